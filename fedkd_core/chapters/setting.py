"""Chapter "The federated setting": Local vs FedAvg across datasets and Dirichlet alpha, and how
skewed each partition is."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import partition
from ..algorithms import algorithm_class
from ..experiment import ExperimentConfig
from ..federation import DataConfig
from ..report import mean_std, parse_list, pm
from ..training import TrainConfig

# The model each dataset is trained with in this chapter (KnFu's M1 and M2).
MODEL_FOR = {"mnist": "knfu_m1", "fashion_mnist": "knfu_m1", "cifar10": "knfu_m2"}


@dataclass(frozen=True)
class Params:
    """The chapter's parameters; defaults are the smoke profile. 0 for samples_per_client means
    the whole training pool is split (no fixed client size)."""

    profile: str = "smoke"
    datasets: str = "mnist"
    alphas: str = "0.5"
    algorithms: str = "local,fedavg"
    seeds: int = 1
    num_clients: int = 4
    samples_per_client: int = 100
    local_test_size: int = 100
    global_test_size: int = 500
    rounds: int = 2
    participation: float = 1.0
    local_epochs: int = 1
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    mixed_precision: bool | str = "auto"  # bf16 where native (fedkd_core.precision)

    def __post_init__(self) -> None:
        for alpha in parse_list(self.alphas, float, "alphas"):
            if not alpha > 0:
                raise ValueError(f"alphas must all be > 0 (got {alpha})")
        for name in parse_list(self.datasets, str, "datasets"):
            if name.strip() not in MODEL_FOR:
                raise ValueError(f"datasets must be among {sorted(MODEL_FOR)} (got {name.strip()!r})")
        for name in parse_list(self.algorithms, str, "algorithms"):
            algorithm_class(name.strip())
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1 (got {self.seeds})")
        if self.samples_per_client < 0:
            raise ValueError(f"samples_per_client must be >= 0 (got {self.samples_per_client})")
        experiments(self)  # every run's config validates its own fields (num_clients, rounds, ...)


def experiments(params: Params) -> list[ExperimentConfig]:
    """Every (dataset, alpha, algorithm, seed) run of the chapter."""
    train = TrainConfig(epochs=params.local_epochs, batch_size=params.batch_size, lr=params.lr,
                        momentum=params.momentum, mixed_precision=params.mixed_precision)
    configs = []
    for dataset in (d.strip() for d in parse_list(params.datasets, str, "datasets")):
        for alpha in parse_list(params.alphas, float, "alphas"):
            data = DataConfig(
                dataset=dataset, num_clients=params.num_clients, partition="dirichlet", alpha=alpha,
                samples_per_client=params.samples_per_client or None,
                local_test_size=params.local_test_size,
            )
            for algorithm in (a.strip() for a in parse_list(params.algorithms, str, "algorithms")):
                for seed in range(params.seeds):
                    configs.append(ExperimentConfig(
                        algorithm=algorithm, data=data, model=MODEL_FOR[dataset], train=train,
                        rounds=params.rounds, participation=params.participation,
                        global_test_size=params.global_test_size or None, seed=seed,
                    ))
    return configs


def skew_summary(labels: np.ndarray, parts: list, classes: int = 10) -> dict:
    """How skewed a split of ``labels`` into ``parts`` (index lists) is: clients, samples, and the
    means over clients of the largest class's share and of the number of classes holding at least
    5% of the client's data."""
    hist = partition.class_histograms(labels, parts, classes)
    share = hist / hist.sum(1, keepdims=True)
    return {"clients": len(parts), "samples": int(hist.sum()),
            "largest class share": round(float(share.max(1).mean()), 3),
            "classes ≥ 5%": round(float((share >= 0.05).sum(1).mean()), 2)}


KEYS = ["data.dataset", "data.alpha", "algorithm"]


def accuracy_table(finals: pd.DataFrame) -> pd.DataFrame:
    """Final ALMA and global accuracy (``report.final_metrics`` rows), mean ± std over seeds (%), per
    dataset, α and method; "—" where a method has no global model (Local)."""
    alma = mean_std(finals, KEYS, "alma")
    glob = mean_std(finals.dropna(subset=["global_acc"]), KEYS, "global_acc")
    table = alma.assign(ALMA=[pm(m, s) for m, s in zip(alma["mean"], alma["std"])])[KEYS + ["ALMA", "n", "profile"]]
    table = table.merge(glob.assign(**{"global acc": [pm(m, s) for m, s in zip(glob["mean"], glob["std"])]})[
        KEYS + ["global acc"]], on=KEYS, how="left").fillna({"global acc": "—"})
    return table.rename(columns={"data.dataset": "dataset", "data.alpha": "alpha", "n": "seeds"})


def local_vs_fedavg(finals: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and α (the index, named "dataset" and "alpha"): each method's mean final ALMA (%)
    and, where both ran, which of Local and FedAvg is higher ("better") and FedAvg's global accuracy (%)."""
    alma = mean_std(finals, KEYS, "alma")
    pivot = alma.pivot_table(index=["data.dataset", "data.alpha"], columns="algorithm", values="mean")
    if {"local", "fedavg"} <= set(pivot.columns):
        glob = mean_std(finals.dropna(subset=["global_acc"]), KEYS, "global_acc")
        pivot["better"] = np.where(pivot["local"] > pivot["fedavg"], "Local", "FedAvg")
        pivot["FedAvg global acc"] = glob.set_index(["data.dataset", "data.alpha"])["mean"]
    return pivot.rename_axis(index=["dataset", "alpha"])


# --- FedBE's step split, as the FedUA chapter runs it -------------------------------------------------

def step_split() -> dict:
    """The step split this page draws: FedUA's reduced profile's major share (FedBE's split as the
    FedUA chapter runs it) and the number of major classes its runs use (``DataConfig``'s)."""
    from . import chapter_module

    return {"major_classes": DataConfig.major_classes,
            "major_fraction": chapter_module("fedua").REDUCED_PROFILE.major_fraction}


def step_split_text(split: dict) -> str:
    """The step split of ``split`` (:func:`step_split`'s keys) in words."""
    return (f"FedBE's step split gives every client {split['major_classes']} major classes holding "
            f"{split['major_fraction'] * 100:g}% of its data and spreads the rest evenly over the other classes, "
            "with the major share the FedUA chapter's reduced profile uses (`major_fraction`).")


# --- what the Local vs FedAvg table supports ------------------------------------------------------------

def below_twice_chance(pivot: pd.DataFrame, classes: int = 10) -> pd.Series:
    """Per row of :func:`local_vs_fedavg`: whether FedAvg's global model is below twice chance
    level (100 / ``classes`` %), too early in its training for the cell to say much about FedAvg."""
    if "FedAvg global acc" not in pivot:
        return pd.Series(False, index=pivot.index)
    return pivot["FedAvg global acc"] < 2 * 100 / classes


def order_in_alpha(winners: list[str]) -> str:
    """How the higher method (by increasing α) changes: "same" (one method throughout), "crossover"
    (Local, then FedAvg: the pattern expected as the clients' data become alike) or "mixed"."""
    if len(set(winners)) == 1:
        return "same"
    return "crossover" if winners == sorted(winners, key=lambda w: w == "FedAvg") else "mixed"


def alphas_text(alphas) -> str:
    return ", ".join(f"{a:g}" for a in alphas)


ORDER_TEXT = {
    "same": "{first} is higher at every α compared ({alphas})",
    "crossover": "Local is higher at α = {local}, FedAvg at α = {fedavg}: the order turns from Local to FedAvg as α grows",
    "mixed": "Local is higher at α = {local}, FedAvg at α = {fedavg}: the order does not follow α",
}


def dataset_conclusion(dataset: str, cells: pd.DataFrame, flagged: pd.Series) -> str:
    """One dataset's line of :func:`conclusion_lines` from its rows of :func:`local_vs_fedavg`
    (indexed by α) and :func:`below_twice_chance` (the same index)."""
    kept = cells[~flagged].sort_index()
    left_out = (f" (left out: α = {alphas_text(cells[flagged].index)}, where FedAvg's global model is below twice "
                "chance)" if flagged.any() else "")
    if not len(kept):
        higher = "; ".join(f"{w} at α = {alphas_text(cells.index[cells.better == w])}" for w in cells.better.unique())
        return (f"**{dataset}**: the higher mean is {higher}, but FedAvg's global model is below twice chance "
                f"level at every α run, so on {dataset} this profile does not compare the two methods.")
    winners = kept["better"].tolist()
    gaps = "; ".join(f"α = {a:g}: {g:+.1f}" for a, g in (kept["fedavg"] - kept["local"]).items())
    order = ORDER_TEXT[order_in_alpha(winners)].format(
        first=winners[0], alphas=alphas_text(kept.index),
        local=alphas_text(kept.index[kept.better == "Local"]), fedavg=alphas_text(kept.index[kept.better == "FedAvg"]))
    return f"**{dataset}**: {order}{left_out}. FedAvg − Local ALMA (points): {gaps}."


def conclusion_lines(pivot: pd.DataFrame, classes: int = 10) -> list[str]:
    """Per dataset of :func:`local_vs_fedavg`, what its table supports: which method has the higher
    mean final ALMA at each α where FedAvg's global model has reached twice chance level
    (:func:`below_twice_chance`), whether that order turns from Local to FedAvg as α grows, and the
    gaps; nothing where Local or FedAvg did not run."""
    if "better" not in pivot:
        return []
    flagged = below_twice_chance(pivot, classes)
    return [dataset_conclusion(dataset, pivot.xs(dataset, level="dataset"), flagged.xs(dataset, level="dataset"))
            for dataset in pivot.index.unique("dataset")]


def images_text(params: Params) -> str:
    """"200 training images per client", or the whole training split where ``samples_per_client`` is 0."""
    return (f"{params.samples_per_client} training images per client" if params.samples_per_client
            else "the whole training split shared among the clients")


def conclusion_text(pivot: pd.DataFrame, params: Params, seeds: list[int], profiles: list[str] = ()) -> str:
    """The page's conclusion: the profile of its records (``profiles``; the page's own when none is
    given) and its scale (rounds, images per client, ``seeds`` per cell), then
    :func:`conclusion_lines`; or that Local and FedAvg did not both run. (The quick profile's runs
    are those of the committed reduced profile, so a built page names "reduced".)"""
    lines = conclusion_lines(pivot)
    if not lines:
        return "Local and FedAvg did not both run in this profile: there is nothing to compare."
    named = " and ".join(f"**{profile}**" for profile in (sorted(set(profiles)) or [params.profile]))
    return (f"In this page's {named} profile ({params.rounds} rounds, {images_text(params)}, "
            f"{'/'.join(map(str, seeds))} seed(s) per cell; an order of the means, without an interval, not a "
            "test):\n\n" + "\n".join(f"- {line}" for line in lines))
