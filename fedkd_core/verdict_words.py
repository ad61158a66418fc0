"""The verdict words, and the one function that picks a claim's word (:func:`claim_word`).

Every page of the book (landing page, Claims page, chapter verdict boxes, robustness tables) takes
its word from :func:`claim_word` through :func:`fedkd_core.verdicts.judge`, and the word a reader
sees after the chapter's family-wise correction from :func:`corrected_word`. The statistics behind
the word are in :mod:`fedkd_core.verdict_cells` (one cell) and :mod:`fedkd_core.verdict_pooling`
(the cells together); this module only turns their numbers into words.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

LEVEL = 0.95
POINTS = 100.0  # accuracies are fractions; effects are reported in points
NOISE = 5e-5  # points: an effect or bound closer to zero than this is float noise, printed as zero
DECIDABLE_EFFECT = 1.0  # points: "what more seeds would buy" is the seeds that decide an effect this size
POWER = 0.8  # the chance with which "seeds to decide" decides an effect of DECIDABLE_EFFECT
MIN_RANDOM_CELLS = 3  # below this many independent cells, the word covers only these cells

HOLDS, MIXED, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "mixed", "does not hold", "inconclusive"
PARTLY = MIXED  # the word "partly" (pooled above zero, a cell reversed) became "mixed" (issue 59)
AFTER_CORRECTION = "inconclusive after correction"
UNTESTED = "untested at this scale"
UNTESTABLE = "not testable offline"
NO_RECORDS = "no committed records"
UNEQUAL_TUNING = "not judged: unequal tuning"
REVERSED = "reversed"
WORDS = (HOLDS, MIXED, DOES_NOT_HOLD, INCONCLUSIVE, AFTER_CORRECTION, UNTESTED, UNEQUAL_TUNING, UNTESTABLE, NO_RECORDS)
DECIDED = (HOLDS, MIXED, DOES_NOT_HOLD)
# The words that are not a verdict on the claim: the records cannot decide it, or do not exist.
NOT_JUDGED = (UNTESTED, UNEQUAL_TUNING, UNTESTABLE, NO_RECORDS)


def scope_text(units: int) -> str:
    """What a word covers where fewer than :data:`MIN_RANDOM_CELLS` independent cells stand behind
    it: " on these 2 cells", " on this cell"; "" from three cells on (the word then speaks for the
    paper's settings in general: the random-cells reading)."""
    if units >= MIN_RANDOM_CELLS or units < 1:
        return ""
    return " on this cell" if units == 1 else f" on these {units} cells"


def base_word(text: str) -> str:
    """The word of a verdict as displayed ("holds on these 2 cells" -> "holds"; the other words as
    they are), for the logic that reads words (which are decided, which are judged)."""
    text = str(text)
    for word in (DOES_NOT_HOLD, HOLDS, MIXED):
        if text == word or text.startswith(word + " on th"):
            return word
    return text


def is_decided(text: str) -> bool:
    """Whether a displayed word is a decided verdict (holds, mixed, does not hold; scoped or not)."""
    return base_word(text) in DECIDED


def claim_word(low: float, high: float, holding: int, reversed_cells: int, units: int) -> str:
    """THE verdict word, from the interval of the reading that decides (``low``, ``high``: the
    random-cells interval with three independent cells or more, else the fixed-cells one) and the
    cells held and reversed after Holm's correction across the claim's cells:

    * *mixed*: at least one cell decided each way, or the interval decided one way and a cell the
      other (the claim depends on the cell: a finding, not a lack of evidence);
    * *holds* / *does not hold*: the interval lies above / below zero;
    * *inconclusive*: it contains zero (or there is none).

    With fewer than three independent cells the decided words say that they cover only these cells
    (:func:`scope_text`)."""
    if holding and reversed_cells:
        word = MIXED
    elif np.isnan(low) or np.isnan(high):
        return INCONCLUSIVE
    elif low > 0:
        word = MIXED if reversed_cells else HOLDS
    elif high < 0:
        word = MIXED if holding else DOES_NOT_HOLD
    else:
        return INCONCLUSIVE
    return word + scope_text(units)


def corrected_word(word: str, kept: bool) -> str:
    """The word a reader sees after the chapter's family-wise correction: a decided word that
    Holm's correction over the chapter's claims does not keep reads :data:`AFTER_CORRECTION`."""
    return word if kept or not is_decided(word) else AFTER_CORRECTION


def under_a_point(interval, word: str, size: float = DECIDABLE_EFFECT) -> bool:
    """Whether a decided verdict is *small*: its whole 95% interval lies within ``size`` points of
    zero, so the direction is decided but the effect is under a point (the order of what moves an
    effect between CPUs, :func:`fedkd_core.verdict_cells.effect_drift`)."""
    if not is_decided(word) or np.isnan(interval.low):
        return False
    return rules_out(interval, size)


def rules_out(interval, size: float = DECIDABLE_EFFECT) -> bool:
    """Whether the whole interval lies strictly within (−size, +size): only then does it rule out
    effects of ``size`` points."""
    if np.isnan(interval.low) or np.isnan(interval.high):
        return False
    return -size < interval.low and interval.high < size


def p_text(p: float) -> str:
    """A p-value as the book prints it, "p = 0.030" or "p < 0.001"."""
    return "p < 0.001" if p < 0.001 else f"p = {p:#.2g}"


def holm(p_values: Sequence[float], family_error: float = 1 - LEVEL) -> list[bool]:
    """Holm's step-down correction (Holm 1979, *Scand. J. Statist.* 6:65-70): which of ``p_values``
    are rejected with the chance of any false rejection in the family at most ``family_error``,
    whatever their dependence. Sorted ascending, the i-th smallest (from 0) is rejected while every
    one up to it is at most family_error / (m − i). NaN p-values are not tests."""
    adjusted = holm_adjusted(p_values)
    return [bool(a <= family_error) if np.isfinite(a) else False for a in adjusted]


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (Wright 1992, *Biometrics* 48:1005-1013): the i-th smallest becomes
    max over j ≤ i of min(1, (m − j) p_(j)); NaN stays NaN and is not counted in m."""
    p = np.asarray(p_values, dtype=float)
    tested = np.flatnonzero(~np.isnan(p))
    adjusted = np.full(len(p), np.nan)
    running = 0.0
    for rank, index in enumerate(tested[np.argsort(p[tested], kind="stable")]):
        running = max(running, min(1.0, (len(tested) - rank) * p[index]))
        adjusted[index] = running
    return adjusted.tolist()
