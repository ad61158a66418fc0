"""The chapters' references and "Reproduce this chapter" boxes, and the verdict box's layout."""

from pathlib import Path

import pandas as pd
import pytest

from fedkd_core.chapters import card, ledger

PAPERS_TEXT = Path(__file__).resolve().parents[1].parent / "shared" / "papers"


@pytest.mark.parametrize("chapter", sorted(card.PAPERS))
def test_every_paper_is_cited_with_a_doi_or_arxiv_link_and_its_claim_in_its_own_words(chapter):
    paper = card.PAPERS[chapter]
    assert paper.link.startswith(("https://doi.org/10.", "https://arxiv.org/abs/", "https://openreview.net/"))
    text = card.citation(chapter)
    assert f"]({paper.link})" in text and "../" not in text and f"> {paper.claim}" in text
    source = PAPERS_TEXT / f"{chapter}.md"
    if source.exists():  # the quote is the paper's text, word for word (modulo whitespace)
        assert " ".join(paper.claim.split()) in " ".join(source.read_text().split())


def test_machine_names_drop_the_cpu_details():
    assert card.machine_text("AMD EPYC (family 25 model 17, AVX512-BF16)") == "AMD EPYC Zen 4"
    assert card.machine_text("AMD EPYC (family 23 model 1, AVX2)", cores=2) == "AMD EPYC Zen, 2 cores"
    assert card.machine_text("Some CPU (family 1 model 2, NEON)") == "Some CPU"
    assert card.machine_text("AMD EPYC") == "AMD EPYC (generation not recorded)"  # VMs report it for Zen 2-5
    assert card.machine_text("NVIDIA H200") == "NVIDIA H200" and card.machine_text("AMD Instinct MI300X") == "AMD Instinct MI300X"
    assert card.machine_text("Intel(R) Xeon(R) Platinum 8480+") == "Intel(R) Xeon(R) Platinum 8480+"  # names its model
    assert card.machine_text("NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB HBM3"
    assert card.machine_text(None) == "unknown machine"


def test_commands_set_up_execute_and_sweep_every_profile(tmp_path):
    for profile, name in (("quick", "knfu"), ("paper", "knfu"), ("paper", "knfu_mnist5"), ("robustness", "knfu")):
        (tmp_path / profile).mkdir(exist_ok=True)
        (tmp_path / profile / f"{name}.yaml").write_text("profile: x\n")
    lines = [command for _, command in card.commands("knfu", tmp_path)]
    assert lines[:2] == ["make setup", "make data"] and "papermill notebooks/knfu.ipynb" in lines[2]
    sweeps = [line for line in lines if "fedkd_core.sweep" in line]
    assert len(sweeps) == 4 and sum("--robustness" in line for line in sweeps) == 1
    assert any("params/paper/knfu_mnist5.yaml" in line for line in sweeps)
    (tmp_path / "robustness" / "redesign").mkdir()
    (tmp_path / "robustness" / "redesign" / "knfu.yaml").write_text("profile: robustness\n")
    rerun = [(what, line) for what, line in card.commands("knfu", tmp_path) if "redesign" in line]
    assert rerun == [("robustness profile's rerun at a larger scale: run its grid (the robustness column moves onto it "
                      "once every run is finished; resumable)",
                      ".venv/bin/python -m fedkd_core.sweep knfu --params notebooks/params/robustness/redesign/knfu.yaml "
                      "--robustness --workers 2")]


def test_the_reproduce_box_states_measured_times_or_that_there_are_none(tmp_path):
    (tmp_path / "quick").mkdir()
    (tmp_path / "quick" / "knfu.yaml").write_text("profile: quick\n")
    empty = card.reproduce_html("knfu", pd.DataFrame(), tmp_path)
    assert "Reproduce this chapter" in empty and "no measured time" in empty
    times = pd.DataFrame([{"profile": "quick", "machine": "AMD EPYC, 1 thread per run", "runs": 12,
                           "compute (hours)": 0.123456, "longest run (minutes)": 3.0}])
    shown = card.reproduce_html("knfu", times, tmp_path)
    assert "0.12" in shown and "0.123456" not in shown and "AMD EPYC" in shown and "nan" not in shown.lower()


def test_the_verdict_box_links_each_claim_to_the_table_it_rests_on_and_fits_five_columns():
    rows = pd.DataFrame([{"chapter": "X", "claim": "A > B", "verdict": "holds", "effect": "+1.0 [+0.5, +1.5]",
                          "cells": "3 hold of 3", "paper": "holds", "best round": "holds, +1.2", "scale": "reduced: R = 15",
                          "evidence": "profile reduced: 9 runs", "note": "", "section": "x.html#verdict"},
                         {"chapter": "X", "claim": "C > D", "verdict": "inconclusive", "effect": "+0.1 [-0.5, +0.7]",
                          "cells": "—", "paper": "holds", "best round": "holds, +0.9 ⚑ differs", "scale": "reduced: R = 15",
                          "evidence": "profile reduced: 9 runs", "note": "6 seeds per cell would decide",
                          "section": "x.html#table-iv-annealing"}])
    box = ledger.box_html(rows)
    assert box.count("<th>") == len(ledger.BOX_COLUMNS) == 5
    assert 'href="#the-claims-cell-by-cell">A &gt; B' in box and 'href="#table-iv-annealing">C &gt; D' in box
    assert "⚑ differs" in box and "6 seeds per cell" in box and box.count("reduced: R = 15") == 1
    assert box.count("profile reduced: 9 runs") == 1 and "under each verdict" not in box  # said once, under the box
    # a claim judged on a rerun already, the other not: each verdict names its own records
    moved = rows.assign(scale=["paper: R = 100", "reduced: R = 15"], evidence=["profile paper: 6 runs", "profile reduced: 9 runs"])
    apart = ledger.box_html(moved)
    verdicts = [cell.split("</td>")[0] for cell in apart.split("<td>")[2::5]]
    assert "profile paper: 6 runs" in verdicts[0] and "profile reduced: 9 runs" in verdicts[1]
    assert "<b>Records:</b> under each verdict" in apart and "paper: R = 100; reduced: R = 15" in apart
    # a claim not testable offline gives its reason where records would be: the others' records stay under the box
    untestable = pd.concat([rows, rows.iloc[:1].assign(claim="E > F", verdict=ledger.UNTESTABLE, scale="—",
                                                       evidence="CIFAR-100 has no offline copy")], ignore_index=True)
    with_reason = ledger.box_html(untestable)
    assert "under each verdict" not in with_reason and "CIFAR-100 has no offline copy" in with_reason  # the reason stays
    claims = ledger.linked_table(rows.assign(robustness="—"))
    assert 'href="./x.html#the-claims-cell-by-cell"' in claims and claims.count("<th>") == len(ledger.CLAIMS_COLUMNS)


def test_a_yaml_header_states_the_measured_cost_of_its_own_records_per_machine():
    from types import SimpleNamespace

    from fedkd_core.chapters.card import GridCost, chapter_of, grid_cost_text, with_cost_header

    assert chapter_of(Path("knfu_tuned.yaml")) == "knfu" and chapter_of(Path("add_your_method.yaml")) == "add_your_method"
    with pytest.raises(ValueError, match="no chapter"):
        chapter_of(Path("fedprox.yaml"))
    runs = [SimpleNamespace(environment={"device_name": cpu}, timings={"total_seconds": s})
            for cpu, s in (("AMD EPYC (family 25 model 17, AVX512-BF16)", 1800), ("AMD EPYC (family 25 model 17, AVX512-BF16)", 5400), ("Xeon", 360))]
    assert grid_cost_text(GridCost(runs, [], 3)) == "3 of 3 runs, complete: 2 runs, 2.0 h on AMD EPYC Zen 4; 1 run, 0.1 h on Xeon"
    assert grid_cost_text(GridCost(runs[:1], [], 4)) == "1 of 4 runs: 1 run, 0.5 h on AMD EPYC Zen 4"
    assert grid_cost_text(GridCost([], [], 4)) == "0 of 4 runs committed so far"
    diverged = SimpleNamespace(environment={"device_name": "Xeon"}, timings={"total_seconds": 720})  # its time until it diverged
    assert grid_cost_text(GridCost(runs[:1], [diverged], 2)) == \
        "2 of 2 runs, complete (1 diverged): 1 run, 0.5 h on AMD EPYC Zen 4; 1 run, 0.2 h on Xeon"
    header = ["# Measured cost (new", "# including new)."]
    old = "# about\n# Measured cost (old\n# including old).\n# Run with\nprofile: paper\n"
    assert with_cost_header(old, header) == "# about\n# Measured cost (new\n# including new).\n# Run with\nprofile: paper\n"
    assert with_cost_header("# about\nprofile: paper\n", header) == "# about\n# Measured cost (new\n# including new).\nprofile: paper\n"
    three = "# about\n# Measured cost (old\n# including old):\n#   1 of 2 runs: 1 run, 0.1 h on X.\n#   python -m x\nprofile: paper\n"
    assert with_cost_header(three, header) == "# about\n# Measured cost (new\n# including new).\n#   python -m x\nprofile: paper\n"
    complete = three.replace("#   1 of 2 runs: 1", "#   2 of 2 runs, complete: 2")
    assert with_cost_header(complete, header) == with_cost_header(three, header)


def test_a_redesign_is_not_counted_as_its_profile_until_it_replaces_it():
    """reduced/redesign/fedgmkd.yaml (50 rounds) is swept beside reduced/fedgmkd.yaml: FedGMKD's
    reduced row must not sum the two designs' runs; its cost header is its own."""
    reduced = card.profile_files("fedgmkd")["reduced"]
    assert [p.relative_to(card.PARAMS).as_posix() for p in reduced] == ["reduced/fedgmkd.yaml"]
    header = card.cost_header(card.PARAMS / "reduced" / "redesign" / "fedgmkd.yaml")
    assert "of 123 runs" in header[-1]
    results = card.PARAMS.parents[1] / "results"
    times = card.measured_times("fedgmkd", results)  # the rerun's runs are timed on a row of their own
    rerun = times[times.profile == "reduced, rerun (redesign/fedgmkd.yaml)"]
    assert len(rerun) and rerun.runs.sum() == len(card.profile_records(
        "fedgmkd", "reduced", [card.PARAMS / "reduced" / "redesign" / "fedgmkd.yaml"], results))
    assert times[times.profile == "reduced"].runs.sum() == 123


def test_a_grid_does_not_count_runs_it_shares_with_another_profile_as_its_own():
    """FedGMKD's 50-round robustness grid (126 configs) reads its base reading's 81 runs from the
    50-round rerun, filed under reduced/: its cost is over its own 45 FedGMKD variant runs."""
    path = card.PARAMS / "robustness" / "redesign" / "fedgmkd.yaml"
    from fedkd_core.sweep import load_grid

    _, configs = load_grid("fedgmkd", path, robustness=True)
    results = card.PARAMS.parents[1] / "results"
    shared = card.filed_elsewhere(card.stored_runs(configs, results), "robustness")
    assert len(configs) == 126 and len(shared) == 81 and {c.rounds for c in shared} == {50}
    assert " of 45 runs" in card.cost_header(path, results)[-1]
    assert " of 126 runs" in card.cost_header(path, results / "nowhere")[-1]  # nothing committed: every run its own


def test_the_hyperparameter_table_gives_each_profile_its_own_column_and_merges_a_profile_in_two_roles():
    from dataclasses import dataclass

    from fedkd_core.chapters.datafiles import profile_columns

    @dataclass(frozen=True)
    class Params:
        profile: str
        epochs: int

    reduced, quick = Params("reduced", 5), Params("quick", 2)
    columns = profile_columns([(reduced, "records in the tables"), (reduced, "verdicts"), (quick, "this page")])
    assert list(columns) == ["reduced profile (records in the tables; verdicts)", "quick profile (this page)"]
    rows = [card.Setting("local epochs E", 5, lambda p: p.epochs, "§IV-A")]
    table = card.settings_table(rows, columns)
    assert list(table.columns) == ["parameter", "paper", *columns, "source"]
    assert table.iloc[0].tolist() == ["local epochs E", 5, 5, 2, "§IV-A"]
    alone = profile_columns([(reduced, "records"), (Params("reduced", 5), "this page")])
    assert list(alone) == ["reduced profile (records; this page)"]
