"""Claims as effects with 95% intervals, and the verdict each page of the book prints.

A claim ("KnFu > FedMD") is an *effect* in accuracy points, positive where the claim is true,
measured per cell (one setting of the paper's tables) and seed: the paired difference of the
methods' runs of that seed (a chapter's ``effects_of`` computes it). :func:`judge` turns a claim's
per-(cell, seed) effects into a :class:`Verdict`; the pieces live by concept:

* :mod:`fedkd_core.verdict_cells`: one cell's t-interval and p-value, and the cells' words
  (holds / reversed) Holm-corrected across the claim's cells;
* :mod:`fedkd_core.verdict_pooling`: cells that share runs pooled by seed into units, and the two
  readings of the mean over them: *fixed cells* (these settings; seeds random) and *random
  cells* (a t-interval on the unit means, the between-cell spread τ, a prediction interval for a
  new cell), with the seeds that would decide an effect of 1 point with 80% power;
* :mod:`fedkd_core.verdict_words`: the words, and the one function that picks them
  (:func:`~fedkd_core.verdict_words.claim_word`): the random-cells reading decides with three
  independent cells or more, the fixed-cells reading with fewer (the word then says "on these 2
  cells"), and *mixed* where cells are decided both ways;
* :mod:`fedkd_core.verdict_gate`: the convergence gate, and which methods and cells an effect reads;
* :mod:`fedkd_core.verdict_paper`: the paper's side, Welch's t on its printed mean ± std.

This module keeps every name it had, so ``from fedkd_core.verdicts import ...`` reads them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from .verdict_cells import (CELL_COLUMNS, MACHINE_DRIFT, NO_INTERVAL, Interval, cell_table,  # noqa: F401
                            corrected_outcomes, effect_drift, interval_of, t_interval, t_p_value)
from .verdict_gate import (LATE_SHARE, LATE_SMOOTHING, MAX_LATE_GAIN, MIN_EVALUATIONS, cell_key,  # noqa: F401
                           cell_keys_of, cell_sources, claim_gates, claim_methods, claims_cell_sources, claims_in,
                           evaluations_text, gate, gate_reasons, joint_gate, passes_gate, rising_text,
                           sparse_text, trajectory, with_sources)
from .verdict_paper import paper_verdicts, welch_interval  # noqa: F401
from .verdict_pooling import (Pooled, fixed_cells, pool, pooled_estimate, pooled_interval,  # noqa: F401
                              pooled_p_value, random_cells, seeds_cannot_decide,
                              seeds_to_decide, unit_table, units_of)
from .verdict_words import (AFTER_CORRECTION, DECIDABLE_EFFECT, DECIDED, DOES_NOT_HOLD, HOLDS,  # noqa: F401
                            INCONCLUSIVE, LEVEL, MIN_RANDOM_CELLS, MIXED, NO_RECORDS, NOISE, NOT_JUDGED, PARTLY,
                            POINTS, POWER, REVERSED, UNEQUAL_TUNING, UNTESTABLE, UNTESTED, WORDS, base_word,
                            claim_word, corrected_word, holm, holm_adjusted, is_decided, p_text, rules_out,
                            scope_text, under_a_point)

# How :attr:`Verdict.cells_text` ends where one-seed cells leave the interval fewer cells than the
# verdict counts (the landing page's "(1 cell)" flag reads it: fedkd_core.glance.one_cell_flag).
INTERVAL_READS = " (the interval reads {})"
HOLM_CELLS = "Holm-corrected: "  # how cells_text starts where the cell words are corrected across cells


@dataclass(frozen=True)
class Verdict:
    """A claim judged on its cells: the word, the effect of the reading that decides it
    (``interval``), both readings, and what stands behind them."""

    claim: str
    word: str
    interval: Interval = NO_INTERVAL
    cells: int = 0
    holding: int = 0  # cells holding after Holm's correction across the claim's cells
    reversed: int = 0  # cells reversed after it
    seeds: str = ""
    note: str = ""
    seeds_needed: int | None = None
    gate_reason: str = ""  # why the gate left cells out, its first rule first (:func:`gate_reasons`)
    counted: str = ""  # with the gate off: why it would have left cells out that were counted
    p_value: float = float("nan")  # of the test behind the word, for the chapter's :func:`holm`
    single_seed: int = 0  # cells with one seed: counted, but left out of the interval (no spread)
    fixed: Interval = NO_INTERVAL  # fixed-cells reading (these cells; seeds random)
    random: Interval = NO_INTERVAL  # random-cells reading (cells a sample of settings)
    prediction: Interval = NO_INTERVAL  # where a new cell's true effect lies (three units or more)
    tau: float = float("nan")  # between-cell spread, points
    units: int = 0  # independent units (cells sharing runs pooled) the intervals read
    seeds_cannot: bool = False  # the between-cell spread alone keeps more seeds from deciding 1 point

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
        corrected = HOLM_CELLS if self.cells > 1 else ""
        return f"{corrected}{self.holding} hold, {self.reversed} reversed, {inconclusive} inconclusive of {self.cells}{read}"

    @property
    def spread_text(self) -> str:
        """"τ = 0.52" (the between-cell spread, points), "—" without two units."""
        return "—" if not np.isfinite(self.tau) else f"τ = {self.tau:.2f}"


def margin(wide: pd.DataFrame, better: Sequence[str], worse: Sequence[str]) -> pd.Series:
    """Per row of ``wide`` (one column per method), how far the worst of the ``better`` methods lies
    above the best of the ``worse`` ones: a claim's effect that ``better`` beat ``worse``; NaN where
    any of them is missing. (Plain arrays: chapters compute it for every perturbation of a verdict.)"""
    ahead, behind = wide[list(better)].to_numpy(dtype=float), wide[list(worse)].to_numpy(dtype=float)
    complete = ~(np.isnan(ahead).any(axis=1) | np.isnan(behind).any(axis=1))
    with np.errstate(invalid="ignore"):
        lead = ahead.min(axis=1) - behind.max(axis=1)
    return pd.Series(np.where(complete, lead, np.nan), index=wide.index)


def versus_paper(ours: Interval, word: str, paper: "Verdict | None") -> str:
    """How our effect's size compares with the paper's, where the paper's own verdict on the same
    cells is *holds* (or *mixed*) and both have a 95% interval: for our *holds* / *mixed*,
    "smaller than the paper's" (our interval wholly below the paper's), "larger than the paper's"
    (wholly above) or "consistent with the paper's" (they overlap); for our *inconclusive*, "rules
    out the paper's effect" where our interval lies wholly below the paper's. Where the paper
    prints no spread (its interval is its point value alone), the same comparison with that value,
    named: "below the paper's +5.0, no spread printed", "above ...", "consistent with ...", "rules
    out the paper's +1.6, no spread printed". "" otherwise: the paper's tables do not show the
    claim (their verdict column says so), the paper's verdict is on cells we did not run, or our
    word already says it."""
    if paper is None or base_word(paper.word) not in (HOLDS, MIXED) or "paper's own cells" in paper.note:
        return ""
    theirs = paper.interval
    if any(np.isnan(v) for v in (ours.low, ours.high, theirs.mean)):
        return ""
    if np.isnan(theirs.low) or np.isnan(theirs.high):
        return _versus_point(ours, word, theirs.mean)
    below, above = ours.high < theirs.low, ours.low > theirs.high
    if base_word(word) in (HOLDS, MIXED):
        return "smaller than the paper's" if below else "larger than the paper's" if above else "consistent with the paper's"
    if word == INCONCLUSIVE and below:
        return "rules out the paper's effect"
    return ""


def _versus_point(ours: Interval, word: str, point: float) -> str:
    """:func:`versus_paper` against a paper's effect printed without a spread: where ``point`` lies
    relative to our 95% interval."""
    named = f"the paper's {Interval(point, float('nan'), float('nan')).text()}, no spread printed"
    if base_word(word) in (HOLDS, MIXED):
        return (f"below {named}" if ours.high < point else f"above {named}" if ours.low > point
                else f"consistent with {named}")
    return f"rules out {named}" if word == INCONCLUSIVE and ours.high < point else ""


def judge(effects: pd.DataFrame, cell_keys: Sequence[str], claim: str, gate_table: pd.DataFrame | None = None,
          enforce_gate: bool = True, widen: float = 0.0, links: dict | None = None) -> Verdict:
    """The verdict on ``claim`` from per-(cell, seed) effects. With a ``gate_table`` (from
    :func:`gate`, indexed by ``cell_keys``) and ``enforce_gate``, only the cells that pass the
    convergence gate count, and a claim with none left is "untested at this scale"; without
    ``enforce_gate`` every cell counts and the note says how many were still rising. ``widen``:
    points added to each side of every interval (the drift between machines: :func:`effect_drift`).
    ``links``: cell -> the cells whose runs its effect shares or reads; such cells are pooled by
    seed into one unit (:func:`~fedkd_core.verdict_pooling.units_of`), so no run counts twice."""
    if claim not in effects or not effects[claim].notna().any():
        return Verdict(claim, NO_RECORDS)
    keys = list(cell_keys)
    cells = cell_table(effects, keys, claim, correct=False)
    notes, gate_reason, counted = [], "", ""
    if gate_table is not None and len(cells):
        passed = passes_gate(gate_table, cells, keys)
        failed = cells[[not p for p in passed]]
        if len(failed):
            gate_rows = gate_table.to_dict("index")
            reasons = gate_reasons([gate_rows[key] for key in cell_keys_of(failed, keys)])
            if enforce_gate:
                notes.append(f"{len(failed)} of {len(cells)} cells left out by the convergence gate: {'; '.join(reasons)}")
                gate_reason = reasons[0] if reasons else ""
                cells = cells[passed]
                if not len(cells):
                    return Verdict(claim, UNTESTED, note=notes[0], gate_reason=gate_reason)
            else:
                counted = "; ".join(reasons)
                notes.append(f"{len(failed)} of {len(cells)} cells still rising at the last round, counted: {counted}")
    cells = corrected_outcomes(cells.reset_index(drop=True))
    single = int((cells.seeds < 2).sum())
    if single:
        notes.append(f"{single} cell{'s' if single > 1 else ''} with one seed left out of the interval")
    units = unit_table(effects, keys, claim, cells, links)
    if (units["size"] > 1).any():
        notes.append(f"cells that share runs pooled by seed: {len(cells)} cells, {len(units)} independent")
    pooled = pool(units, widen)
    if widen:
        notes.append(f"interval widened by ±{widen:.2f} points: it pairs runs from machines that round differently")
    holding, reversed_cells = int((cells.outcome == HOLDS).sum()), int((cells.outcome == REVERSED).sum())
    interval = pooled.interval
    word = claim_word(interval.low, interval.high, holding, reversed_cells, pooled.units)
    p_value = mixed_p_value(cells, pooled) if base_word(word) == MIXED else pooled.p_value
    seeds = f"{cells.seeds.min()}" if cells.seeds.min() == cells.seeds.max() else f"{cells.seeds.min()}-{cells.seeds.max()}"
    tau = pooled.tau if pooled.random_decides else 0.0
    needed = seeds_to_decide(units, tau, widen=widen) if word == INCONCLUSIVE else None
    cannot = word == INCONCLUSIVE and pooled.random_decides and seeds_cannot_decide(units, pooled.tau, widen=widen)
    return Verdict(claim, word, interval, len(cells), holding, reversed_cells, seeds, "; ".join(notes), needed,
                   gate_reason, counted, p_value, single, pooled.fixed, pooled.random, pooled.prediction,
                   pooled.tau, pooled.units, cannot)


def mixed_p_value(cells: pd.DataFrame, pooled: Pooled) -> float:
    """The p-value behind *mixed*, for the chapter's family-wise correction: the claim is mixed when
    a cell is decided each way (or the reading one way and a cell the other), so its evidence is
    the weaker of the two (an intersection-union test: Berger 1982, *Technometrics* 24:295-300),
    each cell's p Holm-adjusted across the claim's cells."""
    up = cells.loc[cells.effect > 0, "p_holm"].min()
    down = cells.loc[cells.effect < 0, "p_holm"].min()
    interval = pooled.interval
    if interval.low > 0:
        up = min(up, pooled.p_value) if np.isfinite(up) else pooled.p_value
    elif interval.high < 0:
        down = min(down, pooled.p_value) if np.isfinite(down) else pooled.p_value
    return float(max(up, down))
