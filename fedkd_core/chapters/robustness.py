"""Robustness of a chapter's claims to the choices its paper leaves open.

A chapter that takes part defines, as data:

* ``ROBUSTNESS``: a tuple of :class:`Variant` — each a name, the ``Params`` fields it changes from
  the base (the profile YAML the sweep is given) and why that value is a fair alternative. The
  first variant is the grid's base reading (no overrides): the chapter's settings on the grid's
  cells, or, where ``ROBUSTNESS_BASE_NOTE`` says so, an earlier design of them.
* ``observations(records)`` and ``effects_of(frame, value)``: the runs as rows and, per (cell,
  seed), one column per claim holding the claim's effect (e.g. KnFu's ALMA minus FedMD's), positive
  where the claim is true (:mod:`fedkd_core.chapters.ledger`);
  ``ROBUSTNESS_BASE_NOTE``, a sentence shown with the grid, when the base is not at the scale of
  the chapter's verdicts (FedUA's, on its first reduced design; KnFu's, on the as-coded schedules);
* optionally ``robustness_grid(root) -> Grid``, where the grid moves with the verdicts onto a rerun
  at a larger scale (FedGMKD's 50 rounds): :func:`grid_of` reads it, else ``ROBUSTNESS_BASE``.

The grid of all variants runs through the resumable sweep
(``python -m fedkd_core.sweep knfu --params notebooks/params/robustness/knfu.yaml --robustness``,
with ``--variant NAME`` to run one variant first);
variants that leave a method's config unchanged reuse its records, since a record's key is its
config. :func:`claim_table` then gives, per claim and variant, the verdict of
:func:`fedkd_core.verdicts.judge` (word, pooled effect and 95% interval, cells holding and reversed).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
import pandas as pd

from ..cpuinfo import machine_text

NOT_JUDGED = "not judged"  # a variant whose diverged runs left a claim without a cell


@dataclass(frozen=True)
class Variant:
    name: str
    overrides: dict = field(default_factory=dict)
    why: str = ""


@dataclass(frozen=True)
class Grid:
    """The grid a chapter's robustness is read on: the ``base`` its variants change, its yaml under
    ``notebooks/params/`` (``path``), whether the convergence gate applies (``enforce_gate``: off
    only on a grid at the paper's own round budget, as the verdicts there), whether it is a rerun of
    the grid at the scale the verdicts have moved to (``rerun``), and a sentence the chapter shows
    with it (``note``)."""

    base: object
    path: str
    enforce_gate: bool = True
    rerun: bool = False
    note: str = ""


def grid_of(module: ModuleType, root=None) -> Grid:
    """The grid a chapter's robustness is read on now: its ``robustness_grid(root)`` where it has
    one (FedGMKD's moves to 50 rounds with its verdicts), else ``ROBUSTNESS_BASE`` from
    ``robustness/<chapter>.yaml`` under the convergence gate."""
    if hasattr(module, "robustness_grid"):
        return module.robustness_grid(root)
    return Grid(module.ROBUSTNESS_BASE, f"robustness/{module.__name__.rsplit('.', 1)[-1]}.yaml")


# How a robustness verdict judged with the gate off (at the paper's round budget) names the cells it
# counted while they were still rising.
COUNTED_PREFIX = "counted: "


def variant_params(base, variant: Variant):
    """``base`` with the variant's fields replaced (a bad field name is a TypeError naming it)."""
    return dataclasses.replace(base, **variant.overrides)


def selected_variants(module: ModuleType, names=()) -> tuple[Variant, ...]:
    """The chapter's variants, or only those ``names`` name (case-insensitive, in the chapter's
    order); a name the chapter lacks is a ValueError listing the names it has."""
    if not names:
        return tuple(module.ROBUSTNESS)
    known = {variant.name.casefold(): variant for variant in module.ROBUSTNESS}
    unknown = [name for name in names if name.casefold() not in known]
    if unknown:
        raise ValueError(f"no robustness variant named {', '.join(map(repr, unknown))}; "
                         f"the variants are: {', '.join(repr(v.name) for v in module.ROBUSTNESS)}")
    wanted = {name.casefold() for name in names}
    return tuple(variant for variant in module.ROBUSTNESS if variant.name.casefold() in wanted)


def variant_grid(module: ModuleType, base, variant: Variant) -> list:
    """The runs of one variant: the chapter's grid at ``base`` with the variant's fields replaced."""
    return module.experiments(variant_params(base, variant))


def experiments(module: ModuleType, base, names=()) -> list:
    """Every run of every variant (or of the variants ``names`` names) once, variant by variant
    (the chapter's reading first)."""
    return _once([variant_grid(module, base, variant) for variant in selected_variants(module, names)])


def sweep_order(module: ModuleType, base, names=(), root=None) -> list:
    """The runs of :func:`experiments` in the order a sweep claims them: variant by variant, the
    variants with the fewest runs left first (the chapter's order among equals), seed by seed within
    a variant. A variant counts only once all its runs are committed, so a sweep stopped early should
    leave whole variants done, not every variant with its first seed (a plain grid's order)."""
    from ..results import is_finished

    grids = [variant_grid(module, base, variant) for variant in selected_variants(module, names)]
    left = [sum(not is_finished(config, root) for config in grid) for grid in grids]
    nearest_first = sorted(range(len(grids)), key=lambda index: (left[index], index))
    return _once([sorted(grids[index], key=lambda config: config.seed) for index in nearest_first])


def _once(grids: list[list]) -> list:
    """The configs of ``grids`` in order, each once (variants share the runs they do not change)."""
    unique = {}
    for grid in grids:
        for config in grid:
            unique.setdefault(repr(config), config)
    return list(unique.values())


def variant_records(module: ModuleType, base, variant: Variant, root=None) -> list:
    """The stored records of one variant's grid (nothing is run)."""
    from ..results import stored_records

    return stored_records(variant_grid(module, base, variant), root)


def variant_divergences(module: ModuleType, base, variant: Variant, root=None) -> list:
    """The stored divergences (``results.Divergence``) of one variant's grid: runs whose training
    became non-finite. They have no accuracy, so no claim's effect counts them; they count as run."""
    from ..results import stored_divergences

    return stored_divergences(variant_grid(module, base, variant), root)


def divergences_by_variant(module: ModuleType, base, root=None) -> dict[str, list]:
    """Each variant's stored divergences (:func:`variant_divergences`), by variant name, read once
    per build where the ledger's cache is on (:func:`_read_once`)."""
    return _read_once("divergences", module, base, root,
                      lambda: {variant.name: variant_divergences(module, base, variant, root)
                               for variant in module.ROBUSTNESS})


def _read_once(what: str, module: ModuleType, base, root, read):
    """``read()``, from the ledger's cache where it is on (:mod:`.ledger_cache`, whose key covers
    every record of the results folder; another ``root`` is never cached): the ledger, each
    chapter's page and the Claims page read the same robustness records, a few thousand files."""
    from .ledger_cache import cache_dir, cached, digest_of

    if cache_dir() is None or root is not None:
        return read()
    return cached(f"robustness-{what}-{module.__name__.rsplit('.', 1)[-1]}-{digest_of(base)}", read)


def divergence_texts(divergences: dict[str, list]) -> dict[str, str]:
    """Per variant with diverged runs, which methods diverged in how many runs and in which
    rounds, e.g. "pFedSD diverged in 6 runs (rounds 2-3)" (methods by the papers' names)."""
    from .ledger_pages import method_names

    names = method_names()
    texts = {}
    for name, diverged in divergences.items():
        by_method: dict[str, list[int]] = {}
        for divergence in diverged:
            by_method.setdefault(divergence.algorithm, []).append(divergence.round)
        if by_method:
            texts[name] = "; ".join(
                f"{names.get(method, method)} diverged in {len(rounds)} run{'s' if len(rounds) != 1 else ''} "
                f"(round{'s' if min(rounds) != max(rounds) else ''} "
                f"{min(rounds)}{f'-{max(rounds)}' if min(rounds) != max(rounds) else ''})"
                for method, rounds in sorted(by_method.items()))
    return texts


def summarise_effects(effects: pd.DataFrame, cell_keys: list[str], widen: float = 0.0,
                      gates: dict[str, pd.DataFrame] | None = None, enforce_gate: bool = True) -> pd.DataFrame:
    """From per-(cell, seed) effects (columns ``cell_keys`` + "seed" + one per claim): per claim,
    its verdict (:func:`fedkd_core.verdicts.judge`: the words, the pooled effect in points with its
    95% interval, widened by ``widen`` points on each side where the runs come from machines that
    drift apart), the cells where it holds and where it is reversed, and the spread over seeds
    (std of the per-seed mean over cells, in points), and why the convergence gate left cells out
    ("reason": :attr:`fedkd_core.verdicts.Verdict.gate_reason`; with the gate off, the cells it
    would have left out, after :data:`COUNTED_PREFIX`). ``gates`` (per claim, from
    :func:`fedkd_core.verdicts.claim_gates`) and ``enforce_gate``: the convergence gate, as
    :func:`fedkd_core.verdicts.judge` takes it."""
    from ..verdicts import POINTS, claims_in, judge

    rows = []
    for claim in claims_in(effects, cell_keys):
        values = effects[cell_keys + ["seed", claim]].dropna()
        if not len(values):
            continue
        verdict = judge(values, cell_keys, claim, (gates or {}).get(claim), enforce_gate, widen=widen)
        per_seed = values.groupby("seed")[claim].mean()
        rows.append({"claim": claim, "verdict": verdict.word, "effect": verdict.interval.mean,
                     "low": verdict.interval.low, "high": verdict.interval.high, "holds in": verdict.holding,
                     "reversed": verdict.reversed, "of cells": verdict.cells,
                     "seed spread": float(per_seed.std(ddof=0) * POINTS), "seeds": int(values.seed.nunique()),
                     "reason": verdict.gate_reason or (COUNTED_PREFIX + verdict.counted if verdict.counted else "")})
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


EFFECT_COLUMNS = ["claim", "verdict", "effect", "low", "high", "holds in", "reversed", "of cells", "seed spread", "seeds",
                  "reason"]


def summarise_variant(module: ModuleType, records: list, enforce_gate: bool = True) -> pd.DataFrame:
    """:func:`summarise_effects` of one variant's records (no records: no claims), its intervals
    widened by the drift between machines (:data:`fedkd_core.verdicts.MACHINE_DRIFT`) where an
    effect pairs runs from machines not shown to compute alike (:func:`fedkd_core.numerics.mixes_numerics`,
    as the chapter's verdicts); ``enforce_gate``: the grid's (:class:`Grid`)."""
    from ..numerics import drift_allowance
    from ..verdicts import claim_gates

    if not records:
        return pd.DataFrame(columns=EFFECT_COLUMNS)
    observed = module.observations(records)
    keys = list(module.EFFECT_CELL_KEYS)
    return summarise_effects(module.effects_of(observed, "final"), keys, drift_allowance(records),
                             claim_gates(module.effects_of, observed, keys, module.METHOD_COLUMN), enforce_gate)


def unjudged_rows(claims: list[str]) -> pd.DataFrame:
    """Rows for claims that a variant could not judge at all (its runs diverged): no cells."""
    return pd.DataFrame({"claim": claims, "verdict": NOT_JUDGED, "effect": float("nan"), "low": float("nan"),
                         "high": float("nan"), "holds in": 0, "reversed": 0, "of cells": 0,
                         "seed spread": float("nan"), "seeds": 0, "reason": ""}, columns=EFFECT_COLUMNS)


def complete_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a :func:`claim_table` whose variant has every run recorded or diverged."""
    return table[table.complete.astype(bool)] if len(table) else table


def judged_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The :func:`complete_rows` that judged their claim: on at least one cell, or as "untested at
    this scale" (every cell failed the convergence gate)."""
    from ..verdicts import UNTESTED

    complete = complete_rows(table)
    return complete[(complete["of cells"] > 0) | (complete.verdict == UNTESTED)] if len(complete) else complete


def records_by_variant(module: ModuleType, base, root=None) -> dict[str, list]:
    """Each variant's stored records (:func:`variant_records`), by variant name, read once (once per
    build where the ledger's cache is on, :func:`_read_once`)."""
    return _read_once("records", module, base, root,
                      lambda: {variant.name: variant_records(module, base, variant, root)
                               for variant in module.ROBUSTNESS})


def claim_table(module: ModuleType, base, root=None, records: dict[str, list] | None = None,
                divergences: dict[str, list] | None = None, enforce_gate: bool = True) -> pd.DataFrame:
    """Per variant and claim: holds in / of cells, effect, seed spread, the variant's runs with a
    record and those that diverged, whether its grid is complete (every run recorded or diverged),
    and how many machines made its records. Variants without runs are left out, and so is a
    claim that a variant leaves exactly as the chapter's reading has it (the variant changes none
    of its methods, e.g. Selective-FD's threshold for "KnFu > FedMD"). A cell and seed where one
    of a claim's methods diverged has no effect: the claim is judged on the rest (``seeds``,
    ``of cells``); a claim with nothing left has a row with no cells (``of cells`` 0, no effect):
    the variant could not judge it.
    ``records``, ``divergences``: :func:`records_by_variant` and :func:`divergences_by_variant`,
    when the caller has read them already from the results folder (``root``); ``enforce_gate``: the
    grid's (:class:`Grid`). Computed once per build where the ledger's cache is on
    (:mod:`.ledger_cache`, whose key covers every record of the results folder), under a name of the
    chapter, ``base`` and ``enforce_gate``: the records are not even read when it is there (another
    ``root`` is never cached: the key does not cover its records)."""
    from .ledger_cache import cache_dir, cached, digest_of

    def table() -> pd.DataFrame:
        by_variant = records if records is not None else records_by_variant(module, base, root)
        diverged = divergences if divergences is not None else divergences_by_variant(module, base, root)
        return _claim_table(module, base, by_variant, diverged, enforce_gate)

    if cache_dir() is None or root is not None:
        return table()
    return cached(f"robustness-{module.__name__.rsplit('.', 1)[-1]}-{digest_of(base, enforce_gate)}", table)


def _claim_table(module: ModuleType, base, by_variant: dict[str, list], diverged: dict[str, list],
                 enforce_gate: bool) -> pd.DataFrame:
    frames, claims = [], []
    for variant in module.ROBUSTNESS:
        records, failed = by_variant[variant.name], len(diverged.get(variant.name, []))
        if not records and not failed:
            continue
        summary = summarise_variant(module, records, enforce_gate)
        claims += [claim for claim in summary.claim if claim not in claims]
        if failed:  # claims its divergences left without a cell: a row with no cells, so it shows
            summary = pd.concat([summary, unjudged_rows([c for c in claims if c not in set(summary.claim)])],
                                ignore_index=True)
        expected = len(variant_grid(module, base, variant))
        frames.append(summary.assign(variant=variant.name, runs=len(records), diverged=failed,
                                     complete=len(records) + failed == expected, machines=len(machines_of(records))))
    columns = ["variant", "claim", "verdict", "effect", "low", "high", "holds in", "reversed", "of cells",
               "seed spread", "seeds", "runs", "diverged", "complete", "machines", "reason"]
    if not frames:
        return pd.DataFrame(columns=columns)
    table = pd.concat(frames, ignore_index=True)[columns]
    reading = table[table.variant == module.ROBUSTNESS[0].name].set_index("claim")
    unchanged = [row.variant != module.ROBUSTNESS[0].name and row.claim in reading.index
                 and _same_numbers((row.effect, row["seed spread"]),
                                   (reading.loc[row.claim, "effect"], reading.loc[row.claim, "seed spread"]))
                 for _, row in table.iterrows()]
    table = table[~pd.Series(unchanged, index=table.index)].reset_index(drop=True)
    return table.astype({"holds in": int, "reversed": int, "of cells": int, "effect": float, "low": float,
                         "high": float, "seed spread": float, "seeds": int, "runs": int, "diverged": int,
                         "complete": bool, "machines": int})


def _same_numbers(these, those) -> bool:
    """Equal, a missing number (no effect: every cell left out by the gate) equal to a missing one."""
    return bool(np.array_equal(np.asarray(these, dtype=float), np.asarray(those, dtype=float), equal_nan=True))


def machines_of(records) -> Counter:
    """How many of ``records`` each machine (``environment.device_name``) made."""
    return Counter(record.environment.get("device_name", "unknown") for record in records)


def machine_notes(records: dict[str, list]) -> list[str]:
    """One line per variant (of :func:`records_by_variant`) whose effects pair runs from machines
    not shown to compute alike (:func:`fedkd_core.numerics.mixes_numerics`), naming its machines:
    its effects then include the drift between machines, so its intervals are widened by it
    (:func:`fedkd_core.verdicts.effect_drift`, measured in results/README.md)."""
    from ..numerics import mixed_pairings

    notes = []
    for name, variant_runs in records.items():
        mixed = mixed_pairings(variant_runs)
        if mixed:
            machines = machines_of(variant_runs)
            notes.append(f"{name}: " + ", ".join(f"{count} runs on {machine_text(machine)}" for machine, count in machines.most_common())
                         + f"; {mixed} cell{'s' if mixed != 1 else ''} and seed{'s' if mixed != 1 else ''} pair runs of both")
    return notes


def variant_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Per claim: in how many variants its verdict is each word, of the variants whose grid is
    complete (a variant still being swept does not count yet) and that judged it on some cell;
    "variants holding" counts the verdict "holds"."""
    complete = judged_rows(table)
    if not len(complete):
        return pd.DataFrame(columns=["claim", "variants holding", "variants", "words"])
    grouped = complete.groupby("claim", sort=False)
    words = grouped.verdict.agg(lambda v: ", ".join(f"{word} in {n}" for word, n in Counter(v).most_common()))
    return pd.DataFrame({"variants holding": grouped.verdict.agg(lambda v: int((v == "holds").sum())),
                         "variants": grouped.size(), "words": words}).reset_index()


def claim_texts(table: pd.DataFrame, planned: int) -> pd.Series:
    """Per claim that some complete variant of a :func:`claim_table` judged, the Claims page's
    robustness text (:func:`claim_text`)."""
    claims = dict.fromkeys(judged_rows(table).claim) if len(table) else {}
    return pd.Series({claim: claim_text(table, claim, planned) for claim in claims}, dtype=object)


def claim_text(table: pd.DataFrame, claim: str, planned: int) -> str:
    """"holds in 2, partly in 1 of 3 variants that bear on it (3 of 5 variants run)": the verdicts
    of the complete variants that judged ``claim`` (:func:`judged_rows`); those where the gate left
    no cell, with the gate's reason (:func:`untested_text`); in brackets, how many of the
    ``planned`` variants are complete, and those whose diverged runs left the claim without a cell
    (:func:`diverged_text`)."""
    from ..verdicts import UNTESTED

    rows = judged_rows(table)
    rows = rows[rows.claim == claim]
    decided = rows[rows.verdict != UNTESTED]
    words = ", ".join(f"{word} in {n}" for word, n in Counter(decided.verdict).most_common())
    parts = [f"{words} of {len(rows)} variants that bear on it" if len(decided) else "", untested_text(rows)]
    run = complete_rows(table).variant.nunique()
    return "; ".join(p for p in parts if p) + f" ({run} of {planned} variants run{diverged_text(table, claim)})"


# More reasons, or more variants named, than these for one claim's untested variants: the Claims page
# counts them and leaves the names and reasons to the chapter's robustness table.
MAX_REASONS_NAMED = 2
MAX_VARIANTS_NAMED = 3


def untested_text(rows: pd.DataFrame) -> str:
    """"untested at this scale under all 8 variants: evaluated 5 times, fewer than 10" for the rows
    (one claim's :func:`judged_rows`) whose every cell the convergence gate left out, the variants
    grouped by the gate's reason ("under A, B: ...; under C: ..."), or only counted where that
    would give more than :data:`MAX_REASONS_NAMED` reasons or name more than
    :data:`MAX_VARIANTS_NAMED` variants; "" where there are none."""
    from ..verdicts import UNTESTED

    untested = rows[rows.verdict == UNTESTED]
    if not len(untested):
        return ""
    reasons = untested["reason"].fillna("") if "reason" in untested else pd.Series("", index=untested.index)
    groups = [(reason, list(untested.variant[reasons == reason])) for reason in dict.fromkeys(reasons)]
    named = sum(len(names) for _, names in groups if not (len(names) == len(rows) > 1))  # "all N" names none
    given = [reason for reason, _ in groups if reason]  # a variant without a recorded reason is no reason
    if len(given) > MAX_REASONS_NAMED or named > MAX_VARIANTS_NAMED:  # a wall of text in one table cell
        count = f"all {len(rows)}" if len(untested) == len(rows) > 1 else f"{len(untested)}"
        recorded = "recorded " if len(given) < len(groups) else ""  # some variants' reasons were not recorded
        why = (f"for {len(given)} {recorded}reason{'s' if len(given) > 1 else ''}: the chapter's robustness table gives "
               f"{'each' if len(given) > 1 else 'it'}" if given else "the chapter's robustness table says why")
        return f"{UNTESTED} under {count} variant{'s' if len(untested) > 1 else ''} (the gate left every cell out, {why})"
    return f"{UNTESTED} " + "; ".join(f"under {_variants_named(names, len(rows))}{': ' + reason if reason else ''}"
                                      for reason, names in groups)


def _variants_named(names: list[str], judged: int) -> str:
    """"all 8 variants" where ``names`` are every variant that judged the claim, else the names."""
    return f"all {judged} variants" if len(names) == judged > 1 else ", ".join(names)


def diverged_text(table: pd.DataFrame, claim: str) -> str:
    """"; not judged under V, where n runs diverged" for the complete variants whose diverged runs
    left ``claim`` without a cell, else ""."""
    complete = complete_rows(table)
    if not len(complete):
        return ""
    unjudged = complete[(complete.claim == claim) & (complete.verdict == NOT_JUDGED)]
    return "".join(f"; not judged under {row.variant}, where {row.diverged} runs diverged"
                   for _, row in unjudged.iterrows() if row.get("diverged", 0) > 0)


def beside_reading(table: pd.DataFrame, reading: str):
    """Per claim that the chapter's reading (``reading``, the first variant) judged: the claim,
    the reading's row and the other variants' rows, of the complete variants that judged it."""
    for claim, rows in judged_rows(table).groupby("claim", sort=False):
        own = rows[rows.variant == reading]
        if len(own):
            yield claim, own.iloc[0], rows[rows.variant != reading]


def changes_from_reading(table: pd.DataFrame, reading: str) -> list[str]:
    """Per claim, the complete variants under which its verdict differs from the chapter's own
    reading (``reading``, the first variant), as one sentence each ("under SGD, lr 0.01 ... Local ≥
    every sharing method holds, +1.2 [+0.4, +2.0]", after the reading's own verdict);
    claims that no variant changes are left out."""
    from ..verdicts import Interval

    lines = []
    for claim, base, others in beside_reading(table, reading):
        moved = others[others.verdict != base.verdict]
        if len(moved):
            lines.append(f"**{claim}** {base.verdict} under **{reading}** ({Interval(base.effect, base.low, base.high).text()}); "
                         + "; ".join(f"under **{row.variant}** it {_reads(row.verdict)} "
                                     f"({Interval(row.effect, row.low, row.high).text()}; "
                                     f"reversed in {row.reversed} of {row['of cells']} cells)"
                                     for _, row in moved.iterrows()))
    return lines


def _reads(word: str) -> str:
    return {"holds": "holds", "partly": "holds partly", "does not hold": "does not hold",
            "inconclusive": "is inconclusive"}.get(word, f"reads {word}")


def effect_shifts(table: pd.DataFrame, reading: str) -> list[str]:
    """Per claim, the complete variants whose effect differs from the reading's by more than their
    two 95% intervals allow (the difference exceeds √(h_reading² + h_variant²), h the intervals'
    half-widths: the usual test of two estimates' difference; approximate, since a variant and the
    reading share seeds), as one line of text each; claims that no variant moves so far are left
    out. Only variants that judged the claim on as many cells and seeds as the reading compare (not
    one whose diverged runs left fewer), and only effects with an interval (two seeds or more)."""
    lines = []
    for claim, base, others in beside_reading(table, reading):
        alike = others[(others.seeds == base.seeds) & (others["of cells"] == base["of cells"])]
        allowed = np.hypot(_half_width(base), alike.apply(_half_width, axis=1)) if len(alike) else []
        moved = alike[(alike.effect - base.effect).abs() > allowed]  # NaN (no interval) never moves
        if len(moved):
            lines.append(f"**{claim}**: {_effect_text(base)} points under **{reading}**; "
                         + "; ".join(f"{_effect_text(row)} with {row.variant}" for _, row in moved.iterrows()))
    return lines


def _half_width(row) -> float:
    return (row.high - row.low) / 2


def _effect_text(row) -> str:
    """An effect with its 95% interval at the book's one precision (as the verdict rows print it:
    one decimal, two where every number is under a point, never "-0.0"); the effect alone where it
    has no interval."""
    from .ledger_pages import one_precision

    interval = "" if pd.isna(row.low) or pd.isna(row.high) else f" [{row.low:+.4f}, {row.high:+.4f}]"
    return one_precision(f"{row.effect:+.4f}{interval}")


def reader_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`claim_table` in six columns a reader can scan: the variant, the claim, the verdict
    (with the convergence gate's reason where it left cells out), the effect with its 95% interval
    in points, the cells where the claim holds / is reversed / was judged, and the runs (with those
    that diverged, and "incomplete" while the variant's sweep is under way)."""
    def effect(row) -> str:
        return "—" if pd.isna(row.effect) else _effect_text(row)

    def verdict(row) -> str:
        from ..verdicts import UNTESTED
        from .ledger_pages import named_methods

        if not row.reason:
            return row.verdict
        reason = named_methods(row.reason)  # "pFedSD in 1 cell still rising", not the key "pfedsd"
        # a judged claim's reason names the cells the gate left out (or, gate off, counted), not why it holds
        if row.verdict == UNTESTED:
            return f"{row.verdict} ({reason})"
        return f"{row.verdict}; {reason}" if reason.startswith(COUNTED_PREFIX) else f"{row.verdict}; left out: {reason}"

    def runs(row) -> str:
        notes = ([f"{row.diverged} diverged"] if row.diverged else []) + ([] if row.complete else ["incomplete"])
        return f"{row.runs}" + (f" ({', '.join(notes)})" if notes else "")

    columns = ["variant", "claim", "verdict", "effect [95% interval]", "cells ✓ / ✗ / judged", "runs"]
    if not len(table):
        return pd.DataFrame(columns=columns)
    return pd.DataFrame({"variant": table.variant, "claim": table.claim,
                         "verdict": table.apply(verdict, axis=1),
                         "effect [95% interval]": table.apply(effect, axis=1),
                         "cells ✓ / ✗ / judged": [f"{h} / {r} / {n}" for h, r, n in
                                                  zip(table["holds in"], table.reversed, table["of cells"])],
                         "runs": table.apply(runs, axis=1)}, columns=columns)


def variants_frame(module: ModuleType) -> pd.DataFrame:
    """The chapter's variants as a table: name, the fields it changes, why."""
    return pd.DataFrame([(v.name, ", ".join(f"{k} = {x}" for k, x in v.overrides.items()) or "—", v.why)
                         for v in module.ROBUSTNESS], columns=["variant", "changes", "why"])


def plot_effects(table: pd.DataFrame, reading: str):
    """One forest plot per claim of the complete variants that judged it (:func:`plots.claim_effects`):
    where its effect lies, with the seeds' spread, and in how many cells it holds. Returns the
    figure (not yet shown: :func:`show` captions it), or None when no variant is complete yet."""
    import matplotlib.pyplot as plt

    from fedkd_core import plots

    judged = judged_rows(table)
    judged = judged[judged.effect.notna()] if len(judged) else judged
    if not len(judged):
        return None
    claims = list(dict.fromkeys(judged.claim))
    heights = [0.9 + 0.32 * (judged.claim == claim).sum() for claim in claims]
    fig, axes = plt.subplots(len(claims), 1, figsize=(7.5, sum(heights) + 0.4), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, claim in zip(axes[:, 0], claims):
        plots.claim_effects(judged[judged.claim == claim], ax, reading, title=claim)
    fig.tight_layout()
    return fig


def show(module: ModuleType, name: str, root=None) -> pd.DataFrame:
    """Display a chapter's robustness grid (its variants, then per variant and claim the cells
    where the claim holds, the effect and its seed spread) and return the claim table."""
    from IPython.display import Markdown, display

    from .. import plots, tables
    from ..verdicts import MACHINE_DRIFT, effect_drift

    grid = grid_of(module, root)
    base_note = getattr(module, "ROBUSTNESS_BASE_NOTE", "")  # where the base is not the chapter's own profile
    notes = [note for note in (grid.note, base_note) if note]
    display(Markdown(f"**{name}**: {len(module.ROBUSTNESS)} variants around `notebooks/params/{grid.path}`"
                     + "".join(f". {note}" for note in notes)))
    tables.show(variants_frame(module))
    records = records_by_variant(module, grid.base, root)
    divergences = divergences_by_variant(module, grid.base, root)
    table = claim_table(module, grid.base, root, records, divergences, grid.enforce_gate)
    if not len(table):
        display(Markdown("No variant has runs yet."))
        return table
    judged = ("kept by the convergence gate" if grid.enforce_gate
              else "every cell, still-rising ones counted as the verdicts count them")
    tables.show(reader_table(table),
                legend="Effect: pooled over cells and seeds, in points (positive where the claim holds); cells: where "
                       f"the claim holds / is reversed (each cell's 95% interval over seeds) / judged ({judged}).")
    fig = plot_effects(table, module.ROBUSTNESS[0].name)
    if fig is not None:
        plots.caption(fig, "Each claim over the variants whose runs are all committed: the pooled effect with its 95% "
                           "interval, a **filled** marker where the verdict is *holds* and a hollow one otherwise (in "
                           f"brackets: the verdict), the grid's base reading ({module.ROBUSTNESS[0].name}) in red; left "
                           "of the dashed line the claim is reversed on average.")
    diverged = divergence_texts(divergences)
    if diverged:
        display(Markdown("Runs that **diverged** (training loss or weights became non-finite; stored as "
                         "`<key>.diverged.json`, not retried). They have no accuracy, so the claims above are "
                         "judged on the cells and seeds where every method they compare finished:\n\n"
                         + "\n".join(f"* {name}: {text}" for name, text in diverged.items())))
    notes = machine_notes(records)
    if notes:
        display(Markdown("Effects that pair runs from machines not shown to compute alike (machines whose fp32 "
                         "reruns of each other's records came out identical count as one): the same "
                         f"run made on another CPU in fp32 moves by {MACHINE_DRIFT:.2f} points on average (the Performance "
                         f"page's drift section), so such a variant's intervals are widened by ±{effect_drift():.2f} points "
                         "(two runs in each effect).\n\n"
                         + "\n".join(f"* {note}" for note in notes)))
    changes = changes_from_reading(table, module.ROBUSTNESS[0].name)
    if changes:
        display(Markdown("Where a variant changes a verdict:\n\n" + "\n".join(f"* {line}" for line in changes)))
    shifts = effect_shifts(table, module.ROBUSTNESS[0].name)
    if shifts:
        display(Markdown("Where a variant moves a claim's effect by more than the two 95% intervals allow (the "
                         "difference exceeds √(h₁² + h₂²), h each interval's half-width; approximate, as the variant "
                         "and the reading share seeds):\n\n" + "\n".join(f"* {line}" for line in shifts)))
    counts = variant_counts(table)
    if len(counts):
        display(Markdown("\n".join(f"* **{row.claim}**: {row.words} of the {row.variants} variants whose runs are "
                                   "all committed and that could judge it" for _, row in counts.iterrows())))
    return table
