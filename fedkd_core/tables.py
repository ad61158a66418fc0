"""Tables as the book shows them: one formatter for every chapter.

Every table of the book goes through :func:`html` (or :func:`show`): no pandas index, every
value formatted (no raw floats, "—" where there is no value, never "nan"): a measurement to fixed
decimals, a setting (a hyperparameter, the α of a cell) exactly as given, columns separated, and
a CSS class (``fedkd-table``, styled in ``book/_static/fedkd.css``) that keeps it inside the
676 px content column at 1280 px by wrapping text rather than widening the page.

:func:`paper_layout` turns a long :func:`fedkd_core.report.compare_with_paper` table into the
paper's own layout (methods as rows, the paper's cells as columns, paper and ours in each cell).
At the paper's scale a cell compares the values; at any smaller scale absolute values cannot be
compared, so a cell compares what the scale can test: each method's rank within its column and
its gain over a baseline (FedAvg), ours beside the paper's. A legend under each table explains
every colour.
"""

from __future__ import annotations

import numbers
from html import escape

import numpy as np
import pandas as pd

DASH = "—"
TABLE_CLASS = "fedkd-table"


def missing(value) -> bool:
    """None, NaN, NaT and pandas' NA: a cell with no value."""
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # lists, arrays: a value
        return False


def cell_text(value, digits: int = 1) -> str:
    """One cell as text: "—" for a missing value, a float with ``digits`` decimals (``-0.0`` as
    ``0.0``), an integer-valued count as an integer, booleans as yes/no, anything else as str."""
    if missing(value):
        return DASH
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return f"{round(float(value), digits) + 0.0:.{digits}f}"  # -0.04 at one decimal is 0.0, not -0.0
    return str(value)


def signed(value, digits: int = 1) -> str:
    """A difference with its sign: "+1.2", "-0.3"; one that rounds to zero at ``digits`` decimals
    prints as "0.0", never "-0.0" or "+0.0" (issue 61); "—" for a missing value. The one signed
    format of every number the book shows outside the verdict rows (gains, gaps, effects)."""
    if missing(value):
        return DASH
    shown = round(float(value), digits) + 0.0
    return f"{shown:.{digits}f}" if shown == 0 else f"{shown:+.{digits}f}"


def scientific(value, significant: int = 2) -> str:
    """A magnitude that may be tiny (a norm that is zero up to rounding, a jitter): "0" when
    exactly zero, "2.4e-07" otherwise, where fixed decimals would print a row of "0.000000"."""
    if missing(value):
        return DASH
    return "0" if float(value) == 0.0 else f"{float(value):.{significant - 1}e}"


def setting_text(value) -> str:
    """A setting (a hyperparameter, a key of a cell) as given, never rounded to a table's decimals:
    0.99, 0.01, 0.25, 1e-05, 3 (a real number to six significant digits, ``format(value, "g")``);
    anything else as :func:`cell_text` shows it."""
    if isinstance(value, numbers.Real) and not isinstance(value, (numbers.Integral, np.bool_)) and not missing(value):
        return format(float(value), "g")
    return cell_text(value)


def mean_spread(mean, std, digits: int = 1) -> str:
    """"55.75 ± 0.40"; "55.75 (no spread)" where there is no spread (the paper gives none, or a
    single run); "—" without a mean."""
    if missing(mean):
        return DASH
    if missing(std):
        return f"{mean:.{digits}f} (no spread)"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def named_index(frame: pd.DataFrame) -> bool:
    """Whether ``frame``'s index means something: it has a name (a pivot table's keys) or holds
    labels rather than row numbers; an unnamed integer index is only the row numbers that
    filtering left (0, 1, 10, 11), not a column."""
    return (any(name is not None for name in frame.index.names)
            or not pd.api.types.is_integer_dtype(frame.index.dtype))


def flat(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a meaningful index (:func:`named_index`) turned into columns, row numbers
    dropped, and multi-level column names joined (a pivot table's "metric · clients", its
    settings exact: "alpha · 0.01"), so that no pandas index is shown."""
    frame = frame.reset_index(drop=not named_index(frame))
    if isinstance(frame.columns, pd.MultiIndex):
        frame.columns = [" · ".join(setting_text(part) for part in column if str(part) != "") for column in frame.columns]
    return frame


def html(frame: pd.DataFrame, digits: int | dict = 1, legend: str = "", settings=()) -> str:
    """``frame`` as an HTML table of the book (module docstring); ``digits`` for every float
    column, or per column name (default 1); ``settings``: the columns that hold settings
    (a parameter table's values, the α of each row), shown exactly by :func:`setting_text`;
    ``legend`` (markdown-free HTML) under the table."""
    frame = flat(frame)

    def text(column, value) -> str:
        if column in settings:
            return setting_text(value)
        return cell_text(value, digits.get(column, 1) if isinstance(digits, dict) else digits)

    head = "".join(f"<th>{header_html(column)}</th>" for column in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{breakable(text(column, value))}</td>"
                                    for column, value in zip(frame.columns, row)) + "</tr>"
                   for row in frame.itertuples(index=False))
    note = f'<p class="fedkd-legend">{legend}</p>' if legend else ""
    return (f'<div class="fedkd-scroll"><table class="{TABLE_CLASS}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{body}</tbody></table></div>{note}')


def breakable(text: str) -> str:
    """``text`` escaped, with a break opportunity after each underscore and slash: the book wraps
    table text at word boundaries only ("FedGMKD", not "FedGMK/D"), so that a snake_case name
    ("seconds_per_client_round") or a path can still wrap."""
    return escape(text).replace("_", "_<wbr>").replace("/", "/<wbr>")


# A header of one word this short stays whole ("clients", not "client/s"); longer words and
# several words may still break, so that a wide table fits the text column (book/_static/fedkd.css).
WHOLE_WORD = 10


def header_html(column) -> str:
    """A column's header as :func:`breakable` text; one short word kept whole."""
    text = str(column)
    if len(text) <= WHOLE_WORD and not any(c.isspace() for c in text):
        return f'<span class="fedkd-word">{escape(text)}</span>'
    return breakable(text)


def show(frame: pd.DataFrame, digits: int | dict = 1, legend: str = "", settings=()) -> None:
    """Display :func:`html` of ``frame`` in a notebook."""
    from IPython.display import HTML, display

    display(HTML(html(frame, digits, legend, settings)))


# --- a comparison with the paper, in the paper's layout ------------------------------------------

AGREES, DISAGREES, PARTLY, NOT_RUN = "fedkd-agrees", "fedkd-disagrees", "fedkd-partly", "fedkd-not-run"
CONSISTENT = "fedkd-consistent"  # a range of ranks that holds the paper's: not contradicted, not confirmed
PAPER_SCALE = "paper"


def ranks(table: pd.DataFrame, group: list[str], value: str) -> pd.Series:
    """Rank of each row's ``value`` (1 = highest) among the rows that share the ``group`` keys
    (the methods of one column of the paper's table); NaN where ``value`` is missing."""
    scored = table[value].where(table[value].notna())
    return scored.groupby([table[k] for k in group], dropna=False).rank(ascending=False, method="min") \
        if group else scored.rank(ascending=False, method="min")


def run_variance(std, n) -> float | None:
    """One run's variance estimated from a std over ``n`` seeds as the tables print it (ddof = 0,
    so times n / (n - 1)); None without a spread (one seed, or none printed)."""
    if not n > 1 or missing(std):
        return None
    return float(std) ** 2 * n / (n - 1)


def noise_band(std_a, n_a, std_b, n_b, level: float = 0.95) -> float:
    """Half the ``level`` t-interval of the difference of two seed means: a smaller difference does
    not order the two methods. Its degrees of freedom are those of the side with fewer seeds (n − 1),
    as in the verdicts' paired test, so a rank the table prints as fixed is roughly one the verdicts
    could also separate (roughly: this interval is unpaired, theirs paired). A side with one seed
    has no spread and a one-seed verdict is always inconclusive, so it orders nothing (infinite)."""
    from scipy import stats

    var_a, var_b = run_variance(std_a, n_a), run_variance(std_b, n_b)
    if var_a is None or var_b is None:
        return float("inf")
    dof = min(n_a, n_b) - 1
    return float(stats.t.ppf(0.5 + level / 2, dof)) * float(np.sqrt(var_a / n_a + var_b / n_b))


def rank_ranges(table: pd.DataFrame, group: list[str], value: str = "mean_ours", std: str = "std_ours",
                seeds: str = "seeds") -> pd.DataFrame:
    """Each row's (``rank_best``, ``rank_worst``) among the rows that share the ``group`` keys:
    the methods clearly above it (by more than :func:`noise_band`) fix its best rank, and those
    not clearly below it its worst; the same number where every difference is outside the noise."""
    best, worst = pd.Series(np.nan, index=table.index), pd.Series(np.nan, index=table.index)
    groups = table.groupby([table[k] for k in group], dropna=False) if group else [(None, table)]
    for _, rows in groups:
        rows = rows[rows[value].notna()]
        for i, row in rows.iterrows():
            above = below_not_clearly = 0
            for j, other in rows.iterrows():
                if i == j:
                    continue
                band = noise_band(row[std], row[seeds], other[std], other[seeds])
                difference = other[value] - row[value]
                above += difference > band
                below_not_clearly += -band <= difference <= band or difference > band
            best[i], worst[i] = 1 + above, 1 + below_not_clearly
    return pd.DataFrame({"rank_best": best, "rank_worst": worst})


def rank_text(best, worst) -> str:
    return f"#{int(best)}" if best == worst else f"#{int(best)}-{int(worst)}"


def gains(table: pd.DataFrame, keys: list[str], method: str, value: str, baseline: str) -> pd.Series:
    """Each row's ``value`` minus the ``baseline`` method's in the same column (NaN without one)."""
    others = [k for k in keys if k != method]
    base = table[table[method] == baseline].set_index(others)[value] if others else \
        table.loc[table[method] == baseline, value].iloc[:1]
    if others:
        reference = [base.get(tuple(row) if len(others) > 1 else row[0], np.nan)
                     for row in table[others].itertuples(index=False)]
    else:
        reference = [base.iloc[0] if len(base) else np.nan] * len(table)
    return table[value] - np.asarray(reference, dtype=float)


def scored(table: pd.DataFrame, keys: list[str], method: str | None, baseline: str | None,
           columns: list[str]) -> pd.DataFrame:
    """A compare_with_paper table (with its ``mean_paper`` and ``mean_ours``) with each row's rank
    among the methods of its column (the keys but ``method``; without a ``method``, the rows of a
    column of ``columns``) and gain over ``baseline``, ours and the paper's, over the rows both ran."""
    both = table["mean_ours"].notna() & table["mean_paper"].notna()
    shared = table[both].copy()
    group = [k for k in keys if k != method] if method else columns
    if "std_ours" in shared and "seeds" in shared:
        shared = shared.join(rank_ranges(shared, group))
    else:  # a table without spreads: every difference orders
        shared["rank_best"] = shared["rank_worst"] = ranks(shared, group, "mean_ours")
    shared["rank_paper"] = ranks(shared, group, "mean_paper")  # ours is a range: rank_best, rank_worst
    for side in ("ours", "paper"):
        shared[f"gain_{side}"] = (gains(shared, keys, method, f"mean_{side}", baseline) if baseline and method
                                  else np.nan)
    return table.join(shared[[c for c in shared.columns if c.startswith(("rank_", "gain_"))]])


def cell_html(row, at_paper_scale: bool, baseline: str | None, method: str, digits: int) -> tuple[str, str]:
    """(CSS class, inner HTML) of one method in one column of :func:`paper_layout`."""
    if missing(row.mean_ours):  # compare_with_paper's "not run", or a chapter's reason (e.g. "diverged (...)")
        return NOT_RUN, f"{escape(row.ours)}<br><small>paper {escape(row.paper)}</small>"
    ours = escape(row.ours)
    if missing(row.mean_paper):
        return "", f"{ours}<br><small>paper: {DASH}</small>"
    if at_paper_scale:
        difference = row.mean_ours - row.mean_paper
        css = AGREES if row.agrees else DISAGREES
        return css, f"{ours}<br><small>paper {escape(row.paper)}; Δ {signed(difference, digits)}</small>"
    rank = f"{rank_text(row.rank_best, row.rank_worst)} <small>(paper #{int(row.rank_paper)})</small>"
    rank_css = rank_agreement(row.rank_best, row.rank_worst, row.rank_paper)
    if not baseline or not method or getattr(row, method) == baseline or missing(row.gain_ours):
        return rank_css, f"{ours}<br>{rank}"  # the baseline's own row: its gain is 0 by definition
    gain = (f"<br><small>vs {escape(baseline)} {signed(row.gain_ours, digits)} "
            f"(paper {signed(row.gain_paper, digits)})</small>")
    same_sign = np.sign(row.gain_ours) == np.sign(row.gain_paper)
    css = rank_css if rank_css != DISAGREES else PARTLY if same_sign else DISAGREES
    return css, f"{ours}<br>{rank}{gain}"


def rank_agreement(best, worst, paper) -> str:
    """:data:`AGREES` where our rank is fixed and is the paper's; :data:`CONSISTENT` where the seeds
    leave a range of ranks that holds the paper's (a wide range contradicts little, so it is not
    shown as agreement); :data:`DISAGREES` where the paper's rank is outside our range."""
    if not best <= paper <= worst:
        return DISAGREES
    return AGREES if best == worst else CONSISTENT


def legend(at_paper_scale: bool, baseline: str | None) -> str:
    """What the colours of :func:`paper_layout` mean, for its scale."""
    swatch = '<span class="{}">&nbsp;&nbsp;&nbsp;&nbsp;</span> {}'
    if at_paper_scale:
        parts = [swatch.format(AGREES, "|ours − paper| ≤ the paper's std + 2 points"),
                 swatch.format(DISAGREES, "ours outside it"), swatch.format(NOT_RUN, "not run")]
        head = "Each cell: ours (mean ± std over seeds), the paper's, and ours − paper (Δ)."
    else:
        gain = f"; and our gain over {baseline} beside the paper's" if baseline else ""
        parts = [swatch.format(AGREES, "same rank as in the paper"),
                 swatch.format(CONSISTENT, "a range of ranks that holds the paper's: not contradicted, not "
                               "confirmed (the wider the range, the less it says)")]
        if baseline:
            parts.append(swatch.format(PARTLY, f"another rank, but the gain over {baseline} has the paper's sign"))
        parts += [swatch.format(DISAGREES, "another rank" + (f" and the gain over {baseline} has the opposite sign"
                                                              f" ({baseline}'s own row: another rank)"
                                                              if baseline else "")),
                  swatch.format(NOT_RUN, "not run")]
        head = ("At a reduced scale absolute accuracies are not comparable with the paper's; each cell "
                f"shows ours (mean ± std over seeds), its rank among the methods of its column (#1 = best) "
                f"beside the paper's rank{gain}. A range (#1-3) is a rank the seeds cannot fix: the methods "
                "whose difference from it lies within a 95% t-interval (n − 1 degrees of freedom of the side with "
                "fewer seeds, as in the verdicts) could be above or below it; a one-seed cell's rank is never fixed (the ± "
                "printed is the std over seeds with ddof 0; the interval uses the sample std, ddof 1). The verdicts "
                "test the paired per-seed differences themselves, so they may separate what this unpaired "
                "interval does not, or the reverse.")
    return head + "<br>" + " &nbsp; ".join(parts)


def header_text(key_names: dict, keys: list[str], values) -> str:
    values = values if isinstance(values, tuple) else (values,)
    return ", ".join(f"{key_names.get(k, k)} {setting_text(v)}".strip() for k, v in zip(keys, values))


def paper_layout(table: pd.DataFrame, rows: list[str], columns: list[str], method: str | None,
                 baseline: str | None = None, names: dict | None = None, digits: int = 1) -> str:
    """A :func:`fedkd_core.report.compare_with_paper` table as HTML in the paper's layout: one
    table per profile that ran a cell, ``rows`` as rows (the methods, or the settings where the
    paper puts the methods in columns), ``columns`` as columns (only the columns this profile
    ran), each cell ours beside the paper's (:func:`cell_html`), coloured, with :func:`legend`.
    ``names`` relabels the keys in the headers (``{"alpha": "α"}``)."""
    names = names or {}
    keys = rows + columns
    blocks = []
    for profile, group in table[table["mean_ours"].notna()].groupby("profile", sort=False):
        at_paper_scale = profile == PAPER_SCALE
        ran = group[columns].drop_duplicates()
        unrun = table[table["mean_ours"].isna() & table["profile"].isin([profile, ""])].merge(ran, on=columns)
        block = scored(pd.concat([group, unrun], ignore_index=True), keys, method, baseline, columns)
        header = [header_text(names, columns, tuple(v)) for v in ran.itertuples(index=False)]
        lines = []
        for row_key, row_group in block.groupby(rows, sort=False):
            row_key = row_key if isinstance(row_key, tuple) else (row_key,)
            cells = {tuple(getattr(r, c) for c in columns): cell_html(r, at_paper_scale, baseline, method, digits)
                     for r in row_group.itertuples(index=False)}
            tds = "".join((lambda css, text: f'<td class="{css}">{text}</td>')(*cells.get(tuple(v), (NOT_RUN, DASH)))
                          for v in ran.itertuples(index=False))
            lines.append("<tr>" + "".join(f'<th class="fedkd-key">{escape(setting_text(v))}</th>' for v in row_key)
                         + tds + "</tr>")
        head = "".join(f'<th class="fedkd-key">{escape(names.get(r, r))}</th>' for r in rows) + "".join(f"<th>{escape(h)}</th>" for h in header)
        rounds = ", ".join(sorted({str(r) for r in group.get("rounds", pd.Series(dtype=str)) if r}))
        seeds = group.seeds.astype(int)
        caption = (f"profile <b>{escape(profile)}</b>{f', {escape(rounds)} rounds' if rounds else ''}, "
                   f"{seeds.min() if seeds.min() == seeds.max() else f'{seeds.min()}-{seeds.max()}'} seed(s) per cell")
        blocks.append(f'<table class="{TABLE_CLASS} fedkd-paper-layout"><caption>{caption}</caption>'
                      f"<thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"
                      f'<p class="fedkd-legend">{legend(at_paper_scale, baseline)}</p>')
    return "".join(blocks)
