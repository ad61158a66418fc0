"""Issue 59: the verdict word follows a random-cells reading, "mixed" where cells are decided both
ways (Holm-corrected), cells sharing runs pooled by seed, diverged runs counted as failures, and
the paper's side by Welch's t. Each test is built on hand-made effects and fails on the verdicts
as they were before (fixed cells only, uncorrected cell words, cells counted as independent)."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fedkd_core import verdicts as V

CLAIM = "A > B"


def effects(cells: dict, seeds=(0, 1, 2)) -> pd.DataFrame:
    """Per cell name -> its per-seed effects in points: the frame judge reads (fractions)."""
    rows = [{"cell": cell, "seed": seed, CLAIM: value / 100} for cell, values in cells.items()
            for seed, value in zip(seeds, values)]
    return pd.DataFrame(rows)


def tight(center: float, spread: float = 0.05) -> list[float]:
    return [center - spread, center, center + spread]


def test_four_tight_cells_decided_both_ways_read_mixed():
    verdict = V.judge(effects({"a": tight(3), "b": tight(-2.5), "c": tight(0.5), "d": tight(1)}), ["cell"], CLAIM)
    assert verdict.word == V.MIXED
    assert (verdict.holding, verdict.reversed) == (3, 1)
    assert verdict.cells_text.startswith(V.HOLM_CELLS)


def test_knfu_best_sharing_on_cifar10_pattern_does_not_read_holds():
    # pooled just above zero, no cell holding on its own, cells spread apart (the CIFAR-10 row)
    frame = effects({"a": [2.5, 0.2, 3.6], "b": [-0.6, 1.4, 0.9], "c": [2.6, -0.1, 1.8], "d": [-0.3, 0.5, 1.2]})
    fixed = V.fixed_cells([1.0], [1.0], [3], [1])  # smoke: the helper runs
    assert np.isfinite(fixed[0])
    verdict = V.judge(frame, ["cell"], CLAIM)
    assert verdict.fixed.low > 0  # the fixed-cells reading alone would say "holds"
    assert V.base_word(verdict.word) != V.HOLDS
    assert verdict.random.low < 0 < verdict.random.high
    assert verdict.holding == 0


def test_the_random_cells_estimate_matches_a_hand_computation():
    cells = {"a": [1.0, 2.0, 3.0], "b": [0.0, 0.5, 1.0], "c": [3.0, 3.5, 4.5], "d": [-1.0, 0.0, 0.5]}
    verdict = V.judge(effects(cells), ["cell"], CLAIM)
    means = np.array([np.mean(v) for v in cells.values()])
    v = np.array([np.var(x, ddof=1) / 3 for x in cells.values()])
    k = 4
    se = means.std(ddof=1) / np.sqrt(k)
    half = stats.t.ppf(0.975, k - 1) * se
    assert verdict.random.mean == pytest.approx(means.mean())
    assert (verdict.random.low, verdict.random.high) == pytest.approx((means.mean() - half, means.mean() + half))
    tau2 = max(0.0, means.var(ddof=1) - v.mean())
    assert verdict.tau == pytest.approx(np.sqrt(tau2))
    pi = stats.t.ppf(0.975, k - 2) * np.sqrt(tau2 + se**2)
    assert (verdict.prediction.low, verdict.prediction.high) == pytest.approx((means.mean() - pi, means.mean() + pi))
    assert verdict.interval == verdict.random  # three cells or more: the random-cells reading decides
    assert verdict.p_value == pytest.approx(stats.ttest_1samp(means, 0).pvalue)


def test_fewer_than_three_cells_say_the_word_covers_only_these_cells():
    verdict = V.judge(effects({"a": tight(2), "b": tight(3)}), ["cell"], CLAIM)
    assert verdict.word == "holds on these 2 cells"
    assert verdict.interval == verdict.fixed
    assert V.base_word(verdict.word) == V.HOLDS


def test_two_cells_made_of_the_same_runs_do_not_narrow_the_interval():
    one = effects({"local": [1.0, 2.5, 0.4]})
    two = effects({"local": [1.0, 2.5, 0.4], "global": [1.0, 2.5, 0.4]})
    alone = V.judge(one, ["cell"], CLAIM)
    shared = V.judge(two, ["cell"], CLAIM, links={("local",): {("global",)}})
    assert shared.interval.high - shared.interval.low >= alone.interval.high - alone.interval.low - 1e-9
    assert shared.units == 1 and "pooled by seed" in shared.note


def test_a_diverged_seed_counted_as_failure_can_turn_holds_into_mixed():
    from fedkd_core.chapters.ledger import failure_observations

    # a beats b by about 2 points everywhere; in cell y, a third method c ends far lower, and a diverges
    observed = pd.DataFrame([{"cell": cell, "method": method, "seed": seed, "final": value, "best": value}
                             for cell, base in (("x", 0.80), ("y", 0.70), ("z", 0.75))
                             for seed in range(3)
                             for method, value in (("a", base + 0.02 + 0.001 * seed), ("b", base + 0.001 * seed),
                                                   ("c", 0.50 + 0.002 * seed))])
    diverged = observed[(observed.cell == "y") & (observed.method == "a")]
    finished = observed.drop(index=diverged.index)

    def effects_of(frame, value="final"):
        wide = frame.pivot_table(index=["cell", "seed"], columns="method", values=value)
        return (wide["a"] - wide["b"]).rename(CLAIM).reset_index()

    left_out = V.judge(effects_of(finished), ["cell"], CLAIM)
    failures = failure_observations(finished, [{"cell": "y", "method": "a", "seed": s} for s in range(3)], ["cell"])
    counted = V.judge(effects_of(pd.concat([finished, failures], ignore_index=True)), ["cell"], CLAIM)
    assert V.base_word(left_out.word) == V.HOLDS
    assert V.base_word(counted.word) in (V.MIXED, V.DOES_NOT_HOLD)
    assert (failures["final"] == finished[finished.cell == "y"]["final"].min()).all()


def test_cell_words_are_holm_corrected_across_the_claims_cells():
    # three cells whose own intervals exclude zero at p about 0.03: none survives Holm over three
    values = [1.0, 1.4, 1.8]
    p = stats.ttest_1samp(values, 0).pvalue
    assert 0.0167 < p < 0.05
    cells = V.cell_table(effects({"a": values, "b": [-v for v in values], "c": values}), ["cell"], CLAIM)
    assert (cells.outcome == V.INCONCLUSIVE).all()
    raw = V.cell_table(effects({"a": values}), ["cell"], CLAIM, correct=False)
    assert raw.outcome.tolist() == [V.HOLDS]


def test_the_word_after_the_chapters_correction_is_inconclusive():
    assert V.corrected_word("holds on these 2 cells", kept=False) == V.AFTER_CORRECTION
    assert V.corrected_word(V.MIXED, kept=True) == V.MIXED
    assert V.corrected_word(V.INCONCLUSIVE, kept=False) == V.INCONCLUSIVE


def test_the_interval_rules_out_a_point_only_when_it_lies_wholly_within_one():
    assert V.rules_out(V.Interval(0.1, -0.9, 0.95))
    assert not V.rules_out(V.Interval(0.3, -0.5, 1.2))
    verdict = V.judge(effects({"a": [0.8, 0.9, 1.0], "b": [-0.3, -0.2, -0.1], "c": [0.5, 0.6, 0.7]}), ["cell"], CLAIM)
    from fedkd_core.chapters.ledger_words import note_text
    assert verdict.word == V.INCONCLUSIVE and not V.rules_out(verdict.interval)
    assert "rules out" not in note_text(verdict)


def test_seeds_to_decide_give_eighty_percent_power_against_a_point_with_welch_df():
    units = pd.DataFrame({"size": [1, 1], "seeds": [3, 3], "mean": [0.2, 0.1], "sd": [1.5, 1.5]})
    n = V.seeds_to_decide(units)
    se = lambda m: np.sqrt(2 * 1.5**2 / m) / 2  # noqa: E731
    df = lambda m: 2 * (m - 1)  # noqa: E731
    power = lambda m: (stats.t.ppf(0.975, df(m)) + stats.t.ppf(0.8, df(m))) * se(m)  # noqa: E731
    assert power(n) <= 1.0 < power(n - 1)
    assert V.seeds_to_decide(units, widen=0.5) > n  # drift widening asks for more seeds
    # random cells: the spread between cells alone can keep any number of seeds from deciding
    spread = pd.DataFrame({"size": 1, "seeds": 3, "mean": [0, 2, -2], "sd": [0.5, 0.5, 0.5]})
    assert V.seeds_to_decide(spread, tau=2.0) is None and V.seeds_cannot_decide(spread, 2.0)


def test_the_papers_side_is_welchs_t_on_its_printed_means():
    paper = pd.DataFrame({"cell": ["x", "x"], "method": ["a", "b"], "mean": [80.0, 78.0], "std": [1.0, 1.5]})

    def effects_of(frame, value="final"):
        wide = frame.pivot_table(index=["cell", "seed"], columns="method", values=value)
        return (wide["a"] - wide["b"]).rename(CLAIM).reset_index()

    for runs in (2, 3, 5):
        verdict = V.paper_verdicts(paper, effects_of, ["cell"], runs)[CLAIM]
        interval, p = V.welch_interval(80.0, 1.0, 78.0, 1.5, runs)
        welch = stats.ttest_ind_from_stats(80, 1.0, runs, 78, 1.5, runs, equal_var=False)
        assert p == pytest.approx(welch.pvalue)
        assert (verdict.interval.low, verdict.interval.high) == pytest.approx((interval.low, interval.high), abs=1e-3)
    assert V.base_word(V.paper_verdicts(paper, effects_of, ["cell"], 2)[CLAIM].word) == V.INCONCLUSIVE
    assert V.base_word(V.paper_verdicts(paper, effects_of, ["cell"], 5)[CLAIM].word) == V.HOLDS
