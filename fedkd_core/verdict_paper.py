"""The paper's side: each claim judged on a paper's printed tables with the same words as ours.

Where a paper prints mean ± std over an assumed number of runs n per method, each cell's effect is
the chapter's ``effects_of`` applied to the printed means, and its standard error comes from the
delta method: the effect's derivative g_i with respect to each printed mean (finite differences;
±1 for a difference of two methods, fractions for a relative drop) gives the variance
Σ_i g_i² s_i²/n. Its degrees of freedom are Welch–Satterthwaite's, (Σ a_i)² / Σ a_i²/(n − 1) with
a_i = g_i² s_i²/n (Welch 1947, *Biometrika* 34:28-35; Satterthwaite 1946): for "A > B" this is
exactly Welch's unequal-variance t-test on the two printed means, which takes the printed std as
an estimate from n runs (t with about 2(n − 1) degrees of freedom), not as exact (a normal). For a
claim over the best of several methods (a max or a min), the derivative is taken at the printed
means, so the comparison is with the method that is best there (its selection is not counted as
uncertain). The cells are then read exactly as ours (:mod:`fedkd_core.verdict_pooling`, every cell
its own unit), and the word comes from :func:`fedkd_core.verdict_words.claim_word`.
Where the paper prints no spread, only the signs are counted.
"""

from __future__ import annotations

import pickle
import weakref
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .verdict_cells import Interval, corrected_outcomes, interval_of, t_p_value
from .verdict_gate import claims_in, effects_of_each
from .verdict_pooling import pool
from .verdict_words import DOES_NOT_HOLD, HOLDS, MIXED, POINTS, REVERSED, claim_word, scope_text

STEP = 1e-4  # the finite-difference step, as a fraction (0.01 points)


def paper_verdicts(paper: pd.DataFrame, effects_of: Callable[[pd.DataFrame, str], pd.DataFrame],
                   cell_keys: Sequence[str], runs: int, cells: pd.DataFrame | None = None,
                   claim_cells: dict[str, pd.DataFrame] | None = None, **_ignored) -> dict:
    """Each claim judged on a paper's table (rows: the chapter's observation columns with ``mean``
    and ``std`` in %, NaN std where the paper gives none), assuming ``runs`` runs per printed
    number; restricted to ``cells`` (a frame of ``cell_keys``) when given, and a claim in
    ``claim_cells`` to its own cells there (the cells our verdict on it kept). Where the paper gives
    no spread, the verdict counts signs (note "paper gives no spread")."""
    from .verdicts import Verdict

    keys = list(cell_keys)
    has_spread = bool(paper["std"].notna().all()) and runs >= 2
    rows = paper.drop(columns=["mean", "std"]).reset_index(drop=True).assign(seed=0)
    values = paper["mean"].to_numpy(dtype=float) / POINTS
    every = effects_of(rows.assign(value=values), "value")
    variances, dofs = _delta_method(rows, values, paper["std"].to_numpy(dtype=float), runs, effects_of, every, keys) \
        if has_spread else ({}, {})
    ours = every.merge(cells[keys].drop_duplicates(), on=keys) if cells is not None and len(cells) else every
    verdicts = {}
    for claim in claims_in(every, keys):
        mine = (every.merge(claim_cells[claim][keys].drop_duplicates(), on=keys)
                if claim_cells and claim in claim_cells and len(claim_cells[claim]) else ours)
        shared = claim in mine and mine[claim].notna().any()
        effects = (mine if shared else every).dropna(subset=[claim])
        if not len(effects):
            continue
        where = "" if shared or ours is every else "; on the paper's own cells, none of which we ran"
        effect = effects[claim].to_numpy(dtype=float) * POINTS
        if has_spread:
            index = [tuple(r) for r in effects[keys].itertuples(index=False, name=None)]
            verdict = _welch_verdict(claim, effect, np.array([variances[claim][i] for i in index]),
                                     np.array([dofs[claim][i] for i in index]), runs)
        else:
            holding, reversed_cells = int((effect > 0).sum()), int((effect < 0).sum())
            word = (HOLDS if holding == len(effect) else DOES_NOT_HOLD if reversed_cells == len(effect) else MIXED)
            verdict = Verdict(claim, word + scope_text(len(effect)), Interval(float(effect.mean()), float("nan"), float("nan")),
                              len(effect), holding, reversed_cells, note="paper gives no spread: signs counted")
        verdicts[claim] = replace(verdict, note=verdict.note + where)
    return verdicts


def _delta_method(rows: pd.DataFrame, values: np.ndarray, stds: np.ndarray, runs: int, effects_of,
                  every: pd.DataFrame, keys: list[str]) -> tuple[dict, dict]:
    """Per claim and cell (a tuple of ``keys``): the delta-method variance of its effect (points²)
    and its Welch–Satterthwaite degrees of freedom."""
    parts = {claim: {} for claim in claims_in(every, keys)}
    for claim, cells in _slopes(rows, values, effects_of, every, keys).items():
        for cell, slopes in cells.items():
            parts[claim][cell] = [slope**2 * stds[i]**2 / runs for i, slope in slopes]
    variances = {claim: {cell: float(sum(a)) for cell, a in cells.items()} for claim, cells in parts.items()}
    dofs = {claim: {cell: (float(sum(a) ** 2 / sum(x**2 / (runs - 1) for x in a)) if sum(a) > 0 else float("inf"))
                    for cell, a in cells.items()} for claim, cells in parts.items()}
    return ({c: _default(v, 0.0) for c, v in variances.items()}, {c: _default(v, float("inf")) for c, v in dofs.items()})


# Per effects_of function (dropped with it), the slopes :func:`_slopes` found for a printed table:
# the same table is judged many times over (every verdict of a chapter, each assumed run count).
_SLOPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _slopes(rows: pd.DataFrame, values: np.ndarray, effects_of, every: pd.DataFrame,
            keys: list[str]) -> dict[str, dict[tuple, list[tuple[int, float]]]]:
    """Per claim and cell, the (printed mean's index, slope) of every printed mean that moves the
    cell's effect: finite differences of ``effects_of``, the cost of the delta method (an
    ``effects_of`` per printed mean). They depend on the table and the means, not on the runs
    assumed or the spreads, so they are computed once per table and ``effects_of``."""
    key = (pickle.dumps((rows, tuple(keys))), values.tobytes())
    known = _SLOPES.setdefault(effects_of, {}) if _weakly_referable(effects_of) else {}
    if key in known:
        return known[key]
    claims = claims_in(every, keys)
    base = every.set_index(keys)
    slopes = {claim: {} for claim in claims}
    nudged = np.tile(values, (len(values), 1))
    nudged[np.arange(len(values)), np.arange(len(values))] += STEP  # row i: printed mean i moved
    for i, effects in enumerate(effects_of_each(effects_of, rows, "value", list(nudged))):
        gradient = (effects.set_index(keys).reindex(base.index) - base) / STEP
        for claim in claims:
            g = gradient[claim].fillna(0.0) if claim in gradient else pd.Series(0.0, index=base.index)
            for cell, slope in g.items():
                if abs(slope) > 1e-9:
                    slopes[claim].setdefault(cell if isinstance(cell, tuple) else (cell,), []).append((i, slope))
    known[key] = slopes
    return slopes


def _weakly_referable(function) -> bool:
    try:
        weakref.ref(function)
    except TypeError:
        return False
    return True


class _default(dict):
    """A dict that answers ``fill`` for a cell whose effect no printed mean moves (a constant)."""

    def __init__(self, items, fill):
        super().__init__(items)
        self.fill = fill

    def __missing__(self, key):
        return self.fill


def _welch_verdict(claim: str, effect: np.ndarray, variance: np.ndarray, dof: np.ndarray, runs: int):
    """The verdict on the paper's cells from their effects, delta-method variances and Welch degrees
    of freedom: cell words Holm-corrected, and the two readings of :func:`~.verdict_pooling.pool`
    (every cell a unit; a unit's "seeds" and "sd" are set so that sd²/seeds is the cell's variance
    and seeds − 1 its degrees of freedom)."""
    from .verdicts import Verdict

    se = np.sqrt(variance)
    cells = pd.DataFrame({"effect": effect, "p": [t_p_value(e, s, d) for e, s, d in zip(effect, se, dof)]})
    cells = corrected_outcomes(cells)
    seeds = np.minimum(dof + 1, 1e6)
    units = pd.DataFrame({"size": 1, "seeds": seeds, "mean": effect, "sd": se * np.sqrt(seeds)})
    pooled = pool(units)
    holding, reversed_cells = int((cells.outcome == HOLDS).sum()), int((cells.outcome == REVERSED).sum())
    interval = pooled.interval
    word = claim_word(interval.low, interval.high, holding, reversed_cells, pooled.units)
    return Verdict(claim, word, interval, len(cells), holding, reversed_cells, seeds=str(runs),
                   note=f"assuming {runs} runs per reported mean ± std (Welch)", p_value=pooled.p_value,
                   fixed=pooled.fixed, random=pooled.random, prediction=pooled.prediction, tau=pooled.tau,
                   units=pooled.units)


def welch_interval(mean_a: float, sd_a: float, mean_b: float, sd_b: float, runs: int) -> tuple[Interval, float]:
    """Welch's 95% interval and two-sided p-value for A − B from two printed mean ± std over ``runs``
    runs each (Welch 1947): the check :func:`paper_verdicts` reduces to for a two-method claim."""
    a, b = sd_a**2 / runs, sd_b**2 / runs
    dof = (a + b) ** 2 / (a**2 / (runs - 1) + b**2 / (runs - 1))
    diff = mean_a - mean_b
    return interval_of(diff, float(np.sqrt(a + b)), dof), t_p_value(diff, float(np.sqrt(a + b)), dof)
