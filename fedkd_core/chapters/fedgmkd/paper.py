"""The paper's numbers, kept as data (``paper_table*.csv`` beside this module, %; the paper prints
no error bars and no seeds, so ``std`` is NaN; shared/specs/fedgmkd.md §4)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..datafiles import paper_table

PAPER_MODEL = "resnet18_code32"  # §4.4: ResNet-18 with a 32-d code (the paper profile's model)
PAPER_ROUNDS = 50  # §4.4: "Total of 50 rounds to achieve convergence", the budget of every table
DATASET_REASON = {"SVHN": "SVHN is not among the offline datasets", "CIFAR-100": "CIFAR-100 is not among the offline datasets"}


def _means(name: str) -> pd.DataFrame:
    """The table in ``name`` with the paper's missing spread as NaN."""
    return paper_table(__package__, name).assign(std=np.nan)


def paper_table1(dataset: str = "CIFAR-10") -> pd.DataFrame:
    """Table 1 as long rows: (method, clients, metric, mean); metric "local" or "global"."""
    table = _means("paper_table1.csv")
    return table[table.dataset == dataset].drop(columns="dataset").reset_index(drop=True)


def paper_times() -> pd.DataFrame:
    """Table 1's time column (s per client-round, 2 A100s) and its ratio to FedAvg, per dataset."""
    frame = paper_table(__package__, "paper_table1_times.csv")
    fedavg = frame[frame.method == "fedavg"].set_index("dataset").seconds
    return frame.assign(ratio=frame.seconds / frame.dataset.map(fedavg))


def paper_table6() -> pd.DataFrame:
    """Table 6 (CIFAR-10): FedGMKD and "HK with DAT", (method, clients, metric, mean)."""
    return _means("paper_table6.csv")


def paper_table5() -> pd.DataFrame:
    """Table 5 (CIFAR-10, 10 clients): (lam, gamma, metric, mean)."""
    return _means("paper_table5.csv")


def paper_table3() -> pd.DataFrame:
    """Table 3 (CIFAR-10; clients unstated, 10 assumed): (method, alpha, metric, mean) at β = 0.2 and 5."""
    return _means("paper_table3.csv")
