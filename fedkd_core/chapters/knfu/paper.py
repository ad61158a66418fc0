"""The paper's numbers (ALMA %, mean ± std over 3 runs): Tables 1 and 2 as data
(``paper_table*.csv`` beside this module)."""

from __future__ import annotations

import pandas as pd

from ..datafiles import paper_table


def paper_table1() -> pd.DataFrame:
    """KnFu Table 1: MNIST ALMA (%), columns dataset, alpha, size (|D_n|), algorithm, mean, std."""
    return paper_table(__package__, "paper_table1.csv")


def paper_table2() -> pd.DataFrame:
    """KnFu Table 2: CIFAR-10 ALMA (%), same columns as :func:`paper_table1`."""
    return paper_table(__package__, "paper_table2.csv")
