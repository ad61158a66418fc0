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
    assert '<span class="fedkd-word">dataset</span>' in headers and '<span class="fedkd-word">alpha</span>' in headers and "data." not in headers


def pivot_of(rows) -> pd.DataFrame:
    """A :func:`setting.local_vs_fedavg` table from (dataset, alpha, local, fedavg, FedAvg global acc) in %."""
    frame = pd.DataFrame(rows, columns=["dataset", "alpha", "local", "fedavg", "FedAvg global acc"])
    frame["better"] = np.where(frame.local > frame.fedavg, "Local", "FedAvg")
    return frame.set_index(["dataset", "alpha"])


def test_the_order_in_alpha_is_a_crossover_only_from_local_to_fedavg():
    assert setting.order_in_alpha(["Local", "Local"]) == "same"
    assert setting.order_in_alpha(["Local", "FedAvg", "FedAvg"]) == "crossover"
    assert setting.order_in_alpha(["FedAvg", "Local"]) == "mixed"
    assert setting.order_in_alpha(["Local", "FedAvg", "Local"]) == "mixed"


def test_the_conclusion_is_read_per_dataset_from_the_table_leaving_out_cells_where_fedavg_is_near_chance():
    pivot = pivot_of([("cifar10", 0.1, 72.0, 15.0, 9.4), ("cifar10", 1.0, 35.9, 23.1, 16.1),
                      ("mnist", 0.1, 88.2, 56.0, 46.8), ("mnist", 0.5, 71.9, 76.4, 71.2), ("mnist", 1.0, 65.5, 79.6, 76.6),
                      ("svhn", 0.1, 60.0, 50.0, 45.0), ("svhn", 1.0, 70.0, 50.0, 15.0)])
    assert setting.below_twice_chance(pivot).tolist() == [True, True, False, False, False, False, True]
    cifar, mnist, svhn = setting.conclusion_lines(pivot)
    assert "Local at α = 0.1, 1" in cifar and "does not compare the two methods" in cifar
    assert "the order turns from Local to FedAvg as α grows" in mnist and "α = 0.1: -32.2" in mnist
    assert "Local is higher at every α compared (0.1)" in svhn and "left out: α = 1" in svhn
    assert setting.conclusion_lines(pivot.drop(columns="better")) == []
    reversed_order = setting.conclusion_lines(pivot_of([("mnist", 0.1, 50.0, 60.0, 55.0), ("mnist", 1.0, 70.0, 60.0, 55.0)]))
    assert "the order does not follow α" in reversed_order[0]


def test_the_conclusion_names_the_profile_and_its_scale_and_says_it_is_no_test():
    params = setting.Params(profile="smoke", rounds=2, samples_per_client=100)
    text = setting.conclusion_text(pivot_of([("mnist", 0.5, 60.0, 70.0, 65.0)]), params, [1])
    assert "**smoke** profile (2 rounds, 100 training images per client, 1 seed(s) per cell" in text
    assert "not a test" in text and "FedAvg is higher at every α compared (0.5)" in text
    assert "nothing to compare" in setting.conclusion_text(pivot_of([]).drop(columns="better"), params, [1])
    read = setting.conclusion_text(pivot_of([("mnist", 0.5, 60.0, 70.0, 65.0)]), params, [1], ["reduced", "reduced"])
    assert "page's **reduced** profile (2 rounds" in read  # the records' profile, not the page's own


def test_the_step_split_drawn_is_the_one_the_fedua_chapter_runs():
    from fedkd_core.chapters import chapter_module

    split = setting.step_split()
    assert split["major_fraction"] == chapter_module("fedua").REDUCED_PROFILE.major_fraction
    assert f"{split['major_classes']} major classes holding {split['major_fraction'] * 100:g}%" in setting.step_split_text(split)
