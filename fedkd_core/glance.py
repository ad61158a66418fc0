"""The landing page's results at a glance: the claims ledger, summarised.

    python -m fedkd_core.glance book/_generated/glance.md

One row per claim of the four papers, with the same names and verdicts as the Claims page (both
come from :func:`fedkd_core.chapters.ledger.ledger`): our verdict with its effect and 95%
interval, the paper's own verdict on its tables, and the scale our verdict rests on. Nothing is
typed in: a chapter without committed records says so.
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

import pandas as pd

COLUMNS = ["paper", "claim", "our verdict", "effect (points) [95% interval]", "the paper's tables", "scale"]
SCALE_NOTE = "**Scales.** "


def glance_table(ledger: pd.DataFrame | None = None) -> pd.DataFrame:
    """The ledger (:func:`fedkd_core.chapters.ledger.ledger`, read when not given) as the landing
    page's table: each claim linked to the chapter section that computes it (raw HTML: MyST would
    treat a Markdown link to ``chapters/x.html#anchor`` as a cross-reference it cannot resolve)."""
    from .chapters.ledger import HOLM_COLUMN, ledger as read_ledger, small_flag

    table = read_ledger() if ledger is None else ledger
    labels = scale_labels(table)
    rows = [{"paper": row.chapter,
             "claim": _escape(f'<a href="chapters/{escape(row.section)}">{escape(row.claim)}</a>'),
             "our verdict": f"**{row.verdict}**" + small_flag(row.verdict, row.get("note", ""))
                            + holm_flag(row.get(HOLM_COLUMN, ""))
                            + (f" ({row['versus paper']})" if row.get("versus paper") else "")
                            + gated_flag(row.get("note", "")),
             "effect (points) [95% interval]": row.effect + one_cell_flag(row.get("cells", "")),
             "the paper's tables": _escape(row.paper), "scale": label}
            for (_, row), label in zip(table.iterrows(), labels)]
    return pd.DataFrame(rows, columns=COLUMNS)


def holm_flag(family_wise: str) -> str:
    """" ‡" where Holm's correction over the chapter's claims does not keep a decided verdict
    (:func:`fedkd_core.chapters.ledger.with_holm`), else ""."""
    from .chapters.ledger import HOLM_MARK, not_kept_by_holm

    return f" {HOLM_MARK}" if not_kept_by_holm(family_wise) else ""


def gated_flag(note: str) -> str:
    """" ⚑ with the still-rising cells left out: untested at this scale" where the verdict counts
    cells still rising at the paper's own round budget and the convergence gate would read otherwise
    (:func:`fedkd_core.chapters.ledger.gated_verdict`), else ""."""
    from .chapters.ledger import GATED_PREFIX, gated_verdict

    word = gated_verdict(note)
    return f" ⚑ {GATED_PREFIX}{word}" if word else ""


def one_cell_flag(cells: str) -> str:
    """" (1 cell)" where a verdict rests on a single cell of the paper's tables (the ledger's cells
    text ends "of 1", or its interval reads one cell, the others having a single seed:
    :attr:`fedkd_core.verdicts.Verdict.cells_text`): its interval speaks for that setting alone."""
    from .verdicts import INTERVAL_READS

    text = str(cells)
    return " (1 cell)" if text.endswith(" of 1") or text.endswith(INTERVAL_READS.format(1)) else ""


def _escape(text: str) -> str:
    """Markdown-table-safe text: a '|' would split the cell."""
    return str(text).replace("|", "\\|")


def scale_labels(ledger: pd.DataFrame) -> list[str]:
    """Each row's short scale ("paper", "reduced"): the ledger's scale text up to its colon, numbered
    ("paper (2)") where a paper's verdicts rest on several record sets (KnFu: tuned MNIST, FedMD as
    its authors run it, CIFAR-10 as coded), so a reader can tell which line of
    :func:`scales_text` a verdict rests on."""
    numbers = _scale_numbers(ledger)
    return [str(row.scale).split(":")[0] + numbers.get((row.chapter, row.scale), "") for row in ledger.itertuples()]


def _scale_numbers(ledger: pd.DataFrame) -> dict[tuple, str]:
    """(chapter, full scale) -> " (2)", its number among the chapter's distinct scales, for the
    chapters with more than one."""
    numbers = {}
    for chapter, rows in ledger[ledger.scale != "—"].groupby("chapter", sort=False):
        scales = list(dict.fromkeys(rows.scale))
        if len(scales) > 1:
            numbers.update({(chapter, scale): f" ({i})" for i, scale in enumerate(scales, start=1)})
    return numbers


def scales_text(ledger: pd.DataFrame) -> str:
    """What each paper's "scale" stands for (the ledger's full scale text), once per distinct scale
    of a paper (KnFu's MNIST and CIFAR-10 rows rest on different runs, numbered as in
    :func:`scale_labels`), as a Markdown list."""
    numbers = _scale_numbers(ledger)
    scales = ledger[ledger.scale != "—"].drop_duplicates(["chapter", "scale"])
    return SCALE_NOTE + "What the scale column stands for, one line per distinct scale of a paper:\n\n" + "".join(
        f"- **{row.chapter}**{numbers.get((row.chapter, row.scale), '')}, {_escape(row.scale)}\n"
        for row in scales.itertuples())


def markdown(table: pd.DataFrame) -> str:
    header = "| " + " | ".join(table.columns) + " |\n|" + "---|" * len(table.columns) + "\n"
    return header + "".join("| " + " | ".join(str(v) for v in row) + " |\n" for row in table.itertuples(index=False))


def count_line(verdicts: pd.Series) -> str:
    """"3 claims: 1 holds, 2 inconclusive": how many of a paper's claims got each verdict, in the
    same order for every paper (:data:`fedkd_core.verdicts.WORDS`), "does not hold" in the plural
    where it counts several."""
    from .chapters.ledger import claims_text
    from .verdicts import DOES_NOT_HOLD, WORDS

    counts = verdicts.fillna("no verdict").value_counts()
    order = [w for w in WORDS if w in counts] + sorted(w for w in counts.index if w not in WORDS)
    return f"{claims_text(len(verdicts))}: " + ", ".join(
        f"{counts[word]} {'do not hold' if word == DOES_NOT_HOLD and counts[word] > 1 else word}" for word in order)


READ_AT_SCALE = "**Read these verdicts at their scale.** "


def scale_warnings() -> dict[str, str]:
    """Per paper (the ledger's chapter name), what a reader must know before reading its verdicts
    at the scale they rest on, from the chapters that say (a chapter module's ``CHAPTER`` and
    ``read_at_scale()``, which its own verdict box also prints; FedUA's reduced server distils for
    one epoch where the paper's distils for 20)."""
    from .chapters import CHAPTERS, chapter_module

    modules = [chapter_module(name) for name in CHAPTERS]
    return {module.CHAPTER: text for module in modules if hasattr(module, "read_at_scale")
            and (text := module.read_at_scale())}


def by_paper(table: pd.DataFrame, ledger: pd.DataFrame, warnings: dict[str, str] | None = None) -> str:
    """:func:`glance_table` as one table per paper, in the book's order, each under a line that
    names the paper and counts its verdicts: the paper column, the same in every row of a paper, is
    dropped, which gives the claims room to wrap less. A paper with a warning in ``warnings``
    (:func:`scale_warnings`) has it under its table."""
    from .chapters.ledger import HOLM_COLUMN, HOLM_MARK, holm_count, holm_marked

    warnings = warnings or {}
    blocks = []
    for paper in dict.fromkeys(table.paper):
        rows = table[table.paper == paper].drop(columns="paper")
        chapter = ledger[ledger.chapter == paper]
        family = holm_count(chapter) if HOLM_COLUMN in chapter else ""
        marked = f" ({HOLM_MARK} marks the others)" if family and holm_marked(chapter) else ""
        blocks.append(f"**{paper}**: {count_line(chapter.verdict)}" + (f"; {family}{marked}" if family else "")
                      + f".\n\n{markdown(rows)}"
                      + (f"\n{READ_AT_SCALE}{warnings[paper]}\n" if paper in warnings else ""))
    return "\n".join(blocks)


# --- the landing page's first screen (issue 61) ----------------------------------------------------

# Each paper's headline claims (the ledger's claim names, or their start): the landing page's first
# table shows these, with our word and effect; every claim follows, paper by paper.
HEADLINES = {"KnFu": ("KnFu > FedMD (MNIST",),
             "FedCKD": ("FedCKD best of the methods run",),
             "FedUA": ("FedUA > FedDF > FedAvg",),
             "FedGMKD": ("FedGMKD has the best local accuracy",)}
WORDS_LINK = "chapters/claims.html#what-the-words-mean"


def headline_rows(ledger: pd.DataFrame) -> pd.DataFrame:
    """The ledger's rows of :data:`HEADLINES`, in the book's order (a paper none of whose headline
    names is in the ledger shows its first claim)."""
    picked = []
    for chapter, rows in ledger.groupby("chapter", sort=False):
        names = HEADLINES.get(chapter, ())
        chosen = [i for start in names for i in rows.index[rows.claim.astype(str).str.startswith(start)][:1]]
        picked += list(dict.fromkeys(chosen)) or list(rows.index[:1])
    return ledger.loc[picked]


def caveats(short: bool = True) -> dict[str, str]:
    """Per paper, the caveat that changes how its verdicts read, shown wherever they are: FedCKD's
    divergences with the clipped deviation's finding (:func:`fedkd_core.chapters.fedckd.clipped_caveat`); FedUA's
    server budget, with what the server-budget ladder found at the paper's 20 epochs
    (:func:`fedkd_core.chapters.fedua.read_at_scale`, which ends with
    :func:`fedkd_core.chapters.fedua.ladder.ladder_finding`). ``short``: one line, for a verdict row."""
    found = {}
    from .chapters.fedckd import clipped_caveat

    fedckd = clipped_caveat(short)  # the column's divergences and the clipped deviation
    if fedckd:
        found["FedCKD"] = fedckd
    try:
        from .chapters.fedua import REDUCED_PROFILE, ladder
        from .chapters.fedua.profiles import PAPER_PROFILE
    except ImportError:  # pragma: no cover - a package without the chapter
        return found
    if REDUCED_PROFILE.server_epochs >= PAPER_PROFILE.server_epochs:
        return found
    runs = ladder.ladder_runs()
    ran = runs.accuracy.notna().any() if len(runs) else False
    budget = (f"the server distils {REDUCED_PROFILE.server_epochs} epoch per round here, "
              f"{PAPER_PROFILE.server_epochs} in the paper")
    if short:
        found["FedUA"] = budget + ("; at 20 the paper's gain still does not appear" if ran else "")
    else:
        from .chapters.fedua import read_at_scale

        found["FedUA"] = read_at_scale()  # ends with the ladder's finding (fedua.claims.ladder_text)
    return found


def knfu_headline() -> str:
    """KnFu's tuning finding in a sentence (:func:`fedkd_core.chapters.knfu.tuning_finding_text`),
    "" without its records."""
    from .chapters import knfu

    return knfu.tuning_finding_text(knfu.tuning_finding(), short=True)


def first_screen(ledger: pd.DataFrame, headline: str = "", notes: dict[str, str] | None = None) -> str:
    """The landing page's opening: KnFu's headline finding, then each paper's headline claims with
    our word and effect and the paper's (one row each, the fine print folded)."""
    from .chapters.ledger import verdict_rows_html, with_holm

    rows = headline_rows(pd.concat([with_holm(r) for _, r in ledger.groupby("chapter", sort=False)]))
    table = verdict_rows_html(rows, lambda row: f"chapters/{row.section}", verdict_header="our verdict",
                              caveats=notes, paper_names=True, words_link=WORDS_LINK)
    lead = f'<p class="fedkd-headline"><b>KnFu: the lead is mostly tuning.</b> {escape(headline)}</p>' if headline else ""
    return (lead + "\n\n" + table + "\n\n")


def every_claim(ledger: pd.DataFrame, notes: dict[str, str] | None = None) -> str:
    """Every claim, one table per paper under a line that counts its words, the paper's caveat under it."""
    from .chapters.ledger import HOLM_COLUMN, holm_count, verdict_rows_html, with_holm

    blocks = []
    for paper, rows in ledger.groupby("chapter", sort=False):
        rows = with_holm(rows)
        family = holm_count(rows) if HOLM_COLUMN in rows else ""
        table = verdict_rows_html(rows, lambda row: f"chapters/{row.section}", verdict_header="our verdict",
                                  words_link=WORDS_LINK)
        note = (notes or {}).get(paper, "")
        blocks.append(f"**{paper}**: {count_line(rows.verdict)}" + (f"; {family}" if family else "") + ".\n\n"
                      + table + "\n\n" + (f'<p class="fedkd-legend fedkd-caveat"><b>Read at its scale.</b> '
                                           f"{escape(note)}</p>\n\n" if note else ""))
    return "".join(blocks)


def main(argv: list[str] | None = None) -> None:
    """Writes the landing page's results: ``glance.md`` (its first screen) and, beside it,
    ``glance_all.md`` (every claim, paper by paper)."""
    target = Path((argv or sys.argv[1:])[0])
    target.parent.mkdir(parents=True, exist_ok=True)
    from .chapters.ledger import ledger as read_ledger

    table = read_ledger()
    target.write_text(first_screen(table, knfu_headline(), caveats(short=True)))
    target.with_name(target.stem + "_all.md").write_text(every_claim(table, caveats(short=False)) + scales_text(table) + "\n")
    print(f"{target} written")


if __name__ == "__main__":
    main()
