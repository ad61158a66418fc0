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
