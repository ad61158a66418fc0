"""The landing page's results at a glance: claims counted from records, never typed."""

from types import SimpleNamespace

from fedkd_core import glance


def record(algorithm, alpha, seed, alma):
    config = {"algorithm": algorithm, "algorithm_params": {"x": algorithm}, "seed": seed,
              "data": {"alpha": alpha}, "train": {"mixed_precision": "auto"}}
    return SimpleNamespace(config=config, final={"alma": alma}, environment={"precision": "fp32"})


def test_a_claim_is_counted_over_cells_from_seed_means():
    records = [record("knfu", 0.1, 0, 0.9), record("knfu", 0.1, 1, 0.7), record("fedmd", 0.1, 0, 0.75),
               record("knfu", 1.0, 0, 0.6), record("fedmd", 1.0, 0, 0.65), record("fedmd", 0.5, 0, 0.5)]
    counts = glance.our_counts(records, "knfu", "fedmd")
    assert counts == {"holds": 1, "cells": 2, "seeds": "1-2", "precision": "fp32"}  # the 0.5 cell lacks KnFu


def test_without_paper_records_the_page_says_so():
    table = glance.glance_table()  # tests keep records in an empty throw-away folder
    assert table["ours"].str.fullmatch(r"no (paper|reduced)-profile records committed yet").all()
    assert "FedUA > FedDF" in set(table.claim)
    assert table["paper's tables (all cells)"].str.match(r"\d+ of \d+ cells").all()
    assert "| chapter | claim |" in glance.markdown(table)


def test_a_claim_can_be_counted_on_another_metric():
    records = [record("fedua", 0.1, 0, 0.2), record("feddf", 0.1, 0, 0.3)]
    for r, acc in zip(records, (0.5, 0.4)):
        r.final["global_acc"] = acc
    assert glance.our_counts(records, "fedua", "feddf", "global_acc")["holds"] == 1
    assert glance.our_counts(records, "fedua", "feddf")["holds"] == 0
