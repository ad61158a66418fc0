"""FedCKD's clipped deviation of the pathological cell (fedkd_core.chapters.fedckd.clipped) and what
the divergence traces say together (divergence.traces_finding_text, poisoned_round)."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fedkd_core.chapters.fedckd import clipped, divergence

RESULTS = Path(__file__).resolve().parents[1] / "results"  # the committed records (tests write elsewhere)


def test_the_clipped_cell_pairs_each_run_with_the_paper_settings_run():
    cell = clipped.clipped_cell(RESULTS)
    assert len(cell) == 15  # notebooks/params/paper/fedckd_fmnist100_clip10.yaml: 5 methods x 3 seeds
    assert set(cell.algorithm) <= {"fedavg", "fedprox", "lg_fedavg", "pfedsd", "fedckd", "fedper", "fedfomo", "pfedme"}
    for _, row in cell.iterrows():
        before, after = row["paper setting"], row["clipped at 10"]
        if isinstance(before, float) and isinstance(after, float):
            assert row["change"] == pytest.approx(after - before)
        else:
            assert math.isnan(row["change"])
    # the stored divergences of the paper setting are named, not dropped
    diverged = cell[cell["paper setting"].map(lambda v: isinstance(v, str))]
    assert all(v.startswith("diverged in round ") for v in diverged["paper setting"])


def test_the_difference_under_clipping_is_paired_by_seed_with_a_t_interval():
    rows = [{"method": m, "algorithm": a, "seed": s, "paper setting": 90.0, "clipped at 10": v, "change": v - 90.0}
            for a, m, values in (("fedckd", "FedCKD", (98.0, 97.5, 98.4)), ("pfedsd", "pFedSD", (97.5, 97.4, 97.9)))
            for s, v in enumerate(values)]
    rows[3]["paper setting"] = "diverged in round 18"
    cell = pd.DataFrame(rows)
    differences, interval = clipped.clipped_difference(cell)
    assert differences == pytest.approx([0.5, 0.1, 0.5])
    d = np.array([0.5, 0.1, 0.5])
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert (interval.mean, interval.low, interval.high) == pytest.approx((d.mean(), d.mean() - half, d.mean() + half))
    text = clipped.clipped_text(cell)
    assert "0 of the 6 diverged" in text and "1 of the same 6 did" in text
    table = clipped.clipped_table(cell)
    assert table.loc[table.method == "FedCKD", "paper setting, per seed (%)"].item() == "90.00, 90.00, 90.00"
    assert "diverged in round 18" in table.loc[table.method == "pFedSD", "paper setting, per seed (%)"].item()


def trace(round_, stored_round, identical, compared, diverged=True, weights=(10.0, 11.0, 12.0)):
    finding = {"diverged": diverged, "round": round_} if diverged else {"diverged": False, "rounds_traced": round_}
    return {"algorithm": "pfedsd", "seed": 1, "stored_round": stored_round, "finding": finding,
            "determinism": {"rounds_compared": compared, "rounds_identical": identical},
            "rounds": [{"round": r + 1, "max_weight_norm": w} for r, w in enumerate(weights)]}


def test_a_blow_up_that_stayed_finite_is_found_in_the_rounds_before():
    assert divergence.poisoned_round(trace(4, 4, 3, 3)) is None
    poisoned = divergence.poisoned_round(trace(4, 4, 3, 3, weights=(10.0, 11.0, 5e6)))
    assert poisoned["round"] == 3
    assert divergence.poisoned_round(trace(30, 18, 0, 17, diverged=False)) is None


def test_the_traces_say_which_reruns_were_exact_and_what_other_draws_did():
    exact = divergence.traces_finding_text([trace(18, 18, 17, 17)])
    assert "pFedSD seed 1 (round 18) diverged again in the same round" in exact and "Under other draws" not in exact
    other = divergence.traces_finding_text([trace(30, 18, 0, 17, diverged=False), trace(7, 12, 0, 6)])
    assert "had not diverged after 30 rounds (stored: round 18)" in other
    assert "diverged in round 7 (stored: round 12)" in other and "diverged again" not in other
    assert divergence.traces_finding_text([]) == ""


def test_the_caveat_counts_the_columns_divergences_and_the_clipped_reruns():
    short, long = clipped.clipped_caveat(True, RESULTS), clipped.clipped_caveat(False, RESULTS)
    assert short.startswith("3 of the column's 48 runs diverged") and "0 of 15 pathological reruns do" in short
    assert "FedCKD − pFedSD there is +0.27" in long
