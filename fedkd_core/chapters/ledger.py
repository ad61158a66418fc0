"""The claims ledger: every chapter's claims, counted alike on the paper's tables and on the
committed records (paper or reduced profile), one row per claim.

A chapter joins the ledger by defining ``ledger_rows() -> pd.DataFrame`` (columns :data:`COLUMNS`),
built with :func:`claim_rows` from two claim-count frames (claim, holds in, of cells) that the
chapter's own ``claims`` function computes on the paper's numbers and on ours, and with
:func:`untestable` for claims whose data are not offline. Nothing here runs an experiment: the
ledger reads records, so it says "no committed records" until a sweep has committed them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from html import escape

import pandas as pd

from ..report import verdict_word

COLUMNS = ["chapter", "claim", "paper's tables", "ours", "evidence", "verdict", "section"]
NO_RECORDS = "no committed records"
UNTESTABLE = "not testable offline"


def counts_text(holds, cells) -> str:
    return "—" if pd.isna(cells) or not cells else f"{int(holds)} of {int(cells)} cells"


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


def claim_rows(chapter: str, section: str, paper: pd.DataFrame, ours: pd.DataFrame | None, evidence_text: str) -> pd.DataFrame:
    """One row per claim of ``paper`` or ``ours`` (both: claim, holds in, of cells). The verdict
    is computed from ours; a claim we have no cells for reads :data:`NO_RECORDS`."""
    names = {"holds in": "holds", "of cells": "cells"}
    theirs = paper.rename(columns={"holds in": "paper_holds", "of cells": "paper_cells"})
    mine = (ours if ours is not None else pd.DataFrame(columns=["claim", "holds in", "of cells"])).rename(columns=names)
    merged = theirs.merge(mine, on="claim", how="outer", sort=False)
    rows = []
    for _, row in merged.iterrows():
        tested = not pd.isna(row.cells) and row.cells > 0
        rows.append({"chapter": chapter, "claim": row.claim, "paper's tables": counts_text(row.paper_holds, row.paper_cells),
                     "ours": counts_text(row.holds, row.cells), "evidence": evidence_text if tested else NO_RECORDS,
                     "verdict": verdict_word(int(row.holds), int(row.cells)) if tested else NO_RECORDS,
                     "section": section})
    return pd.DataFrame(rows, columns=COLUMNS)


def untestable(chapter: str, claim: str, reason: str, section: str) -> pd.DataFrame:
    return pd.DataFrame([{"chapter": chapter, "claim": claim, "paper's tables": "reported", "ours": "—",
                          "evidence": reason, "verdict": UNTESTABLE, "section": section}], columns=COLUMNS)


def ledger() -> pd.DataFrame:
    """Every chapter's ``ledger_rows()``, in the book's chapter order, with the robustness of each
    claim where its chapter has variants (:func:`robustness_column`)."""
    from . import CHAPTERS, chapter_module

    modules = [chapter_module(name) for name in CHAPTERS]
    frames = [robustness_column(module, module.ledger_rows()) for module in modules if hasattr(module, "ledger_rows")]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS + ["robustness"])


def robustness_column(module, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with a "robustness" column for claims the chapter's robustness grid covers, "—"
    for the others: "holds in k of V variants that bear on it (C of N variants run)", naming the
    variants whose diverged runs left the claim without a cell (:func:`unjudged_text`). Only complete
    variants count; of those, a variant bears on a claim unless it leaves every method the claim
    compares as the chapter's reading has them (Selective-FD's threshold for "KnFu > FedMD")."""
    from .robustness import claim_table

    if not hasattr(module, "ROBUSTNESS"):
        return rows.assign(robustness="—")
    table = claim_table(module, module.ROBUSTNESS_BASE)
    return rows.assign(robustness=robustness_texts(table, planned=len(module.ROBUSTNESS)).reindex(rows.claim, fill_value="—").to_numpy())


def robustness_texts(table: pd.DataFrame, planned: int) -> pd.Series:
    """Per claim of a :func:`robustness.claim_table`, the Claims page's robustness text."""
    from .robustness import complete_rows, variant_counts

    counts = variant_counts(table)
    run = complete_rows(table).variant.nunique()
    return pd.Series({row.claim: f"holds in {row['variants holding']} of {row['variants']} variants that bear on it "
                                 f"({run} of {planned} variants run{unjudged_text(table, row.claim)})"
                      for _, row in counts.iterrows()}, dtype=object)


def unjudged_text(table: pd.DataFrame, claim: str) -> str:
    """"; not judged under V, where n runs diverged" for the complete variants of a
    :func:`robustness.claim_table` whose diverged runs left ``claim`` without a cell, else ""."""
    from .robustness import complete_rows

    complete = complete_rows(table)
    if not len(complete):
        return ""
    unjudged = complete[(complete.claim == claim) & (complete["of cells"] == 0)]
    return "".join(f"; not judged under {row.variant}, where {row.diverged} runs diverged" for _, row in unjudged.iterrows())


# --- the Claims page as a chapter of the book (it runs nothing) -----------------------------------

@dataclass(frozen=True)
class Params:
    """The Claims page reads committed records only; ``profile`` just names the build."""

    profile: str = "smoke"


def experiments(params: Params) -> list:
    return []


def verdict_counts(table: pd.DataFrame) -> pd.DataFrame:
    """How many claims of each chapter got each verdict."""
    return table.pivot_table(index="chapter", columns="verdict", values="claim", aggfunc="count", fill_value=0,
                             sort=False)


def linked_table(table: pd.DataFrame) -> str:
    """The ledger as an HTML table whose claims link to the chapter sections that compute them
    (all text escaped: claims contain characters such as '|' and '>')."""
    linked = table.assign(claim=[f'<a href="./{escape(section)}">{escape(claim)}</a>'
                                 for claim, section in zip(table.claim, table.section)])
    for column in linked.columns.drop(["claim", "section"]):
        linked[column] = linked[column].map(lambda value: escape(str(value)))
    return linked.drop(columns="section").to_html(index=False, escape=False, classes="ledger")
