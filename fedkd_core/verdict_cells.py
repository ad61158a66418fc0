"""One cell of a claim: the paired per-seed effects, their t-interval and p-value, and the cell's
word after Holm's correction across the claim's cells.

A cell is one setting of a paper's table (dataset, α, |D_n|, ...). Runs of one seed share their
data partition and initialisation, so the effect of seed s is the paired difference of the
methods' seed-s runs (a chapter's ``effects_of`` computes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from .verdict_words import HOLDS, INCONCLUSIVE, LEVEL, NOISE, POINTS, REVERSED, holm_adjusted

# How far one run's ALMA moves between CPUs, fp32, in points: the mean absolute difference over the
# 36 pairs of KnFu robustness runs of the same config and seed made on two CPUs (the "R = 30 rounds"
# variant read at round 15 against the base's R = 15 runs; fedkd_core.performance.drift_pairs
# recomputes it from the records, and a test keeps this constant equal to it).
MACHINE_DRIFT = 0.46


def effect_drift(run_drift: float = MACHINE_DRIFT) -> float:
    """How far an effect (a difference of two runs, each drifting independently) may move between
    machines: √2 times one run's drift (the variance of a difference of independent errors)."""
    return float(np.sqrt(2) * run_drift)


@dataclass(frozen=True)
class Interval:
    """A mean and its 95% interval, in points."""

    mean: float
    low: float
    high: float

    def text(self, digits: int | None = None) -> str:
        """"+3.5 [+2.9, +4.1]"; a mean without an interval prints alone. By default one decimal,
        two where every number is below a point, and more (up to 4) where a bound that is not zero
        would print as zero (a bound below :data:`NOISE`, float noise, keeps the usual decimals)."""
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
        """holds / reversed / inconclusive for one cell, uncorrected (the interval alone)."""
        return HOLDS if self.low > 0 else REVERSED if self.high < 0 else INCONCLUSIVE

    def widened(self, by: float) -> "Interval":
        """The interval with ``by`` points added on each side."""
        return self if not by else Interval(self.mean, self.low - by, self.high + by)


NO_INTERVAL = Interval(float("nan"), float("nan"), float("nan"))


def t_interval(values: Sequence[float], level: float = LEVEL) -> Interval:
    """The one-sample t-interval of the mean of ``values`` (Student 1908; n − 1 degrees of
    freedom); a single value has a mean and no interval."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return NO_INTERVAL
    mean = float(values.mean())
    if len(values) < 2:
        return Interval(mean, float("nan"), float("nan"))
    half = float(stats.t.ppf(0.5 + level / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))
    return Interval(mean, mean - half, mean + half)


def t_p_value(mean: float, se: float, dof: float, widen: float = 0.0) -> float:
    """Two-sided p-value of "the effect is zero" for an estimate ``mean`` with standard error ``se``
    and ``dof`` degrees of freedom: the test a t-interval inverts (below 1 − level exactly where the
    interval excludes zero). ``widen`` (points added to each side of the interval) is taken off the
    distance from zero first, so the p-value matches the widened interval. NaN without an error."""
    if np.isnan(se) or np.isnan(mean) or np.isnan(dof):
        return float("nan")
    distance = abs(mean) - widen
    if distance <= 0:
        return 1.0
    return 0.0 if se == 0 else float(2 * stats.t.sf(distance / se, dof))


def interval_of(mean: float, se: float, dof: float, level: float = LEVEL, widen: float = 0.0) -> Interval:
    """mean ± t(level, dof) × se (+ ``widen``); a mean alone where ``se`` is NaN."""
    if np.isnan(se) or np.isnan(dof):
        return Interval(mean, float("nan"), float("nan"))
    half = 0.0 if se == 0 else float(stats.t.ppf(0.5 + level / 2, dof) * se)
    return Interval(mean, mean - half - widen, mean + half + widen)


CELL_COLUMNS = ["seeds", "effect", "sd", "low", "high", "p", "outcome"]


def cell_table(effects: pd.DataFrame, cell_keys: Sequence[str], claim: str, scale: float = POINTS,
               correct: bool = True) -> pd.DataFrame:
    """Per cell of ``effects`` (columns ``cell_keys`` + seed + one per claim, fractions): the seeds,
    the mean effect in points, its per-seed std, the t-interval, the one-sample t-test's p-value and
    the cell's word. With ``correct`` the words are Holm-corrected across the cells
    (:func:`corrected_outcomes`), else read off each interval alone."""
    values = effects[list(cell_keys) + ["seed", claim]].dropna(subset=[claim])
    rows = []
    for cell, group in values.groupby(list(cell_keys), sort=True):
        effect = group[claim].to_numpy() * scale
        interval = t_interval(effect)
        sd = float(effect.std(ddof=1)) if len(effect) > 1 else float("nan")
        p = t_p_value(interval.mean, sd / np.sqrt(len(effect)), len(effect) - 1) if len(effect) > 1 else float("nan")
        rows.append({**dict(zip(cell_keys, cell if isinstance(cell, tuple) else (cell,))),
                     "seeds": len(effect), "effect": interval.mean, "sd": sd,
                     "low": interval.low, "high": interval.high, "p": p, "outcome": interval.word})
    table = pd.DataFrame(rows, columns=list(cell_keys) + CELL_COLUMNS)
    return corrected_outcomes(table) if correct else table


def corrected_outcomes(cells: pd.DataFrame) -> pd.DataFrame:
    """``cells`` (a :func:`cell_table`) with each cell's word Holm-corrected across its rows: a
    cell *holds* (is *reversed*) when its effect is positive (negative) and Holm's step-down
    correction over the claim's cells rejects "the effect is zero" at 5% family-wise; the
    Holm-adjusted p-value in "p_holm". With 12 cells and no effect anywhere, uncorrected cell words
    would call some cell decided by luck about one time in four."""
    cells = cells.copy()
    adjusted = holm_adjusted(cells["p"].tolist()) if len(cells) else []
    cells["p_holm"] = adjusted
    cells["outcome"] = [INCONCLUSIVE if not (a <= 1 - LEVEL) else HOLDS if e > 0 else REVERSED
                        for a, e in zip(adjusted, cells["effect"])]
    return cells
