"""A claim's cells together: cells that share runs pooled by seed, then two readings of the mean
effect over the cells.

**Units: cells that share runs pooled by seed.** Two cells of a claim that read the same runs
(FedGMKD's local and global accuracy of one run; FedUA's relative drops, all measured against the
C = 1 runs) are not independent: counting them as two cells would count a run twice. Such cells
are joined into one *unit* (connected components of "reads the runs of": :func:`units_of`), and
within a unit each seed's effects are averaged over its cells first, so that every unit's per-seed
values are independent across seeds and units. Two cells made of the same runs then give exactly
one cell's interval (a test keeps it so). Each unit weighs as many cells as it joins in the
fixed-cells reading, and one in the random-cells reading.

**Fixed cells** (the cells are the settings the paper chose; only seeds are random): the weighted
mean of the unit means, variance Σ_g w_g² s_g²/n_g, Welch–Satterthwaite degrees of freedom
(Satterthwaite 1946, *Biometrics Bulletin* 2:110-114; Welch 1947, *Biometrika* 34:28-35). This is
a statement about these exact cells.

**Random cells** (the cells are a sample of the settings the paper's claim is about): the t-interval
on the K unit means, with K − 1 degrees of freedom. Its variance s_b²/K, with s_b² the sample
variance of the unit means, estimates (τ² + mean v_g)/K without bias, so it carries both the
between-cell spread τ and the seed noise v_g = s_g²/n_g of each unit mean. It is the random-effects
meta-analysis of the unit means with equal weights and the Hartung–Knapp variance (Hartung & Knapp
2001, *Stat. Med.* 20:3875-3889; Sidik & Jonkman 2002, *Stat. Med.* 21:3153-3159), chosen over the
inverse-variance weighted DerSimonian–Laird estimate (DerSimonian & Laird 1986, *Control. Clin.
Trials* 7:177-188) because (1) each unit's variance rests on 2-4 seeds (1-3 degrees of freedom), so
inverse-variance weights would be mostly noise and would hand a cell that happened to get three
close seeds most of the weight; (2) equal weights estimate the same quantity as the fixed-cells
reading (the mean over the paper's settings), so the two readings differ only in what they count
as random; (3) DerSimonian–Laird's normal interval undercovers badly with under ten studies
(IntHout, Ioannidis & Borm 2014, *BMC Med. Res. Methodol.* 14:25), where Hartung–Knapp's t keeps
its level. The between-cell spread is Hedges' unweighted moment estimate
τ² = max(0, s_b² − mean v_g) (Hedges 1983, *Psychol. Bull.* 93:388-395), and where there are three
units or more, the 95% prediction interval for the true effect of a new cell is
mean ± t(K − 2) × √(τ² + SE²) (Higgins, Thompson & Spiegelhalter 2009, *J. R. Stat. Soc. A*
172:137-159).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from .verdict_cells import NO_INTERVAL, Interval, interval_of, t_p_value
from .verdict_words import DECIDABLE_EFFECT, LEVEL, MIN_RANDOM_CELLS, POINTS, POWER


def units_of(cells: Sequence[tuple], links: dict | None = None) -> list[list[tuple]]:
    """``cells`` (tuples of cell keys) grouped into units: two cells are in one unit where
    ``links`` (cell -> the cells whose runs it also reads or shares) joins them, directly or through
    other cells (union-find). A link to a cell not in ``cells`` is ignored. Units in the order of
    their first cell."""
    cells = [tuple(c) for c in cells]
    parent = {c: c for c in cells}

    def root(c):
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for cell, others in (links or {}).items():
        cell = tuple(cell)
        if cell not in parent:
            continue
        for other in others:
            other = tuple(other)
            if other in parent and root(other) != root(cell):
                parent[root(other)] = root(cell)
    groups: dict[tuple, list[tuple]] = {}
    for cell in cells:
        groups.setdefault(root(cell), []).append(cell)
    return list(groups.values())


def unit_table(effects: pd.DataFrame, cell_keys: Sequence[str], claim: str, cells: pd.DataFrame,
               links: dict | None = None, scale: float = POINTS) -> pd.DataFrame:
    """Per unit of the ``cells`` (rows with ``cell_keys``) of ``claim``: its cells, how many, the
    seeds, and the mean and std over seeds of each seed's effect averaged over the unit's cells
    (points). A seed that only some cells of a unit have is averaged over those."""
    keys = list(cell_keys)
    tuples = [tuple(row) for row in cells[keys].itertuples(index=False, name=None)]
    values = effects[keys + ["seed", claim]].dropna(subset=[claim])
    values = values.assign(_cell=[tuple(r) for r in values[keys].itertuples(index=False, name=None)])
    rows = []
    for unit in units_of(tuples, links):
        mine = values[values._cell.isin(unit)]
        per_seed = mine.groupby("seed")[claim].mean().to_numpy() * scale
        rows.append({"cells": unit, "size": len(unit), "seeds": len(per_seed),
                     "mean": float(per_seed.mean()) if len(per_seed) else float("nan"),
                     "sd": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else float("nan")})
    return pd.DataFrame(rows, columns=["cells", "size", "seeds", "mean", "sd"])


@dataclass(frozen=True)
class Pooled:
    """The two readings of a claim's mean effect over its units (points)."""

    fixed: Interval = NO_INTERVAL
    fixed_p: float = float("nan")
    random: Interval = NO_INTERVAL
    random_p: float = float("nan")
    prediction: Interval = NO_INTERVAL  # for the true effect of a new cell (three units or more)
    tau: float = float("nan")  # between-cell spread, points
    units: int = 0  # units with two seeds or more: those the intervals read
    single: int = 0  # units with one seed: no spread, left out of the intervals

    @property
    def random_decides(self) -> bool:
        """Whether the word follows the random-cells reading (three independent cells or more)."""
        return self.units >= MIN_RANDOM_CELLS

    @property
    def interval(self) -> Interval:
        """The reading that decides the word."""
        return self.random if self.random_decides else self.fixed

    @property
    def p_value(self) -> float:
        return self.random_p if self.random_decides else self.fixed_p


def fixed_cells(means, sds, ns, weights) -> tuple[float, float, float]:
    """(mean, standard error, Welch–Satterthwaite degrees of freedom) of the weighted mean
    Σ w_g ȳ_g / Σ w_g with the cells fixed: variance Σ (w_g/W)² s_g²/n_g, degrees of freedom
    (Σ a_g)² / Σ a_g²/(n_g − 1) with a_g = (w_g/W)² s_g²/n_g (Satterthwaite 1946). Units with one
    seed are left out; none left: the mean over all and NaN."""
    means, sds, ns, weights = (np.asarray(x, dtype=float) for x in (means, sds, ns, weights))
    keep = ns >= 2
    if not keep.any():
        mean = float(np.average(means, weights=weights)) if len(means) else float("nan")
        return mean, float("nan"), float("nan")
    means, sds, ns, weights = means[keep], sds[keep], ns[keep], weights[keep]
    w = weights / weights.sum()
    parts = w**2 * sds**2 / ns
    variance = float(parts.sum())
    dof = float(variance**2 / np.sum(parts**2 / (ns - 1))) if variance > 0 else float("inf")
    return float(np.sum(w * means)), float(np.sqrt(variance)), dof


def random_cells(means, sds, ns) -> tuple[float, float, float, float]:
    """(mean, standard error, degrees of freedom, τ) over units with two seeds or more: the mean of
    the unit means, s_b/√K with K − 1 degrees of freedom (Hartung & Knapp 2001 with equal weights),
    and Hedges' (1983) τ = √max(0, s_b² − mean s_g²/n_g). Fewer than two units: NaN error."""
    means, sds, ns = (np.asarray(x, dtype=float) for x in (means, sds, ns))
    keep = ns >= 2
    means, sds, ns = means[keep], sds[keep], ns[keep]
    k = len(means)
    if k < 2:
        return (float(means.mean()) if k else float("nan")), float("nan"), float("nan"), float("nan")
    between = float(means.var(ddof=1))
    tau2 = max(0.0, between - float(np.mean(sds**2 / ns)))
    return float(means.mean()), float(np.sqrt(between / k)), float(k - 1), float(np.sqrt(tau2))


def pool(units: pd.DataFrame, widen: float = 0.0, level: float = LEVEL) -> Pooled:
    """Both readings of a :func:`unit_table` (columns size, seeds, mean, sd), each interval widened
    by ``widen`` points on each side and its p-value matching the widened interval."""
    if not len(units):
        return Pooled()
    args = (units["mean"], units["sd"], units["seeds"])
    mean, se, dof = fixed_cells(*args, units["size"])
    fixed = interval_of(mean, se, dof, level, widen)
    rmean, rse, rdof, tau = random_cells(*args)
    random = interval_of(rmean, rse, rdof, level, widen) if not np.isnan(rse) else Interval(rmean, float("nan"), float("nan"))
    k = int((units["seeds"] >= 2).sum())
    prediction = NO_INTERVAL
    if k >= MIN_RANDOM_CELLS:
        half = float(stats.t.ppf(0.5 + level / 2, k - 2) * np.sqrt(tau**2 + rse**2)) + widen
        prediction = Interval(rmean, rmean - half, rmean + half)
    return Pooled(fixed, t_p_value(mean, se, dof, widen), random, t_p_value(rmean, rse, rdof, widen), prediction,
                  tau, k, int(len(units) - k))


def seeds_to_decide(units: pd.DataFrame, tau: float = 0.0, effect: float = DECIDABLE_EFFECT,
                    widen: float = 0.0, power: float = POWER, level: float = LEVEL,
                    most: int = 1000) -> int | None:
    """The seeds per cell at which the reading that decides the word (random cells from three units,
    else fixed cells) would decide an effect of ``effect`` points with probability ``power``: the
    least n with (t(1 − α/2, df) + t(power, df)) × SE(n) + ``widen`` ≤ ``effect`` (the usual
    normal-approximation power formula with t quantiles, e.g. Chow, Shao & Wang 2008, *Sample Size
    Calculations in Clinical Research*, §3.2), at the units' observed per-seed spreads ``sd``.
    Random cells: SE(n)² = (τ² + mean s_g²/n)/K, df = K − 1, so past some point more seeds cannot
    help (the spread between cells remains): None. Fixed cells: SE(n)² = Σ w_g² s_g²/n, Welch df.
    None where no n up to ``most`` would do."""
    units = units[np.isfinite(units["sd"].astype(float))]
    if not len(units) or effect - widen <= 0:
        return None
    sds, sizes = units["sd"].to_numpy(float), units["size"].to_numpy(float)
    k = len(units)
    # Every n at once (one t quantile call per probability, not two per n: the ledger asked scipy
    # for ~58,000 scalar quantiles); each n's SE, df and test are the same arithmetic as one at a time.
    n = np.arange(2, most + 1)
    if k >= MIN_RANDOM_CELLS:
        se, dof = np.sqrt((tau**2 + np.mean(sds**2) / n) / k), np.full(len(n), k - 1.0)
    else:
        w = sizes / sizes.sum()
        parts = (w**2 * sds**2)[None, :] / n[:, None]  # row i: the cells' parts at n[i] seeds
        se = np.sqrt(parts.sum(axis=1))
        with np.errstate(divide="ignore", invalid="ignore"):
            dof = np.where(se > 0, parts.sum(axis=1) ** 2 / np.sum(parts**2 / (n[:, None] - 1), axis=1), np.inf)
    decides = (stats.t.ppf(0.5 + level / 2, dof) + stats.t.ppf(power, dof)) * se + widen <= effect
    return int(n[np.argmax(decides)]) if decides.any() else None


def seeds_cannot_decide(units: pd.DataFrame, tau: float, effect: float = DECIDABLE_EFFECT, widen: float = 0.0,
                        power: float = POWER, level: float = LEVEL) -> bool:
    """Whether the between-cell spread alone keeps the random-cells reading from deciding an effect
    of ``effect`` points, however many seeds (three units or more): (t + t) τ/√K + widen > effect."""
    k = int(np.isfinite(units["sd"].astype(float)).sum())
    if k < MIN_RANDOM_CELLS or not np.isfinite(tau):
        return False
    return (stats.t.ppf(0.5 + level / 2, k - 1) + stats.t.ppf(power, k - 1)) * tau / np.sqrt(k) + widen > effect


def pooled_estimate(means, sds, ns) -> tuple[float, float, float]:
    """The fixed-cells reading of k cells, each its own unit (:func:`fixed_cells` with equal weights)."""
    return fixed_cells(means, sds, ns, np.ones(len(np.asarray(means))))


def pooled_interval(means, sds, ns, level: float = LEVEL) -> Interval:
    """The fixed-cells 95% interval of k cells, each its own unit (:func:`pooled_estimate`)."""
    mean, se, dof = pooled_estimate(means, sds, ns)
    return interval_of(mean, se, dof, level)


def pooled_p_value(means, sds, ns, widen: float = 0.0) -> float:
    """The p-value of the test :func:`pooled_interval` inverts (``widen`` taken off first)."""
    return t_p_value(*pooled_estimate(means, sds, ns), widen)
