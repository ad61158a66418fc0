"""Figures the chapters share (matplotlib + seaborn, imported lazily)."""

from __future__ import annotations

import numpy as np
import pandas as pd

# The book's figures: at most 9.4 inches wide at 100 dpi, so that the 676 px content column at
# 1280 px shows them at 72% or more of their size and 12 pt text stays at least 12 px on screen
# (tests/test_book_browser.py checks the scale); legends outside the data.
BOOK_STYLE = {"figure.dpi": 100, "savefig.dpi": 100, "font.size": 12, "axes.titlesize": 12, "axes.labelsize": 12,
              "xtick.labelsize": 11, "ytick.labelsize": 11, "legend.fontsize": 11, "figure.titlesize": 13}
MAX_WIDTH = 9.4  # inches
# At most two panels a row: the text column is ~676 px at 1280 px, so a panel stays ~330 px wide
# (issue 61: three a row shrank each to ~220 px, their tick labels under 10 px).
MAX_COLUMNS = 2
# Metrics as a reader names them.
METRIC_LABELS = {"alma": "ALMA (%)", "global_acc": "global accuracy (%)", "local_acc": "local accuracy (%)",
                 "client_acc_std": "std across clients (%)"}


def use_book_style() -> None:
    """Set matplotlib's defaults to :data:`BOOK_STYLE` (each chapter calls it once)."""
    import matplotlib

    matplotlib.rcParams.update(BOOK_STYLE)


def grid(panels: int, height: float = 3.2, per_row: int = MAX_COLUMNS):
    """A figure of ``panels`` panels, at most ``per_row`` a row and never more than
    :data:`MAX_COLUMNS`, no wider than :data:`MAX_WIDTH`; returns the figure and its used axes as a
    flat list (extra axes hidden)."""
    import matplotlib.pyplot as plt

    columns = max(1, min(per_row, panels, MAX_COLUMNS))
    rows = -(-max(panels, 1) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(min(MAX_WIDTH, 3.1 * columns + 0.8), height * rows),
                             squeeze=False)
    flat = list(axes.flat)
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat[:panels]


def legend_below(fig, ax) -> None:
    """One legend for the whole figure, under its panels (outside the data), from ``ax``'s lines;
    every panel's own legend removed."""
    handles, labels = ax.get_legend_handles_labels()
    for axis in fig.axes:
        if axis.get_legend() is not None:
            axis.get_legend().remove()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), frameon=False,
                   bbox_to_anchor=(0.5, 0.0))
        fig.tight_layout(rect=(0, 0.08 + 0.05 * ((len(labels) - 1) // 5), 1, 1))


def caption(fig, text: str) -> None:
    """Show ``fig`` now and ``text`` directly under it as its caption, ``<p class="fedkd-caption">``
    (styled in book/_static/fedkd.css). The figure is closed once shown, so the inline backend does
    not show it again at the end of the cell; pass None where a helper has already shown its figure
    (with ``plt.show()``) to add only the caption. ``text`` is HTML-escaped, then ``**bold**``,
    ``*italic*`` and ```code``` are the only markup it may carry."""
    import html
    import re

    import matplotlib.pyplot as plt
    from IPython.display import HTML, display

    if fig is not None:
        display(fig)
        plt.close(fig)
    body = html.escape(text, quote=False)
    for pattern, tag in ((r"\*\*(.+?)\*\*", "strong"), (r"\*(.+?)\*", "em"), (r"`(.+?)`", "code")):
        body = re.sub(pattern, rf"<{tag}>\1</{tag}>", body)
    display(HTML(f'<p class="fedkd-caption">{body}</p>'))


def seeds_text(frame: pd.DataFrame, keys) -> str:
    """How many seeds each line of a learning-curve figure averages: "3", or "1 to 3" where the
    groups of ``keys`` (a panel's cell and method) differ, for a caption."""
    counts = frame.groupby(list(keys)).seed.nunique()
    return f"{counts.min()}" + (f" to {counts.max()}" if counts.max() > counts.min() else "")


def label_bubbles(histograms: np.ndarray, ax, title: str = "") -> None:
    """Clients on x, classes on y, bubble area proportional to the sample count (KnFu Fig. 2)."""
    clients, classes = np.meshgrid(np.arange(histograms.shape[0]), np.arange(histograms.shape[1]), indexing="ij")
    sizes = 400 * histograms / max(histograms.max(), 1)
    ax.scatter(clients.ravel(), classes.ravel(), s=sizes.ravel(), color="tab:red", alpha=0.6, edgecolors="none")
    ax.set(xlabel="client", ylabel="class", title=title,
           xticks=range(histograms.shape[0]), yticks=range(histograms.shape[1]))


def weight_heatmap(matrix: np.ndarray, ax, title: str = "", fmt: str = ".2f") -> None:
    import seaborn as sns

    sns.heatmap(matrix, ax=ax, cmap="viridis", annot=matrix.shape[0] <= 12, fmt=fmt, square=True, cbar=True)
    ax.set(title=title, xlabel="source client m", ylabel="receiving client n")


def learning_curves(history: pd.DataFrame, ax, y: str = "alma", hue: str = "algorithm", title: str = "",
                    highlight: str | None = None) -> None:
    """Mean over seeds with a ± 1 std band, in percent, the y axis named as a reader would
    (:data:`METRIC_LABELS`); ``highlight`` (the paper's own method) drawn thick and on top."""
    import matplotlib.colors
    import matplotlib.ticker
    import seaborn as sns

    frame = history.assign(**{y: history[y] * 100})
    sns.lineplot(data=frame, x="round", y=y, hue=hue, errorbar="sd", ax=ax, marker="o", markersize=3)
    if highlight is not None:
        # seaborn labels its plotted lines "_child0", ...: the legend entry's colour finds the method's line
        legend = ax.get_legend()
        for handle, text in zip(legend.legend_handles if legend else [], legend.get_texts() if legend else []):
            if text.get_text() == highlight:
                handle.set_linewidth(3.0)
                text.set_fontweight("bold")
                colour = matplotlib.colors.to_rgba(handle.get_color())
                for line in ax.get_lines():
                    if matplotlib.colors.to_rgba(line.get_color()) == colour:
                        line.set(linewidth=3.0, zorder=5)
    ax.set(title=title, xlabel="round", ylabel=METRIC_LABELS.get(y, y))
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))  # rounds are whole: no "1.25"


def claim_effects(rows: pd.DataFrame, ax, reading: str, title: str = "") -> None:
    """One claim across robustness variants (a forest plot): per variant (``rows``: ``variant``,
    ``verdict``, ``effect``, ``low``, ``high``, in points) its pooled effect with its 95% interval;
    a filled marker where the verdict is "holds", a hollow one otherwise, the verdict beside the
    variant's name; the chapter's own reading (``reading``) in red, the line of no effect dashed."""
    import textwrap

    positions = np.arange(len(rows))[::-1]
    for y, (_, row) in zip(positions, rows.iterrows()):
        colour = "tab:red" if row.variant == reading else "tab:blue"
        low, high = row.low, row.high
        error = None if np.isnan(low) else [[row.effect - low], [high - row.effect]]
        ax.errorbar(row.effect, y, xerr=error, fmt="o", color=colour, capsize=3,
                    markerfacecolor=colour if row.verdict == "holds" else "white")
    ax.axvline(0.0, color="grey", linestyle="--", linewidth=1)
    ax.set_yticks(positions, [f"{v} ({w})" for v, w in zip(rows.variant, rows.verdict)])
    ax.set(xlabel="effect (points): pooled mean and 95% interval", title="\n".join(textwrap.wrap(title, 70)))


OUTCOME_MARKS = {"holds": "✓", "reversed": "✗", "inconclusive": "·", "left out": "○"}


def effect_label(effect: float) -> str:
    """An effect in points, short but never rounded to nothing: one decimal from 1 point up, two
    below ("+2.4", "+0.35", "+0.05"), and two significant digits where two decimals would read zero
    ("+0.004"), so a small effect whose interval lies above zero never reads "+0.0 ✓"; float noise
    (below :data:`fedkd_core.verdicts.NOISE`, "+3.7e-15") is zero."""
    from .verdicts import NOISE

    if abs(effect) < NOISE:
        return f"{0.0:+.1f}"
    if abs(effect) >= 0.95:
        return f"{effect:+.1f}"
    return f"{effect:+.2f}" if round(abs(effect), 2) > 0 else f"{effect:+.2g}"


def cell_verdicts(table: pd.DataFrame, title: str = ""):
    """A claims x cells heatmap of :func:`fedkd_core.chapters.ledger.cell_verdicts`: colour the mean
    effect in points (blue where the claim is true, red where reversed), each square marked ✓
    (holds: interval above zero), ✗ (reversed) or · (inconclusive) with its effect. Returns the figure
    (None without cells)."""
    import textwrap

    import matplotlib.pyplot as plt

    if not len(table):
        return None
    claims = list(dict.fromkeys(table.claim))
    cells = list(dict.fromkeys(table.cell))
    grid = table.pivot_table(index="cell", columns="claim", values="effect").reindex(index=cells, columns=claims)
    marks = table.set_index(["claim", "cell"])
    limit = max(1.0, float(np.nanmax(np.abs(grid.to_numpy()))))
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH, 1.5 * len(claims) + 3.0), 0.42 * len(cells) + 2.6))
    ax.imshow(grid.to_numpy(), cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    for j, claim in enumerate(claims):
        for i, cell in enumerate(cells):
            if (claim, cell) in marks.index:
                row = marks.loc[(claim, cell)]
                ax.text(j, i, f"{OUTCOME_MARKS[row.outcome]} {effect_label(row.effect)}", ha="center", va="center", fontsize=11)
    ax.set_yticks(range(len(cells)), cells)
    ax.set_xticks(range(len(claims)), ["\n".join(textwrap.wrap(c, 16)) for c in claims])
    ax.xaxis.tick_top()
    ax.set_title("\n".join(textwrap.wrap(title or "effect per cell (points): ✓ holds, ✗ reversed, · inconclusive "
                                                   "(95% interval)", 60)), fontsize=12)
    fig.tight_layout()
    return fig
