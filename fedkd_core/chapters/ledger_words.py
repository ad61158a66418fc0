"""The ledger's words and notes per row: the paper's side in words, the best-round diagnostic, the
gate's and the small-effect notes, the seeds that would decide a claim, withheld verdicts, and the
chapter's family-wise (Holm) correction, which sets the word a reader sees
(:func:`with_holm`). Part of :mod:`fedkd_core.chapters.ledger`, which re-exports every name here."""

from __future__ import annotations

import pandas as pd

from .. import verdicts as V
from ..verdicts import DECIDED, NO_RECORDS  # noqa: F401


def paper_text(verdict) -> str:
    """"holds, +5.2 [+4.6, +5.9]" for the paper's side of a claim ("—" where it has none)."""
    if verdict is None:
        return "—"
    spread = "" if verdict.note.startswith("assuming") else f" ({verdict.cells_text}; no spread printed)"
    where = " (on the paper's own cells)" if "paper's own cells" in verdict.note else ""
    return f"{verdict.word}, {verdict.effect_text}{spread}{where}"


BEST_ROUND_DIFFERS = " ⚑ differs"  # kept for old rows: the best round no longer gets a word, so never set
BEST_ROUND = "diagnostic, no verdict: "  # how the best-round reading starts


def differing_best_verdict(best_round: str) -> str:
    """The best-round verdict of an old row flagged as differing, else "" (the best-round reading is
    a diagnostic now, with no word: the round is picked per run on the test set)."""
    text = str(best_round)
    return text.removesuffix(BEST_ROUND_DIFFERS) if text.endswith(BEST_ROUND_DIFFERS) else ""


def best_round_text(final, best) -> str:
    """The best-round diagnostic: the effect with each run read at its best evaluation, without a
    verdict word. That round is picked per run among up to 100 evaluations on the test set itself
    (at different rounds in the two arms of a comparison), so it is biased upwards and is not a
    test: "diagnostic, no verdict: +2.9 [+2.2, +3.7]"."""
    if best.word == NO_RECORDS or best.word == V.UNTESTED:
        return "—"
    return f"{BEST_ROUND}{best.effect_text}"


def diverged_text(left) -> str:
    """The verdict with the diverged runs' seeds left out (``left``: a Verdict, or None where no
    diverged run touches the claim), shown beside the headline that counts them as failures."""
    if left is None:
        return ""
    return f"{left.word}, {left.effect_text}" if left.word != NO_RECORDS else NO_RECORDS


GATED_PREFIX = "with the still-rising cells left out: "


def gated_verdict(note: str) -> str:
    """The gated verdict a row's note gives (:func:`gated_text`: "untested at this scale"), else ""."""
    return str(note).split(GATED_PREFIX, 1)[1].split(";")[0].strip() if GATED_PREFIX in str(note) else ""


def gated_text(verdict, gated: dict | None) -> str:
    """"with the still-rising cells left out: untested at this scale" where a verdict judged with
    every cell counted (at the paper's own round budget) would read otherwise under the
    convergence gate (``gated``: :func:`judge_chapter`'s entry for the claim), else ""."""
    if not gated or gated["final"].word == verdict.word:
        return ""
    return f"{GATED_PREFIX}{gated['final'].word} {gated['final'].effect_text}".rstrip(" —")


SMALL_NOTE = f"small: the whole interval lies within {V.DECIDABLE_EFFECT:g} point of zero"
SMALL_MARK = " (small)"  # beside a verdict word whose interval lies within a point of zero


def small_flag(verdict: str, note) -> str:
    """" (small)" beside a decided verdict whose note says its whole interval lies within a point of
    zero (:data:`SMALL_NOTE`), else "" (also where a chapter withheld the word: :func:`withhold`)."""
    return SMALL_MARK if V.is_decided(verdict) and SMALL_NOTE in str(note or "") else ""


def note_text(verdict) -> str:
    """What stands behind a verdict beyond its interval: the gate's note; for a decided claim whose
    interval lies within a point of zero :data:`SMALL_NOTE` (:func:`fedkd_core.verdicts.under_a_point`);
    for an inconclusive claim, that the interval already rules out effects of 1 point (only where it
    lies wholly within (−1, +1)), or that the between-cell spread alone keeps more seeds from
    deciding one, or the seeds per cell that would decide an effect of 1 point with 80% power
    (:func:`fedkd_core.verdict_pooling.seeds_to_decide`)."""
    parts = [verdict.note] if verdict.note else []
    if V.under_a_point(verdict.interval, verdict.word):
        parts.append(f"{SMALL_NOTE} (the direction is decided, the size is under a point)")
    if verdict.word == V.INCONCLUSIVE:
        effect = f"{V.DECIDABLE_EFFECT:g} point"
        if V.rules_out(verdict.interval):
            parts.append(f"the interval already rules out effects of {effect} or more: any effect is smaller than that")
        elif verdict.seeds_cannot:
            parts.append(f"more seeds cannot decide an effect of {effect}: the spread between cells ({verdict.spread_text}) "
                         "keeps the interval wider however many seeds run; more cells would")
        elif verdict.seeds_needed is not None:
            seeds = int(verdict.seeds.split("-")[0]) if verdict.seeds else 0
            parts.append(f"the {seeds} seeds per cell run already had 80% power to decide an effect of {effect}: "
                         "the effect is likely smaller" if verdict.seeds_needed <= seeds else
                         f"{verdict.seeds_needed} seeds per cell would decide an effect of {effect} with 80% power")
    return "; ".join(parts)


def withhold(rows: pd.DataFrame, word: str, reasons: dict[str, str]) -> pd.DataFrame:
    """``rows`` with the verdict of each claim in ``reasons`` replaced by ``word`` (one of
    :data:`~fedkd_core.verdicts.NOT_JUDGED`: the records measure the claim but cannot judge it
    fairly, e.g. :data:`~fedkd_core.verdicts.UNEQUAL_TUNING`), the measured verdict and the reason
    leading its note; the effect stays, as measured. A claim the records cannot judge anyway
    (no records, every cell left out by the gate) keeps its word."""
    rows = rows.copy()
    for index, row in rows[rows.claim.isin(list(reasons)) & ~rows.verdict.isin(V.NOT_JUDGED)].iterrows():
        measured = f"measured: {row.verdict}, {row.effect}"
        rows.loc[index, ["verdict", "versus paper", "best round", "note", "p"]] = [
            word, "", "—", "; ".join(part for part in (measured, reasons[row.claim], row.note) if part), float("nan")]
    return rows


# --- many claims judged at once: Holm's correction over each chapter's claims --------------------

HOLM_COLUMN = "family-wise"
HOLM_MARK = "‡"


UNCORRECTED = "uncorrected"  # the column keeping the word before the chapter's correction
CORRECTION_NOTE = "before the chapter's correction: "


def with_holm(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (ledger rows, one or more chapters) with the word a reader sees: each chapter's
    claims judged with an interval (a p-value) are one family, and Holm's step-down correction
    (:func:`fedkd_core.verdicts.holm`) keeps at most 5% the chance that any decided verdict (holds,
    mixed, does not hold) calls an effect that is really zero non-zero. A decided verdict it does not
    keep reads :data:`~fedkd_core.verdicts.AFTER_CORRECTION` ("inconclusive after correction"), its
    uncorrected word and effect leading its note and kept in :data:`UNCORRECTED`; the effect column
    is unchanged. :data:`HOLM_COLUMN` says "survives Holm's correction over the chapter's N claims
    judged (p < 0.001)" or "‡ not after Holm's correction over ...: p = 0.021 on its own"; "" for the
    other verdicts. Applying it twice changes nothing. A decided verdict without a p-value is an
    error (a row built without it would otherwise read as kept)."""
    rows = rows.copy()
    texts = pd.Series("", index=rows.index, dtype=object)
    p = pd.to_numeric(rows.get("p", pd.Series(float("nan"), index=rows.index)), errors="coerce")
    before = rows[UNCORRECTED].fillna(rows.verdict) if UNCORRECTED in rows else rows.verdict.copy()
    before = before.where(before.astype(str) != "", rows.verdict)
    decided = before.map(V.is_decided)
    missing = rows[decided & p.isna()]
    if len(missing):
        raise ValueError(f"decided verdicts without a p-value, so outside Holm's family: {', '.join(missing.claim)}")
    for _, family in rows.groupby("chapter", sort=False):
        tested = p.loc[family.index]
        kept = dict(zip(family.index, V.holm(tested.tolist())))
        claims = f"the chapter's {claims_text(int(tested.notna().sum()))} judged"
        for index in family.index[decided.loc[family.index]]:
            texts[index] = (f"survives Holm's correction over {claims} ({V.p_text(p[index])})" if kept[index] else
                            f"{HOLM_MARK} not after Holm's correction over {claims}: {V.p_text(p[index])} on its own")
            if not kept[index] and rows.at[index, "verdict"] != V.AFTER_CORRECTION:
                note = str(rows.at[index, "note"] or "")
                measured = f"{CORRECTION_NOTE}{before[index]}, {rows.at[index, 'effect']}"
                rows.at[index, "note"] = "; ".join(part for part in (measured, note) if part)
                rows.at[index, "verdict"] = V.corrected_word(before[index], False)
                if "versus paper" in rows:
                    rows.at[index, "versus paper"] = ""
    return rows.assign(**{HOLM_COLUMN: texts, UNCORRECTED: before})


def not_kept_by_holm(family_wise) -> bool:
    """Whether a row's :data:`HOLM_COLUMN` text says Holm's correction does not keep its verdict."""
    return str(family_wise or "").startswith(HOLM_MARK)


def claims_text(count: int) -> str:
    return f"{count} claim{'s' if count != 1 else ''}"


def holm_count(rows: pd.DataFrame) -> str:
    """"2 of 6 decided verdicts survive Holm's correction over the 9 claims judged" for one
    chapter's rows (:func:`with_holm`'s column), "" where none is decided."""
    notes = rows.get(HOLM_COLUMN, pd.Series(dtype=object)).fillna("")
    decided = notes[notes != ""]
    if decided.empty:
        return ""
    tested = int(pd.to_numeric(rows.p, errors="coerce").notna().sum())
    kept = len(decided) - int(decided.map(not_kept_by_holm).sum())
    return (f"{kept} of {len(decided)} decided verdict{'s' if len(decided) > 1 else ''} "
            f"survive{'s' if len(decided) == 1 else ''} Holm's correction over the {claims_text(tested)} judged")


def holm_marked(rows: pd.DataFrame) -> bool:
    """Whether any of ``rows`` carries the :data:`HOLM_MARK` (:func:`with_holm`)."""
    return any(map(not_kept_by_holm, rows.get(HOLM_COLUMN, [])))
