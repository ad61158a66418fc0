"""The statistics behind every verdict: intervals against textbook computations (scipy's
t-interval, a seeded bootstrap), the verdict words on hand-made effects, the convergence gate."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fedkd_core import verdicts as V


def test_one_cells_interval_is_scipys_t_interval():
    values = np.array([1.2, 0.4, 2.1, 0.9, 1.5])
    ours = V.t_interval(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
    assert (ours.mean, ours.low, ours.high) == pytest.approx((values.mean(), low, high))
    assert np.isnan(V.t_interval([3.0]).low)  # one seed: a mean, no interval
    assert V.t_interval([2.0, 2.0]).text() == "+2.0 [+2.0, +2.0]"
    # a bound that is not zero never prints as zero: it takes the decimals it needs (up to 4)
    assert V.Interval(0.34, 0.003, 0.68).text() == "+0.340 [+0.003, +0.680]"
    assert V.Interval(1.9, 0.04, 3.9).text() == "+1.90 [+0.04, +3.90]"
    assert V.Interval(1.9, 0.0, 3.9).text() == "+1.9 [+0.0, +3.9]"  # exactly zero stays as it is
    assert V.Interval(0.3, 5e-17, 0.6).text() == "+0.30 [+0.00, +0.60]"  # float noise: no row of zeros


def test_a_single_cell_pooled_is_its_t_interval():
    values = np.array([0.5, 1.5, 1.0])
    pooled = V.pooled_interval([values.mean()], [values.std(ddof=1)], [3])
    single = V.t_interval(values)
    assert (pooled.low, pooled.high) == pytest.approx((single.low, single.high))


def test_the_pooled_interval_matches_a_seeded_stratified_bootstrap():
    """Cells fixed, seeds random: resampling seeds within each cell and averaging the cell means
    gives the same 95% interval as the Welch-Satterthwaite t-interval, up to bootstrap noise."""
    rng = np.random.default_rng(0)
    cells = [rng.normal(mu, sd, size=40) for mu, sd in ((1.0, 0.5), (2.0, 1.5), (-0.5, 1.0))]
    pooled = V.pooled_interval([c.mean() for c in cells], [c.std(ddof=1) for c in cells], [len(c) for c in cells])
    boot = np.mean([[rng.choice(c, size=len(c)).mean() for c in cells] for _ in range(4000)], axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    assert pooled.mean == pytest.approx(np.mean([c.mean() for c in cells]))
    assert pooled.low == pytest.approx(low, abs=0.05) and pooled.high == pytest.approx(high, abs=0.05)


def test_welch_satterthwaite_degrees_of_freedom_for_unequal_cells():
    means, sds, ns = [1.0, 3.0], [0.5, 2.0], [3, 5]
    parts = np.array(sds) ** 2 / np.array(ns)
    dof = parts.sum() ** 2 / np.sum(parts**2 / (np.array(ns) - 1))
    half = stats.t.ppf(0.975, dof) * np.sqrt(parts.sum()) / 2
    pooled = V.pooled_interval(means, sds, ns)
    assert (pooled.low, pooled.high) == pytest.approx((2.0 - half, 2.0 + half))


def effects_frame(cells: dict[str, list[float]]) -> pd.DataFrame:
    """Per-(cell, seed) effects in fractions from points given per cell."""
    return pd.DataFrame([{"cell": cell, "seed": seed, "A > B": value / 100}
                         for cell, values in cells.items() for seed, value in enumerate(values)])


@pytest.mark.parametrize("cells, word", [
    ({"c1": [3.0, 3.5, 4.0], "c2": [2.0, 2.4, 2.2]}, "holds on these 2 cells"),  # two cells: these cells only
    ({"c1": [6.0, 6.5, 7.0], "c2": [-2.0, -2.4, -2.2]}, "mixed on these 2 cells"),  # pooled above zero, c2 reversed
    ({"c1": [-3.0, -3.5, -4.0], "c2": [-2.0, -2.4, -2.2]}, "does not hold on these 2 cells"),
    ({"c1": [3.0, 3.5, 4.0], "c2": [2.0, 2.4, 2.2], "c3": [2.5, 2.9, 3.1]}, "holds"),  # random cells decide
    ({"c1": [1.0, -1.0, 0.5], "c2": [-0.5, 0.7, 0.1]}, "inconclusive"),
])
def test_the_verdict_words(cells, word):
    assert V.judge(effects_frame(cells), ["cell"], "A > B").word == word


def test_a_verdict_counts_its_cells_and_prints_its_interval():
    verdict = V.judge(effects_frame({"c1": [3.0, 3.5, 4.0], "c2": [2.0, 2.4, 2.2], "c3": [0.0, 1.0, -1.0]}), ["cell"], "A > B")
    assert (verdict.cells, verdict.holding, verdict.reversed, verdict.seeds) == (3, 2, 0, "3")
    assert verdict.effect_text.startswith("+1.9 [") and verdict.cells_text == "Holm-corrected: 2 hold, 0 reversed, 1 inconclusive of 3"
    assert V.judge(effects_frame({"c1": [1.0]}), ["cell"], "A > B").word == "inconclusive"  # one seed decides nothing
    assert V.judge(effects_frame({"c1": [1.0]}), ["cell"], "C > D").word == V.NO_RECORDS


def test_an_inconclusive_verdict_says_what_more_seeds_would_buy():
    noisy = V.judge(effects_frame({"c1": [2.0, -1.0, 0.5], "c2": [-1.5, 1.5, 0.0]}), ["cell"], "A > B")
    assert noisy.word == "inconclusive"
    k, sds = 2, np.array([1.5, 1.5])
    n = noisy.seeds_needed  # 80% power against a 1-point effect, Welch df (two cells: the fixed-cells reading)
    power = lambda seeds: ((stats.t.ppf(0.975, k * (seeds - 1)) + stats.t.ppf(0.8, k * (seeds - 1)))  # noqa: E731
                           * np.sqrt(np.sum(sds**2) / seeds) / k)
    assert power(n) <= 1.0 < power(n - 1)


def test_trajectory_reads_final_best_and_the_late_gain():
    history = [{"round": r, "alma": a} for r, a in zip(range(2, 21, 2), [0.1, 0.3, 0.5, 0.6, 0.62, 0.64, 0.66, 0.70, 0.68, 0.69])]
    run = V.trajectory(history, "alma", rounds=20)
    assert (run["final"], run["best"], run["evaluations"]) == (0.69, 0.70, 10)
    # two evaluations after round 16 (0.8 x 20), so two at each end: rounds 18, 20 against 14, 16
    assert run["late_gain"] == pytest.approx(((0.68 + 0.69) / 2 - (0.66 + 0.70) / 2) * 100)
    sparse = V.trajectory(history[::2], "alma", rounds=20)  # rounds 2, 6, ..., 18: one evaluation after the cut
    assert sparse["late_gain"] == pytest.approx((0.68 - 0.66) * 100)
    assert V.trajectory([{"round": 1, "global_acc": None}], "global_acc", 1)["evaluations"] == 0


def test_the_late_gain_averages_three_evaluations_so_round_to_round_noise_is_not_a_rise():
    """A plateau at 0.60 with +-1 point of noise, evaluated every round for 45 rounds, low at round
    36 (the cut, 0.8 x 45) and high at the end: the plain difference reads +2 points (still rising),
    the smoothed one (rounds 43-45 against 34-36) +0.67; a real climb of 0.2 point a round still
    reads as a rise (9 rounds apart: +1.8, plus the same noise)."""
    noise = {r: (0.01 if r % 2 else -0.01) for r in range(1, 46)}
    flat = [{"round": r, "acc": 0.60 + e} for r, e in noise.items()]
    assert V.trajectory(flat, "acc", 45, smoothing=1)["late_gain"] == pytest.approx(2.0)
    assert V.trajectory(flat, "acc", 45)["late_gain"] == pytest.approx(2 / 3)
    climbing = [{"round": r, "acc": 0.40 + 0.002 * r + e} for r, e in noise.items()]
    assert V.trajectory(climbing, "acc", 45)["late_gain"] == pytest.approx(1.8 + 2 / 3)


def test_a_run_not_evaluated_late_holds_its_method_back_with_the_reason():
    """One seed of B has no evaluation after the cut (late gain NaN): its mean is not taken over the
    other seeds alone, and the reason says what is missing."""
    observations = pd.DataFrame({"cell": ["c"] * 4, "method": ["A", "A", "B", "B"], "final": [0.5] * 4,
                                 "evaluations": [12] * 4, "late_gain": [0.1, 0.2, 0.3, np.nan]})
    row = V.gate(observations, ["cell"], "method").loc["c"]
    assert not row.converged and row.rising == ["B"]
    assert "B not evaluated in the last 20% of rounds" in row.reason


def test_the_gate_passes_a_plateau_and_names_what_is_still_rising_or_sparse():
    observations = pd.DataFrame({"cell": ["c1"] * 4 + ["c2"] * 2, "method": ["fedavg", "fedavg", "fedua", "fedua", "fedavg", "fedua"],
                                 "final": [0.23, 0.23, 0.30, 0.30, 0.6, 0.6], "evaluations": [10, 10, 10, 10, 5, 5],
                                 "late_gain": [3.2, 3.0, 0.2, 0.4, 0.0, 0.5]})
    table = V.gate(observations, ["cell"], "method")
    assert not table.converged["c1"] and table.rising["c1"] == ["fedavg"]
    assert table.reason["c1"] == "fedavg still rising: +3.1 points over the last 20% of rounds, ends at 23.0%"
    assert table.reason["c2"] == "evaluated 5 times, fewer than 10"
    plateau = observations.assign(late_gain=0.5, evaluations=12)
    assert V.gate(plateau, ["cell"], "method").converged.all()


def test_cells_that_fail_the_gate_do_not_count_unless_at_the_papers_round_budget():
    effects = effects_frame({"c1": [3.0, 3.5, 4.0], "c2": [-3.0, -3.5, -4.0]})
    gates = pd.DataFrame({"converged": [True, False], "rising": [[], ["B"]], "evaluations": [12, 12],
                          "reason": ["", "B still rising"]}, index=["c1", "c2"])
    gated = V.judge(effects, ["cell"], "A > B", gates)
    assert (gated.word, gated.cells) == ("holds on this cell", 1) and "1 of 2 cells left out" in gated.note
    kept = V.judge(effects, ["cell"], "A > B", gates, enforce_gate=False)
    assert (kept.word, kept.cells) == ("mixed on these 2 cells", 2) and "still rising at the last round, counted" in kept.note
    none_left = V.judge(effects, ["cell"], "A > B", gates.assign(converged=False))
    assert none_left.word == V.UNTESTED and "B in 1 cell still rising" in none_left.note



def test_a_cell_evaluated_too_rarely_says_so_before_any_rising_curve():
    """FedUA's robustness grid (its first reduced design) evaluates 5 times (rounds 2, 4, ..., 10): every cell fails the
    10-evaluations rule, whatever its curves do. The reason names that rule first and gives the
    count; the rising methods come after it; the verdict carries the first rule as its reason."""
    observations = pd.DataFrame({"cell": ["c1"] * 2 + ["c2"] * 2, "method": ["A", "B"] * 2, "final": [0.5] * 4,
                                 "evaluations": [5] * 4, "late_gain": [3.0, 0.2, 0.1, 0.2]})
    gates = V.gate(observations, ["cell"], "method")
    assert gates.reason["c1"].startswith("evaluated 5 times, fewer than 10; A still rising")
    verdict = V.judge(effects_frame({"c1": [3.0, 3.5, 4.0], "c2": [2.0, 2.5, 3.0]}), ["cell"], "A > B", gates)
    assert verdict.word == V.UNTESTED
    assert verdict.note == ("2 of 2 cells left out by the convergence gate: evaluated 5 times, fewer than 10; "
                            "A in 1 cell still rising")
    assert verdict.gate_reason == "evaluated 5 times, fewer than 10"
    # one cell sparse, the other only rising: the sparse one is counted and comes first
    mixed = observations.assign(evaluations=[5, 5, 12, 12], late_gain=[0.1, 0.2, 2.0, 0.2])
    verdict = V.judge(effects_frame({"c1": [3.0, 3.5], "c2": [2.0, 2.5]}), ["cell"], "A > B",
                      V.gate(mixed, ["cell"], "method"))
    assert verdict.note.endswith(": 1 cell evaluated 5 times, fewer than 10; A in 1 cell still rising")
    assert verdict.gate_reason == "1 cell evaluated 5 times, fewer than 10"
    assert V.judge(effects_frame({"c1": [3.0, 3.5]}), ["cell"], "A > B").gate_reason == ""


def best_of_effects(frame: pd.DataFrame, value: str) -> pd.DataFrame:
    """Claims over whichever methods ran, as FedCKD's: "A > B"; "A best of the methods run" (A −
    the best other); "every personal method beats G" (the worst of A, B − G)."""
    wide = frame.pivot_table(index=["cell", "seed"], columns="method", values=value)
    effects = pd.DataFrame(index=wide.index)
    if {"A", "B"} <= set(wide):
        effects["A > B"] = wide.A - wide.B
    others = [m for m in ("B", "C", "G") if m in wide]
    if "A" in wide and len(others) > 1:
        effects["A best of the methods run"] = wide.A - wide[others].max(axis=1)
    personal = [m for m in ("A", "B") if m in wide]
    if "G" in wide and personal:
        effects["every personal method beats G"] = wide[personal].min(axis=1) - wide.G
    return effects.reset_index()


def test_the_gate_of_a_claim_reads_every_method_its_effect_reads():
    """Dropping B's runs leaves "A best of the methods run" (over C and G) and "every personal
    method beats G" (A alone) with every effect they had, yet both read B: B still rising fails
    their cell, as it fails "A > B"'s. C is read only by "A best of the methods run"."""
    observations = pd.DataFrame([{"cell": "c", "method": m, "seed": s, "final": f, "evaluations": 12,
                                  "late_gain": 3.0 if m == "B" else 0.2}
                                 for s in range(3) for m, f in (("A", 0.90), ("B", 0.80), ("C", 0.70), ("G", 0.50))])
    methods = V.claim_methods(best_of_effects, observations, ["cell"])
    assert methods == {"A > B": {"A", "B"}, "A best of the methods run": {"A", "B", "C", "G"},
                       "every personal method beats G": {"A", "B", "G"}}
    gates = V.claim_gates(best_of_effects, observations, ["cell"])
    effects = best_of_effects(observations, "final")
    for claim in methods:
        verdict = V.judge(effects, ["cell"], claim, gates[claim])
        assert (verdict.word, verdict.note) == (V.UNTESTED, "1 of 1 cells left out by the convergence gate: "
                                                            "B in 1 cell still rising"), claim
    # C rising holds back only the claim that reads C
    rising_c = observations.assign(late_gain=np.where(observations.method == "C", 3.0, 0.2))
    gates = V.claim_gates(best_of_effects, rising_c, ["cell"])
    assert {claim: bool(gate.converged["c"]) for claim, gate in gates.items()} == {
        "A > B": True, "A best of the methods run": False, "every personal method beats G": True}

def test_claims_whose_names_extend_one_another_are_read_apart():
    """All claims' effects are compared in one merge: a claim named like another plus " moved" (the
    suffix a merge would add) must not be mistaken for the other's moved column."""
    def effects_of(frame: pd.DataFrame, value: str) -> pd.DataFrame:
        wide = frame.pivot_table(index=["cell", "seed"], columns="method", values=value)
        return pd.DataFrame({"A > B": wide.A - wide.B, "A > B moved": wide.A - wide.C}, index=wide.index).reset_index()

    observations = pd.DataFrame([{"cell": "c", "method": m, "seed": s, "final": f, "evaluations": 12, "late_gain": 0.2}
                                 for s in range(3) for m, f in (("A", 0.9), ("B", 0.8), ("C", 0.7))])
    assert V.claim_methods(effects_of, observations, ["cell"]) == {"A > B": {"A", "B"}, "A > B moved": {"A", "C"}}


def paper_chapter_effects(frame: pd.DataFrame, value: str) -> pd.DataFrame:
    wide = frame.pivot_table(index=["cell", "seed"], columns="method", values=value)
    return pd.DataFrame({"A > B": wide.A - wide.B}, index=wide.index).reset_index()


def test_the_papers_side_is_welchs_t_on_its_mean_and_std():
    """One cell, A 81.0 ± 0.5 vs B 79.0 ± 0.8 over 3 runs: Welch's interval of the difference,
    ± t(df) √((0.5² + 0.8²)/3) around +2.0 with Welch–Satterthwaite df."""
    paper = pd.DataFrame({"cell": ["c1", "c1"], "method": ["A", "B"], "mean": [81.0, 79.0], "std": [0.5, 0.8]})
    verdict = V.paper_verdicts(paper, paper_chapter_effects, ["cell"], runs=3)["A > B"]
    a, b = 0.5**2 / 3, 0.8**2 / 3
    half = stats.t.ppf(0.975, (a + b) ** 2 / (a**2 / 2 + b**2 / 2)) * np.sqrt(a + b)
    assert verdict.interval.mean == pytest.approx(2.0)
    assert (verdict.interval.low, verdict.interval.high) == pytest.approx((2.0 - half, 2.0 + half), abs=1e-3)
    assert verdict.word == "holds on this cell" and "assuming 3 runs" in verdict.note


def test_a_paper_without_spread_is_judged_by_signs():
    paper = pd.DataFrame({"cell": ["c1", "c1", "c2", "c2"], "method": ["A", "B"] * 2,
                          "mean": [80.0, 79.0, 70.0, 71.0], "std": [np.nan] * 4})
    verdict = V.paper_verdicts(paper, paper_chapter_effects, ["cell"], runs=1)["A > B"]
    assert (verdict.word, verdict.holding, verdict.reversed) == ("mixed on these 2 cells", 1, 1)
    assert "no spread" in verdict.note and np.isnan(verdict.interval.low)
    only_ours = V.paper_verdicts(paper, paper_chapter_effects, ["cell"], runs=1, cells=pd.DataFrame({"cell": ["c1"]}))
    assert only_ours["A > B"].word == "holds on this cell"  # restricted to the cells we ran


def test_drift_between_machines_widens_an_effect_by_root_two_runs():
    assert V.effect_drift(0.5) == pytest.approx(0.5 * np.sqrt(2))


def _relative_drop_effects(frame, value="final"):
    """A claim measured against another cell: b's relative drop from c = 1 minus a's, at c < 1."""
    wide = frame.pivot_table(index=["c", "seed"], columns="method", values=value)
    at_one = wide.xs(1.0, level="c")
    cells = wide.index.to_frame(index=False)
    reference = at_one.reindex(cells.seed.to_numpy())
    drop = {m: 1 - wide[m].to_numpy() / reference[m].to_numpy() for m in ("a", "b")}
    effect = pd.Series(drop["b"] - drop["a"], index=wide.index).where((cells.c < 1).to_numpy())
    return pd.DataFrame({"a loses less": effect}).reset_index()


def test_a_cell_measured_against_a_rising_cell_fails_the_gate_with_that_cell_named():
    from fedkd_core.verdicts import claim_gates

    rows = []
    for c, gain_b in ((1.0, 3.0), (0.5, 0.1)):  # b still rising where c = 1, flat at c = 0.5
        for seed in range(3):
            rows += [{"c": c, "method": "a", "seed": seed, "final": 0.6 - 0.1 * (c < 1), "evaluations": 20, "late_gain": 0.1},
                     {"c": c, "method": "b", "seed": seed, "final": 0.6 - 0.2 * (c < 1), "evaluations": 20, "late_gain": gain_b}]
    observations = pd.DataFrame(rows)
    table = claim_gates(_relative_drop_effects, observations, ["c"])["a loses less"]
    assert not table.loc[1.0, "converged"] and not table.loc[0.5, "converged"]  # 0.5's effect divides by c = 1's runs
    assert "the cell it is measured against (1.0)" in table.loc[0.5, "reason"] and table.loc[0.5, "rising"] == ["b"]
    flat = observations.assign(late_gain=0.1)
    assert claim_gates(_relative_drop_effects, flat, ["c"])["a loses less"].converged.all()


def test_versus_paper_compares_sizes_only_where_the_papers_tables_show_the_claim():
    holds = V.Verdict("c", V.HOLDS, V.Interval(3.0, 2.0, 4.0), note="assuming 3 runs")
    assert V.versus_paper(V.Interval(0.5, 0.2, 0.8), V.HOLDS, holds) == "smaller than the paper's"
    assert V.versus_paper(V.Interval(0.5, 0.2, 0.8), V.PARTLY, holds) == "smaller than the paper's"
    assert V.versus_paper(V.Interval(6.0, 5.0, 7.0), V.HOLDS, holds) == "larger than the paper's"
    assert V.versus_paper(V.Interval(3.5, 1.5, 5.5), V.HOLDS, holds) == "consistent with the paper's"
    assert V.versus_paper(V.Interval(0.1, -0.3, 0.5), V.INCONCLUSIVE, holds) == "rules out the paper's effect"
    assert V.versus_paper(V.Interval(1.0, -1.0, 3.0), V.INCONCLUSIVE, holds) == ""  # could be the paper's
    assert V.versus_paper(V.Interval(-2.0, -3.0, -1.0), V.DOES_NOT_HOLD, holds) == ""  # the word says it
    # the paper's tables do not show the claim: no size to compare with
    for word, interval in ((V.INCONCLUSIVE, V.Interval(0.05, -0.8, 0.9)), (V.DOES_NOT_HOLD, V.Interval(-2.0, -3.0, -1.0))):
        assert V.versus_paper(V.Interval(0.7, 0.3, 1.1), V.HOLDS, V.Verdict("c", word, interval)) == ""
    own_cells = V.Verdict("c", V.HOLDS, V.Interval(3.0, 2.0, 4.0), note="; on the paper's own cells, none of which we ran")
    assert V.versus_paper(V.Interval(0.5, 0.2, 0.8), V.HOLDS, own_cells) == ""  # other data: sizes do not compare
    # the paper prints no spread: our interval against its point value, named
    signs_only = V.Verdict("c", V.HOLDS, V.Interval(3.0, float("nan"), float("nan")))
    assert V.versus_paper(V.Interval(0.5, 0.2, 0.8), V.HOLDS, signs_only) == "below the paper's +3.0, no spread printed"
    assert V.versus_paper(V.Interval(4.0, 3.5, 4.5), V.HOLDS, signs_only) == "above the paper's +3.0, no spread printed"
    assert V.versus_paper(V.Interval(2.5, 1.0, 4.0), V.PARTLY, signs_only) == "consistent with the paper's +3.0, no spread printed"
    assert V.versus_paper(V.Interval(0.0, -0.1, 0.1), V.INCONCLUSIVE, signs_only) == "rules out the paper's +3.0, no spread printed"
    assert V.versus_paper(V.Interval(1.0, -1.0, 3.5), V.INCONCLUSIVE, signs_only) == ""  # could be the paper's
    small = V.Verdict("c", V.HOLDS, V.Interval(0.04, float("nan"), float("nan")))  # two decimals under a point
    assert V.versus_paper(V.Interval(0.5, 0.2, 0.8), V.HOLDS, small) == "above the paper's +0.04, no spread printed"
    assert V.versus_paper(V.Interval(0.5, 0.2, 0.8), V.HOLDS, None) == ""


def test_a_joint_gate_passes_a_cell_only_where_both_sets_of_runs_converged():
    one = pd.DataFrame({"converged": [True, False, True], "rising": [[], ["A"], []], "evaluations": [15, 15, 15],
                        "reason": ["", "A still rising", ""]}, index=["c1", "c2", "c3"])
    other = pd.DataFrame({"converged": [True, True, False], "rising": [[], [], ["B"]], "evaluations": [15, 12, 15],
                          "reason": ["", "", "B still rising"]}, index=["c1", "c2", "c3"])
    both = V.joint_gate(one, other)
    assert both.converged.tolist() == [True, False, False]
    assert both.rising.tolist() == [[], ["A"], ["B"]] and both.evaluations.tolist() == [15, 12, 15]
    assert V.joint_gate(one, None) is one


def test_a_single_cells_p_value_is_scipys_one_sample_t_test_and_matches_its_interval():
    effects = np.array([1.0, 2.0, 3.5])
    p = V.pooled_p_value([effects.mean()], [effects.std(ddof=1)], [3])
    assert p == pytest.approx(stats.ttest_1samp(effects, 0.0).pvalue)


def test_the_pooled_p_value_is_below_five_percent_exactly_where_the_interval_excludes_zero():
    rng = np.random.default_rng(3)
    for _ in range(200):
        k = int(rng.integers(1, 6))
        means, sds, ns = rng.normal(0.5, 1.0, k), rng.uniform(0.2, 2.0, k), rng.integers(2, 6, k)
        widen = float(rng.choice([0.0, 0.3]))
        interval = V.pooled_interval(means, sds, ns)
        excludes = interval.low - widen > 0 or interval.high + widen < 0
        assert (V.pooled_p_value(means, sds, ns, widen) < 0.05) == excludes
    assert V.pooled_p_value([0.2], [1.0], [3], widen=0.5) == 1.0  # the widening alone reaches zero
    assert np.isnan(V.pooled_p_value([0.2], [0.0], [1]))  # one seed: no interval, no test
    assert V.pooled_p_value([0.2, 0.4], [0.0, 0.0], [3, 3]) == 0.0  # seeds agree exactly: a zero-width interval
    assert V.pooled_interval([0.2, 0.4], [0.0, 0.0], [3, 3]).low > 0
    assert V.pooled_p_value([0.2], [0.0], [3], widen=0.5) == 1.0
    assert np.isnan(V.pooled_p_value([float("nan")], [0.0], [3]))  # no mean: no test


@pytest.mark.parametrize("p, rejected", [
    ([0.01, 0.04, 0.03, 0.005], [True, False, False, True]),  # 0.005 <= .05/4, 0.01 <= .05/3, 0.03 > .05/2: stop
    ([0.02, 0.03, 0.04], [False, False, False]),  # 0.02 > .05/3 stops it, though 0.04 <= .05 alone
    ([0.001, 0.02, 0.011], [True, True, True]),
    ([0.01, float("nan"), 0.04], [True, False, True]),  # NaN is no test: m = 2
])
def test_holms_step_down_correction_on_hand_made_p_values(p, rejected):
    assert V.holm(p) == rejected


def test_a_judged_verdict_carries_the_p_value_of_its_interval():
    effects = pd.DataFrame({"cell": ["a"] * 3 + ["b"] * 3, "seed": list(range(3)) * 2,
                            "A > B": [0.010, 0.020, 0.035, 0.02, 0.025, 0.03]})
    verdict = V.judge(effects, ["cell"], "A > B")
    per_cell = effects.groupby("cell")["A > B"].agg(["mean", "std", "size"]) * [100, 100, 1]
    assert verdict.p_value == pytest.approx(V.pooled_p_value(per_cell["mean"], per_cell["std"], per_cell["size"]))
    assert verdict.word == "holds on these 2 cells" and verdict.p_value < 0.05
    widened = V.judge(effects, ["cell"], "A > B", widen=2.0)  # +2.25 points, widened by 2 each side
    assert widened.word == "inconclusive" and 0.05 <= widened.p_value < 1
    assert V.judge(effects, ["cell"], "A > B", widen=3.0).p_value == 1.0


def test_p_values_print_at_one_precision_and_below_a_thousandth_as_a_bound():
    assert [V.p_text(p) for p in (0.03, 0.021, 0.1, 1.0, 0.0012)] == [
        "p = 0.030", "p = 0.021", "p = 0.10", "p = 1.0", "p = 0.0012"]
    assert V.p_text(0.0009) == "p < 0.001" and V.p_text(0.0) == "p < 0.001"


def test_a_decided_effect_is_small_only_where_its_whole_interval_lies_within_a_point_of_zero():
    assert V.under_a_point(V.Interval(0.34, 0.18, 0.51), V.HOLDS)
    assert V.under_a_point(V.Interval(-0.5, -0.9, -0.1), V.DOES_NOT_HOLD)
    assert V.under_a_point(V.Interval(0.4, 0.1, 0.7), V.PARTLY)
    assert not V.under_a_point(V.Interval(0.9, 0.5, 1.2), V.HOLDS)  # the interval reaches past a point
    assert not V.under_a_point(V.Interval(0.06, -0.06, 0.18), V.INCONCLUSIVE)  # not decided: its own note
    assert not V.under_a_point(V.Interval(0.3, float("nan"), float("nan")), V.HOLDS)  # no interval


def test_effects_of_many_moved_tables_from_one_call_equal_one_call_each():
    """verdict_gate.effects_of_each: each column's effects, as effects_of gives them for that column
    alone, with the table's own seeds; where seeds cannot be filed by copy (negative), one call each."""
    from fedkd_core.verdict_gate import effects_of_each

    def effects_of(frame, value):  # A - B and A / B per cell and seed, as a chapter's effects
        wide = frame.pivot_table(index=["cell", "seed"], columns="method", values=value)
        return pd.DataFrame({"A > B": wide.A - wide.B, "A / B": wide.A / wide.B}, index=wide.index).reset_index()

    frame = pd.DataFrame({"cell": ["x", "x", "y", "y"] * 2, "method": ["A", "B"] * 4, "seed": [0] * 4 + [3] * 4,
                          "final": [0.5, 0.4, 0.7, 0.2, 0.6, 0.1, 0.3, 0.3]})
    rng = np.random.default_rng(0)
    columns = [frame.final + rng.normal(0, 0.1, len(frame)) for _ in range(5)]
    for table in (frame, frame.assign(seed=frame.seed - 1)):  # seeds 0 and 3; then -1 and 2: one call each
        calls = []
        counted = lambda f, v: calls.append(1) or effects_of(f, v)  # noqa: E731
        together = effects_of_each(counted, table, "final", columns)
        alone = [effects_of(table.assign(final=column), "final") for column in columns]
        assert len(calls) == (1 if table.seed.min() >= 0 else 5)
        for mine, theirs in zip(together, alone, strict=True):
            pd.testing.assert_frame_equal(mine, theirs)
