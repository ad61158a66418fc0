"""The claims ledger: every chapter's claims, judged alike on the paper's tables and on the
committed records (paper or reduced profile), one row per claim, with the verdict words and
intervals of :mod:`fedkd_core.verdicts`.

A chapter joins the ledger by defining ``ledger_rows() -> pd.DataFrame`` (columns :data:`COLUMNS`),
built with :func:`judged_rows` from its records and four names it defines: ``observations(records)``
(one row per run: cell, method, seed, final and best value, evaluations, late gain),
``effects_of(frame, value)`` (per cell and seed, one effect column per claim, leaving out a claim
whose methods are missing from ``frame``), ``paper_observations()``
(the paper's tables in the same columns with mean and std) and ``PAPER_RUNS``; and with
:func:`untestable` for claims whose data are not offline. Nothing here runs an experiment: the
ledger reads records, so it says "no committed records" until a sweep has committed them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from html import escape

import pandas as pd

from .. import verdicts as V
from ..verdicts import DOES_NOT_HOLD, HOLDS, NO_RECORDS, PARTLY, UNTESTABLE

# A cell's outcome where the convergence gate leaves it out of the verdict (its runs still rising).
LEFT_OUT = "left out"
COLUMNS = ["chapter", "claim", "verdict", "versus paper", "effect", "cells", "paper", "best round", "scale", "evidence",
           "note", "section", "p"]


@dataclass(frozen=True)
class VerdictBasis:
    """The records a chapter's verdicts rest on: which reference profile (``params``), its
    committed ``records``, the scale as the verdict box states it, and whether the convergence gate
    applies (``enforce_gate``: off only for runs at the paper's own scale and round budget); where a
    rerun at a larger scale is under way, how many of its runs are finished of those planned, and
    the claims judged on it already (``moved``: every run such a claim compares is finished, while
    runs of others are not; :func:`claims_settled`)."""

    params: object
    records: list
    scale: str
    enforce_gate: bool
    rerun_finished: int = 0
    rerun_planned: int = 0
    moved: tuple = ()


def rerun_or(fallback: VerdictBasis, rerun: VerdictBasis, configs, root=None) -> VerdictBasis:
    """``rerun`` once every run of its grid ``configs`` is finished (its records committed, or
    diverged: :func:`fedkd_core.results.finished_runs`), else ``fallback``, never a partial rerun
    (it would judge each claim on whichever seeds and cells the sweep reached first); either with
    the rerun's progress."""
    from dataclasses import replace

    from ..results import finished_runs, planned_runs

    planned = planned_runs(configs)
    finished = finished_runs(configs, rerun.records, root)
    chosen = rerun if rerun.records and finished == planned else fallback
    return replace(chosen, rerun_finished=finished, rerun_planned=planned)


def claims_settled(effects_of, observed: pd.DataFrame, to_come: pd.DataFrame, keys: list[str]) -> tuple[str, ...]:
    """The claims of ``effects_of`` on ``observed`` (one row per finished run, :func:`observations`'
    columns) that no run still ``to_come`` (stand-in rows for the planned runs not finished) can
    change: with the stand-ins scoring 0 and with them scoring 100, the claim's effect in every
    cell and seed is what the finished runs alone give, and there is at least one. A claim that
    compares a method with runs still to come, or gains a seed or cell from them, is not settled.
    Two extremes bound every value the runs to come can take for effects that rise or fall with
    each run's score (differences, the min or max over methods, as every chapter's are)."""
    now = effects_of(observed, "final").set_index(keys)
    extremes = [effects_of(pd.concat([observed, to_come.assign(final=score)], ignore_index=True), "final").set_index(keys)
                for score in (0.0, 100.0)]

    def unchanged(claim: str, later: pd.DataFrame) -> bool:
        return claim in later.columns and now[claim].dropna().sort_index().equals(later[claim].dropna().sort_index())

    return tuple(claim for claim in now.columns
                 if now[claim].notna().any() and all(unchanged(claim, later) for later in extremes))


@dataclass(frozen=True)
class Rerun:
    """A sweep that reruns a chapter's evidence at a larger scale: the chapter as the Claims page
    names it, its grid's profile (``params``), its yaml under ``notebooks/params/`` (``path``), and
    the rows that move onto it once every one of its runs is finished (``decides``), the
    profile whose committed runs of the same methods pace the kinds it has not run yet
    (``pace_reference``: :func:`fedkd_core.sweep.calibrated_paces`), and whether it is a robustness
    grid (``robustness``: its runs are every variant's, :func:`~.robustness.experiments`). A chapter
    lists its own in ``RERUNS``."""

    chapter: str
    params: object
    path: str
    decides: str
    pace_reference: object = None  # a profile whose committed runs of the same methods pace kinds not run yet
    robustness: bool = False

    def configs(self, module, params=None) -> list:
        """The runs of the rerun's grid (of ``params``, default its own): the chapter's
        ``experiments``, or every robustness variant's for a robustness grid."""
        from .robustness import experiments as variant_runs

        params = self.params if params is None else params
        return variant_runs(module, params) if self.robustness else module.experiments(params)

    def complete_text(self, module, root=None) -> str:
        """What a complete rerun's row says: the verdicts rest on it; a robustness grid's, whether
        the robustness column does yet (only once the verdicts have moved too: :func:`~.robustness.grid_of`)."""
        from .robustness import grid_of

        if not self.robustness:
            return "none: complete, the verdicts rest on it"
        if grid_of(module, root).rerun:
            return "none: complete, the robustness column rests on it"
        return "none: complete, it counts once the verdicts have moved"


RERUN_COLUMNS = ["chapter", "rerun", "decides", "runs finished", "one core's time left"]


def rerun_row(module, rerun: Rerun, root=None, earlier: frozenset = frozenset()) -> dict:
    """How far ``rerun`` has got: its runs finished (records, and diverged runs) of those planned,
    and one worker's time for the rest at the pace of the finished ones (on the machines
    :func:`rerun_machines` names; "—" before any has finished), or that it is complete. Runs it
    shares with an earlier rerun of the chapter (their keys: ``earlier``) count there, not here:
    its time is then what it adds "after" that one."""
    from ..results import config_hash, stored_divergences, stored_records
    from ..sweep import duration_text, estimated_seconds

    configs = rerun.configs(module)
    records, diverged = stored_records(configs, root), stored_divergences(configs, root)
    finished = {record.key for record in records} | {divergence.key for divergence in diverged}
    unfinished = [config for config in configs if config_hash(config) not in finished]
    left = [config.resolved() for config in unfinished if config_hash(config) not in earlier]
    reference = stored_records(rerun.configs(module, rerun.pace_reference), root) if rerun.pace_reference else []
    seconds = estimated_seconds(left, on_cpu(records), reference=on_cpu(reference)) if left else None
    shared = len(left) < len(unfinished)
    pace = (duration_text(seconds) + (" after the rerun above" if shared else "") if seconds
            else rerun.complete_text(module, root) if not unfinished
            else "none after the rerun above" if not left else "—")
    count = f"{len(records) + len(diverged)} of {len(configs)}" + (f" ({len(diverged)} diverged)" if diverged else "")
    return {"chapter": rerun.chapter, "rerun": rerun.path, "decides": rerun.decides, "runs finished": count,
            "one core's time left": pace}


def on_cpu(records) -> list:
    """The ``records`` of runs made on a CPU: the pace of one core's time left (a GPU run's pace,
    several runs sharing the device, says nothing about a core's)."""
    from ..results import on_gpu

    return [record for record in records if not on_gpu(record)]


def chapter_reruns() -> list[tuple]:
    """(chapter module, :class:`Rerun`) for every rerun a chapter lists, in the book's order."""
    from . import CHAPTERS, chapter_module

    return [(module, rerun) for name in CHAPTERS for module in [chapter_module(name)]
            for rerun in getattr(module, "RERUNS", ())]


def rerun_machines(root=None) -> str:
    """The CPUs the reruns' finished runs ran on (their pace is the time left's), one name each."""
    from ..results import stored_records

    from ..cpuinfo import machine_text

    names = {machine_text(record.environment.get("device_name")) for module, rerun in chapter_reruns()
             for record in on_cpu(stored_records(rerun.configs(module), root))}
    return ", ".join(sorted(names)) or "none yet"


def reruns_table(root=None) -> pd.DataFrame:
    """Every chapter's reruns (``RERUNS``) in the book's chapter order, one :func:`rerun_row` each; a
    run two reruns of a chapter share is timed in the first."""
    from ..results import config_hash

    rows, earlier = [], {}
    for module, rerun in chapter_reruns():
        keys = earlier.setdefault(rerun.chapter, set())
        rows.append(rerun_row(module, rerun, root, frozenset(keys)))
        keys.update(config_hash(config) for config in rerun.configs(module))
    return pd.DataFrame(rows, columns=RERUN_COLUMNS)


def basis_text(basis: VerdictBasis, rerun: str, moved: bool) -> str:
    """What a chapter's verdicts rest on (a :func:`rerun_or` basis): how many of the runs of the
    ``rerun`` they move to are finished (committed or diverged), whether they have ``moved``, and
    the profile (with its scale and runs) that the verdicts are judged on now."""
    finished = f"**{basis.rerun_finished} of the {basis.rerun_planned} runs** of {rerun} are finished (committed, or diverged)"
    if moved:  # named as the rerun's: a profile's earlier, smaller runs may count as many records
        return (f"{finished}, and the verdicts have moved to it: they rest on the rerun's {len(basis.records)} "
                f"committed records ({basis.scale}), not on earlier runs of the **{basis.params.profile}** profile.")
    if basis.moved:
        named = [f"*{claim}*" for claim in basis.moved]
        claims = ", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else named[0]
        return (f"{finished}. Every run that {claims} compare{'s' if len(basis.moved) == 1 else ''} is among them, "
                f"so {'that claim is' if len(basis.moved) == 1 else 'those claims are'} judged on it already (no run "
                f"still to come can change {'it' if len(basis.moved) == 1 else 'them'}); the others move once all the "
                f"runs are finished, and until then rest on the **{basis.params.profile}** profile's "
                f"{len(basis.records)} committed records ({basis.scale}).")
    return (f"{finished}, and the verdicts move to it once all of them are. Until then they rest on the "
            f"**{basis.params.profile}** profile's {len(basis.records)} committed records ({basis.scale}).")


def evidence(records) -> str:
    """"profile paper: 152 runs, 1-3 seeds per cell, 15/30 rounds" for the records a claim rests
    on (a cell is a configuration up to its seed)."""
    if not records:
        return NO_RECORDS
    by_profile: dict[str, list] = {}
    for record in records:
        by_profile.setdefault(record.profile, []).append(record)
    return "; ".join(f"profile {p}: {len(rs)} runs, {_seeds_per_cell(rs)} seed(s) per cell, "
                     f"{'/'.join(str(n) for n in sorted({r.config['rounds'] for r in rs}))} rounds"
                     for p, rs in sorted(by_profile.items()))


def _seeds_per_cell(records) -> str:
    from ..results import key_of  # a record's key without its seed: fields added later, at their old value, drop out

    cells = Counter(key_of({**r.config, "seed": None}) for r in records)
    fewest, most = min(cells.values()), max(cells.values())
    return str(fewest) if fewest == most else f"{fewest}-{most}"


def judge_chapter(module, records, enforce_gate: bool = True, gates: dict | None = None) -> dict[str, dict]:
    """Per claim of ``module`` on ``records``: the :class:`~fedkd_core.verdicts.Verdict` on the
    final round ("final"), on each run's best round ("best"), and on the paper's tables over the
    same cells ("paper": the cells our final verdict's interval reads, :func:`interval_cells`; over the paper's own cells for a claim
    none of ours share). The convergence gate of a claim reads the runs of the methods it compares;
    ``gates`` replaces it (per claim, a :func:`~fedkd_core.verdicts.gate` table: two sets of runs
    judged on the same cells, :func:`~fedkd_core.verdicts.joint_gate`). Where an effect pairs runs
    from machines not shown to compute alike (:func:`fedkd_core.numerics.mixes_numerics`), the
    intervals are widened by the drift between machines, as a robustness variant's are."""
    from ..numerics import drift_allowance

    keys = list(module.EFFECT_CELL_KEYS)
    widen = drift_allowance(records)
    observed = module.observations(records)
    final, best = module.effects_of(observed, "final"), module.effects_of(observed, "best")
    if gates is None:
        gates = V.claim_gates(module.effects_of, observed, keys, module.METHOD_COLUMN)
    kept = interval_cells(final, keys, gates if enforce_gate else {})
    paper = V.paper_verdicts(module.paper_observations(), module.effects_of, keys, module.PAPER_RUNS, cells=final,
                             claim_cells=kept)
    claims = list(dict.fromkeys(list(paper) + V.claims_in(final, keys)))
    return {claim: {"final": V.judge(final, keys, claim, gates.get(claim), enforce_gate, widen=widen),
                    "best": V.judge(best, keys, claim, gates.get(claim), enforce_gate, widen=widen),
                    "paper": paper.get(claim)} for claim in claims}


def kept_cells(effects: pd.DataFrame, keys: list[str], gates: dict) -> dict[str, pd.DataFrame]:
    """Per claim of ``effects``, the cells (``keys``) that have its effect and pass its gate (in
    ``gates``, where it has one)."""
    kept = {}
    for claim in V.claims_in(effects, keys):
        cells = effects.dropna(subset=[claim])[keys].drop_duplicates()
        gate = gates.get(claim)
        if gate is not None:
            cells = cells[V.passes_gate(gate, cells, keys)]
        kept[claim] = cells
    return kept


def interval_cells(effects: pd.DataFrame, keys: list[str], gates: dict) -> dict[str, pd.DataFrame]:
    """Per claim, the cells its verdict's interval reads: :func:`kept_cells` less those whose effect
    has a single seed (no spread: :func:`~fedkd_core.verdicts.pooled_interval` leaves them out, so
    the paper's side must too), unless no kept cell has two (the verdict is then a mean over all)."""
    seeds = {claim: effects.dropna(subset=[claim]).groupby(keys).size() for claim in V.claims_in(effects, keys)}

    def spread(claim: str, cells: pd.DataFrame) -> pd.DataFrame:
        counts = seeds[claim]
        two = cells[[counts.get(V.cell_key(row, keys), 0) >= 2 for _, row in cells.iterrows()]]
        return two if len(two) else cells

    return {claim: spread(claim, cells) for claim, cells in kept_cells(effects, keys, gates).items()}


def paper_text(verdict) -> str:
    """"holds, +5.2 [+4.6, +5.9]" for the paper's side of a claim ("—" where it has none)."""
    if verdict is None:
        return "—"
    spread = "" if verdict.note.startswith("assuming") else f" ({verdict.cells_text}; no spread printed)"
    where = " (on the paper's own cells)" if "paper's own cells" in verdict.note else ""
    return f"{verdict.word}, {verdict.effect_text}{spread}{where}"


BEST_ROUND_DIFFERS = " ⚑ differs"  # how best_round_text flags a best-round verdict that differs


def differing_best_verdict(best_round: str) -> str:
    """The best-round verdict a row's "best round" gives where it differs from the final round's
    (:func:`best_round_text` flags it), without the flag, else ""."""
    text = str(best_round)
    return text.removesuffix(BEST_ROUND_DIFFERS) if text.endswith(BEST_ROUND_DIFFERS) else ""


def best_round_text(final, best) -> str:
    """The verdict on each run's best round ("(small)" where its whole interval lies within a point
    of zero, as :func:`small_flag` marks the final round's), flagged where it differs from the final round's."""
    if best.word == NO_RECORDS:
        return "—"
    flag = "" if best.word == final.word else BEST_ROUND_DIFFERS
    small = SMALL_MARK if V.under_a_point(best.interval, best.word) else ""
    return f"{best.word}{small}, {best.effect_text}{flag}"


def judged_rows(chapter: str, module, records, section: str, scale: str, evidence_text: str,
                enforce_gate: bool = True, sections: dict | None = None) -> pd.DataFrame:
    """One ledger row per claim of ``module`` judged on ``records`` (:func:`judge_chapter`): the
    verdict on the final round, its effect and interval, the cells, the paper's verdict, the
    verdict on the best round, the scale, the evidence, and what the verdict leaves out
    (cells not converged, seeds to decide it); without ``enforce_gate``, where the gate would
    change the verdict, what it would read (:func:`gated_text`). ``sections``: claims whose section is not ``section``."""
    if not records:
        paper = V.paper_verdicts(module.paper_observations(), module.effects_of, list(module.EFFECT_CELL_KEYS),
                                 module.PAPER_RUNS)
        judged = {claim: {"final": V.Verdict(claim, NO_RECORDS), "best": V.Verdict(claim, NO_RECORDS), "paper": verdict}
                  for claim, verdict in paper.items()}
    else:
        judged = judge_chapter(module, records, enforce_gate)
    gated = judge_chapter(module, records, True) if records and not enforce_gate else {}
    rows = []
    for claim, verdicts in judged.items():
        final, paper = verdicts["final"], verdicts["paper"]
        rows.append({"chapter": chapter, "claim": claim, "verdict": final.word,
                     "versus paper": V.versus_paper(final.interval, final.word, paper),
                     "effect": final.effect_text,
                     "cells": final.cells_text, "paper": paper_text(verdicts["paper"]),
                     "best round": best_round_text(final, verdicts["best"]), "scale": scale,
                     "evidence": evidence_text if final.word != NO_RECORDS else NO_RECORDS,
                     "note": "; ".join(filter(None, [note_text(final), gated_text(final, gated.get(claim))])),
                     "section": (sections or {}).get(claim, section), "p": final.p_value})
    return pd.DataFrame(rows, columns=COLUMNS)


# How a note says what the convergence gate would make of a verdict judged with every cell counted.
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
    return SMALL_MARK if verdict in DECIDED and SMALL_NOTE in str(note or "") else ""


def note_text(verdict) -> str:
    """What stands behind a verdict beyond its interval: the gate's note, for a decided claim
    whose interval lies within a point of zero :data:`SMALL_NOTE`
    (:func:`fedkd_core.verdicts.under_a_point`), and for an inconclusive claim the seeds per cell
    that would decide an effect of 1 point."""
    parts = [verdict.note] if verdict.note else []
    if V.under_a_point(verdict.interval, verdict.word):
        parts.append(f"{SMALL_NOTE} (the direction is decided, the size is under a point)")
    if verdict.word == V.INCONCLUSIVE and verdict.seeds_needed is not None:
        seeds = int(verdict.seeds.split("-")[0]) if verdict.seeds else 0
        if verdict.seeds_needed <= seeds:
            parts.append(f"the interval already rules out effects of {V.DECIDABLE_EFFECT:g} point or more: "
                         "any effect is smaller than that")
        else:
            parts.append(f"{verdict.seeds_needed} seeds per cell would decide an effect of {V.DECIDABLE_EFFECT:g} point")
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


def verdict_html(row) -> str:
    """A row's verdict word in bold (flagged where :func:`small_flag` says so), with how its effect
    compares with the paper's under it, and where Holm's correction over its chapter's claims does
    not keep it, that (:func:`with_holm`).
    Each word is kept whole (a narrow column wraps between words: "untested at / this scale", never
    "inconclusi / ve")."""
    versus = str(row.get("versus paper", "") or "")
    holm_note = str(row.get(HOLM_COLUMN, "") or "")
    weaker = not_kept_by_holm(holm_note)
    return (f"<b>{whole_words(row.verdict)}</b>" + small_flag(row.verdict, row.get("note", ""))
            + (f" {HOLM_MARK}" if weaker else "")
            + (f"<br><small>{escape(versus)}</small>" if versus else "")
            + (f"<br><small>{escape(holm_note.removeprefix(HOLM_MARK).strip())}</small>" if weaker else ""))


# --- many claims judged at once: Holm's correction over each chapter's claims --------------------

HOLM_COLUMN = "family-wise"
HOLM_MARK = "‡"
DECIDED = (HOLDS, PARTLY, DOES_NOT_HOLD)


def with_holm(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (ledger rows, one or more chapters) with a :data:`HOLM_COLUMN`: each chapter's
    claims judged with an interval (a p-value) are one family, and Holm's step-down correction
    (:func:`fedkd_core.verdicts.holm`) says which decided verdicts (holds, partly, does not hold)
    keep at most 5% the chance that any of them calls an effect that is really zero non-zero:
    "survives Holm's correction over the chapter's N claims judged (p < 0.001)" or, for one it
    does not keep, "‡ not after Holm's correction over the chapter's N claims judged: p = 0.021
    on its own". "" for the other verdicts. A decided verdict without a p-value is an error (a
    row built without it would otherwise read as kept)."""
    rows = rows.copy()
    texts = pd.Series("", index=rows.index, dtype=object)
    p = pd.to_numeric(rows.get("p", pd.Series(float("nan"), index=rows.index)), errors="coerce")
    missing = rows[rows.verdict.isin(DECIDED) & p.isna()]
    if len(missing):
        raise ValueError(f"decided verdicts without a p-value, so outside Holm's family: {', '.join(missing.claim)}")
    for _, family in rows.groupby("chapter", sort=False):
        tested = p.loc[family.index]
        kept = dict(zip(family.index, V.holm(tested.tolist())))
        claims = f"the chapter's {claims_text(int(tested.notna().sum()))} judged"
        for index in family.index[family.verdict.isin(DECIDED)]:
            texts[index] = (f"survives Holm's correction over {claims} ({V.p_text(p[index])})" if kept[index] else
                            f"{HOLM_MARK} not after Holm's correction over {claims}: {V.p_text(p[index])} on its own")
    return rows.assign(**{HOLM_COLUMN: texts})


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


def whole_words(text: str) -> str:
    """``text`` escaped, each word in a span that does not break (the CSS class ``fedkd-word``)."""
    return " ".join(f'<span class="fedkd-word">{escape(word)}</span>' for word in str(text).split())


# A note longer than this shows its first part (up to the first "; ") and folds the rest away.
NOTE_SHOWN = 300


def note_html(note: str) -> str:
    """A claim's note in small print under it; a long one (the reasons a claim is not judged run
    to 700 characters) shows its first part and folds the rest into a "(more)" that opens on a click."""
    if not isinstance(note, str) or not note:  # no note (None, NaN or "")
        return ""
    first, _, rest = note.partition("; ")
    if len(note) <= NOTE_SHOWN or not rest:
        return f"<br><small>{escape(note)}</small>"
    return (f"<br><small>{escape(first)}</small>"
            f' <details class="fedkd-note"><summary><small>(more)</small></summary><small>{escape(rest)}</small></details>')


def untestable(chapter: str, claim: str, reason: str, section: str) -> pd.DataFrame:
    return pd.DataFrame([{"chapter": chapter, "claim": claim, "verdict": UNTESTABLE, "versus paper": "", "effect": "—",
                          "cells": "—",
                          "paper": "reported", "best round": "—", "scale": "—", "evidence": reason, "note": "",
                          "section": section, "p": float("nan")}], columns=COLUMNS)


def ledger() -> pd.DataFrame:
    """Every chapter's ``ledger_rows()``, in the book's chapter order, with the robustness of each
    claim where its chapter has variants (:func:`robustness_column`)."""
    from . import CHAPTERS, chapter_module

    modules = [chapter_module(name) for name in CHAPTERS]
    frames = [robustness_column(module, module.ledger_rows()) for module in modules if hasattr(module, "ledger_rows")]
    return (with_holm(pd.concat(frames, ignore_index=True)) if frames
            else pd.DataFrame(columns=COLUMNS + ["robustness", HOLM_COLUMN]))


def robustness_column(module, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with a "robustness" column for claims the chapter's robustness grid covers, "—"
    for the others: "holds in k, inconclusive in j of V variants that bear on it (C of N variants run)", with the
    convergence gate's reason where it left a variant no cell, and the variants whose diverged runs
    left the claim without a cell (:func:`robustness.claim_text`). Only complete
    variants count; of those, a variant bears on a claim unless it leaves every method the claim
    compares as the chapter's reading has them (Selective-FD's threshold for "KnFu > FedMD").
    A chapter whose rows name their claims differently from its grid maps them with
    ``robustness_claim(row_claim) -> grid claim or None`` and says how the grid's reading differs
    in ``ROBUSTNESS_ROW_PREFIX`` (KnFu: rows on tuned schedules, a grid on the round as first coded);
    where the verdicts have moved onto a rerun at a larger scale, :func:`grid_scale_prefix` says
    at which scale the grid is read."""
    from .robustness import claim_table, grid_of

    if not hasattr(module, "ROBUSTNESS"):
        return rows.assign(robustness="—")
    grid = grid_of(module)
    table = claim_table(module, grid.base, enforce_gate=grid.enforce_gate)
    texts = robustness_texts(table, planned=len(module.ROBUSTNESS))
    grid_claim = getattr(module, "robustness_claim", lambda claim: claim)
    prefix = getattr(module, "ROBUSTNESS_ROW_PREFIX", "")
    basis = module.verdict_basis() if hasattr(module, "verdict_basis") else None  # once, not once per claim
    scale = {claim: grid_scale_prefix(module, grid, claim, basis) for claim in rows.claim}
    return rows.assign(robustness=[prefix + scale[claim] + texts[grid_claim(claim)]
                                   if grid_claim(claim) in texts.index else "—" for claim in rows.claim])


# How the Claims page's robustness text starts where the grid is not read at the verdicts' scale, and
# where it is read on a rerun at the paper's round budget with the still-rising cells counted.
GRID_APART_PREFIX = ("from the grid at the reduced profile's smaller scale, superseded (no robustness evidence yet at the "
                     "verdict's scale{rerun}): ")
GRID_RERUN_LISTED = "; its rerun is on the Claims page's reruns table"
GRID_RERUN_PREFIX = "grid rerun at the verdict's scale, still-rising cells counted: "


def grid_apart(module, grid=None, claim: str | None = None, basis: VerdictBasis | None = None) -> bool:
    """Whether a chapter's verdicts have moved off its reduced profile onto a rerun at a larger scale
    (``verdict_basis()``: FedGMKD's 50 rounds, FedCKD's paper column; with ``claim``, that claim's
    verdict; without, any of them, :attr:`VerdictBasis.moved`) while its robustness grid
    (``grid``, :func:`~.robustness.grid_of`'s) is still the one derived from the reduced profile.
    ``basis``: the chapter's ``verdict_basis()`` where the caller has it already."""
    from .robustness import grid_of

    if not hasattr(module, "verdict_basis"):
        return False
    basis = basis or module.verdict_basis()
    if basis.params == module.REDUCED_PROFILE and not (claim in basis.moved if claim else basis.moved):
        return False
    return not (grid or grid_of(module)).rerun


def grid_scale_prefix(module, grid=None, claim: str | None = None, basis: VerdictBasis | None = None) -> str:
    """:data:`GRID_APART_PREFIX` where the verdicts (``claim``'s, or any) and the robustness grid
    read runs at different scales (:func:`grid_apart`), :data:`GRID_RERUN_PREFIX` where the grid is
    rerun at the verdicts' scale and judged as they are, every cell counted; else "" (``basis`` as
    :func:`grid_apart`'s)."""
    from .robustness import grid_of

    if not hasattr(module, "verdict_basis"):  # verdicts that never move: the grid is at their scale
        return ""
    grid = grid or grid_of(module)
    if grid_apart(module, grid, claim, basis):
        listed = any(rerun.robustness for rerun in getattr(module, "RERUNS", ()))
        return GRID_APART_PREFIX.format(rerun=GRID_RERUN_LISTED if listed else "")
    return GRID_RERUN_PREFIX if grid.rerun and not grid.enforce_gate else ""


def robustness_texts(table: pd.DataFrame, planned: int) -> pd.Series:
    """Per claim of a :func:`robustness.claim_table`, the Claims page's robustness text
    (:func:`robustness.claim_texts`)."""
    from .robustness import claim_texts

    return claim_texts(table, planned)


# --- the Claims page as a chapter of the book (it runs nothing) -----------------------------------

@dataclass(frozen=True)
class Params:
    """The Claims page reads committed records only; ``profile`` just names the build."""

    profile: str = "smoke"


def experiments(params: Params) -> list:
    return []


def verdict_counts(table: pd.DataFrame) -> pd.DataFrame:
    """How many claims of each chapter got each verdict: one row per verdict word (in the order the
    ledger first gives it), one column per chapter (in the book's order), so that the table's many
    verdict words are row labels that wrap at word boundaries and its headers are single names."""
    counts = table.pivot_table(index="verdict", columns="chapter", values="claim", aggfunc="count", fill_value=0,
                               sort=False)
    return counts.reindex(index=list(dict.fromkeys(table.verdict)), columns=list(dict.fromkeys(table.chapter)))


CLAIMS_COLUMNS = ["chapter", "claim", "verdict", "effect (points) [95% interval]", "cells", "the paper's tables"]


def linked_table(table: pd.DataFrame) -> str:
    """The ledger as the Claims page's HTML table: per claim, linked to the table in its chapter
    that it rests on (:func:`claim_anchor`), its verdict, effect, cells and the paper's verdict; the
    scale, records, a best round that differs, the robustness (where the chapter's grid reads the
    claim) and the note in small print under the claim, so that the table fits the content column
    (all text escaped: claims contain characters such as '|' and '>')."""
    from ..tables import TABLE_CLASS

    lines = []
    for _, row in table.iterrows():
        page = row.section.split("#", 1)[0]
        robustness = str(row.get("robustness", "—"))
        family = str(row.get(HOLM_COLUMN, "") or "")
        details = [f"scale: {row.scale}", f"records: {row.evidence}", differing_best_round(row),
                   f"robustness: {robustness}" if robustness != "—" else "",
                   family if family and not family.startswith(HOLM_MARK) else ""]
        small = "".join(f"<br><small>{escape(str(d))}</small>" for d in details if d and d != "scale: —") + note_html(row.note)
        claim = f'<a href="./{escape(page)}{claim_anchor(row.section)}">{escape(row.claim)}</a>{small}'
        cells = [escape(row.chapter), claim, verdict_html(row), escape(row.effect), escape(row.cells),
                 escape(row.paper)]
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{escape(c)}</th>" for c in CLAIMS_COLUMNS)
    return f'<table class="{TABLE_CLASS} ledger"><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table>'


# --- a chapter's own rows, at the top of the chapter ----------------------------------------------

BOX_COLUMNS = ["claim", "verdict", "effect (points) [95% interval]", "cells", "the paper's tables"]
# A claim judged in the chapter's verdict section rests on the per-cell table of its claims.
CELL_TABLE = "#the-claims-cell-by-cell"


def claim_anchor(section: str) -> str:
    """The anchor, within its chapter, of the table a claim rests on."""
    anchor = "#" + section.split("#", 1)[1] if "#" in section else ""
    return CELL_TABLE if anchor in ("", "#verdict") else anchor


def differing_best_round(row) -> str:
    """"best round: ..." where the verdict on each run's best round differs from the final round's
    (:func:`differing_best_verdict`), else ""."""
    return f"best round: {row['best round']}" if differing_best_verdict(row["best round"]) else ""


def box_html(rows: pd.DataFrame) -> str:
    """A chapter's ledger rows as the verdict box: per claim its verdict word, effect with its
    95% interval, the cells where it holds, the paper's own verdict, linked to the table it rests
    on; what a verdict leaves out (a best round that differs, the note) under the claim; the scale and the records
    under the table where every claim has the same, else each claim's records under its verdict
    (a chapter whose claims move onto a rerun one by one, as FedCKD's)."""
    from ..tables import TABLE_CLASS

    evidence = [str(e) for e in rows.evidence if e not in ("—", NO_RECORDS)]
    # untestable rows give their reason as evidence, not records: they do not set the box apart
    apart = len({str(e) for e in rows.evidence[rows.verdict != UNTESTABLE] if e not in ("—", NO_RECORDS)}) > 1
    lines = []
    for _, row in rows.iterrows():
        best = differing_best_round(row)
        small = (f"<br><small>{escape(best)}</small>" if best else "") + note_html(row.note)
        claim = f'<a href="{claim_anchor(row.section)}">{escape(row.claim)}</a>{small}'
        verdict = verdict_html(row) + (f"<br><small>{escape(str(row.evidence))}</small>" if apart else "")
        cells = [claim, verdict, escape(row.effect), escape(row.cells), escape(row.paper)]
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{escape(c)}</th>" for c in BOX_COLUMNS)
    scale = "; ".join(dict.fromkeys(str(s) for s in rows.scale if s != "—"))
    records = "under each verdict" if apart else "; ".join(dict.fromkeys(evidence))
    caption = "".join(f"<br><b>{label}</b> {escape(text)}" for label, text in
                      (("Scale:", scale), ("Records:", records or NO_RECORDS)) if text)
    return (f'<table class="{TABLE_CLASS} verdict-box"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(lines)}</tbody></table><p class="fedkd-legend">{caption[4:]}</p>')


def final_reading(module) -> str:
    """How a chapter's claims read a run ("final"): the mean of its last N evaluated rounds where the
    chapter's ``summary`` averages them (its ``last`` argument, as FedGMKD's paper reports accuracy),
    else the run's final evaluation."""
    import inspect

    summary = getattr(module, "summary", None)
    last = inspect.signature(summary).parameters.get("last") if summary else None
    return (f"the mean of each run's last {last.default} evaluated rounds" if last is not None
            else "each run's final evaluation")


def verdict_box(module) -> pd.DataFrame:
    """Display a chapter's rows of the ledger (``module.ledger_rows()``: the committed records,
    whatever profile the page runs) as the box that opens the chapter (:func:`box_html`), and
    return them."""
    from IPython.display import HTML, Markdown, display

    rows = with_holm(module.ledger_rows())
    display(HTML(box_html(rows)))
    family = holm_count(rows)
    display(Markdown(f"Verdicts read {final_reading(module)}, as the paper's tables do; *best round* judges each "
                     "run at its best evaluation instead, and ⚑ marks a claim whose verdict differs between the two. "
                     "Effects are in accuracy points with 95% intervals; *cells* counts the settings where the claim "
                     "holds or is reversed on its own; a claim links to the table it rests on. "
                     + (f"Each interval is 95% on its own; judged together, {family} (the chance that any of them "
                        "calls an effect that is really zero non-zero at most 5%)"
                        + (f"; {HOLM_MARK} marks the others. " if holm_marked(rows) else ". ") if family else "")
                     + "[How verdicts are computed](claims.html#how-verdicts-are-computed)."))
    return rows


def cell_verdicts(module, records, value: str = "final", enforce_gate: bool = True) -> pd.DataFrame:
    """Per claim and cell of ``records``: seeds, the mean effect in points, its 95% t-interval and
    the cell's word (holds / reversed / inconclusive), with a readable cell label; with
    ``enforce_gate``, a cell the convergence gate leaves out of the claim's verdict is
    :data:`LEFT_OUT` (as :func:`judge_chapter` judges it), its effect still shown."""
    keys = list(module.EFFECT_CELL_KEYS)
    observed = module.observations(records)
    effects = module.effects_of(observed, value)
    gates = V.claim_gates(module.effects_of, observed, keys, module.METHOD_COLUMN) if enforce_gate else {}
    frames = []
    for claim in V.claims_in(effects, keys):
        cells = V.cell_table(effects, keys, claim)
        if len(cells):
            gate = gates.get(claim)
            if gate is not None:
                passed = V.passes_gate(gate, cells, keys)
                cells.loc[[not p for p in passed], "outcome"] = LEFT_OUT
            label = cells[keys].astype(str).agg(", ".join, axis=1) if len(keys) > 1 else cells[keys[0]].astype(str)
            frames.append(cells.assign(claim=claim, cell=label))
    columns = ["claim", "cell"] + keys + ["seeds", "effect", "low", "high", "outcome"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def show_cell_verdicts(module, records, enforce_gate: bool = True, label: str | None = None,
                       claims=None) -> pd.DataFrame:
    """Display, per profile of ``records`` (runs of two profiles are never paired), the heatmap of
    :func:`cell_verdicts` on the final round and on the best round, with one caption under the
    pair; return the final-round cells.
    ``enforce_gate`` as the verdicts on these records use it; ``label`` names the records in the
    titles (default: their profile); ``claims``: only these claims' columns (default: every claim)."""
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    from .. import plots

    shown = []
    for profile in sorted({record.profile for record in records}):
        runs = [record for record in records if record.profile == profile]
        for value, moment in (("final", "final round"), ("best", "best round")):
            table = cell_verdicts(module, runs, value, enforce_gate)
            if claims is not None:
                table = table[table.claim.isin(claims)]
            if not len(table):
                continue
            if value == "final":
                shown.append(table.assign(profile=profile))
            legend = "✓ holds, ✗ reversed, · inconclusive" + (", ○ left out by the convergence gate"
                                                               if (table.outcome == LEFT_OUT).any() else "")
            plots.cell_verdicts(table, f"{label or 'profile ' + profile}, {moment}: effect per cell (points); {legend}")
            plt.show()
        if shown and shown[-1].profile.iloc[0] == profile:
            plots.caption(None, f"Above, {label + ' (' if label else ''}records of profile {profile}{')' if label else ''}: "
                                f"two heatmaps, one on {final_reading(module)}, then one on each run's best round. A "
                                "column per claim, a row per cell; colour and number: the cell's mean effect over seeds "
                                "in points (blue: positive, the claim's direction; red: negative); the mark is the "
                                "cell's word from its 95% interval.")
    if not shown:
        display(Markdown("No cell has every method a claim compares: nothing to show."))
        return pd.DataFrame()
    return pd.concat(shown, ignore_index=True)
