"""The book's Performance page: every figure on it comes from a benchmark script's result file,
with the machine, the date and what ran beside it; nothing is typed into the page."""

import json
import math
import re
from pathlib import Path

import pytest

from fedkd_core import performance

ROOT = Path(__file__).resolve().parents[1]
ZEN4 = {"cpu": "AMD EPYC (family 25 model 17, AVX512-BF16)", "cores": 2, "gpu": None}


@pytest.fixture
def fixed_machine(monkeypatch):
    monkeypatch.setattr(performance, "machine", lambda: dict(ZEN4))
    monkeypatch.setattr(performance, "busy_processes",
                        lambda: [{"name": "python -m fedkd_core.sweep", "nice": 10, "cpu_percent": 95}])


def test_a_result_names_its_machine_date_command_and_what_ran_beside(tmp_path, fixed_machine):
    started = performance.beside_now()
    path = performance.save_result(
        "local_training", "Local training speed", [{"model": "knfu_m1", "fp32 samples/s": 2832, "bf16 / fp32": 1.4178,
                                                    "missing": None, "broken": math.nan}],
        started=started, beside_note="the test suite", note="What the figures mean.",
        command="python benchmarks/local_training.py --samples 1024", root=tmp_path)
    assert path.name == "local_training-amd-epyc-zen-4-2cores.json"
    stored = json.loads(path.read_text())
    assert stored["machine"]["cpu"] == ZEN4["cpu"] and stored["threads"] >= 1 and stored["torch"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", stored["date"])
    page = performance.render(performance.load_results(tmp_path))
    assert "**AMD EPYC Zen 4, 2 cores**" in page and f"<code>{ZEN4['cpu']}</code>" in page and stored["date"] in page
    assert "<code>python benchmarks/local_training.py --samples 1024</code>" in page
    # what was measured first (the ratio), the machine's state folded under the table (issue 61)
    assert page.index("## What was measured") < page.index("bf16 / fp32 1.42") < page.index("<details")
    assert page.index("| knfu_m1 |") < page.index("<details") < page.index("the test suite")
    assert "the test suite" in page and "python -m fedkd_core.sweep (nice 10) 95% of a core" in page
    assert "| knfu_m1 | 2,832 | 1.42 | — |" in page and "missing" not in page  # a column with no value is left out
    assert not re.search(r"\bnan\b|\bNone\b", page, flags=re.I)


def test_the_recorded_command_is_what_a_reader_types_without_the_beside_words():
    argv = ["benchmarks/local_training.py", "--samples", "1024", "--beside", "a sweep, 2 workers"]
    assert performance.command_line(argv) == "python benchmarks/local_training.py --samples 1024"


def test_a_result_file_without_a_field_the_page_needs_is_named(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"benchmark": "x", "rows": []}))
    with pytest.raises(ValueError, match=r"x\.json: benchmark result without title, command, date, machine"):
        performance.load_results(tmp_path)


def test_no_results_says_so():
    assert "No benchmark result" in performance.render([])


def test_every_committed_figure_reaches_the_page_with_its_machine_and_date():
    results = performance.load_results()
    assert results, "benchmarks/results/ holds no result file: run make benchmark and commit it"
    page = performance.render(results)
    for result in results:
        assert result["date"] in page and result["machine"]["cpu"] in page and result["command"] in page
        digits = result.get("digits", {})
        for row in result["rows"]:
            for column, value in zip(result["columns"], row):
                assert performance.number_text(value, digits.get(column)) in page


def test_the_performance_page_itself_types_no_figure():
    text = (ROOT / "book" / "performance.md").read_text()
    assert "{include} _generated/performance.md" in text
    typed = re.findall(r"\b\d[\d,.]*\s*(?:s|ms|min|samples/s|GFLOP/s|%|x|×)(?=[\s,;.)])", text)
    assert not typed, f"figures on the Performance page must come from benchmarks/results/: {typed}"


def test_drift_is_summarised_apart_for_runs_stored_here_and_elsewhere():
    import importlib.util

    import pandas as pd

    spec = importlib.util.spec_from_file_location("precision_drift", ROOT / "benchmarks" / "precision_drift.py")
    drift = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(drift)
    table = pd.DataFrame({"rerun in": ["fp32", "fp32", "fp32"], "stored on": ["old", "old", "here"],
                          "alma Δ": [0.4, -0.8, 0.0]})
    assert drift.drift_summary(table, "here") == [
        "runs stored on another machine, rerun in fp32: final ALMA moved by 0.60 points on average, 0.80 at most, "
        "over 2 run(s)",
        "runs stored on this machine, rerun in fp32: final ALMA moved by 0.00 points on average, 0.00 at most, "
        "over 1 run(s)"]


def test_a_section_after_a_benchmark_follows_its_blocks(tmp_path, fixed_machine):
    for name, order in (("first", 1), ("second", 2)):
        performance.save_result(name, f"The {name}", [{"x": 1}], started={"note": "", "load_average": [0.1], "busy": []},
                                extra={"order": order}, root=tmp_path / name)
    results = performance.load_results(tmp_path / "first") + performance.load_results(tmp_path / "second")
    page = performance.render(results, after={"first": "AFTER FIRST", "missing": "AT THE END"})
    assert page.index("## The first") < page.index("AFTER FIRST") < page.index("## The second") < page.index("AT THE END")
    assert "AT THE END" in performance.render([], after={"missing": "AT THE END"})


def test_the_drift_the_verdicts_allow_is_the_committed_cross_machine_pairs_mean():
    """MACHINE_DRIFT is measured on committed runs that would be identical on one machine (KnFu's
    robustness R = 30 runs at round 15 against the R = 15 runs): the page computes it from them."""
    from fedkd_core.verdicts import MACHINE_DRIFT

    pairs = performance.drift_pairs(ROOT / "results")  # the committed records (tests write elsewhere)
    assert len(pairs) and (pairs.drift >= 0).all() and (pairs["round"] == 15).all()
    summaries = performance.drift_summary(pairs)
    across = [s for s in summaries if not s["same machine"]]
    assert len(across) == 1 and across[0]["pairs"] == len(pairs)
    assert round(across[0]["mean"], 2) == MACHINE_DRIFT
    section = performance.machine_drift_markdown(ROOT / "results")
    assert f"{across[0]['mean']:.2f} points on average" in section and f"over {across[0]['pairs']} pairs" in section
    assert f"MACHINE_DRIFT` = {MACHINE_DRIFT:.2f}" in section


def test_drift_between_machines_and_on_one_machine_are_summarised_apart():
    import pandas as pd

    pairs = pd.DataFrame({"chapter": "knfu", "variant": "R = 30 rounds", "method": ["knfu", "fedmd", "knfu"],
                          "dataset": "mnist", "round": 15, "longer run on": ["new", "new", "old"],
                          "shorter run on": ["old", "old", "old"], "drift": [0.2, 0.6, 0.0]})
    summaries = performance.drift_summary(pairs)
    assert [(s["same machine"], s["pairs"], round(s["mean"], 2), s["max"], s["identical"]) for s in summaries] == \
        [(False, 2, 0.4, 0.6, 0), (True, 1, 0.0, 0.0, 1)]
    assert "both made on old" in performance.drift_sentence(summaries[1])


def test_the_drift_benchmark_keeps_the_machine_pairs_of_records_it_does_not_rerun_again():
    """Its result file decides which machines compute alike (fedkd_core.numerics): a later run on
    the same machine replaces the pairs of the records it reruns and keeps the others."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("precision_drift", ROOT / "benchmarks" / "precision_drift.py")
    drift = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(drift)
    earlier = [{"record": "a", "rerun_in": "fp32", "alma_delta": 0.0}, {"record": "b", "rerun_in": "fp32", "alma_delta": 0.0},
               {"record": "a", "rerun_in": "bf16", "alma_delta": 1.2}]
    new = [{"record": "a", "rerun_in": "bf16", "alma_delta": 0.9}]
    assert drift.merged_pairs(earlier, new) == earlier[:2] + new


def test_a_table_wider_than_the_column_is_shown_turned():
    from fedkd_core.performance import WIDEST, table_lines

    columns = ["round", *(f"c{i}" for i in range(WIDEST))]
    turned = table_lines(columns, [[1, *range(WIDEST)], [2, *range(WIDEST)]], {})
    assert turned[0] == "| round | 1 | 2 |" and len(turned) == 2 + WIDEST
    assert turned[2].startswith("| c0 | 0 | 0 |")
    narrow = table_lines(["a", "b"], [[1, 2]], {})
    assert narrow == ["| a | b |", "|---|---|", "| 1 | 2 |"]
