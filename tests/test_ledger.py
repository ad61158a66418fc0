"""The claims ledger: verdicts judged from effects with intervals, every chapter present and
finding its committed records, links that point at the chapters, text that survives HTML."""

from pathlib import Path

import pandas as pd
import pytest

from fedkd_core.chapters import fedckd, ledger, ledger_evidence, ledger_pages

ROOT = Path(__file__).resolve().parents[1]


def counts(rows: list[tuple[str, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["claim", "holds in", "of cells"])


def toy_chapter():
    """A chapter of one claim, "A > B", over cells c1 and c2: our runs as rows (seed, final and best
    value, evaluations, late gain) and the paper's means and stds."""
    from types import SimpleNamespace

    def effects_of(frame, value="final"):
        wide = frame.pivot_table(index=["cell", "seed"], columns="method", values=value)
        effects = pd.DataFrame(index=wide.index)
        if {"A", "B"} <= set(wide.columns):  # a chapter's effects_of tolerates missing methods
            effects["A > B"] = wide.A - wide.B
        return effects.reset_index()

    def observations(records):
        return pd.DataFrame(records, columns=["cell", "method", "seed", "final", "best", "evaluations", "late_gain"])

    paper = pd.DataFrame({"cell": ["c1", "c1", "c2", "c2"], "method": ["A", "B"] * 2,
                          "mean": [80.0, 70.0, 81.0, 71.0], "std": [0.5] * 4})
    return SimpleNamespace(EFFECT_CELL_KEYS=("cell",), METHOD_COLUMN="method", observations=observations,
                           effects_of=effects_of, paper_observations=lambda: paper, PAPER_RUNS=3)


def test_judged_rows_give_verdict_interval_paper_and_best_round_per_claim():
    runs = [(cell, method, seed, value, value + bump, 12, 0.1)
            for cell, shift in (("c1", 0.0), ("c2", 0.01))
            for seed, noise in enumerate((0.0, 0.004, -0.004))
            for method, value, bump in (("A", 0.80 + shift + noise, 0.0), ("B", 0.78 + shift, 0.05))]
    rows = ledger.judged_rows("X", toy_chapter(), runs, "x.html#verdict", "reduced", "profile reduced: 12 runs")
    row = rows.set_index("claim").loc["A > B"]
    assert row.verdict == "holds on these 2 cells" and row.effect.startswith("+2.0 [")  # A leads by 2 points, seeds agree
    assert row.cells == "Holm-corrected: 2 hold, 0 reversed, 0 inconclusive of 2"
    assert row.paper.startswith("holds on these 2 cells, +10.0 [")
    # the best round is a diagnostic with no word (picked per run on the test set): B peaks higher
    assert row["best round"].startswith("diagnostic, no verdict: -3.0") and "holds" not in row["best round"]
    assert row.evidence == "profile reduced: 12 runs" and row.section == "x.html#verdict"


def test_judged_rows_gate_out_cells_still_rising_and_without_records_say_so():
    rising = [(cell, method, seed, 0.5, 0.5, 12, 3.0 if method == "B" else 0.0)
              for cell in ("c1", "c2") for seed in range(3) for method in ("A", "B")]
    row = ledger.judged_rows("X", toy_chapter(), rising, "x.html", "reduced", "").iloc[0]
    assert row.verdict == "untested at this scale" and "B in 2 cells still rising" in row.note
    at_paper_scale = ledger.judged_rows("X", toy_chapter(), rising, "x.html", "paper", "", enforce_gate=False).iloc[0]
    assert at_paper_scale.verdict == "inconclusive" and "still rising at the last round, counted" in at_paper_scale.note
    assert at_paper_scale.note.endswith("with the still-rising cells left out: untested at this scale")
    converged = [run[:-1] + (0.0,) for run in rising]  # nothing rising: the gate changes nothing, says nothing
    assert "left out" not in ledger.judged_rows("X", toy_chapter(), converged, "x.html", "paper", "",
                                                enforce_gate=False).iloc[0].note
    empty = ledger.judged_rows("X", toy_chapter(), [], "x.html", "reduced", "").iloc[0]
    assert (empty.verdict, empty.evidence) == (ledger.NO_RECORDS, ledger.NO_RECORDS)
    assert empty.paper.startswith("holds")  # the paper's side is judged whatever we have


def test_withheld_claims_keep_their_measured_effect_and_say_why():
    runs = [(cell, method, seed, 0.80 + 0.02 * (method == "A") + 0.001 * seed, 0.8, 12, 0.1)
            for cell in ("c1", "c2") for seed in range(3) for method in ("A", "B")]
    rows = ledger.judged_rows("X", toy_chapter(), runs, "x.html", "reduced", "")
    assert rows.iloc[0].verdict == "holds on these 2 cells"
    withheld = ledger.withhold(rows, ledger.V.UNEQUAL_TUNING, {"A > B": "B was never tuned"}).iloc[0]
    assert withheld.verdict == "not judged: unequal tuning" and withheld.effect == rows.iloc[0].effect
    assert withheld.note.startswith(f"measured: holds on these 2 cells, {rows.iloc[0].effect}; B was never tuned")
    assert withheld["versus paper"] == "" and withheld.verdict in ledger.V.NOT_JUDGED
    empty = ledger.judged_rows("X", toy_chapter(), [], "x.html", "reduced", "")
    assert ledger.withhold(empty, ledger.V.UNEQUAL_TUNING, {"A > B": "why"}).iloc[0].verdict == ledger.NO_RECORDS
    untouched = ledger.withhold(rows, ledger.V.UNEQUAL_TUNING, {"another claim": "why"})
    assert untouched.equals(rows)
    rising = [(cell, method, seed, 0.5, 0.5, 12, 3.0 if method == "B" else 0.0)
              for cell in ("c1", "c2") for seed in range(3) for method in ("A", "B")]
    untested = ledger.judged_rows("X", toy_chapter(), rising, "x.html", "reduced", "")
    assert ledger.withhold(untested, ledger.V.UNEQUAL_TUNING, {"A > B": "why"}).iloc[0].verdict == "untested at this scale"


def test_a_verdict_says_how_its_effect_compares_with_the_papers():
    # ours: A leads by 2 points, seeds agree; the toy paper's A leads by 10 with std 0.5: ours is smaller
    runs = [(cell, method, seed, 0.80 + 0.02 * (method == "A") + 0.001 * seed, 0.8, 12, 0.1)
            for cell in ("c1", "c2") for seed in range(3) for method in ("A", "B")]
    row = ledger.judged_rows("X", toy_chapter(), runs, "x.html", "reduced", "").iloc[0]
    assert row["versus paper"] == "smaller than the paper's"
    from html import escape

    assert escape("smaller than the paper's") in ledger.linked_table(pd.DataFrame([row]))
    assert escape("smaller than the paper's") in ledger.verdict_html(row)


def test_cells_the_gate_leaves_out_of_a_verdict_are_marked_so():
    # B still rising in c2 only: c2 is left out of the verdict, and its cell says so
    runs = [(cell, method, seed, 0.80 + 0.02 * (method == "A") + 0.001 * seed, 0.8, 12,
             3.0 if (cell, method) == ("c2", "B") else 0.0)
            for cell in ("c1", "c2") for seed in range(3) for method in ("A", "B")]
    cells = ledger.cell_verdicts(toy_chapter(), runs)  # cells c1, c2 in order
    assert cells.outcome.tolist() == ["holds", ledger.LEFT_OUT]
    assert cells.effect.iloc[1] > 1.9  # the effect is still shown
    assert ledger.cell_verdicts(toy_chapter(), runs, enforce_gate=False).outcome.tolist() == ["holds", "holds"]
    row = ledger.judged_rows("X", toy_chapter(), runs, "x.html", "reduced", "").iloc[0]
    assert row.cells == "1 hold, 0 reversed, 0 inconclusive of 1"  # the box counts the same cells
    judged = ledger.judge_chapter(toy_chapter(), runs)["A > B"]
    assert judged["paper"].cells == 1  # the paper's side reads the cell our verdict kept
    assert ledger.judge_chapter(toy_chapter(), runs, enforce_gate=False)["A > B"]["paper"].cells == 2


def test_the_papers_side_leaves_out_a_cell_our_interval_leaves_out_for_having_one_seed():
    """FedCKD > pFedSD at paper scale: pFedSD diverged in two of the pathological cell's three seeds,
    so our interval reads the practical cell alone; the paper's side read both cells (+0.04 where
    the practical cell alone gives +0.01). The toy paper: A leads by 10 in c1, by 30 in c2."""
    tiny = toy_chapter()
    tiny.paper_observations = lambda: pd.DataFrame({"cell": ["c1", "c1", "c2", "c2"], "method": ["A", "B"] * 2,
                                                    "mean": [80.0, 70.0, 81.0, 51.0], "std": [0.5] * 4})
    runs = [(cell, method, seed, 0.80 + 0.02 * (method == "A") + 0.001 * seed, 0.8, 12, 0.0)
            for cell in ("c1", "c2") for seed in range(3) for method in ("A", "B") if cell == "c1" or seed == 0]
    for enforce_gate in (True, False):
        judged = ledger.judge_chapter(tiny, runs, enforce_gate=enforce_gate)["A > B"]
        assert judged["final"].cells == 2 and "1 cell with one seed left out of the interval" in judged["final"].note
        assert judged["final"].cells_text == "Holm-corrected: 1 hold, 0 reversed, 1 inconclusive of 2 (the interval reads 1)"
        assert judged["paper"].cells == 1 and abs(judged["paper"].interval.mean - 10.0) < 0.2  # c1 alone, not +20
    one_seed_everywhere = [run for run in runs if run[2] == 0]  # no cell has two seeds: the mean reads both
    judged = ledger.judge_chapter(tiny, one_seed_everywhere)["A > B"]
    assert judged["paper"].cells == 2 and judged["final"].cells_text.endswith("inconclusive of 2")
    from fedkd_core.glance import one_cell_flag

    assert one_cell_flag("1 hold, 0 reversed, 1 inconclusive of 2 (the interval reads 1)") == " (1 cell)"
    assert one_cell_flag("2 hold, 0 reversed, 1 inconclusive of 3 (the interval reads 2)") == ""

def sign_counts(frame):
    """FedCKD's claims as (cells where it holds, cells), by the sign of each cell's effect."""
    from fedkd_core.verdicts import paper_verdicts

    verdicts = paper_verdicts(frame.assign(std=float("nan")), fedckd.effects_of, list(fedckd.EFFECT_CELL_KEYS), runs=1)
    return {claim: (v.holding, v.cells) for claim, v in verdicts.items()}


def test_fedckd_claims_on_hand_made_means_and_on_the_papers_tables():
    means = pd.DataFrame({"dataset": ["d"] * 4 + ["e"] * 4, "setting": ["practical"] * 8, "clients": [20] * 8,
                          "algorithm": ["fedavg", "fedprox", "pfedsd", "fedckd"] * 2,
                          "mean": [50, 51, 70, 71, 50, 52, 72, 51.5]})
    table = sign_counts(means)
    assert table["FedCKD > pFedSD"] == (1, 2)
    assert table["FedCKD best of the methods run"] == (1, 2)
    assert table["every personalised method beats FedAvg and FedProx"] == (1, 2)
    paper = sign_counts(fedckd.paper_observations())
    assert paper["FedCKD > pFedSD"] == (12, 12)  # Tables I-II: FedCKD above pFedSD everywhere
    assert paper[fedckd.ANNEALING_CLAIM] == (1, 1)  # Table IV: 57.25 > 57.08


def test_fedckd_annealing_claim_compares_each_cell_with_and_without_annealing():
    means = pd.DataFrame({"dataset": ["d", "d", "e", "e", "f"], "setting": ["practical"] * 5, "clients": [20] * 5,
                          "algorithm": ["fedckd", fedckd.CONSTANT] * 2 + ["fedckd"], "mean": [71.0, 70.5, 60.0, 60.0, 55.0]})
    assert sign_counts(means)[fedckd.ANNEALING_CLAIM] == (1, 2)  # f has no constant-λ run; a tie is not a gain


def test_the_ledger_has_every_chapter_and_links_to_existing_pages(empty_ledger):
    table = empty_ledger  # ledger.ledger() over the tests' empty results folder
    assert list(dict.fromkeys(table.chapter)) == ["KnFu", "FedCKD", "FedUA", "FedGMKD"]
    assert set(table.verdict) <= set(ledger.V.WORDS)
    for section in table.section:
        page, anchor = section.split("#")
        assert (ROOT / "notebooks" / page.replace(".html", ".py")).exists(), section
        assert anchor
    judged = table[table.verdict.isin(["holds", "partly", "does not hold", "inconclusive"])]
    assert all(text.startswith("profile ") for text in judged.evidence)


def test_linked_table_escapes_the_claims_text():
    table = ledger.untestable("X", "Local ≥ sharing at largest |D_n| <", "no data", "x.html#v")
    html = ledger.linked_table(table)
    assert '<a href="./x.html#v">Local ≥ sharing at largest |D_n| &lt;</a>' in html
    assert html.count("<td>") == len(ledger.CLAIMS_COLUMNS)  # one row: the '|' split nothing


def test_evidence_counts_seeds_per_cell_and_lists_the_rounds():
    from dataclasses import replace
    from types import SimpleNamespace

    params = replace(fedckd.REDUCED_PROFILE, settings="practical", algorithms="fedavg,fedckd", seeds=3,
                     annealing_datasets="")
    configs = fedckd.experiments(params)
    records = [SimpleNamespace(config=c.resolved(), profile="reduced") for c in configs
               if c.algorithm == "fedavg" or c.seed == 0]
    records.append(SimpleNamespace(config=replace(configs[0], rounds=5).resolved(), profile="quick"))
    assert ledger.evidence(records) == ("profile quick: 1 runs, 1 seed(s) per cell, 5 rounds; "
                                        "profile reduced: 4 runs, 1-3 seed(s) per cell, 15 rounds")
    assert ledger.evidence([]) == ledger.NO_RECORDS


def test_the_robustness_text_counts_complete_variants_that_bear_on_each_claim():
    table = pd.DataFrame({
        "variant": ["reading", "reading", "sgd", "sgd", "threshold", "half-run"],
        "claim": ["A > B", "L ≥ all", "A > B", "L ≥ all", "A > B", "A > B"],
        "verdict": ["holds", "inconclusive", "holds", "holds", "partly", "holds"],
        "holds in": [3, 1, 3, 3, 2, 0], "of cells": [3, 3, 3, 3, 3, 1],
        "complete": [True, True, True, True, True, False]})
    texts = ledger.robustness_texts(table, planned=5)
    assert texts["A > B"] == "holds in 2, partly in 1 of 3 variants that bear on it (3 of 5 variants run)"
    assert texts["L ≥ all"] == "inconclusive in 1, holds in 1 of 2 variants that bear on it (3 of 5 variants run)"
    assert ledger.robustness_texts(table.iloc[:0], planned=5).empty


def test_the_robustness_text_names_variants_whose_diverged_runs_left_a_claim_unjudged():
    table = pd.DataFrame({  # robustness.claim_table gives a claim a variant could not judge 0 cells
        "variant": ["reading", "reading", "literal KL", "literal KL", "half-run"],
        "claim": ["A > B", "C", "A > B", "C", "A > B"],
        "verdict": ["holds", "holds", "not judged", "holds", "holds"],
        "holds in": [2, 1, 0, 0, 0], "of cells": [2, 1, 0, 1, 1], "diverged": [0, 0, 6, 6, 1],
        "complete": [True, True, True, True, False]})
    texts = ledger.robustness_texts(table, planned=3)
    assert texts["A > B"] == ("holds in 1 of 1 variants that bear on it "
                              "(2 of 3 variants run; not judged under literal KL, where 6 runs diverged)")
    assert texts["C"] == "holds in 2 of 2 variants that bear on it (2 of 3 variants run)"  # judged on what finished


def test_a_chapter_maps_its_rows_onto_its_grids_claims_and_says_how_the_grid_reads_them(monkeypatch):
    from types import SimpleNamespace

    from fedkd_core.chapters import knfu
    from fedkd_core.chapters import robustness as rb

    table = pd.DataFrame({"variant": ["reading", "sgd"], "claim": ["KnFu > FedMD"] * 2, "verdict": ["holds"] * 2,
                          "holds in": [3, 3], "of cells": [3, 3], "complete": [True, True]})
    monkeypatch.setattr(rb, "claim_table", lambda module, base, enforce_gate=True: table)
    module = SimpleNamespace(ROBUSTNESS=[1, 2], ROBUSTNESS_BASE=None, robustness_claim=knfu.robustness_claim,
                             ROBUSTNESS_ROW_PREFIX=knfu.ROBUSTNESS_ROW_PREFIX, __name__="chapters.knfu")
    rows = pd.DataFrame({"claim": ["KnFu > FedMD" + knfu.TUNED_SUFFIX, "KnFu > FedMD" + knfu.AS_CODED_SUFFIX,
                                   knfu.ORIGINAL_CLAIM + knfu.ORIGINAL_SUFFIX]})
    texts = ledger.robustness_column(module, rows).robustness.tolist()
    assert texts == [knfu.ROBUSTNESS_ROW_PREFIX + "holds in 2 of 2 variants that bear on it (2 of 2 variants run)",
                     "—", "—"]
    plain = SimpleNamespace(ROBUSTNESS=[1, 2], ROBUSTNESS_BASE=None, __name__="chapters.plain")  # rows are the grid's claims
    assert ledger.robustness_column(plain, pd.DataFrame({"claim": ["KnFu > FedMD", "other"]})).robustness.tolist() == [
        "holds in 2 of 2 variants that bear on it (2 of 2 variants run)", "—"]


def test_the_cell_by_cell_heatmaps_get_one_caption_per_profile_under_them(monkeypatch):
    """Each profile's two heatmaps (final, best round) are followed by one caption naming the records."""
    from types import SimpleNamespace

    import IPython.display

    from fedkd_core import plots

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objects, **kwargs: shown.extend(objects))
    monkeypatch.setattr(plots, "cell_verdicts", lambda table, title: shown.append(f"heatmap: {title}"))
    monkeypatch.setattr(ledger_pages, "cell_verdicts", lambda module, runs, value, gate: pd.DataFrame(
        {"claim": ["A > B"], "outcome": ["holds"], "effect": [1.0]}))
    records = [SimpleNamespace(profile="reduced"), SimpleNamespace(profile="paper")]
    cells = ledger.show_cell_verdicts(fedckd, records, label="MNIST, tuned")
    assert list(cells.profile) == ["paper", "reduced"]
    kinds = ["caption" if isinstance(item, IPython.display.HTML) else item.split(",")[0] for item in shown]
    assert kinds == ["heatmap: MNIST", "heatmap: MNIST", "caption"] * 2
    assert "MNIST, tuned (records of profile paper)" in shown[2].data
    assert ledger.final_reading(fedckd) in shown[2].data


def test_linked_table_gives_the_robustness_in_small_print_under_the_claim():
    table = ledger.untestable("X", "A > B", "no data", "x.html#v").assign(robustness="holds in 2 of 2 variants")
    html = ledger.linked_table(table)
    assert "<small>robustness: holds in 2 of 2 variants</small>" in html
    assert "robustness:" not in ledger.linked_table(table.assign(robustness="—"))


def test_a_reruns_row_counts_finished_runs_and_the_time_left_at_their_pace(tmp_path):
    """Three runs of one kind: one recorded in 600 s on a named machine, one diverged, one left:
    "2 of 3 (1 diverged)", and the one left at the recorded run's pace, 10 minutes."""
    from types import SimpleNamespace

    from fedkd_core import results
    from fedkd_core.chapters import fedgmkd

    configs = [fedgmkd.run_config(fedgmkd.Params(methods="fedavg"), "fedavg", 10, seed) for seed in range(3)]
    module = SimpleNamespace(experiments=lambda params: configs)
    rerun = ledger.Rerun("Toy", params=None, path="reduced/toy.yaml", decides="the toy's rows")
    assert ledger.rerun_row(module, rerun, tmp_path) == {"chapter": "Toy", "rerun": "reduced/toy.yaml",
                                                         "decides": "the toy's rows", "runs finished": "0 of 3",
                                                         "one core's time left": "—"}
    done, diverged = configs[0], configs[1]
    results.save_record(results.RunRecord(config=done.resolved(), key=results.config_hash(done), history=[{"round": 1, "alma": 0.5}],
                                          client_accuracies=[], timings={"total_seconds": 600.0},
                                          environment={"device_name": "A CPU"}, profile="reduced"), tmp_path)
    results.save_divergence(results.Divergence(config=diverged.resolved(), key=results.config_hash(diverged), round=1,
                                               error="non-finite loss", history=[], timings={}, environment={},
                                               profile="reduced"), tmp_path)
    row = ledger.rerun_row(module, rerun, tmp_path)
    assert row["runs finished"] == "2 of 3 (1 diverged)"
    assert row["one core's time left"] == "10 min"
    last = configs[2]
    results.save_record(results.RunRecord(config=last.resolved(), key=results.config_hash(last),
                                          history=[{"round": 1, "alma": 0.5}], client_accuracies=[],
                                          timings={"total_seconds": 600.0}, environment={"device_name": "A CPU"},
                                          profile="reduced"), tmp_path)
    row = ledger.rerun_row(module, rerun, tmp_path)
    assert row["runs finished"] == "3 of 3 (1 diverged)"
    assert row["one core's time left"] == "none: complete, the verdicts rest on it"


def test_one_cores_time_left_is_paced_by_cpu_runs_only(tmp_path):
    """A run made on a GPU (60 s, sharing the device) says nothing about a core's pace: with only
    it finished the time left is unknown ("—"); beside a CPU run (600 s) it is that run's pace."""
    from types import SimpleNamespace

    from fedkd_core import results
    from fedkd_core.chapters import fedgmkd

    configs = [fedgmkd.run_config(fedgmkd.Params(methods="fedavg"), "fedavg", 10, seed) for seed in range(4)]
    module = SimpleNamespace(experiments=lambda params: configs)
    rerun = ledger.Rerun("Toy", params=None, path="reduced/toy.yaml", decides="the toy's rows")

    def save(config, seconds, device, name):
        results.save_record(results.RunRecord(
            config=config.resolved(), key=results.config_hash(config), history=[{"round": 1, "alma": 0.5}],
            client_accuracies=[], timings={"total_seconds": seconds}, environment={"device": device, "device_name": name},
            profile="reduced"), tmp_path)

    save(configs[0], 60.0, "cuda", "NVIDIA H200")
    assert ledger.rerun_row(module, rerun, tmp_path)["one core's time left"] == "—"
    save(configs[1], 600.0, "cpu", "A CPU")
    assert ledger.rerun_row(module, rerun, tmp_path)["one core's time left"] == "20 min"  # two runs left at 600 s


def test_every_rerun_a_chapter_lists_is_one_of_its_profiles_yaml():
    """A rerun's path is the yaml its params come from: a wrong path would send a reader's sweep
    elsewhere."""
    from fedkd_core.chapters.datafiles import profile

    reruns = ledger.chapter_reruns()
    assert {rerun.chapter for _, rerun in reruns} == {"KnFu", "FedCKD", "FedGMKD"}
    for module, rerun in reruns:
        assert profile(module.Params, rerun.path) == rerun.params
        assert (ROOT / "notebooks" / "params" / rerun.path).is_file()


def test_the_robustness_text_says_when_the_verdict_has_moved_off_the_grids_scale():
    """Once a chapter's verdicts move onto a rerun at 50 rounds, its robustness grid (derived from
    the 15-round reduced profile) must not read as the robustness of that verdict."""
    from types import SimpleNamespace

    from fedkd_core.chapters.robustness import Grid

    reduced, rerun = SimpleNamespace(rounds=15), SimpleNamespace(rounds=50)
    fifteen, fifty = Grid(reduced, "robustness/toy.yaml"), Grid(rerun, "robustness/redesign/toy.yaml", False, rerun=True)

    def chapter(verdict_params, grid=fifteen):
        basis = ledger.VerdictBasis(verdict_params, [], "", True)
        return SimpleNamespace(verdict_basis=lambda: basis, REDUCED_PROFILE=reduced, robustness_grid=lambda root=None: grid)

    assert ledger.grid_scale_prefix(chapter(reduced)) == ""
    apart = ledger.grid_scale_prefix(chapter(rerun))
    assert "superseded" in apart and "reruns table" not in apart  # this chapter lists no robustness rerun
    listed = SimpleNamespace(**vars(chapter(rerun)), RERUNS=(SimpleNamespace(robustness=True),))
    assert ledger.grid_scale_prefix(listed).endswith("its rerun is on the Claims page's reruns table): ")
    assert ledger.grid_apart(chapter(rerun)) and not ledger.grid_apart(chapter(reduced))
    assert ledger.grid_scale_prefix(SimpleNamespace(REDUCED_PROFILE=reduced)) == ""
    # the grid rerun at the verdict's scale: no longer apart, and judged with its still-rising cells counted
    assert not ledger.grid_apart(chapter(rerun, fifty))
    assert ledger.grid_scale_prefix(chapter(rerun, fifty)) == "grid rerun at the verdict's scale, still-rising cells counted: "
    # one claim judged on the rerun already (every run it compares finished): apart for that claim only
    early = ledger.VerdictBasis(reduced, [], "", True, moved=("A > B",))
    partly = SimpleNamespace(verdict_basis=lambda: early, REDUCED_PROFILE=reduced, robustness_grid=lambda root=None: fifteen)
    assert ledger.grid_apart(partly, claim="A > B") and not ledger.grid_apart(partly, claim="A > C")
    assert ledger.grid_apart(partly)  # some verdict reads the rerun
    assert "superseded" in ledger.grid_scale_prefix(partly, claim="A > B")
    assert ledger.grid_scale_prefix(partly, claim="A > C") == ""


def test_a_claim_is_settled_only_when_no_run_still_to_come_can_change_any_of_its_effects():
    """Toy claims on hand-made runs: "A > B" reads methods A and B, "A > C" A and C. With C's seed 1
    still to come, "A > C" is not settled (that seed's effect would appear); with B's seed 1 to come
    while A's seed 1 is in, "A > B" is not either; a run of A alone in a new seed changes neither."""

    def effects_of(frame, value="final"):
        wide = frame.pivot_table(index=["cell", "seed"], columns="algorithm", values=value)
        out = pd.DataFrame(index=wide.index)
        for other in ("B", "C"):
            if {"A", other} <= set(wide.columns):
                out[f"A > {other}"] = wide["A"] - wide[other]
        return out.reset_index()

    def runs(*triples):
        return pd.DataFrame([{"cell": "x", "algorithm": a, "seed": s, "final": v} for a, s, v in triples])

    keys = ["cell", "seed"]
    finished = runs(("A", 0, 90.0), ("B", 0, 80.0), ("C", 0, 85.0), ("A", 1, 91.0), ("B", 1, 81.0))
    assert ledger.claims_settled(effects_of, finished, runs(("C", 1, 0.0)), keys) == ("A > B",)
    assert ledger.claims_settled(effects_of, finished, runs(("A", 2, 0.0)), keys) == ("A > B", "A > C")
    without_b1 = finished[~((finished.algorithm == "B") & (finished.seed == 1))]
    assert ledger.claims_settled(effects_of, without_b1, runs(("B", 1, 0.0)), keys) == ("A > C",)
    assert ledger.claims_settled(effects_of, finished, runs(), keys) == ("A > B", "A > C")
    # "A best": A minus the best other method run. With C not run at all, C's runs to come change it
    # only if they score above B: a stand-in scoring 0 alone would call it settled
    def with_best(frame, value="final"):
        wide = frame.pivot_table(index=["cell", "seed"], columns="algorithm", values=value)
        others = [m for m in ("B", "C") if m in wide.columns]
        return pd.DataFrame({"A best": wide["A"] - wide[others].max(axis=1, skipna=False)}).reset_index()

    no_c = runs(("A", 0, 90.0), ("B", 0, 80.0), ("A", 1, 91.0), ("B", 1, 81.0))
    assert ledger.claims_settled(with_best, no_c, runs(("C", 0, 0.0), ("C", 1, 0.0)), keys) == ()
    assert ledger.claims_settled(with_best, no_c, runs(), keys) == ("A best",)
    # a claim with no effect yet is never settled, even with nothing to come ("A > C" has a column, all empty)
    assert ledger.claims_settled(effects_of, runs(("A", 0, 90.0), ("B", 0, 80.0), ("C", 1, 85.0)), runs(), keys) == ("A > B",)


def test_a_rerun_shared_with_an_earlier_one_is_timed_only_for_the_runs_it_adds(tmp_path):
    """A rerun shares two of its three runs with an earlier one of its chapter (a robustness grid
    whose reading is the first rerun's runs), one of them finished: its time left counts only the
    run it adds, "after the rerun above"; with every unfinished run shared, it adds none."""
    from types import SimpleNamespace

    from fedkd_core import results
    from fedkd_core.chapters import fedgmkd

    configs = [fedgmkd.run_config(fedgmkd.Params(methods="fedavg"), "fedavg", 10, seed) for seed in range(4)]
    done = configs[0]
    results.save_record(results.RunRecord(config=done.resolved(), key=results.config_hash(done), history=[{"round": 1, "alma": 0.5}],
                                          client_accuracies=[], timings={"total_seconds": 600.0},
                                          environment={"device_name": "A CPU"}, profile="reduced"), tmp_path)
    module = SimpleNamespace(experiments=lambda params: [configs[0], configs[1], configs[3]])  # shares 0 and 1
    second = ledger.Rerun("Toy", params="second", path="robustness/toy.yaml", decides="its robustness")
    earlier = frozenset(results.config_hash(c) for c in configs[:3])
    assert ledger.rerun_row(module, second, tmp_path)["one core's time left"] == "20 min"  # alone: two runs left
    row = ledger.rerun_row(module, second, tmp_path, earlier)
    assert row["runs finished"] == "1 of 3" and row["one core's time left"] == "10 min after the rerun above"
    module.experiments = lambda params: configs[:3]
    assert ledger.rerun_row(module, second, tmp_path, earlier)["one core's time left"] == "none after the rerun above"


def test_a_robustness_reruns_runs_are_every_variants():
    """FedGMKD's 50-round grid plans the nine methods' runs of its reading (the 50-round rerun's
    own configs) and FedGMKD once more per other variant; its reading adds nothing to the rerun."""
    from fedkd_core.chapters import fedgmkd
    from fedkd_core.results import config_hash

    grid = next(rerun for rerun in fedgmkd.RERUNS if rerun.robustness)
    configs = grid.configs(fedgmkd)
    reading = fedgmkd.experiments(fedgmkd.ROBUSTNESS_RERUN)
    assert len(configs) == len(reading) + (len(fedgmkd.ROBUSTNESS) - 1) * 3 * 3
    assert {config_hash(c) for c in reading} <= {config_hash(c) for c in fedgmkd.experiments(fedgmkd.REDESIGN_PROFILE)}
    assert all(c.rounds == 50 for c in configs)


def test_the_verdicts_per_chapter_are_one_row_per_verdict_and_one_column_per_chapter_in_book_order():
    table = pd.DataFrame({"chapter": ["KnFu", "KnFu", "FedUA", "FedGMKD"], "claim": list("abcd"),
                          "verdict": ["holds", "inconclusive", "holds", "untested at this scale"]})
    counts = ledger.verdict_counts(table)
    assert list(counts.columns) == ["KnFu", "FedUA", "FedGMKD"]
    assert list(counts.index) == ["holds", "inconclusive", "untested at this scale"]
    assert counts.loc["holds"].tolist() == [1, 1, 0] and int(counts.to_numpy().sum()) == 4


def test_a_grid_rerun_at_the_verdicts_scale_is_judged_with_its_gate_and_said_so(monkeypatch):
    """The robustness column reads the grid the chapter names (``robustness_grid``) with that grid's
    gate: a grid at the paper's round budget is judged gate off, and its text says so."""
    from types import SimpleNamespace

    from fedkd_core.chapters import robustness as rb

    reduced, rerun = SimpleNamespace(rounds=15), SimpleNamespace(rounds=50)
    table = pd.DataFrame({"variant": ["reading"], "claim": ["C"], "verdict": ["holds"], "holds in": [3],
                          "of cells": [3], "complete": [True]})
    seen = []
    monkeypatch.setattr(rb, "claim_table", lambda module, base, enforce_gate=True: seen.append((base, enforce_gate)) or table)
    module = SimpleNamespace(ROBUSTNESS=[1], REDUCED_PROFILE=reduced,
                             verdict_basis=lambda: ledger.VerdictBasis(rerun, [], "", False),
                             robustness_grid=lambda root=None: rb.Grid(rerun, "robustness/redesign/toy.yaml", False, rerun=True))
    texts = ledger.robustness_column(module, pd.DataFrame({"claim": ["C"]})).robustness.tolist()
    assert seen == [(rerun, False)]
    assert texts == [ledger.GRID_RERUN_PREFIX + "holds in 1 of 1 variants that bear on it (1 of 1 variants run)"]


def test_a_complete_robustness_grid_says_whether_the_robustness_column_rests_on_it_yet():
    from types import SimpleNamespace

    from fedkd_core.chapters import robustness as rb

    grid = ledger.Rerun("Toy", params=None, path="robustness/redesign/toy.yaml", decides="", robustness=True)
    waiting = SimpleNamespace(robustness_grid=lambda root=None: rb.Grid(None, "robustness/toy.yaml"))
    moved = SimpleNamespace(robustness_grid=lambda root=None: rb.Grid(None, grid.path, False, rerun=True))
    assert grid.complete_text(waiting) == "none: complete, it counts once the verdicts have moved"
    assert grid.complete_text(moved) == "none: complete, the robustness column rests on it"
    plain = ledger.Rerun("Toy", params=None, path="reduced/redesign/toy.yaml", decides="")
    assert plain.complete_text(waiting) == "none: complete, the verdicts rest on it"


def test_the_reruns_table_times_a_run_two_reruns_of_a_chapter_share_in_the_first(tmp_path, monkeypatch):
    """Two reruns of one chapter: the first plans runs 0-2, the second 0-3; run 0 is recorded in
    600 s. The first has 20 min left, the second only its own run 3 "after the rerun above"."""
    from types import SimpleNamespace

    from fedkd_core import results
    from fedkd_core.chapters import fedgmkd

    configs = [fedgmkd.run_config(fedgmkd.Params(methods="fedavg"), "fedavg", 10, seed) for seed in range(4)]
    done = configs[0]
    results.save_record(results.RunRecord(config=done.resolved(), key=results.config_hash(done), history=[{"round": 1, "alma": 0.5}],
                                          client_accuracies=[], timings={"total_seconds": 600.0},
                                          environment={"device_name": "A CPU"}, profile="reduced"), tmp_path)
    module = SimpleNamespace(experiments=lambda params: configs[:3] if params == "rerun" else configs)
    first = ledger.Rerun("Toy", params="rerun", path="reduced/redesign/toy.yaml", decides="rows")
    second = ledger.Rerun("Toy", params="grid", path="robustness/redesign/toy.yaml", decides="robustness")
    monkeypatch.setattr(ledger_evidence, "chapter_reruns", lambda: [(module, first), (module, second)])
    table = ledger.reruns_table(tmp_path)
    assert table["runs finished"].tolist() == ["1 of 3", "1 of 4"]
    assert table["one core's time left"].tolist() == ["20 min", "10 min after the rerun above"]
    other = ledger.Rerun("Other", params="grid", path="robustness/redesign/other.yaml", decides="robustness")
    monkeypatch.setattr(ledger_evidence, "chapter_reruns", lambda: [(module, first), (module, other)])  # another chapter's
    assert ledger.reruns_table(tmp_path)["one core's time left"].tolist() == ["20 min", "30 min"]


def test_a_verdict_widens_its_interval_only_where_an_effect_pairs_runs_of_machines_not_shown_alike(monkeypatch):
    """The toy chapter's runs as records that name their machine: seed 2's two methods ran on
    machines that round differently, so the interval widens by the drift between machines; when
    those machines are measured to compute alike, it does not."""
    from fedkd_core import numerics
    from fedkd_core import verdicts as V

    class Run(tuple):  # a toy row that is also a record with a config and a machine
        def __new__(cls, row, machine):
            run = super().__new__(cls, row)
            run.config = {"data": {"cell": row[0]}, "seed": row[2], "rounds": 15, "train": {}}
            run.environment = {"device_name": machine, "precision": "fp32"}
            return run

    rows = [(cell, method, seed, 0.80 + 0.004 * seed if method == "A" else 0.78, 0.8, 12, 0.1)
            for cell in ("c1", "c2") for seed in range(3) for method in ("A", "B")]
    runs = [Run(row, "zen5" if row[2] == 2 and row[1] == "A" else "avx2") for row in rows]
    monkeypatch.setattr(numerics, "rerun_pairs", lambda: [])
    plain = ledger.judge_chapter(toy_chapter(), rows)["A > B"]["final"]
    widened = ledger.judge_chapter(toy_chapter(), runs)["A > B"]["final"]
    assert widened.interval.mean == plain.interval.mean
    assert widened.interval.low == plain.interval.low - V.effect_drift()
    assert "pairs runs from machines that round differently" in widened.note
    alike = [{"stored_on": "avx2", "stored_in": "fp32", "rerun_on": "zen5", "rerun_in": "fp32", "alma_delta": 0.0}] * 3
    monkeypatch.setattr(numerics, "rerun_pairs", lambda: alike)
    assert ledger.judge_chapter(toy_chapter(), runs)["A > B"]["final"].interval == plain.interval


def test_a_long_note_shows_its_first_part_and_folds_the_rest_a_short_one_shows_whole():
    long_note = "measured: holds, +17.1 [+15.9, +18.3]; " + "why it is not judged " * 20
    html = ledger.note_html(long_note)
    shown, folded = html.split("<details", 1)
    assert "measured: holds, +17.1 [+15.9, +18.3]" in shown and "why it is not judged" not in shown
    assert "why it is not judged" in folded and "<summary>" in folded
    assert "<details" not in ledger.note_html("2 of 12 cells left out; 8 seeds per cell would decide")
    assert ledger.note_html("") == ""
    one_part = "x" * (ledger.NOTE_SHOWN + 10)  # nothing to fold at: shown whole
    assert "<details" not in ledger.note_html(one_part) and one_part in ledger.note_html(one_part)


def test_verdict_words_are_kept_whole_and_escaped():
    html = ledger.verdict_html(pd.Series({"verdict": "not judged: unequal tuning", "versus paper": ""}))
    assert html.count('<span class="fedkd-word">') == 4 and '<span class="fedkd-word">unequal</span>' in html
    assert "a&gt;b" in ledger.whole_words("a>b")


def test_a_rerun_counts_a_run_once_however_often_its_grids_list_it(tmp_path):
    """FedCKD's γ = 0.99 runs are in two of its grids: a record met twice must not count twice,
    or the verdicts would move onto a column with a run still missing."""
    from fedkd_core import results
    from fedkd_core.chapters import fedgmkd

    configs = [fedgmkd.run_config(fedgmkd.Params(methods="fedavg"), "fedavg", 10, seed) for seed in range(3)]
    records = []
    for config in configs[:2]:
        record = results.RunRecord(config=config.resolved(), key=results.config_hash(config),
                                   history=[{"round": 1, "alma": 0.5}], client_accuracies=[],
                                   timings={"total_seconds": 600.0}, environment={"device_name": "A CPU"},
                                   profile="reduced")
        results.save_record(record, tmp_path)
        records.append(record)
    twice = records + records[:1]  # 3 records, 2 runs
    assert results.finished_runs(configs, twice, tmp_path) == 2
    assert not results.every_run_finished(configs + configs[:1], twice, tmp_path)
    fallback = ledger.VerdictBasis("reduced", ["r"], "small", True)
    rerun = ledger.VerdictBasis("paper", twice, "large", False)
    chosen = ledger.rerun_or(fallback, rerun, configs + configs[:1], tmp_path)
    assert chosen.params == "reduced" and (chosen.rerun_finished, chosen.rerun_planned) == (2, 3)


def test_holms_correction_runs_over_each_chapters_judged_claims_and_marks_the_verdicts_it_does_not_keep():
    rows = pd.concat([ledger.untestable(chapter, f"claim {i}", "", "x.html#v") for chapter, i in
                      [("A", 0), ("A", 1), ("A", 2), ("A", 3), ("B", 0)]], ignore_index=True)
    rows = rows.assign(verdict=["holds", "does not hold", "untested at this scale", "holds", "holds"],
                       p=[0.012, 0.03, float("nan"), 0.026, 0.04])
    family = ledger.with_holm(rows)[ledger.HOLM_COLUMN].tolist()
    # chapter A: three tests (the untested claim has none); 0.012 <= .05/3, then 0.026 > .05/2 stops
    assert family[0] == "survives Holm's correction over the chapter's 3 claims judged (p = 0.012)"
    assert family[1] == "‡ not after Holm's correction over the chapter's 3 claims judged: p = 0.030 on its own"
    assert family[2] == "" and family[3].startswith("‡")
    assert family[4] == "survives Holm's correction over the chapter's 1 claim judged (p = 0.040)"  # B is its own family
    assert ledger.holm_count(ledger.with_holm(rows)[rows.chapter == "A"]) == (
        "1 of 3 decided verdicts survive Holm's correction over the 3 claims judged")
    html = ledger.verdict_html(ledger.with_holm(rows).iloc[1])
    assert html.startswith("<b>") and html.count("‡") == 1 and "</b> ‡" in html and "not after Holm" in html
    assert "‡" not in ledger.verdict_html(ledger.with_holm(rows).iloc[0])
    with pytest.raises(ValueError, match="without a p-value.*claim 0"):  # a row builder that forgot p
        ledger.with_holm(rows.assign(p=[float("nan")] + [0.01] * 4))


def test_a_withheld_verdict_leaves_holms_family():
    rows = ledger.untestable("A", "claim", "", "x.html#v").assign(verdict="holds", effect="+1.0 [+0.2, +1.8]", p=0.01)
    withheld = ledger.withhold(rows, ledger.V.UNEQUAL_TUNING, {"claim": "not tuned alike"})
    assert withheld.p.isna().all() and ledger.with_holm(withheld)[ledger.HOLM_COLUMN].tolist() == [""]


def test_the_fine_print_names_methods_as_the_papers_write_them():
    """Issue 61: the gate's notes read "left out: pfedsd in 1 cell still rising"; a reader sees the
    paper's names, taken from the chapters' own maps, and a path or an unrelated word stays as it is."""
    from fedkd_core.chapters.ledger_pages import fine_print, named_methods

    assert named_methods("pfedsd in 1 cell, lg_fedavg in 2 cells still rising") == \
        "pFedSD in 1 cell, LG-FedAvg in 2 cells still rising"
    assert named_methods("selective_fd in 3 cells, knfu_local in 1 cell, hk_dat in 1 cell") == \
        "Selective-FD in 3 cells, Local in 1 cell, HK + DAT in 1 cell"
    assert named_methods("fedmd still rising: +3.2 points") == "FedMD still rising: +3.2 points"
    assert named_methods("results/paper/fedmd in 3 cells; the fedavg grid") == "results/paper/fedmd in 3 cells; the fedavg grid"
    row = pd.Series({"claim": "FedCKD > pFedSD", "note": "2 of 3 cells still rising at the last round, counted: "
                     "pfedsd in 2 cells, fedckd in 1 cell still rising"})
    assert any("counted: pFedSD in 2 cells, FedCKD in 1 cell still rising" in line for line in fine_print(row))
