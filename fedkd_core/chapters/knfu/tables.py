"""Our records as the paper's tables: one row per run (``final_table``), the per-round history, the
communication per client and round, and the plain sentences that compare ours with the paper's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...report import count_text, record_precision
from ...tables import signed
from .grid import METHODS
from .records import cell_of


def final_table(records) -> pd.DataFrame:
    """One row per run: its cell, seed, final ALMA, profile and precision."""
    rows = []
    for record in records:
        dataset, alpha, size, algorithm = cell_of(record)
        rows.append({"dataset": dataset, "alpha": alpha, "size": size, "algorithm": algorithm,
                     "method": METHODS.get(algorithm, algorithm), "seed": record.config["seed"],
                     "alma": record.final["alma"], "profile": record.profile,
                     "precision": record_precision(record)})
    return pd.DataFrame(rows, columns=["dataset", "alpha", "size", "algorithm", "method", "seed", "alma", "profile",
                                       "precision"])


def history_frame(records) -> pd.DataFrame:
    """Per-round metrics of every run with its cell and method name."""
    frames = []
    for record in records:
        frame = record.history_frame()
        frame["size"] = record.config["data"]["samples_per_client"]
        frame["method"] = METHODS.get(record.config["algorithm"], record.config["algorithm"])
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def communication_table(records) -> pd.DataFrame:
    """Mean bytes per client and round, up and down, in KB, per dataset, |D_n| and method."""
    rows = []
    for record in records:
        for row in record.history:
            clients = max(row["clients"], 1)
            rows.append({"dataset": record.config["data"]["dataset"],
                         "size": record.config["data"]["samples_per_client"],
                         "method": METHODS.get(record.config["algorithm"], record.config["algorithm"]),
                         "upload per client (KB)": row["bytes_up"] / clients / 1e3,
                         "download per client (KB)": row["bytes_down"] / clients / 1e3})
    frame = pd.DataFrame(rows)
    return frame.groupby(["dataset", "size", "method"], as_index=False).mean()


def verdict(ours: pd.DataFrame, paper: pd.DataFrame) -> list[str]:
    """Plain sentences, each computed from the numbers: gaps to the paper, the best method, the
    correlation with the paper's cells (the claims' verdicts are :func:`~.claims.ledger_rows`').

    ``ours`` from ``report.mean_std`` (columns dataset, alpha, size, algorithm, mean, n, profile),
    ``paper`` the paper's cells restricted to those we ran.
    """
    lines = []
    if ours.empty:
        return ["No runs: nothing to judge."]
    profiles = "+".join(sorted(set("+".join(ours["profile"]).split("+"))))
    lines.append(f"Based on {len(ours[['dataset', 'alpha', 'size']].drop_duplicates())} cells, "
                 f"profile(s) {profiles}; {seeds_text(ours)}.")
    merged = paper.merge(ours, on=["dataset", "alpha", "size", "algorithm"], suffixes=("_paper", "_ours"))
    for algorithm, group in merged.groupby("algorithm", sort=False):
        gap = (group["mean_ours"] - group["mean_paper"]).mean()
        lines.append(f"{METHODS.get(algorithm, algorithm)}: ours − paper = {signed(gap)} points on average "
                     f"over {len(group)} cells.")
    lines.extend(ranking_lines(ours))
    if len(merged) > 2:
        rho = np.corrcoef(merged["mean_paper"], merged["mean_ours"])[0, 1]
        lines.append(f"Across cells and methods, our ALMA correlates with the paper's at r = {rho:.2f}.")
    return lines


def ranking_lines(ours: pd.DataFrame) -> list[str]:
    """The methods run in every cell with the most seeds any method has there, ranked by mean ALMA
    over those cells; then each other method (FedMD in its original form, say: fewer cells, or
    fewer seeds while its sweep is under way) beside the ranked ones on its own cells only, one
    dataset at a time and with its seeds per cell: a mean over other cells, or over seeds whose
    runs are at different stages, would not compare."""
    cell = ["dataset", "alpha", "size"]
    everywhere = len(ours[cell].drop_duplicates())
    full = ours if "n" not in ours else ours[ours["n"] == ours.groupby(cell)["n"].transform("max")]
    coverage = ours.groupby("algorithm")[cell].apply(lambda c: len(c.drop_duplicates()))
    complete = full.groupby("algorithm")[cell].apply(lambda c: len(c.drop_duplicates()))
    ranked = complete[complete == everywhere].index

    def means(frame: pd.DataFrame) -> str:
        order = frame.groupby("algorithm")["mean"].mean().sort_values(ascending=False)
        return ", ".join(f"{METHODS.get(a, a)} {m:.1f}" for a, m in order.items())

    lines = [f"Mean ALMA over the {everywhere} cells, of the methods run with the most seeds in every cell: "
             f"{means(ours[ours.algorithm.isin(ranked)])}."]
    for algorithm in coverage.index.difference(ranked):
        own = ours[ours.algorithm == algorithm]
        short = own.merge(full[cell + ["algorithm"]], on=cell + ["algorithm"], how="left", indicator=True)
        short_on = list(dict.fromkeys(short.loc[short["_merge"] == "left_only", "dataset"]))
        parts = []
        for dataset, runs in own.groupby("dataset", sort=False):
            cells = runs[cell].drop_duplicates()
            seeds = "" if "n" not in runs else f", {METHODS.get(algorithm, algorithm)} with {seeds_range(runs['n'])} per cell"
            parts.append(f"on {dataset} ({len(cells)} of {len(ours[ours.dataset == dataset][cell].drop_duplicates())} "
                         f"cells{seeds}): {means(ours.merge(cells, on=cell))}")
        fewer = (f", with fewer seeds than the others on {' and '.join(short_on)}"
                 if coverage[algorithm] == everywhere else "")
        lines.append(f"{METHODS.get(algorithm, algorithm)} ran in {coverage[algorithm]} of the "
                     f"{everywhere} cells{fewer}; on its own cells, " + "; ".join(parts) + ".")
    return lines


def seeds_range(seeds: pd.Series) -> str:
    """"1 seed", "3 seeds", "1-3 seeds": the seeds per cell in ``seeds``."""
    low, high = int(seeds.min()), int(seeds.max())
    return count_text(high, "seed") if low == high else f"{low}-{high} seeds"


def seeds_text(ours: pd.DataFrame) -> str:
    """Seeds per cell, per dataset and, where a method ran fewer, naming it: "mnist: 5 seeds per
    cell (FedMD (original form): 1); cifar10: 3 seeds per cell (FedMD (original form): 2 to 3)", the
    range where the method's cells differ. Pass only the methods a table shows."""
    parts = []
    for dataset, group in ours.groupby("dataset", sort=False):
        per_method = group.groupby("algorithm")["n"].agg(["min", "max"])
        most = int(per_method["min"].max())
        fewer = [f"{METHODS.get(a, a)}: {int(low)}" + (f" to {int(high)}" if high > low else "")
                 for a, (low, high) in per_method.iterrows() if low < most]
        parts.append(f"{dataset}: {count_text(most, 'seed')} per cell" + (f" ({', '.join(fewer)})" if fewer else ""))
    return "; ".join(parts)


def originals_beside(ours: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Per cell where FedMD in its original form ran (``ours``, from ``report.mean_std``): its final
    ALMA (%) as mean ± std with its seeds, beside the means of KnFu and FedMD of the same records
    and the paper's FedMD (``paper``: the paper's cells), and KnFu's mean minus its mean (each
    method's mean over its own seeds, which the seeds column gives for the original form)."""
    from ...report import pm
    from .records import ORIGINAL

    cell = ["dataset", "alpha", "size"]
    own = ours[ours.algorithm == ORIGINAL]
    means = ours.pivot_table(index=cell, columns="algorithm", values="mean").reset_index()
    theirs = paper[paper.algorithm == "fedmd"].rename(columns={"mean": "paper's FedMD"})[cell + ["paper's FedMD"]]
    rows = own.merge(means, on=cell, how="left").merge(theirs, on=cell, how="left")

    def mean_of(algorithm: str) -> pd.Series:  # NaN where the records have no run of it
        return rows[algorithm] if algorithm in rows else pd.Series(np.nan, index=rows.index)

    table = pd.DataFrame({**{key: rows[key] for key in cell},
                          METHODS[ORIGINAL]: [pm(m, s) for m, s in zip(rows["mean"], rows["std"])],
                          "seeds": rows["n"].astype(int),
                          METHODS["knfu"]: mean_of("knfu"), METHODS["fedmd"]: mean_of("fedmd"),
                          "paper's FedMD": rows["paper's FedMD"],
                          f"KnFu − {METHODS[ORIGINAL]}": mean_of("knfu") - rows["mean"]})
    order = {dataset: i for i, dataset in enumerate(dict.fromkeys(paper.dataset))}  # the paper's tables' order
    return table.sort_values(["dataset", "size", "alpha"], key=lambda c: c.map(order) if c.name == "dataset" else c,
                             ignore_index=True)
