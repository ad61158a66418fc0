"""Comparison tables and verdicts as the book shows them."""

import numpy as np
import pandas as pd
import pytest

from fedkd_core import report


def comparison():
    paper = pd.DataFrame({"cell": ["a", "b", "c", "d"], "mean": [90.0, 80.0, 70.0, 60.0], "std": [1.0, 0.5, 0.0, 1.0]})
    ours = pd.DataFrame({"cell": ["a", "b", "c"], "mean": [92.5, 83.0, 70.4], "std": [0.5, 0.0, 0.0],
                         "n": [3, 1, 2], "profile": ["paper"] * 3, "precision": ["bf16", "fp32", "fp32"]})
    return report.compare_with_paper(ours, paper, ["cell"])


def test_ours_agrees_when_within_the_papers_spread_plus_two_points():
    table = comparison().set_index("cell")
    assert table.loc["a", "agrees"] is True       # +2.5 <= 1.0 + 2
    assert table.loc["b", "agrees"] is False      # +3.0 >  0.5 + 2
    assert table.loc["c", "agrees"] is True
    assert table.loc["d", "agrees"] is None and table.loc["d", "ours"] == "not run"


def test_a_one_seed_cell_has_no_fake_spread():
    table = comparison().set_index("cell")
    assert table.loc["b", "ours"] == "83.0 (1 seed)"
    # two seeds that agree: a real zero spread; and fewer seeds than cell a's three, which it says
    assert table.loc["c", "ours"] == "70.4 ± 0.0 (2 seeds)"
    assert table.loc["a", "ours"] == "92.5 ± 0.5"  # as many seeds as any cell of its profile: no count
    assert table.loc["b", "precision"] == "fp32" and table.loc["a", "precision"] == "bf16"


def test_compare_with_paper_keeps_the_numbers_the_layout_needs():
    table = comparison().set_index("cell")
    assert table.loc["a", "mean_paper"] == 90.0 and table.loc["a", "mean_ours"] == 92.5
    assert np.isnan(table.loc["d", "mean_ours"])


def test_parameters_table_is_headed_by_the_profile():
    from fedkd_core.chapters.setting import Params

    table = report.parameters_table(Params(profile="quick"))
    assert list(table.columns) == ["profile: quick"] and "profile" not in table.index
    assert table.loc["alphas", "profile: quick"] == "0.5"
    import dataclasses

    assert list(table.index) == [f.name for f in dataclasses.fields(Params) if f.name != "profile"]  # every other one


def test_mean_std_per_profile_keeps_profiles_apart_and_names_the_rounds():
    from fedkd_core.report import mean_std_per_profile

    frame = pd.DataFrame({"method": ["a", "a", "a", "b"], "profile": ["quick", "quick", "reduced", "reduced"],
                          "rounds": [3, 5, 15, 15], "acc": [0.5, 0.7, 0.8, 0.9]})
    table = mean_std_per_profile(frame, ["method"], "acc").set_index(["profile", "method"])
    assert table.loc[("quick", "a"), "mean"] == pytest.approx(60.0) and table.loc[("quick", "a"), "n"] == 2
    assert table.loc[("quick", "a"), "rounds"] == "3+5" and table.loc[("reduced", "b"), "rounds"] == "15"
    assert mean_std_per_profile(frame.iloc[:0], ["method"], "acc").empty
