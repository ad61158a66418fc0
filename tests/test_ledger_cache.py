"""The ledger computed once per build (fedkd_core.chapters.ledger_cache): a second read with the same
inputs does not recompute, and a changed record or a cache turned off does."""

from __future__ import annotations

import json
import os
import time
import types

import pandas as pd
import pytest

from fedkd_core.chapters import ledger_cache


def counting_chapter(name: str = "fakechapter"):
    calls = []

    def ledger_rows():
        calls.append(1)
        return pd.DataFrame({"claim": ["A > B"], "verdict": ["holds"], "call": [len(calls)]})

    return types.SimpleNamespace(__name__=f"fedkd_core.chapters.{name}", ledger_rows=ledger_rows), calls


@pytest.fixture
def folders(tmp_path, monkeypatch):
    results = tmp_path / "results"
    (results / "reduced" / "fedavg").mkdir(parents=True)
    monkeypatch.setenv("FEDKD_RESULTS", str(results))
    monkeypatch.setenv("FEDKD_LEDGER_CACHE", str(tmp_path / "cache"))
    return results


def test_unchanged_inputs_are_read_from_the_cache(folders):
    module, calls = counting_chapter()
    first = ledger_cache.chapter_rows(module)
    second = ledger_cache.chapter_rows(module)
    assert len(calls) == 1
    pd.testing.assert_frame_equal(first, second)


def test_a_new_or_changed_record_computes_the_rows_again(folders):
    module, calls = counting_chapter()
    ledger_cache.chapter_rows(module)
    record = folders / "reduced" / "fedavg" / "abc.json"
    record.write_text(json.dumps({"history": []}))
    assert ledger_cache.chapter_rows(module)["call"].item() == 2
    later = time.time() + 5
    os.utime(record, (later, later))  # the same size, rewritten later
    assert ledger_cache.chapter_rows(module)["call"].item() == 3
    assert len(calls) == 3


def test_another_results_folder_is_another_key(folders, tmp_path, monkeypatch):
    module, calls = counting_chapter()
    ledger_cache.chapter_rows(module)
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("FEDKD_RESULTS", str(other))
    ledger_cache.chapter_rows(module)
    assert len(calls) == 2


@pytest.mark.parametrize("setting", ["off", ""])
def test_off_or_unset_never_stores(folders, monkeypatch, tmp_path, setting):
    monkeypatch.setenv("FEDKD_LEDGER_CACHE", setting)
    module, calls = counting_chapter()
    ledger_cache.chapter_rows(module)
    ledger_cache.chapter_rows(module)
    assert len(calls) == 2
    assert not (tmp_path / "cache").exists()


def test_a_damaged_entry_is_recomputed_not_trusted(folders, tmp_path):
    module, calls = counting_chapter()
    ledger_cache.chapter_rows(module)
    [entry] = (tmp_path / "cache").glob("fakechapter-*.pkl")
    entry.write_bytes(b"not a pickle")
    assert ledger_cache.chapter_rows(module)["call"].item() == 2


def test_a_record_the_build_writes_leaves_the_key_unchanged(folders):
    """The quick and smoke profiles' records and those of a method outside the package (what
    ``make book`` and CI write while the pages run) are read by no verdict: a new one must not make
    every later page compute the ledger again."""
    module, calls = counting_chapter()
    ledger_cache.chapter_rows(module)
    for profile in sorted(ledger_cache.BUILD_PROFILES - {"custom"}):
        (folders / profile / "fedavg").mkdir(parents=True)
        (folders / profile / "fedavg" / "abc.json").write_text(json.dumps({"history": []}))
    # the Add-your-method page's runs of a method registered in the notebook: in no chapter's grid
    (folders / "custom" / "fedavgm").mkdir(parents=True)
    (folders / "custom" / "fedavgm" / "abc.json").write_text(json.dumps({"history": []}))
    (folders / "custom" / "fedmd").mkdir(parents=True)  # and its baselines, in the chapter's smoke cells
    (folders / "custom" / "fedmd" / "abc.json").write_text(json.dumps({"history": []}))
    ledger_cache.chapter_rows(module)
    assert len(calls) == 1


def test_the_parts_cover_every_chapter_with_verdicts():
    """``python -m fedkd_core.chapters.ledger_cache --jobs N`` computes each chapter's rows and
    robustness table as a part of its own, the longest first."""
    from fedkd_core.chapters import CHAPTERS, chapter_module

    parts = ledger_cache.parts()
    with_rows = {name for name in CHAPTERS if name != "claims" and hasattr(chapter_module(name), "ledger_rows")}
    assert {name for kind, name in parts if kind == "rows"} == with_rows
    assert {name for kind, name in parts if kind == "robustness"} == {
        name for name in with_rows if hasattr(chapter_module(name), "ROBUSTNESS")}
    assert parts[0] == ("rows", "fedckd") and len(parts) == len(set(parts))
