"""The setting chapter's tables from hand-made inputs: how skewed a split is, Local vs FedAvg."""

import numpy as np
import pandas as pd
import pytest

from fedkd_core import tables
from fedkd_core.chapters import setting


def test_skew_summary_of_a_split_worked_by_hand():
    labels = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 2])
    summary = setting.skew_summary(labels, [np.array([0, 1, 2, 3]), np.array([4, 5, 6, 7, 8, 9])], classes=3)
    # client 0: 3 of class 0, 1 of class 1 (largest 3/4); client 1: 1 of class 1, 5 of class 2 (largest 5/6)
    assert summary == {"clients": 2, "samples": 10, "largest class share": round((3 / 4 + 5 / 6) / 2, 3),
                       "classes ≥ 5%": 2.0}


def finals(rows) -> pd.DataFrame:
    """``report.final_metrics``-like rows from (dataset, alpha, algorithm, seed, alma, global_acc)."""
    frame = pd.DataFrame(rows, columns=["data.dataset", "data.alpha", "algorithm", "seed", "alma", "global_acc"])
    return frame.assign(profile="smoke")


RUNS = finals([("mnist", 0.1, "local", 0, 0.90, np.nan), ("mnist", 0.1, "local", 1, 0.80, np.nan),
               ("mnist", 0.1, "fedavg", 0, 0.70, 0.60), ("mnist", 0.1, "fedavg", 1, 0.70, 0.50),
               ("mnist", 1.0, "local", 0, 0.40, np.nan), ("mnist", 1.0, "fedavg", 0, 0.95, 0.95)])


def test_accuracy_table_gives_mean_and_std_over_seeds_and_no_global_accuracy_for_local():
    table = setting.accuracy_table(RUNS).set_index(["alpha", "algorithm"])
    assert table.loc[(0.1, "local"), ["ALMA", "global acc", "seeds"]].tolist() == ["85.0 ± 5.0", "—", 2]
    assert table.loc[(0.1, "fedavg"), ["ALMA", "global acc"]].tolist() == ["70.0 ± 0.0", "55.0 ± 5.0"]


def test_local_vs_fedavg_names_the_better_method_per_dataset_and_alpha():
    pivot = setting.local_vs_fedavg(RUNS)
    assert pivot["better"].to_dict() == {("mnist", 0.1): "Local", ("mnist", 1.0): "FedAvg"}
    assert pivot["FedAvg global acc"].tolist() == pytest.approx([55.0, 95.0])
    assert "better" not in setting.local_vs_fedavg(RUNS[RUNS.algorithm == "local"])
    headers = tables.html(pivot)
    assert "<th>dataset</th>" in headers and "<th>alpha</th>" in headers and "data." not in headers
