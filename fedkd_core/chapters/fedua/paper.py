"""The paper's numbers (global accuracy %, mean ± spread over > 5 runs), kept as data, and its
printed percentage rows checked against its printed accuracies."""

from __future__ import annotations

import numpy as np
import pandas as pd

_TABLE1 = {"random": "71.5 0.61 71.3 0.78 71.8 0.66 72.3 0.66 72.1 0.55",
           "bald": "72.0 0.24 72.5 0.36 73.9 0.46 73.7 0.33 73.2 0.48"}
_TABLE1_RATIOS = (0.2, 0.4, 0.6, 0.8, 1.0)

# Table 2: step, Dir(0.1), Dir(0.5) at C = 1; Table 3: C = 1.0, 0.7, 0.4 on step.
_TABLE2 = {"fedavg": "62.6 0.23 59.6 1.03 80.1 0.45", "feddf": "72.3 0.49 64.4 0.93 82.8 0.47",
           "fedua": "74.8 0.45 65.3 0.78 83.4 0.24"}
_TABLE3 = {"fedavg": "62.6 0.23 61.3 0.35 58.1 0.26", "feddf": "72.3 0.49 68.1 0.61 63.8 1.03",
           "fedua": "74.8 0.45 71.8 0.56 68.3 0.85"}

# The derived rows as printed (percent changes), to check our arithmetic against the paper's;
# each tuple follows PRINTED_COLUMNS of its row.
PRINTED_COLUMNS = {"change vs step": ("dir0.1", "dir0.5"), "change vs FedAvg": ("step", "dir0.1", "dir0.5"),
                   "accuracy drop": ("C = 0.7", "C = 0.4")}
PRINTED_CHANGES = {
    ("change vs step", "fedavg"): (-4.7, 28.0), ("change vs step", "feddf"): (-11.0, 14.5),
    ("change vs step", "fedua"): (-12.7, 11.5),
    ("change vs FedAvg", "feddf"): (15.5, 8.0, 3.4), ("change vs FedAvg", "fedua"): (19.5, 9.6, 4.1),
    ("accuracy drop", "fedavg"): (2.1, 7.2), ("accuracy drop", "feddf"): (5.9, 11.8),
    ("accuracy drop", "fedua"): (4.0, 8.7),
}


def _pairs(text: str) -> list[tuple[float, float]]:
    numbers = [float(x) for x in text.split()]
    return list(zip(numbers[::2], numbers[1::2]))


def paper_table1() -> pd.DataFrame:
    """Table 1: (selection, ratio, mean, std) — FedDF with sample selection, step, C = 1."""
    return pd.DataFrame([{"selection": s, "ratio": r, "mean": m, "std": d}
                         for s, text in _TABLE1.items() for r, (m, d) in zip(_TABLE1_RATIOS, _pairs(text))])


def paper_table2() -> pd.DataFrame:
    """Table 2: (partition, algorithm, mean, std) at C = 1."""
    return pd.DataFrame([{"partition": p, "algorithm": a, "mean": m, "std": d}
                         for a, text in _TABLE2.items()
                         for p, (m, d) in zip(("step", "dir0.1", "dir0.5"), _pairs(text))])


def paper_table3() -> pd.DataFrame:
    """Table 3: (participation, algorithm, mean, std) on step."""
    return pd.DataFrame([{"participation": c, "algorithm": a, "mean": m, "std": d}
                         for a, text in _TABLE3.items() for c, (m, d) in zip((1.0, 0.7, 0.4), _pairs(text))])


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


def printed_check() -> pd.DataFrame:
    """Each printed percentage of the paper beside the same change computed from its printed
    accuracies; ``agrees``: the computed value rounds to the printed one (to 0.1)."""
    computed = derived_rows(paper_table2(), paper_table3()).set_index(["row", "algorithm", "column"])["value"]
    rows = [{"row": row, "algorithm": algorithm, "column": column, "printed": printed,
             "computed": round(float(computed[(row, algorithm, column)]), 2)}
            for (row, algorithm), values in PRINTED_CHANGES.items()
            for column, printed in zip(PRINTED_COLUMNS[row], values)]
    frame = pd.DataFrame(rows)
    return frame.assign(agrees=np.isclose(frame.computed.round(1), frame.printed))
