"""The claims ledger: every chapter's claims, judged alike on the paper's tables and on the
committed records (paper or reduced profile), one row per claim, with the verdict words and
intervals of :mod:`fedkd_core.verdicts`. This module assembles the ledger; its parts are
:mod:`.ledger_evidence` (what the verdicts rest on: bases, reruns, robustness),
:mod:`.ledger_words` (the words and notes of a row, and the chapter's family-wise correction that
sets the word a reader sees) and :mod:`.ledger_pages` (the Claims page's table, the verdict boxes,
the heatmaps); every name of those is re-exported here.

A chapter joins the ledger by defining ``ledger_rows() -> pd.DataFrame`` (columns :data:`COLUMNS`),
built with :func:`judged_rows` from its records and four names it defines: ``observations(records)``
(one row per run: cell, method, seed, final and best value, evaluations, late gain),
``effects_of(frame, value)`` (per cell and seed, one effect column per claim, leaving out a claim
whose methods are missing from ``frame``), ``paper_observations()``
(the paper's tables in the same columns with mean and std) and ``PAPER_RUNS``; optionally
``SHARED_RUN_KEYS`` (cell keys along which cells are the same runs read differently: FedGMKD's
metric), and with :func:`untestable` for claims whose data are not offline. Nothing here runs an
experiment: the ledger reads records, so it says "no committed records" until a sweep has
committed them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .. import verdicts as V
from ..verdicts import NO_RECORDS, UNTESTABLE
from .ledger_evidence import *  # noqa: F401,F403
from .ledger_evidence import robustness_column
from .ledger_pages import *  # noqa: F401,F403
from .ledger_words import *  # noqa: F401,F403
from .ledger_words import (HOLM_COLUMN, best_round_text, diverged_text, gated_text, note_text, paper_text,
                           with_holm)

COLUMNS = ["chapter", "claim", "verdict", "versus paper", "effect", "cells", "paper", "best round", "scale", "evidence",
           "note", "section", "p", "fixed cells", "random cells", "spread", "new cell", "failures left out"]


def judge_chapter(module, records, enforce_gate: bool = True, gates: dict | None = None,
                  failures: pd.DataFrame | None = None) -> dict[str, dict]:
    """Per claim of ``module`` on ``records``: the :class:`~fedkd_core.verdicts.Verdict` on the
    final round ("final"), the best-round diagnostic ("best", whose word is never shown), and the
    paper's tables over the same cells ("paper": the cells our final verdict's interval reads,
    :func:`interval_cells`; over the paper's own cells for a claim none of ours share). With
    ``failures`` (stand-in observations of diverged runs, :func:`failure_observations`), "final"
    counts each diverged run as its method's failure, and "left out" is the verdict with those seeds
    left out instead. The convergence gate of a claim reads the runs of the methods it compares;
    ``gates`` replaces it (per claim, a :func:`~fedkd_core.verdicts.gate` table). Cells that share
    runs (:func:`cell_links`) are pooled by seed. Where an effect pairs runs from machines not shown
    to compute alike (:func:`fedkd_core.numerics.mixes_numerics`), the intervals are widened by the
    drift between machines, as a robustness variant's are."""
    from ..numerics import drift_allowance

    keys = list(module.EFFECT_CELL_KEYS)
    widen = drift_allowance(records)
    observed = module.observations(records)
    counted = observed if failures is None or not len(failures) else pd.concat([observed, failures], ignore_index=True)
    final, best = module.effects_of(counted, "final"), module.effects_of(counted, "best")
    left = module.effects_of(observed, "final") if counted is not observed else None
    if gates is None:
        gates = V.claim_gates(module.effects_of, observed, keys, module.METHOD_COLUMN)
    links = cell_links(module, observed, final)
    kept = interval_cells(final, keys, gates if enforce_gate else {})
    paper = V.paper_verdicts(module.paper_observations(), module.effects_of, keys, module.PAPER_RUNS, cells=final,
                             claim_cells=kept)
    claims = list(dict.fromkeys(list(paper) + V.claims_in(final, keys)))

    def verdict(effects, claim):
        return V.judge(effects, keys, claim, gates.get(claim), enforce_gate, widen=widen, links=links.get(claim))

    judged = {}
    for claim in claims:
        judged[claim] = {"final": verdict(final, claim), "best": verdict(best, claim), "paper": paper.get(claim)}
        if left is not None and _differs(final, left, keys, claim):
            judged[claim]["left out"] = verdict(left, claim)
    return judged


def _differs(one: pd.DataFrame, other: pd.DataFrame, keys: list[str], claim: str) -> bool:
    """Whether ``claim``'s effects differ between two effect tables (a seed more or less, or a value)."""
    if claim not in one or claim not in other:
        return claim in one or claim in other
    a, b = (t.set_index(keys + ["seed"])[claim].dropna().sort_index() for t in (one, other))
    return not a.equals(b)


def cell_links(module, observed: pd.DataFrame, effects: pd.DataFrame) -> dict[str, dict]:
    """Per claim, cell -> the cells that share runs with it, so that the verdict pools them by seed
    (:func:`fedkd_core.verdict_pooling.units_of`): the cells its effect reads the runs of
    (:func:`~fedkd_core.verdicts.claims_cell_sources`: FedUA's drops from C = 1) and, along the
    chapter's ``SHARED_RUN_KEYS``, cells that are the same runs read another way (FedGMKD's local
    and global accuracy of one run)."""
    keys = list(module.EFFECT_CELL_KEYS)
    claims = V.claims_in(effects, keys)
    links = {claim: {cell: set(cells) for cell, cells in sources.items()}
             for claim, sources in V.claims_cell_sources(module.effects_of, observed, keys, claims).items()}
    shared = [k for k in getattr(module, "SHARED_RUN_KEYS", ()) if k in keys]
    if shared:
        rest = [i for i, k in enumerate(keys) if k not in shared]
        for claim in claims:
            cells = [tuple(c) for c in effects.dropna(subset=[claim])[keys].drop_duplicates().itertuples(index=False)]
            for cell in cells:
                same = {c for c in cells if c != cell and all(c[i] == cell[i] for i in rest)}
                if same:
                    links.setdefault(claim, {}).setdefault(cell, set()).update(same)
    return links


def failure_observations(observed: pd.DataFrame, stand_ins: list[dict], keys: list[str],
                         values: tuple = ("final", "best")) -> pd.DataFrame:
    """Observations for diverged runs (``stand_ins``: each a dict of the cell ``keys``, method and
    seed) that count each as its method's *failure* on that seed: scored at the worst ``values`` of
    any finished run in its cell (any method, any seed), so that it ranks last there without
    inventing a number below what any run reached. A cell without finished runs gives no row."""
    rows = []
    for stand_in in stand_ins:
        mine = observed
        for key in keys:
            mine = mine[mine[key] == stand_in[key]]
        if not len(mine):
            continue
        rows.append({**stand_in, **{value: float(mine[value].min()) for value in values}})
    return pd.DataFrame(rows)


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
    has a single seed (no spread: :func:`~fedkd_core.verdict_pooling.pool` leaves them out, so
    the paper's side must too), unless no kept cell has two (the verdict is then a mean over all)."""
    seeds = {claim: effects.dropna(subset=[claim]).groupby(keys).size() for claim in V.claims_in(effects, keys)}

    def spread(claim: str, cells: pd.DataFrame) -> pd.DataFrame:
        counts = seeds[claim]
        two = cells[[counts.get(key, 0) >= 2 for key in V.cell_keys_of(cells, keys)]]
        return two if len(two) else cells

    return {claim: spread(claim, cells) for claim, cells in kept_cells(effects, keys, gates).items()}
def judged_rows(chapter: str, module, records, section: str, scale: str, evidence_text: str,
                enforce_gate: bool = True, sections: dict | None = None,
                failures: pd.DataFrame | None = None) -> pd.DataFrame:
    """One ledger row per claim of ``module`` judged on ``records`` (:func:`judge_chapter`): the
    verdict on the final round (diverged runs in ``failures`` counted as failures, the verdict
    with them left out beside it), the effect of the reading that decides it, both readings, the
    between-cell spread and a new cell's interval, the cells, the paper's verdict, the best-round
    diagnostic, the scale, the evidence, and what the verdict leaves out (cells not converged,
    seeds to decide it); without ``enforce_gate``, where the gate would change the verdict, what
    it would read (:func:`gated_text`). ``sections``: claims whose section is not ``section``. The
    word is the uncorrected one: :func:`with_holm` sets the word a reader sees."""
    if not records:
        paper = V.paper_verdicts(module.paper_observations(), module.effects_of, list(module.EFFECT_CELL_KEYS),
                                 module.PAPER_RUNS)
        judged = {claim: {"final": V.Verdict(claim, NO_RECORDS), "best": V.Verdict(claim, NO_RECORDS), "paper": verdict}
                  for claim, verdict in paper.items()}
    else:
        judged = judge_chapter(module, records, enforce_gate, failures=failures)
    gated = judge_chapter(module, records, True, failures=failures) if records and not enforce_gate else {}
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
                     "section": (sections or {}).get(claim, section), "p": final.p_value,
                     "fixed cells": final.fixed.text(), "random cells": final.random.text() if final.units >= 2 else "—",
                     "spread": final.spread_text, "new cell": final.prediction.text(),
                     "failures left out": diverged_text(verdicts.get("left out"))})
    return pd.DataFrame(rows, columns=COLUMNS)


def untestable(chapter: str, claim: str, reason: str, section: str) -> pd.DataFrame:
    return pd.DataFrame([{"chapter": chapter, "claim": claim, "verdict": UNTESTABLE, "versus paper": "", "effect": "—",
                          "cells": "—",
                          "paper": "reported", "best round": "—", "scale": "—", "evidence": reason, "note": "",
                          "section": section, "p": float("nan"), "fixed cells": "—", "random cells": "—",
                          "spread": "—", "new cell": "—", "failures left out": ""}], columns=COLUMNS)


def ledger() -> pd.DataFrame:
    """Every chapter's ``ledger_rows()``, in the book's chapter order, with the robustness of each
    claim where its chapter has variants (:func:`robustness_column`)."""
    from .ledger_cache import cached

    return cached("ledger", _whole_ledger)


def _whole_ledger() -> pd.DataFrame:
    from . import CHAPTERS, chapter_module
    from .ledger_cache import chapter_rows

    modules = [chapter_module(name) for name in CHAPTERS]
    frames = [robustness_column(module, chapter_rows(module)) for module in modules if hasattr(module, "ledger_rows")]
    return (with_holm(pd.concat(frames, ignore_index=True)) if frames
            else pd.DataFrame(columns=COLUMNS + ["robustness", HOLM_COLUMN]))
# --- the Claims page as a chapter of the book (it runs nothing) -----------------------------------

@dataclass(frozen=True)
class Params:
    """The Claims page reads committed records only; ``profile`` just names the build."""

    profile: str = "smoke"


def experiments(params: Params) -> list:
    return []
