"""Claims as effects with 95% intervals, and the verdict words every page of the book uses.

A claim ("KnFu > FedMD") is an *effect* in accuracy points, positive where the claim is true,
measured per cell (one setting of the paper's tables) and seed. Runs of one seed share their data
partition and initialisation, so the effect of seed s is the paired difference of the methods'
seed-s runs; a chapter's ``effects_of`` computes it (see :mod:`fedkd_core.chapters`).

How the numbers are turned into a verdict (the Claims page explains the same in prose):

* **Per cell**, a t-interval on the paired per-seed effects (n seeds, n − 1 degrees of freedom):
  the cell *holds* when the interval lies above zero, is *reversed* when it lies below, and is
  *inconclusive* otherwise (always so with a single seed).
* **Per claim**, the mean of the per-cell means, with a 95% interval that treats the cells as the
  fixed settings the paper chose and the seeds as the only randomness: its variance is
  Σ_c s_c² / n_c / k², with Welch–Satterthwaite degrees of freedom. The claim is about *these*
  settings, so the cells are not a sample to generalise from; a t-interval over cell means would
  instead ask whether the effect holds for settings the paper never ran, and with the 2-4 cells a
  reduced profile has it could never decide anything.
* **The words**: *holds* (interval above zero, no cell reversed), *partly* (interval above zero,
  some cell reversed), *does not hold* (interval below zero), *inconclusive* (the interval
  contains zero), *untested at this scale* (every cell failed the convergence gate, :func:`gate`);
  a chapter may withhold a measured verdict as *not judged: unequal tuning* (the methods compared
  did not get the same tuning budget: :func:`fedkd_core.chapters.ledger.withhold`). A decided
  word whose whole interval lies within 1 point of zero is flagged *small* (:func:`under_a_point`):
  the direction is decided, the size is under a point.
* **Many claims at once**: each verdict also carries the p-value of the test its interval
  inverts (:func:`pooled_p_value`), and a chapter's claims are one family for Holm's step-down
  correction (:func:`holm`, applied by :func:`fedkd_core.chapters.ledger.with_holm`), which marks
  a decided verdict that, judged with the chapter's other claims, it does not keep.
* **The paper's side**: where a paper reports mean ± std over n runs, each method's cell mean is
  drawn from a normal with that mean and std/√n (a seeded parametric bootstrap), the same effect
  function is applied to every draw, and the 2.5 and 97.5 percentiles give the intervals. The
  paper's runs are not paired with one another, so this is a little wider than a paired test
  would be. Where the paper gives no spread, only the signs are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

LEVEL = 0.95
POINTS = 100.0  # accuracies are fractions; effects are reported in points

HOLDS, PARTLY, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "partly", "does not hold", "inconclusive"
UNTESTED = "untested at this scale"
UNTESTABLE = "not testable offline"
NO_RECORDS = "no committed records"
UNEQUAL_TUNING = "not judged: unequal tuning"
REVERSED = "reversed"
WORDS = (HOLDS, PARTLY, DOES_NOT_HOLD, INCONCLUSIVE, UNTESTED, UNEQUAL_TUNING, UNTESTABLE, NO_RECORDS)
# The words that are not a verdict on the claim: the records cannot decide it, or do not exist.
NOT_JUDGED = (UNTESTED, UNEQUAL_TUNING, UNTESTABLE, NO_RECORDS)

# The convergence gate: a cell counts only if every run behind it was evaluated this often and its
# method's mean curve gained less than this many points over the last LATE_SHARE of the rounds.
MIN_EVALUATIONS = 10
MAX_LATE_GAIN = 1.0
LATE_SHARE = 0.2
LATE_SMOOTHING = 3  # evaluations averaged at each end of the late window (trajectory)
DECIDABLE_EFFECT = 1.0  # points: "what more seeds would buy" is the seeds that decide an effect this size
# How far one run's ALMA moves between CPUs, fp32, in points: the mean absolute difference over the
# 36 pairs of KnFu robustness runs of the same config and seed made on two CPUs (the "R = 30 rounds"
# variant read at round 15 against the base's R = 15 runs; fedkd_core.performance.drift_pairs
# recomputes it from the records, and a test keeps this constant equal to it).
MACHINE_DRIFT = 0.46
NOISE = 5e-5  # points: an effect or bound closer to zero than this is float noise, printed as zero


def effect_drift(run_drift: float = MACHINE_DRIFT) -> float:
    """How far an effect (a difference of two runs, each drifting independently) may move between
    machines: √2 times one run's drift."""
    return float(np.sqrt(2) * run_drift)


@dataclass(frozen=True)
class Interval:
    """A mean and its 95% interval, in points."""

    mean: float
    low: float
    high: float

    def text(self, digits: int | None = None) -> str:
        """"+3.5 [+2.9, +4.1]"; a mean without an interval prints alone. By default one decimal,
        two where every number is below a point (so "+0.04 [-0.05, +0.13]" does not read
        "+0.0 [-0.1, +0.1]"), and more (up to 4) where a bound that is not zero would print as
        zero: "+0.340 [+0.003, +0.680]", not "[+0.00, +0.68]" beside "holds", which reads as touching
        zero (a bound below :data:`NOISE`, float noise, keeps the usual decimals)."""
        if np.isnan(self.mean):
            return "—"
        if digits is None:
            digits = 2 if np.nanmax(np.abs([self.mean, self.low, self.high])) < 1 else 1
            while digits < 4 and any(round(abs(b), digits) == 0 and abs(b) >= NOISE for b in (self.low, self.high)):
                digits += 1
        if np.isnan(self.low):
            return f"{self.mean:+.{digits}f}"
        return f"{self.mean:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]"

    @property
    def word(self) -> str:
        """holds / reversed / inconclusive for one cell."""
        return HOLDS if self.low > 0 else REVERSED if self.high < 0 else INCONCLUSIVE


NO_INTERVAL = Interval(float("nan"), float("nan"), float("nan"))


def t_interval(values: Sequence[float], level: float = LEVEL) -> Interval:
    """The t-interval of the mean of ``values`` (n − 1 degrees of freedom); a single value has a
    mean and no interval. Identical values have a zero-width interval."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return NO_INTERVAL
    mean = float(values.mean())
    if len(values) < 2:
        return Interval(mean, float("nan"), float("nan"))
    half = float(stats.t.ppf(0.5 + level / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))
    return Interval(mean, mean - half, mean + half)


def pooled_interval(means: Sequence[float], sds: Sequence[float], ns: Sequence[int], level: float = LEVEL) -> Interval:
    """The mean of k cell means and its interval with the cells fixed and the seeds random:
    variance Σ s_c²/n_c / k², Welch–Satterthwaite degrees of freedom. Cells with fewer than two
    seeds have no spread and are left out (the caller says so)."""
    mean, se, dof = pooled_estimate(means, sds, ns)
    if np.isnan(se):  # no cell with two seeds: a mean alone (NaN, as NO_INTERVAL, where there is none)
        return Interval(mean, float("nan"), float("nan"))
    if se == 0:
        return Interval(mean, mean, mean)
    half = float(stats.t.ppf(0.5 + level / 2, dof) * se)
    return Interval(mean, mean - half, mean + half)


def pooled_estimate(means: Sequence[float], sds: Sequence[float], ns: Sequence[int]) -> tuple[float, float, float]:
    """(mean, standard error, degrees of freedom) of :func:`pooled_interval`; the error and degrees
    of freedom are NaN where no cell has two seeds (the mean is then over every cell, NaN for none)."""
    means, sds, ns = (np.asarray(x, dtype=float) for x in (means, sds, ns))
    keep = ns >= 2
    if not keep.any():
        return (float(means.mean()) if len(means) else float("nan")), float("nan"), float("nan")
    means, sds, ns = means[keep], sds[keep], ns[keep]
    parts = sds**2 / ns  # each cell mean's variance
    variance = parts.sum() / len(means) ** 2
    dof = parts.sum() ** 2 / np.sum(parts**2 / (ns - 1)) if variance > 0 else float("inf")
    return float(means.mean()), float(np.sqrt(variance)), float(dof)


def pooled_p_value(means: Sequence[float], sds: Sequence[float], ns: Sequence[int], widen: float = 0.0) -> float:
    """Two-sided p-value of "the pooled effect is zero", the test :func:`pooled_interval` inverts:
    below 1 − level exactly where the interval excludes zero. ``widen`` (points added to each side
    of the interval, :func:`judge`) is taken off the effect's distance from zero first, so the
    p-value still matches the widened interval (1 where the widening alone reaches zero). NaN
    where there is no interval (no cell with two seeds)."""
    mean, se, dof = pooled_estimate(means, sds, ns)
    if np.isnan(se) or np.isnan(mean):
        return float("nan")
    distance = abs(mean) - widen
    if distance <= 0:
        return 1.0
    return 0.0 if se == 0 else float(2 * stats.t.sf(distance / se, dof))


def p_text(p: float) -> str:
    """A p-value as the book prints it, "p = 0.030" or "p < 0.001": two significant digits with
    their trailing zero kept, so 0.03 and 0.021 read at the same precision, and "< 0.001" below
    that (with a few seeds a run, finer digits carry no information)."""
    return "p < 0.001" if p < 0.001 else f"p = {p:#.2g}"


def holm(p_values: Sequence[float], family_error: float = 1 - LEVEL) -> list[bool]:
    """Holm's step-down correction: which of ``p_values`` (one family of tests) are rejected with
    the chance of any false rejection in the family at most ``family_error``. Sorted ascending, the
    i-th smallest (from 0) is rejected while every one up to it is at most family_error / (m − i);
    the first that is not stops the procedure. NaN p-values are not tests: never rejected, not counted in m."""
    p = np.asarray(p_values, dtype=float)
    tested = np.flatnonzero(~np.isnan(p))
    rejected = np.zeros(len(p), dtype=bool)
    for rank, index in enumerate(tested[np.argsort(p[tested], kind="stable")]):
        if p[index] > family_error / (len(tested) - rank):
            break
        rejected[index] = True
    return rejected.tolist()


def seeds_to_decide(sds: Sequence[float], effect: float = DECIDABLE_EFFECT, level: float = LEVEL,
                    most: int = 1000) -> int | None:
    """The seeds per cell at which the pooled interval's half-width falls below ``effect`` points,
    given the cells' observed per-seed spreads ``sds`` (None if more than ``most`` would be needed)."""
    sds = np.asarray([s for s in sds if np.isfinite(s)], dtype=float)
    if not len(sds):
        return None
    k = len(sds)
    for n in range(2, most + 1):
        half = stats.t.ppf(0.5 + level / 2, k * (n - 1)) * np.sqrt(np.sum(sds**2) / n) / k
        if half < effect:
            return n
    return None


# --- one claim on per-(cell, seed) effects -----------------------------------------------------

def cell_table(effects: pd.DataFrame, cell_keys: Sequence[str], claim: str, scale: float = POINTS) -> pd.DataFrame:
    """Per cell of ``effects`` (columns ``cell_keys`` + seed + one per claim, fractions): the seeds,
    the mean effect in points, its per-seed std, the t-interval and the cell's word."""
    values = effects[list(cell_keys) + ["seed", claim]].dropna(subset=[claim])
    rows = []
    for cell, group in values.groupby(list(cell_keys), sort=True):
        effect = group[claim].to_numpy() * scale
        interval = t_interval(effect)
        rows.append({**dict(zip(cell_keys, cell if isinstance(cell, tuple) else (cell,))),
                     "seeds": len(effect), "effect": interval.mean,
                     "sd": float(effect.std(ddof=1)) if len(effect) > 1 else float("nan"),
                     "low": interval.low, "high": interval.high, "outcome": interval.word})
    return pd.DataFrame(rows, columns=list(cell_keys) + ["seeds", "effect", "sd", "low", "high", "outcome"])


# How :attr:`Verdict.cells_text` ends where one-seed cells leave the interval fewer cells than the
# verdict counts (the landing page's "(1 cell)" flag reads it: fedkd_core.glance.one_cell_flag).
INTERVAL_READS = " (the interval reads {})"


@dataclass(frozen=True)
class Verdict:
    """A claim judged on its cells: the word, the pooled effect, and what stands behind it."""

    claim: str
    word: str
    interval: Interval = NO_INTERVAL
    cells: int = 0
    holding: int = 0
    reversed: int = 0
    seeds: str = ""
    note: str = ""
    seeds_needed: int | None = None
    gate_reason: str = ""  # why the gate left cells out, its first rule first (:func:`gate_reasons`)
    counted: str = ""  # with the gate off: why it would have left cells out that were counted
    p_value: float = float("nan")  # of "the pooled effect is zero" (:func:`pooled_p_value`), for :func:`holm`
    single_seed: int = 0  # cells with one seed: counted, but left out of the interval (no spread)

    @property
    def effect_text(self) -> str:
        return self.interval.text()

    @property
    def cells_text(self) -> str:
        if not self.cells:
            return "—"
        inconclusive = self.cells - self.holding - self.reversed
        spread = self.cells - self.single_seed
        read = INTERVAL_READS.format(spread) if self.single_seed and spread else ""
        return f"{self.holding} hold, {self.reversed} reversed, {inconclusive} inconclusive of {self.cells}{read}"


def claim_word(interval: Interval, reversed_cells: int) -> str:
    """The verdict word for a pooled interval and the number of reversed cells."""
    if np.isnan(interval.low):
        return INCONCLUSIVE
    if interval.low > 0:
        return PARTLY if reversed_cells else HOLDS
    return DOES_NOT_HOLD if interval.high < 0 else INCONCLUSIVE


def under_a_point(interval: Interval, word: str, size: float = DECIDABLE_EFFECT) -> bool:
    """Whether a decided verdict (holds, partly, does not hold) is *small*: its whole 95% interval
    lies within ``size`` points of zero, so the direction is decided but the effect is under a
    point. Such an effect is real at these settings and seeds, and yet of the order of what moves
    an effect between CPUs (:func:`effect_drift`)."""
    if word not in (HOLDS, PARTLY, DOES_NOT_HOLD) or np.isnan(interval.low):
        return False
    return max(abs(interval.low), abs(interval.high)) < size


def versus_paper(ours: Interval, word: str, paper: "Verdict | None") -> str:
    """How our effect's size compares with the paper's, where the paper's own verdict on the same
    cells is *holds* (or *partly*) and both have a 95% interval: for our *holds* / *partly*,
    "smaller than the paper's" (our interval wholly below the paper's), "larger than the paper's"
    (wholly above) or "consistent with the paper's" (they overlap); for our *inconclusive*, "rules
    out the paper's effect" where our interval lies wholly below the paper's. Where the paper
    prints no spread (its interval is its point value alone), the same comparison with that value,
    named: "below the paper's +5.0, no spread printed", "above ...", "consistent with ...", "rules
    out the paper's +1.6, no spread printed". "" otherwise: the paper's tables do not show the
    claim (their verdict column says so), the paper's verdict is on cells we did not run, or our
    word already says it."""
    if paper is None or paper.word not in (HOLDS, PARTLY) or "paper's own cells" in paper.note:
        return ""
    theirs = paper.interval
    if any(np.isnan(v) for v in (ours.low, ours.high, theirs.mean)):
        return ""
    if np.isnan(theirs.low) or np.isnan(theirs.high):
        return _versus_point(ours, word, theirs.mean)
    below, above = ours.high < theirs.low, ours.low > theirs.high
    if word in (HOLDS, PARTLY):
        return "smaller than the paper's" if below else "larger than the paper's" if above else "consistent with the paper's"
    if word == INCONCLUSIVE and below:
        return "rules out the paper's effect"
    return ""


def _versus_point(ours: Interval, word: str, point: float) -> str:
    """:func:`versus_paper` against a paper's effect printed without a spread: where ``point`` lies
    relative to our 95% interval."""
    named = f"the paper's {Interval(point, float('nan'), float('nan')).text()}, no spread printed"
    if word in (HOLDS, PARTLY):
        return (f"below {named}" if ours.high < point else f"above {named}" if ours.low > point
                else f"consistent with {named}")
    return f"rules out {named}" if word == INCONCLUSIVE and ours.high < point else ""


def judge(effects: pd.DataFrame, cell_keys: Sequence[str], claim: str, gate_table: pd.DataFrame | None = None,
          enforce_gate: bool = True, widen: float = 0.0) -> Verdict:
    """The verdict on ``claim`` from per-(cell, seed) effects. With a ``gate_table`` (from
    :func:`gate`, indexed by ``cell_keys``) and ``enforce_gate``, only the cells that pass the
    convergence gate count, and a claim with none left is "untested at this scale"; without
    ``enforce_gate`` (runs at the paper's own round budget, where a still-rising method is the
    paper's protocol; or two sets of runs compared on the same cells) every cell counts and the note
    says how many were still rising. ``widen``:
    points added to each side of the pooled interval (the drift between machines, where the
    effect pairs runs from machines not shown to compute alike: :func:`effect_drift`,
    :func:`fedkd_core.numerics.mixes_numerics`)."""
    if claim not in effects or not effects[claim].notna().any():
        return Verdict(claim, NO_RECORDS)
    cells = cell_table(effects, cell_keys, claim)
    notes, gate_reason, counted = [], "", ""
    if gate_table is not None and len(cells):
        passed = passes_gate(gate_table, cells, cell_keys)
        failed = cells[[not p for p in passed]]
        if len(failed):
            reasons = gate_reasons([gate_table.loc[[cell_key(row, cell_keys)]].iloc[0] for _, row in failed.iterrows()])
            if enforce_gate:
                notes.append(f"{len(failed)} of {len(cells)} cells left out by the convergence gate: {'; '.join(reasons)}")
                gate_reason = reasons[0] if reasons else ""
                cells = cells[passed]
                if not len(cells):
                    return Verdict(claim, UNTESTED, note=notes[0], gate_reason=gate_reason)
            else:
                counted = "; ".join(reasons)
                notes.append(f"{len(failed)} of {len(cells)} cells still rising at the last round, counted: {counted}")
    single = int((cells.seeds < 2).sum())
    if single:
        notes.append(f"{single} cell{'s' if single > 1 else ''} with one seed left out of the interval")
    interval = pooled_interval(cells.effect, cells.sd, cells.seeds)
    p_value = pooled_p_value(cells.effect, cells.sd, cells.seeds, widen)
    if widen:
        interval = Interval(interval.mean, interval.low - widen, interval.high + widen)
        notes.append(f"interval widened by ±{widen:.2f} points: it pairs runs from machines that round differently")
    reversed_cells = int((cells.outcome == REVERSED).sum())
    word = claim_word(interval, reversed_cells)
    seeds = f"{cells.seeds.min()}" if cells.seeds.min() == cells.seeds.max() else f"{cells.seeds.min()}-{cells.seeds.max()}"
    needed = seeds_to_decide(cells.sd) if word == INCONCLUSIVE else None
    return Verdict(claim, word, interval, len(cells), int((cells.outcome == HOLDS).sum()), reversed_cells, seeds,
                   "; ".join(notes), needed, gate_reason, counted, p_value, single)


def gate_reasons(failed_rows) -> list[str]:
    """Why the gate failed these cells (:func:`gate` rows), the first rule first: too few
    evaluations ("evaluated 5 times, fewer than 10"), then the methods still rising
    (:func:`rising_text`); only the reasons that apply."""
    rows = list(failed_rows)
    return [text for text in (sparse_text(rows), rising_text(rows)) if text]


def evaluations_text(evaluations, least: int = MIN_EVALUATIONS) -> str:
    """"evaluated 5 times, fewer than 10" ("evaluated 4-5 times, ..." for a range)."""
    fewest, most = min(evaluations), max(evaluations)
    times = f"{fewest}" if fewest == most else f"{fewest}-{most}"
    return f"evaluated {times} time{'s' if most != 1 else ''}, fewer than {least}"


def sparse_text(failed_rows) -> str:
    """"evaluated 5 times, fewer than 10" where every failed cell was evaluated too rarely, "2 cells
    evaluated 5 times, fewer than 10" where only some were, "" where none was."""
    sparse = [int(row["evaluations"]) for row in failed_rows if row["evaluations"] < MIN_EVALUATIONS]
    if not sparse:
        return ""
    which = "" if len(sparse) == len(failed_rows) else f"{len(sparse)} cell{'s' if len(sparse) > 1 else ''} "
    return which + evaluations_text(sparse)


def rising_text(failed_rows) -> str:
    """"fedmd in 9 cells, selective_fd in 5 cells still rising" from the :func:`gate` rows of the
    failed cells ("" where no method was rising)."""
    methods: dict[str, int] = {}
    for row in failed_rows:
        for method in row["rising"]:
            methods[method] = methods.get(method, 0) + 1
    if not methods:
        return ""
    ranked = sorted(methods.items(), key=lambda item: -item[1])
    named = ", ".join(f"{m} in {n} cell{'s' if n > 1 else ''}" for m, n in ranked[:3])
    more = f" and {len(ranked) - 3} more methods" if len(ranked) > 3 else ""
    return f"{named}{more} still rising"


def passes_gate(gate_table: pd.DataFrame, cells: pd.DataFrame, cell_keys: Sequence[str]) -> list[bool]:
    """Per row of ``cells`` (columns ``cell_keys``), whether the :func:`gate` table passes it (a
    cell the table does not list passes)."""
    return [bool(gate_table["converged"].get(cell_key(row, cell_keys), True)) for _, row in cells.iterrows()]


def cell_key(row: pd.Series, cell_keys: Sequence[str]):
    key = tuple(row[k] for k in cell_keys)
    return key if len(key) > 1 else key[0]


def claims_in(effects: pd.DataFrame, cell_keys: Sequence[str]) -> list[str]:
    return [c for c in effects.columns if c not in set(cell_keys) | {"seed"}]


# --- the convergence gate ----------------------------------------------------------------------

def trajectory(history: Sequence[dict], metric: str, rounds: int, late_share: float = LATE_SHARE,
               smoothing: int = LATE_SMOOTHING) -> dict:
    """From a run's evaluated rounds: the metric at the last evaluation ("final"), its best value
    ("best"), how many times it was evaluated, and its gain in points over the last ``late_share``
    of the rounds ("late_gain"): the mean of the last k evaluations minus the mean of the k
    evaluations ending at round (1 − ``late_share``) x ``rounds``, where k is ``smoothing`` or the
    number of evaluations after that round if fewer. One evaluation moves by up to a point from round
    to round (FedUA's FedAvg, evaluated every round); averaging three keeps that noise from reading
    as a rise or a plateau, and with one evaluation after the cut it is the plain difference."""
    points = [(row["round"], row[metric]) for row in history if row.get(metric) is not None and np.isfinite(row[metric])]
    if not points:
        return {"final": float("nan"), "best": float("nan"), "evaluations": 0, "late_gain": float("nan")}
    cut = (1 - late_share) * rounds
    before = [value for r, value in points if r <= cut]
    after = [value for r, value in points if r > cut]
    k = max(1, min(smoothing, len(after), len(before)))
    gain = (np.mean(after[-k:]) - np.mean(before[-k:])) * POINTS if before and after else float("nan")
    return {"final": points[-1][1], "best": max(value for _, value in points), "evaluations": len(points),
            "late_gain": float(gain)}


def gate(observations: pd.DataFrame, cell_keys: Sequence[str], method: str = "method",
         min_evaluations: int = MIN_EVALUATIONS, max_late_gain: float = MAX_LATE_GAIN) -> pd.DataFrame:
    """Per cell of ``observations`` (one row per run: ``cell_keys``, ``method``, final, evaluations,
    late_gain): whether every run was evaluated at least ``min_evaluations`` times and every
    method's mean late gain is below ``max_late_gain`` points; the methods still rising, the fewest
    evaluations, and the reason in words (e.g. "fedavg still rising: +3.2 points over the last 20%
    of rounds, ends at 23.1%")."""
    rows = {}
    for cell, runs in observations.groupby(list(cell_keys), sort=True):
        reasons = []
        evaluations = int(runs.evaluations.min())
        if evaluations < min_evaluations:
            reasons.append(evaluations_text([evaluations], min_evaluations))
        by_method = runs.groupby(method).agg(gain=("late_gain", lambda g: g.mean(skipna=False)), final=("final", "mean"))
        rising = [name for name, row in by_method.iterrows() if not row.gain < max_late_gain]
        reasons += [f"{name} still rising: {by_method.gain[name]:+.1f} points over the last {LATE_SHARE:.0%} of rounds, "
                    f"ends at {by_method.final[name] * POINTS:.1f}%" if np.isfinite(by_method.gain[name])
                    else f"{name} not evaluated in the last {LATE_SHARE:.0%} of rounds in some run" for name in rising]
        key = cell if len(cell_keys) > 1 else (cell[0] if isinstance(cell, tuple) else cell)
        rows[key] = {"converged": not reasons, "rising": rising, "evaluations": evaluations, "reason": "; ".join(reasons)}
    table = pd.DataFrame.from_dict(rows, orient="index", columns=["converged", "rising", "evaluations", "reason"])
    if len(cell_keys) > 1 and len(table):
        table.index = pd.MultiIndex.from_tuples(table.index, names=list(cell_keys))
    return table


def claim_methods(effects_of: Callable[[pd.DataFrame, str], pd.DataFrame], observations: pd.DataFrame,
                  cell_keys: Sequence[str], method: str = "method", value: str = "final") -> dict[str, set]:
    """Per claim of ``effects_of(observations)``, the methods its effect reads: a method belongs to
    a claim when moving that method's ``value`` far above, or far below, every other value changes
    the claim's effect somewhere. This finds the methods of a plain difference ("FedCKD > pFedSD"),
    and also those of a claim over whichever methods ran ("FedCKD best of the methods run", "every
    personalised method beats FedAvg and FedProx"), which lose no effect when one method is
    missing, so dropping a method's runs would not reveal that they read it. The convergence gate
    then reads exactly those methods (FedAvg still rising does not hold back "FedCKD > pFedSD")."""
    keys = list(cell_keys) + ["seed"]
    full = effects_of(observations, value)
    claims = claims_in(full, cell_keys)
    methods: dict[str, set] = {claim: set() for claim in claims}
    for name in observations[method].unique():
        for moved in _moved_effects(effects_of, observations, method, name, value):
            changed = _changed_rows(full, moved, keys, claims)
            for claim in claims:
                if claim not in changed or len(changed[claim]):  # an effect that disappears is a change
                    methods[claim].add(name)
    return methods


def _far(values: pd.Series) -> float:
    """A shift that moves a value past every other of ``values``."""
    return float(values.max() - values.min()) + 1.0


def _moved_effects(effects_of, observations: pd.DataFrame, method: str, name, value: str) -> list[pd.DataFrame]:
    """The effects with method ``name``'s ``value`` moved above every value, then below every value."""
    values = observations[value].astype(float)
    far = _far(values)
    own = (observations[method] == name).to_numpy()
    return [effects_of(observations.assign(**{value: values.where(~own, values + shift)}), value)
            for shift in (far, -far)]


def _changed_rows(full: pd.DataFrame, moved: pd.DataFrame, keys: list[str], claims: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Per claim of ``claims`` that ``moved`` still has, the ``keys`` of the rows where its effect
    in ``moved`` differs from ``full`` (an effect that disappears from a row counts as a change).
    One merge serves every claim: the rows are matched on ``keys`` alone."""
    present = [claim for claim in claims if claim in moved]
    # the moved effects under integer labels: no claim's name (a string) can collide with them
    renamed = moved[keys + present].set_axis(keys + list(range(len(present))), axis=1)
    both = full[keys + present].merge(renamed, on=keys, how="left")
    return {claim: both.loc[~np.isclose(both[claim].to_numpy(dtype=float), both[i].to_numpy(dtype=float),
                                        equal_nan=True), keys]
            for i, claim in enumerate(present)}


def claim_gates(effects_of: Callable[[pd.DataFrame, str], pd.DataFrame], observations: pd.DataFrame,
                cell_keys: Sequence[str], method: str = "method") -> dict[str, pd.DataFrame]:
    """Per claim, the :func:`gate` of the runs of the methods it compares (:func:`claim_methods`),
    where a cell whose effect also reads the runs of other cells (FedUA's relative drop from C = 1)
    passes only if those cells pass too (:func:`claims_cell_sources`)."""
    methods_of = claim_methods(effects_of, observations, cell_keys, method)
    sources = claims_cell_sources(effects_of, observations, cell_keys, list(methods_of))
    return {claim: with_sources(gate(observations[observations[method].isin(methods)], cell_keys, method),
                                sources.get(claim, {}))
            for claim, methods in methods_of.items()}


def cell_sources(effects_of: Callable[[pd.DataFrame, str], pd.DataFrame], observations: pd.DataFrame,
                 cell_keys: Sequence[str], claim: str, value: str = "final") -> dict[tuple, set]:
    """Per cell of ``claim``'s effects, the *other* cells whose runs its effect reads: moving every
    value of a cell far above the rest changes the effect there (a relative drop reads the C = 1
    cell it drops from)."""
    return claims_cell_sources(effects_of, observations, cell_keys, [claim], value).get(claim, {})


def claims_cell_sources(effects_of: Callable[[pd.DataFrame, str], pd.DataFrame], observations: pd.DataFrame,
                        cell_keys: Sequence[str], claims: Sequence[str],
                        value: str = "final") -> dict[str, dict[tuple, set]]:
    """:func:`cell_sources` of every claim of ``claims`` at once: each cell is moved once and every
    claim's effects read from that one move (a claim's effect reads only its own methods' runs, so
    moving the other methods' runs of the cell as well changes nothing for it)."""
    keys = list(cell_keys)
    observations = observations.reset_index(drop=True)
    full = effects_of(observations, value)
    claims = [claim for claim in claims if claim in full]
    values = observations[value].astype(float)
    far = _far(values)
    sources: dict[str, dict[tuple, set]] = {claim: {} for claim in claims}
    for source, runs in observations.groupby(keys, sort=False) if claims else ():
        source = source if isinstance(source, tuple) else (source,)
        moved = effects_of(observations.assign(**{value: values.where(~observations.index.isin(runs.index), values + far)}),
                           value)
        for claim, changed in _changed_rows(full, moved, keys + ["seed"], claims).items():
            for target in changed[keys].drop_duplicates().itertuples(index=False, name=None):
                if tuple(target) != source:
                    sources[claim].setdefault(tuple(target), set()).add(source)
    return sources


def joint_gate(one: pd.DataFrame | None, other: pd.DataFrame | None) -> pd.DataFrame | None:
    """Two :func:`gate` tables of the same claim on two sets of runs (a method as coded and tuned),
    as one: a cell passes only where it passes in both, so that both sets are judged on the same
    cells; the methods still rising and the fewest evaluations of either."""
    if one is None or other is None:
        return one if other is None else other
    index = one.index.union(other.index)
    a, b = one.reindex(index), other.reindex(index)
    passes = lambda t: t["converged"].map(lambda v: True if v is None or v != v else bool(v))  # noqa: E731
    rising = lambda t: t["rising"].map(lambda v: v if isinstance(v, list) else [])  # noqa: E731
    return pd.DataFrame({"converged": passes(a) & passes(b),
                         "rising": [sorted(set(x) | set(y)) for x, y in zip(rising(a), rising(b))],
                         "evaluations": pd.concat([a["evaluations"], b["evaluations"]], axis=1).min(axis=1),
                         "reason": ["; ".join(r for r in (x, y) if isinstance(r, str) and r) for x, y in zip(a["reason"], b["reason"])]},
                        index=index)


def with_sources(table: pd.DataFrame, sources: dict[tuple, set]) -> pd.DataFrame:
    """``table`` (a :func:`gate`) with each cell failing where a cell it reads (``sources``) fails,
    the reason naming that cell."""
    table = table.copy()

    def row_of(cell: tuple):
        key = cell if table.index.nlevels > 1 else cell[0]
        return table.loc[key] if key in table.index else None

    for target, cells in sources.items():
        mine = row_of(target)
        failing = [(cell, row) for cell in sorted(cells, key=str) if (row := row_of(cell)) is not None and not row.converged]
        if mine is None or not failing:
            continue
        key = target if table.index.nlevels > 1 else target[0]
        reasons = [mine.reason] if mine.reason else []
        reasons += [f"the cell it is measured against ({', '.join(map(str, cell))}): {row.reason}" for cell, row in failing]
        table.at[key, "converged"] = False
        table.at[key, "rising"] = sorted(set(mine.rising).union(*(row.rising for _, row in failing)))
        table.at[key, "evaluations"] = min([int(mine.evaluations)] + [int(row.evaluations) for _, row in failing])
        table.at[key, "reason"] = "; ".join(reasons)
    return table


# --- the paper's side ---------------------------------------------------------------------------

PAPER_REPLICATES = 4000


def paper_verdicts(paper: pd.DataFrame, effects_of: Callable[[pd.DataFrame, str], pd.DataFrame],
                   cell_keys: Sequence[str], runs: int, cells: pd.DataFrame | None = None,
                   replicates: int = PAPER_REPLICATES, seed: int = 0,
                   claim_cells: dict[str, pd.DataFrame] | None = None) -> dict[str, Verdict]:
    """Each claim judged on a paper's table (rows: the chapter's observation columns with ``mean``
    and ``std`` in %, NaN std where the paper gives none), by a seeded parametric bootstrap over
    ``runs`` assumed runs per reported number; restricted to ``cells`` (a frame of ``cell_keys``)
    when given, and a claim in ``claim_cells`` to its own cells there (the cells our verdict on it
    kept: the two sides then read the same cells). Where the paper gives no spread, the verdict
    counts signs (note "paper gives no spread")."""
    has_spread = bool(paper["std"].notna().all())
    draws = replicates if has_spread else 1
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((draws, len(paper))) if has_spread else np.zeros((1, len(paper)))
    spread = (paper["std"].fillna(0).to_numpy() / np.sqrt(runs))[None, :]
    values = paper["mean"].to_numpy()[None, :] + noise * spread
    # every replicate of the table, one after another (replicate r's rows are rows r*n .. r*n + n - 1)
    rows = paper.drop(columns=["mean", "std"])
    frame = rows.iloc[np.tile(np.arange(len(rows)), draws)].reset_index(drop=True).assign(
        seed=np.repeat(np.arange(draws), len(rows)), value=values.reshape(-1) / POINTS)
    every = effects_of(frame, "value")
    ours = every.merge(cells[list(cell_keys)].drop_duplicates(), on=list(cell_keys)) if cells is not None and len(cells) else every
    verdicts = {}
    for claim in claims_in(every, cell_keys):
        mine = (every.merge(claim_cells[claim][list(cell_keys)].drop_duplicates(), on=list(cell_keys))
                if claim_cells and claim in claim_cells and len(claim_cells[claim]) else ours)
        shared = claim in mine and mine[claim].notna().any()
        effects = mine if shared else every  # a claim none of our cells share: the paper's own cells
        per_cell = effects.dropna(subset=[claim]).pivot_table(index="seed", columns=list(cell_keys), values=claim) * POINTS
        if per_cell.empty:
            continue
        where = "" if shared or ours is every else "; on the paper's own cells, none of which we ran"
        if has_spread:
            verdict = _bootstrap_verdict(claim, per_cell, runs)
        else:
            signs = per_cell.iloc[0]
            holding, reversed_cells = int((signs > 0).sum()), int((signs < 0).sum())
            word = HOLDS if holding == len(signs) else DOES_NOT_HOLD if holding == 0 else PARTLY
            verdict = Verdict(claim, word, Interval(float(signs.mean()), float("nan"), float("nan")), len(signs),
                              holding, reversed_cells, note="paper gives no spread: signs counted")
        verdicts[claim] = replace(verdict, note=verdict.note + where)
    return verdicts


def _bootstrap_verdict(claim: str, per_cell: pd.DataFrame, runs: int) -> Verdict:
    low, high = (0.5 - LEVEL / 2) * 100, (0.5 + LEVEL / 2) * 100
    cell_words = [Interval(float(per_cell[c].mean()), float(np.percentile(per_cell[c], low)),
                           float(np.percentile(per_cell[c], high))).word for c in per_cell.columns]
    pooled = per_cell.mean(axis=1)
    interval = Interval(float(pooled.mean()), float(np.percentile(pooled, low)), float(np.percentile(pooled, high)))
    reversed_cells = cell_words.count(REVERSED)
    return Verdict(claim, claim_word(interval, reversed_cells), interval, len(cell_words), cell_words.count(HOLDS),
                   reversed_cells, seeds=str(runs), note=f"assuming {runs} runs per reported mean ± std")
