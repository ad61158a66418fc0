"""The ledger as the reader sees it: the Claims page's table, a chapter's verdict box, the verdict
counts, and the cell-by-cell heatmaps. Part of :mod:`fedkd_core.chapters.ledger`, which re-exports
every name here."""

from __future__ import annotations

import re
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


def verdict_box(module, headline: str = "", caveat: str | None = None) -> pd.DataFrame:
    """Display a chapter's rows of the ledger (``module.ledger_rows()``: the committed records,
    whatever profile the page runs) as the box that opens the chapter, and return them: ``headline``
    (HTML, the chapter's finding in a sentence) above it, one row per claim (:func:`box_rows_html`),
    the chapter's caveat under it (``caveat``, else ``module.read_at_scale()``), and what the verdicts
    rest on folded."""
    from IPython.display import HTML, display

    from .ledger_cache import chapter_rows

    rows = with_holm(chapter_rows(module))
    display(HTML(box_rows_html(rows, module, headline, caveat)))
    return rows


def box_rows_html(rows: pd.DataFrame, module=None, headline: str = "", caveat: str | None = None) -> str:
    """A chapter's verdict box (:func:`verdict_rows_html`): each claim linked to the table it rests
    on; the chapter's caveat under it; how the verdicts read a run, the Holm family, the scale and
    the records in one fold; a link to what the words mean."""
    if caveat is None:
        caveat = module.read_at_scale() if module is not None and hasattr(module, "read_at_scale") else ""
    table = verdict_rows_html(rows, lambda row: claim_anchor(row.section), table_class="verdict-box", grouped=True)
    family = holm_count(rows)
    evidence = [str(e) for e in rows.evidence if e not in ("—", NO_RECORDS)]
    scales = list(dict.fromkeys(str(s) for s in rows.scale if s != "—"))
    basis = ([f"Verdicts read {final_reading(module)}, as the paper's tables do."] if module is not None else []) + [
        "Effects are in accuracy points, positive where the claim is true, with 95% intervals that count the spread "
        "between cells (three cells or more; with fewer the word says it covers only these cells)."]
    if family:
        basis.append(f"Each interval is 95% on its own; judged together, {family}"
                     + (f" ({HOLM_MARK} marks the others)." if holm_marked(rows) else "."))
    basis += [f"Scale: {s}." for s in scales] + [f"Records: {e}." for e in dict.fromkeys(evidence)]
    fold = ('<details class="fedkd-fine fedkd-basis"><summary>What these verdicts rest on</summary><ul>'
            + "".join(f"<li>{escape(line)}</li>" for line in basis) + "</ul></details>")
    return ((f'<p class="fedkd-headline">{headline}</p>' if headline else "") + table
            + (f'<p class="fedkd-legend fedkd-caveat"><b>Read at its scale.</b> {escape(caveat)}</p>' if caveat else "")
            + f'<p class="fedkd-legend"><a href="{escape(WORDS_SECTION)}">What the words mean</a>. {fold}</p>')


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


# --- one row per claim, its fine print folded (issue 61) ------------------------------------------
#
# Every page that shows verdicts (the landing page, the Claims page, each chapter's box) shows a
# claim as one row of at most about three lines at 1280 px: the claim in one plain sentence, our
# word and effect, the paper's; a caveat that changes how the verdict reads stays visible; the rest
# (scale, records, cells, both readings, the best round, Holm, what more seeds would buy) folds
# into one <details> per claim. The words are explained once, on the Claims page.

WORDS_SECTION = "claims.html#what-the-words-mean"
NUMBER = re.compile(r"(?<![\w.])([+\-−]?)(\d+\.\d+)")


def one_precision(text) -> str:
    """An effect text at the book's one precision (as :meth:`fedkd_core.verdict_cells.Interval.text`
    prints it, without its extra decimals for a bound near zero): one decimal, two where every number
    is under a point ("+0.3383 [+0.0001, +0.6765]" -> "+0.34 [+0.000, +0.68]", "+0.40 [-0.20, +1.10]"
    -> "+0.4 [-0.2, +1.1]"), a bound that is not zero with the decimals that show it (up to 3), never
    "-0.0"; other text as it is."""
    text = str(text)
    numbers = [float(m.group(2)) for m in NUMBER.finditer(text)]
    if not numbers:
        return text
    digits = 2 if all(abs(round(n, 2)) < 1 for n in numbers) else 1

    def number(m) -> str:  # a bound that is not zero keeps the decimals that show it (up to 3): -0.03, not -0.0
        value = float(m.group(2))
        places = digits
        while value and round(value, places) == 0 and places < 3:
            places += 1
        shown = f"{value:.{places}f}"
        return (m.group(1) if float(shown) or m.group(1) == "+" else "") + shown

    return NUMBER.sub(number, text)


# --- method names as the papers write them ------------------------------------------------------
#
# The convergence gate and the divergence notes name methods by their keys ("pfedsd in 1 cell still
# rising", "lg_fedavg diverged"); a reader sees the paper's names ("pFedSD", "LG-FedAvg"). The names
# are each chapter's own map (fedckd.METHOD_NAMES, knfu.METHODS, fedua.METHODS, fedgmkd.METHODS'
# labels), gathered, never retyped.

_METHOD_NAMES: dict[str, str] = {}
# a key where it names a method in a note: "KEY in 3 cells", "KEY still rising", "KEY diverged"
_METHOD_CONTEXT = r"(?=(?: in \d+ cells?\b| still rising\b| diverged\b| not evaluated\b))"


def method_names() -> dict[str, str]:
    """{method key: the name the papers write} over every chapter's own map."""
    if not _METHOD_NAMES:
        from . import CHAPTERS, chapter_module

        for chapter in CHAPTERS:
            module = chapter_module(chapter)
            for mapping in (getattr(module, "METHOD_NAMES", None), getattr(module, "METHODS", None)):
                if isinstance(mapping, dict):
                    for key, value in mapping.items():
                        name = value if isinstance(value, str) else getattr(value, "label", None)
                        if isinstance(name, str):
                            _METHOD_NAMES.setdefault(key, name)
    return _METHOD_NAMES


def named_methods(text) -> str:
    """``text`` with every method key that a note names ("pfedsd in 1 cell still rising",
    "selective_fd in 2 cells", "lg_fedavg diverged") written as the paper's name ("pFedSD in 1 cell
    still rising"); other words, and keys in other contexts (a file path), as they are."""
    text = str(text)
    names = method_names()
    if not names:
        return text
    keys = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    return re.sub(rf"(?<![\w/.])({keys}){_METHOD_CONTEXT}", lambda m: names[m.group(1)], text)


# The claims as a student reads them: "A > B" as a sentence; the qualifier in brackets stays.
PLAIN_PATTERNS = [
    (re.compile(r"^(.+?) best of the methods run$"), r"\1 beats every other method run"),
    (re.compile(r"^(.+?) best of the methods$"), r"\1 beats every other method"),
    (re.compile(r"^(.+?) ≥ (.+)$"), r"\1 does at least as well as \2"),
    (re.compile(r"^(.+?) > (.+?) > (.+)$"), r"\1 beats \2, which beats \3"),
    (re.compile(r"^(.+?) > (.+)$"), r"\1 beats \2"),
]


def plain_claim(claim: str) -> str:
    """A claim of the ledger as one plain sentence ("KnFu > FedMD (MNIST, schedules tuned)" ->
    "KnFu beats FedMD (MNIST, schedules tuned)"); a claim already in words stays as it is."""
    claim = str(claim)
    head, bracket = (claim.split(" (", 1) + [""])[:2]
    for pattern, replacement in PLAIN_PATTERNS:
        if pattern.match(head):
            head = pattern.sub(replacement, head)
            break
    return head + (f" ({bracket}" if bracket else "")


def _has(row, column: str) -> str:
    value = row.get(column, "")
    return str(value) if isinstance(value, str) and value not in ("", "—") else ""


def fine_print(row, robustness: bool = True) -> list[str]:
    """The fine print of a claim, one short line each: cells, the two readings of the effect and a
    new cell's interval, how it compares with the paper's, Holm, the best round (a diagnostic), the
    diverged runs left out, the scale, the records, the robustness grid and the note."""
    family = _has(row, HOLM_COLUMN)
    lines = [f"cells: {_has(row, 'cells')}" if _has(row, "cells") else "",
             "; ".join(one_precision(part) for part in readings_text(row).split("; ")).replace(
                 "between cells", "spread between cells"),
             f"beside the paper: {_has(row, 'versus paper')}" if _has(row, "versus paper") else "",
             f"the paper's tables: {paper_parts(row.get('paper', ''))[1]}" if paper_parts(row.get("paper", ""))[1] else "",
             f"judged with the chapter's other claims (Holm): {family.removeprefix(HOLM_MARK).strip()}" if family else "",
             f"best round (a diagnostic, no word): {one_precision(_has(row, 'best round').removeprefix('diagnostic, no verdict: '))}"
             if _has(row, "best round") else "",
             f"{DIVERGED_LEFT_OUT}{failures_left_out(row)}" if failures_left_out(row) else "",
             f"scale: {_has(row, 'scale')}" if _has(row, "scale") else "",
             f"records: {_has(row, 'evidence')}" if _has(row, "evidence") else "",
             f"robustness: {_has(row, 'robustness')}" if robustness and _has(row, "robustness") else "",
             str(row.get("note", "") or "") if isinstance(row.get("note", ""), str) else ""]
    return [named_methods(line) for line in lines if line]


def verdict_cell(row) -> str:
    """Our word in bold (with "(small)" and ‡ where they apply) and the effect at one precision."""
    holm = f" {HOLM_MARK}" if not_kept_by_holm(row.get(HOLM_COLUMN, "")) else ""
    effect = one_precision(row.effect) if str(row.effect) not in ("", "—") else ""
    return (f'<b class="fedkd-verdict">{escape(str(row.verdict))}</b>{escape(small_flag(row.verdict, row.get("note", "")))}'
            f"{holm}" + (f' <span class="fedkd-effect">{escape(effect)}</span>' if effect else ""))


def paper_parts(text) -> tuple[str, str]:
    """The paper's verdict text split into what a row shows ("holds, +0.74") and its bracketed
    detail ("Holm-corrected: 3 hold, ...; no spread printed"), which the fine print takes."""
    text = str(text)
    shown, bracket, rest = text.partition(" (")
    return (shown, rest.removesuffix(")")) if bracket else (text, "")


def paper_cell(row) -> str:
    """The paper's own word on its tables, with its effect at one precision."""
    shown, detail = paper_parts(row.paper)
    return escape(one_precision(shown)) + (" <small>(no spread printed)</small>" if "no spread" in detail else "")


def claim_cell(row, href: str, caveat: str = "", robustness: bool = True, words_link: str = WORDS_SECTION) -> str:
    """The plain sentence linked to where the claim is computed, a visible caveat where one changes
    how the verdict reads (the diverged runs, the chapter's scale), and the fine print folded."""
    lines = fine_print(row, robustness)
    left = failures_left_out(row)
    visible = named_methods("; ".join(part for part in (
        f"with the diverged runs left out: {one_precision(left)}" if left else "", caveat) if part))
    details = ("" if not lines else '<details class="fedkd-fine"><summary> ▸ details</summary><ul>'
               + "".join(f"<li>{escape(line)}</li>" for line in lines)
               + f'<li><a href="{escape(words_link)}">what the words mean</a></li>'
               + "</ul></details>")
    return (f'<a href="{escape(href)}">{escape(plain_claim(row.claim))}</a>'
            + (f'<br><small class="fedkd-caveat">{escape(visible)}</small>' if visible else "") + details)


QUALIFIER = re.compile(r"^(.*?) \(([^()]*(?:\([^()]*\))?[^()]*)\)$")


def qualifier_groups(claims) -> list[str]:
    """Per claim, the bracketed qualifier that ends it where two claims or more share it and it names
    a dataset and how it was run ("MNIST, schedules tuned"), else "": a box groups such claims under
    one heading row."""
    found = [QUALIFIER.match(str(c)) for c in claims]
    names = [m.group(2) if m else "" for m in found]
    # a dataset and how it was run ("MNIST, schedules tuned"), not a claim's own words ("those run")
    return [n if "," in n and names.count(n) > 1 else "" for n in names]


def verdict_rows_html(rows: pd.DataFrame, href, claim_header: str = "claim", verdict_header: str = "verdict",
                      caveats: dict[str, str] | None = None, paper_names: bool = False, robustness: bool = True,
                      words_link: str = WORDS_SECTION, table_class: str = "", grouped: bool = False) -> str:
    """Rows of the ledger as the book's verdict table: per claim its plain sentence (linked by
    ``href(row)``), our word and effect, the paper's; ``caveats``: per chapter, a caveat shown under
    each of its claims; ``paper_names``: a first column naming the paper (the Claims page);
    ``grouped``: claims that end in the same bracketed qualifier sit under one heading row naming
    it, without it (a chapter's box)."""
    from ..tables import TABLE_CLASS

    body = []
    groups = qualifier_groups(rows.claim) if grouped else [""] * len(rows)
    current = None
    width = 4 if paper_names else 3
    for group, (_, row) in zip(groups, rows.iterrows()):
        if grouped and group != current:
            current = group
            if group:
                body.append(f'<tr class="fedkd-group"><td colspan="{width}">{escape(group)}</td></tr>')
        if group:
            row = row.copy()
            row["claim"] = QUALIFIER.match(str(row.claim)).group(1)
        claim = claim_cell(row, href(row), (caveats or {}).get(row.chapter, ""), robustness, words_link)
        cells = ([escape(str(row.chapter))] if paper_names else []) + [claim, verdict_cell(row), paper_cell(row)]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    headers = (["paper"] if paper_names else []) + [claim_header, verdict_header, "the paper's tables"]
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    classes = f"{TABLE_CLASS} fedkd-verdicts" + (" with-paper-name" if paper_names else "") + (f" {table_class}" if table_class else "")
    return f'<table class="{classes}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def claims_page_link(row) -> str:
    """Where a claim of the Claims page links: the table in its chapter that it rests on."""
    page = str(row.section).split("#", 1)[0]
    return f"./{page}{claim_anchor(row.section)}"


def reruns_left(reruns: pd.DataFrame) -> bool:
    """Whether any rerun of :func:`~.ledger_evidence.reruns_table` still has runs to make (a table
    whose every row reads "none: complete" has nothing to tell a reader)."""
    column = "one core's time left"
    return bool(len(reruns)) and not reruns[column].astype(str).str.startswith("none").all() if column in reruns else bool(len(reruns))


PAPER_RUN_CHOICES = (2, 3, 5)
CHAPTER_NAMES = {"knfu": "KnFu", "fedckd": "FedCKD", "fedua": "FedUA", "fedgmkd": "FedGMKD"}


def paper_runs_table(choices=PAPER_RUN_CHOICES) -> pd.DataFrame:
    """Per claim of each chapter whose paper prints a spread: the paper's own verdict (word and
    effect) over every cell of its tables, assuming each of ``choices`` runs behind each printed
    mean ± std (:func:`fedkd_core.verdicts.paper_verdicts`, Welch); the chapter's own assumption
    (``PAPER_RUNS``) is marked "*". Cached with the ledger."""
    from .ledger_cache import cached

    return cached("paper_runs", lambda: _paper_runs_table(tuple(choices)))


def _paper_runs_table(choices) -> pd.DataFrame:
    from . import CHAPTERS, chapter_module

    rows = []
    for name in CHAPTERS:
        module = chapter_module(name)
        if not all(hasattr(module, a) for a in ("paper_observations", "effects_of", "PAPER_RUNS", "EFFECT_CELL_KEYS")):
            continue
        paper = module.paper_observations()
        if not paper["std"].notna().any():
            continue  # no spread printed: the paper's side counts signs, whatever the runs
        judged = {runs: V.paper_verdicts(paper, module.effects_of, list(module.EFFECT_CELL_KEYS), runs)
                  for runs in choices}
        for claim in dict.fromkeys(c for verdicts in judged.values() for c in verdicts):
            row = {"paper": getattr(module, "CHAPTER", CHAPTER_NAMES.get(name, name)), "claim": plain_claim(claim)}
            for runs in choices:
                verdict = judged[runs].get(claim)
                row[f"{runs} runs"] = (f"{verdict.word}, {one_precision(verdict.effect_text)}"
                                       + (" *" if runs == module.PAPER_RUNS else "")) if verdict else "—"
            row["assumed here"] = f"{module.PAPER_RUNS} runs"
            rows.append(row)
    return pd.DataFrame(rows).fillna("")
