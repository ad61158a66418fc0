"""KnFu's lead over each method, seed by seed: the paired differences behind Figs. 3-4.

The paper's Figs. 3-4 draw every method's learning curve on one 40-95% axis, where a lead of a
fraction of a point cannot be seen (issue 61). Here, per cell and seed, KnFu's final ALMA minus
each other method's (the runs of a cell and seed share their partition and initialisation, so the
difference is paired), drawn with its mean and 95% t-interval around 0: one panel per method,
each on its own scale.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...verdicts import t_interval
from .grid import METHODS

CELL = ["dataset", "alpha", "size"]


def paired_differences(finals: pd.DataFrame, reference: str = "knfu") -> pd.DataFrame:
    """Per cell, seed and other method of ``finals`` (:func:`~.tables.final_table` rows): KnFu's
    final ALMA minus the method's, in points, over the seeds both ran. Columns: dataset, alpha,
    size, seed, method (the paper's name), difference."""
    columns = [*CELL, "seed", "method", "difference"]
    if not len(finals) or reference not in set(finals.algorithm):
        return pd.DataFrame(columns=columns)
    runs = finals.groupby([*CELL, "seed", "algorithm"], as_index=False).alma.mean()
    ours = runs[runs.algorithm == reference].drop(columns="algorithm").rename(columns={"alma": "reference"})
    others = runs[runs.algorithm != reference].merge(ours, on=[*CELL, "seed"])
    others["difference"] = (others.reference - others.alma) * 100
    others["method"] = others.algorithm.map(lambda key: METHODS.get(key, key))
    order = {name: i for i, name in enumerate(METHODS.values())}
    others = others.sort_values([*CELL, "method", "seed"], key=lambda c: c.map(order) if c.name == "method" else c)
    return others[columns].reset_index(drop=True)


def difference_summary(differences: pd.DataFrame) -> pd.DataFrame:
    """Per cell and method of :func:`paired_differences`: the seeds, the mean difference and its
    95% t-interval over seeds (no interval from one seed), in points."""
    rows = []
    for (dataset, alpha, size, method), group in differences.groupby([*CELL, "method"], sort=False):
        interval = t_interval(group.difference.to_numpy())
        rows.append({"dataset": dataset, "alpha": alpha, "size": size, "method": method, "seeds": len(group),
                     "mean": interval.mean, "low": interval.low, "high": interval.high})
    return pd.DataFrame(rows, columns=[*CELL, "method", "seeds", "mean", "low", "high"])


def cell_labels(cells) -> list[str]:
    """Each (alpha, size) cell as a row label naming only what varies among ``cells`` ("α = 0.5"
    where every cell has |D_n| = 100), both on two lines where both vary (a narrow label leaves
    the panels their width)."""
    cells = list(cells)
    alphas, sizes = {a for a, _ in cells}, {s for _, s in cells}
    return ["\n".join(([f"α = {a:g}"] if len(alphas) > 1 or len(sizes) == 1 else [])
                      + ([f"|D_n| = {int(s)}"] if len(sizes) > 1 else [])) for a, s in cells]


# plots.grid's width: two panels a row, 7 in, shown near full size in the 676 px column (~330 px a
# panel, 11 pt tick labels 10 px or more on screen).
PANEL_HEIGHT = 0.55  # inches per cell (a row of the panel)


def plot_paired_differences(differences: pd.DataFrame, cells, title: str = ""):
    """One panel per method KnFu is compared with, on its own scale: a row per cell of ``cells``
    ((alpha, size) pairs), each seed's difference as a dot, the mean as a diamond with its 95%
    t-interval as a bar, and the zero line. Returns the figure, or None where nothing pairs."""
    import matplotlib.pyplot as plt

    from ... import plots

    cells = list(cells)
    shown = differences[[(a, s) in cells for a, s in zip(differences.alpha, differences["size"])]]
    if not len(shown):
        return None
    summary = difference_summary(shown)
    methods = list(dict.fromkeys(shown.method))
    fig, axes = plots.grid(len(methods), height=1.3 + PANEL_HEIGHT * len(cells))
    labels = cell_labels(cells)
    # the legend's entries, in neutral colours (a cell's own colour says where its interval lies)
    axes[0].scatter([], [], s=18, color="0.55", label="one seed")
    axes[0].plot([], [], "D-", color="0.2", lw=2.4, markersize=7, label="mean and 95% interval")
    for index, (ax, method) in enumerate(zip(axes, methods)):
        for row, (alpha, size) in enumerate(cells):
            at = (shown.method == method) & (shown.alpha == alpha) & (shown["size"] == size)
            seeds = shown[at].difference.to_numpy()
            if not len(seeds):
                continue
            jitter = np.linspace(-0.12, 0.12, len(seeds)) if len(seeds) > 1 else np.zeros(1)
            ax.scatter(seeds, row + 0.18 + jitter, s=18, color="0.55", zorder=2)
            line = summary[(summary.method == method) & (summary.alpha == alpha) & (summary["size"] == size)].iloc[0]
            colour = "tab:green" if line.low > 0 else "tab:red" if line.high < 0 else "0.2"
            if not np.isnan(line.low):
                ax.plot([line.low, line.high], [row, row], color=colour, lw=2.4, zorder=3)
            ax.plot(line["mean"], row, "D", color=colour, markersize=7, zorder=4)
        ax.axvline(0, color="black", lw=0.9)
        ax.set_yticks(range(len(cells)), labels if index % plots.MAX_COLUMNS == 0 else [],  # rows named once a row
                      fontsize=10 if any("\n" in label for label in labels) else None)
        ax.set_ylim(len(cells) - 0.5, -0.6)
        ax.set_xlabel("points")
        ax.set_title(f"KnFu − {method}")
        ax.grid(axis="x", alpha=0.3)
    if title:
        fig.suptitle(title)
    plots.legend_below(fig, axes[0])
    return fig


def paired_caption(differences: pd.DataFrame, cells) -> str:
    """The caption of :func:`plot_paired_differences`: what a dot, a diamond and a bar are, and the
    seeds behind them."""
    cells = list(cells)
    shown = differences[[(a, s) in cells for a, s in zip(differences.alpha, differences["size"])]]
    seeds = shown.groupby([*CELL, "method"]).seed.nunique() if len(shown) else pd.Series(dtype=int)
    count = (f"{seeds.min()}" + (f" to {seeds.max()}" if seeds.max() > seeds.min() else "")) if len(seeds) else "0"
    return ("KnFu's final ALMA minus each other method's, in points, per cell (a row) of the records shown, paired "
            f"by seed ({count} seeds a cell): a grey dot per seed, the diamond the mean, the bar its 95% t-interval "
            "over seeds; green where the interval lies above 0 (KnFu ahead), red where below, dark where it "
            "holds 0. Each panel has its own scale, so a lead of a fraction of a point stays visible.")
