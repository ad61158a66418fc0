"""Figures the chapters share (matplotlib + seaborn, imported lazily)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def label_bubbles(histograms: np.ndarray, ax, title: str = "") -> None:
    """Clients on x, classes on y, bubble area proportional to the sample count (KnFu Fig. 2)."""
    clients, classes = np.meshgrid(np.arange(histograms.shape[0]), np.arange(histograms.shape[1]), indexing="ij")
    sizes = 400 * histograms / max(histograms.max(), 1)
    ax.scatter(clients.ravel(), classes.ravel(), s=sizes.ravel(), color="tab:red", alpha=0.6, edgecolors="none")
    ax.set(xlabel="client", ylabel="class", title=title,
           xticks=range(histograms.shape[0]), yticks=range(histograms.shape[1]))
    ax.tick_params(axis="x", labelsize=7)


def weight_heatmap(matrix: np.ndarray, ax, title: str = "", fmt: str = ".2f") -> None:
    import seaborn as sns

    sns.heatmap(matrix, ax=ax, cmap="viridis", annot=matrix.shape[0] <= 12, fmt=fmt, square=True, cbar=True)
    ax.set(title=title, xlabel="source client m", ylabel="receiving client n")


def learning_curves(history: pd.DataFrame, ax, y: str = "alma", hue: str = "algorithm", title: str = "") -> None:
    """Mean over seeds with a ± 1 std band, in percent."""
    import seaborn as sns

    frame = history.assign(**{y: history[y] * 100})
    sns.lineplot(data=frame, x="round", y=y, hue=hue, errorbar="sd", ax=ax, marker="o", markersize=3)
    ax.set(title=title, ylabel=f"{y} (%)")


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


OUTCOME_MARKS = {"holds": "✓", "reversed": "✗", "inconclusive": "·"}


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
    grid = table.pivot_table(index="claim", columns="cell", values="effect").reindex(index=claims, columns=cells)
    marks = table.set_index(["claim", "cell"])
    limit = max(1.0, float(np.nanmax(np.abs(grid.to_numpy()))))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.62 * len(cells) + 3.2), 0.55 * len(claims) + 1.9))
    ax.imshow(grid.to_numpy(), cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    for i, claim in enumerate(claims):
        for j, cell in enumerate(cells):
            if (claim, cell) in marks.index:
                row = marks.loc[(claim, cell)]
                ax.text(j, i, f"{OUTCOME_MARKS[row.outcome]}\n{row.effect:+.1f}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(cells)), cells, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(claims)), ["\n".join(textwrap.wrap(c, 34)) for c in claims], fontsize=8)
    ax.set_title(title or "effect per cell (points): ✓ holds, ✗ reversed, · inconclusive (95% interval)", fontsize=9)
    fig.tight_layout()
    return fig
