"""The paper's numbers (global accuracy %, mean ± spread over > 5 runs), kept as data
(``paper_*.csv`` beside this module), and its printed percentage rows checked against its printed
accuracies."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..datafiles import paper_table


def paper_table1() -> pd.DataFrame:
    """Table 1: (selection, ratio, mean, std) — FedDF with sample selection, step, C = 1."""
    return paper_table(__package__, "paper_table1.csv")


def paper_table2() -> pd.DataFrame:
    """Table 2: (partition, algorithm, mean, std) at C = 1."""
    return paper_table(__package__, "paper_table2.csv")


def paper_table3() -> pd.DataFrame:
    """Table 3: (participation, algorithm, mean, std) on step."""
    return paper_table(__package__, "paper_table3.csv")


def paper_changes() -> pd.DataFrame:
    """The percentage rows as printed (row, algorithm, column, printed, decimals: the decimal places
    the paper prints it with), to check our arithmetic against the paper's: change vs step and vs
    FedAvg (Table 2), accuracy drop from C = 1 (Table 3)."""
    return paper_table(__package__, "paper_changes.csv")


def relative_changes(means: pd.Series, reference) -> pd.Series:
    """(value - reference) / reference in percent, the paper's derived rows."""
    return (means - reference) / reference * 100


def derived_rows(table2: pd.DataFrame, table3: pd.DataFrame) -> pd.DataFrame:
    """The paper's percentage rows from (partition | participation, algorithm, mean) frames:
    change vs step, change vs FedAvg (Table 2) and accuracy drop vs C = 1 (Table 3), in %."""
    rows = []
    t2 = table2.pivot_table(index="algorithm", columns="partition", values="mean")
    if "step" in t2:
        for algorithm, row in t2.iterrows():
            for partition in (p for p in t2.columns if p != "step"):
                rows.append({"row": "change vs step", "algorithm": algorithm, "column": partition,
                             "value": float(relative_changes(row[partition], row["step"]))})
    if "fedavg" in t2.index:
        for algorithm in (a for a in t2.index if a != "fedavg"):
            for partition in t2.columns:
                rows.append({"row": "change vs FedAvg", "algorithm": algorithm, "column": partition,
                             "value": float(relative_changes(t2.loc[algorithm, partition], t2.loc["fedavg", partition]))})
    t3 = table3.pivot_table(index="algorithm", columns="participation", values="mean")
    if 1.0 in t3:
        for algorithm, row in t3.iterrows():
            for c in (c for c in t3.columns if c != 1.0):
                rows.append({"row": "accuracy drop", "algorithm": algorithm, "column": f"C = {c:g}",
                             "value": float(-relative_changes(row[c], row[1.0]))})
    return pd.DataFrame(rows, columns=["row", "algorithm", "column", "value"])


def rounds_to(computed: pd.Series, printed: pd.Series, decimals: pd.Series) -> np.ndarray:
    """Whether each computed value, rounded to the decimals its printed value has, is that value
    (-10.93 is the paper's whole "−11%", not its one-decimal "-10.9")."""
    rounded = [round(float(value), int(places)) for value, places in zip(computed, decimals)]
    return np.isclose(rounded, printed)


def printed_check() -> pd.DataFrame:
    """Each printed percentage of the paper beside the same change computed from its printed
    accuracies (shown to 0.01); ``agrees``: the computed value, unrounded, rounds to the printed one
    at the precision the paper prints it with (:func:`rounds_to`: a whole percent where it prints a
    whole number, 0.1 elsewhere)."""
    computed = derived_rows(paper_table2(), paper_table3()).set_index(["row", "algorithm", "column"])["value"]
    printed = paper_changes()
    keys = zip(printed.row, printed.algorithm, printed.column)
    exact = pd.Series([float(computed[key]) for key in keys], index=printed.index)
    return printed.assign(computed=exact.round(2), agrees=rounds_to(exact, printed.printed, printed.decimals)
                          ).drop(columns="decimals")
