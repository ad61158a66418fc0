"""The paper's numbers: Tables I-V as data (``paper_table*.csv`` beside this module, %)."""

from __future__ import annotations

import pandas as pd

from ..datafiles import paper_table
from .grid import SETTINGS

ACCURACY_TABLES = {"practical": "paper_table1.csv", "pathological": "paper_table2.csv"}


def paper_accuracy_table(setting: str) -> pd.DataFrame:
    """Table I ("practical") or II ("pathological") as rows (dataset, clients, algorithm, mean, std)."""
    return paper_table(__package__, ACCURACY_TABLES[setting])


def paper_accuracy_tables() -> pd.DataFrame:
    """Tables I and II as one long frame with a ``setting`` column."""
    return pd.concat([paper_accuracy_table(s).assign(setting=s) for s in SETTINGS], ignore_index=True)


def paper_table3() -> pd.DataFrame:
    """Table III: (algorithm, dataset, mean, client_std) at n = 100, practical setting; the std is
    *across the 100 clients*."""
    return paper_table(__package__, "paper_table3.csv")


def paper_table4() -> pd.DataFrame:
    """Table IV: FedCKD on CIFAR-100, n = 20, practical, with and without annealing."""
    return paper_table(__package__, "paper_table4.csv")


def paper_table5() -> pd.DataFrame:
    """Table V: (algorithm, varied, value, mean, std) on CIFAR-100, n = 20; ``value`` is a number
    where α or r is varied, the model's name where the backbone is.

    As printed, the α = 0.1 column equals the r = 0.6 column and the r = 1.0 column equals
    Table I (CIFAR-100, n = 20), although r = 1.0 is said to be the default of the study.
    """
    table = paper_table(__package__, "paper_table5.csv")
    values = [value if varied == "model" else float(value) for varied, value in zip(table.varied, table.value)]
    return table.assign(value=pd.Series(values, index=table.index, dtype=object))
