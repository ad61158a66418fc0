"""The ledger as the reader sees it: the Claims page's table, a chapter's verdict box, the verdict
counts, and the cell-by-cell heatmaps. Part of :mod:`fedkd_core.chapters.ledger`, which re-exports
every name here."""

from __future__ import annotations

from html import escape

import pandas as pd

from .. import verdicts as V
from ..verdicts import NO_RECORDS, UNTESTABLE
from .ledger_words import (HOLM_COLUMN, HOLM_MARK, differing_best_verdict, holm_count, holm_marked,
                           not_kept_by_holm, small_flag, with_holm)

# A cell's outcome where the convergence gate leaves it out of the verdict (its runs still rising).
LEFT_OUT = "left out"


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
            + (f"<br><small>{escape(holm_note.removeprefix(HOLM_MARK).strip())}</small>" if weaker else "")
            + (f"<br><small>{escape(DIVERGED_LEFT_OUT + left)}</small>" if (left := failures_left_out(row)) else ""))


DIVERGED_LEFT_OUT = "diverged seeds left out: "


def failures_left_out(row) -> str:
    """The verdict with the diverged runs' seeds left out, where a diverged run touches the claim
    (the headline counts each as its method's failure), else ""."""
    text = row.get("failures left out", "")
    return str(text) if isinstance(text, str) and text else ""


def readings_text(row) -> str:
    """The two readings and the spread under a claim's effect: "random cells +0.34 [-0.05, +0.74];
    fixed cells +0.34 [+0.18, +0.51]; between cells τ = 0.52; a new cell [-0.9, +1.5]" (parts
    without a number left out)."""
    parts = [("random cells", row.get("random cells")), ("fixed cells", row.get("fixed cells")),
             ("between cells", row.get("spread")), ("a new cell", row.get("new cell"))]
    return "; ".join(f"{label} {value}" for label, value in parts if isinstance(value, str) and value not in ("", "—"))


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
        details = [f"scale: {row.scale}", f"records: {row.evidence}", best_round_line(row),
                   f"robustness: {robustness}" if robustness != "—" else "",
                   family if family and not family.startswith(HOLM_MARK) else ""]
        small = "".join(f"<br><small>{escape(str(d))}</small>" for d in details if d and d != "scale: —") + note_html(row.note)
        claim = f'<a href="./{escape(page)}{claim_anchor(row.section)}">{escape(row.claim)}</a>{small}'
        readings = readings_text(row)
        effect = escape(row.effect) + (f"<br><small>{escape(readings)}</small>" if readings else "")
        cells = [escape(row.chapter), claim, verdict_html(row), effect, escape(row.cells), escape(row.paper)]
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


def best_round_line(row) -> str:
    """"best round: diagnostic, no verdict: +2.9 [+2.2, +3.7]" ("" without one)."""
    text = str(row.get("best round", "—"))
    return f"best round: {text}" if text not in ("", "—") else ""


def differing_best_round(row) -> str:
    """Kept for old rows (:func:`~.ledger_words.differing_best_verdict`): the best round has no word now."""
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

    from .ledger_cache import chapter_rows

    rows = with_holm(chapter_rows(module))
    display(HTML(box_html(rows)))
    family = holm_count(rows)
    display(Markdown(f"Verdicts read {final_reading(module)}, as the paper's tables do. Effects are in accuracy "
                     "points with 95% intervals that count the spread between cells (three cells or more; with "
                     "fewer, the word says it covers only these cells); *cells* counts the settings where the claim "
                     "holds or is reversed on its own, Holm-corrected across the claim's cells; a claim links to the "
                     "table it rests on. "
                     + (f"Each interval is 95% on its own; judged together, {family} (the chance that any of them "
                        "calls an effect that is really zero non-zero at most 5%)"
                        + (f"; {HOLM_MARK} marks the others. " if holm_marked(rows) else ". ") if family else "")
                     + "[How verdicts are computed](claims.html#how-verdicts-are-computed)."))
    return rows


def cell_verdicts(module, records, value: str = "final", enforce_gate: bool = True) -> pd.DataFrame:
    """Per claim and cell of ``records``: seeds, the mean effect in points, its 95% t-interval and
    the cell's word (holds / reversed / inconclusive, Holm-corrected across the claim's cells that
    count, as the verdict reads them), with a readable cell label; with ``enforce_gate``, a cell the
    convergence gate leaves out of the claim's verdict is :data:`LEFT_OUT` (as
    :func:`judge_chapter` judges it), its effect still shown."""
    keys = list(module.EFFECT_CELL_KEYS)
    observed = module.observations(records)
    effects = module.effects_of(observed, value)
    gates = V.claim_gates(module.effects_of, observed, keys, module.METHOD_COLUMN) if enforce_gate else {}
    frames = []
    for claim in V.claims_in(effects, keys):
        cells = V.cell_table(effects, keys, claim, correct=False)
        if len(cells):
            gate = gates.get(claim)
            passed = V.passes_gate(gate, cells, keys) if gate is not None else [True] * len(cells)
            counted = V.corrected_outcomes(cells[passed])
            cells.loc[counted.index, "outcome"] = counted["outcome"]
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
