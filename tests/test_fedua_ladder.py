"""FedUA's server-budget ladder (fedkd_core.chapters.fedua.ladder): the runs it reads are the
committed ones, gains are paired by seed, intervals are Student's t, and the readings differ from
the reduced profile only where they say."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedkd_core.chapters.datafiles import profile
from fedkd_core.chapters.fedua import REDUCED_PROFILE, Params, ladder

ROOT = Path(__file__).resolve().parents[1]


def test_paired_interval_is_students_t_on_the_differences():
    mean, low, high = ladder.paired_interval([1.0, 2.0, 4.0])
    # by hand: mean 7/3, sd sqrt(((1-7/3)^2+(2-7/3)^2+(4-7/3)^2)/2) = sqrt(7/3), t(0.975, 2) = 4.302653
    half = 4.302653 * np.sqrt(7 / 3) / np.sqrt(3)
    assert (mean, low, high) == pytest.approx((7 / 3, 7 / 3 - half, 7 / 3 + half), rel=1e-6)
    assert np.isnan(ladder.paired_interval([1.5])[1])  # one seed: no interval
    assert ladder.paired_interval([1.0, np.nan, 3.0])[0] == pytest.approx(2.0)  # a missing run is left out


def test_gains_pair_each_run_with_fedavg_of_its_own_seed():
    runs = pd.DataFrame({"method": ["fedavg", "fedavg", "feddf", "feddf"], "server_epochs": [0, 0, 5, 5],
                         "reading": ["", "", "", ""], "seed": [0, 1, 1, 0], "accuracy": [40.0, 50.0, 51.0, 43.0]})
    gained = ladder.gains(runs).set_index("seed").gain
    assert gained[0] == pytest.approx(3.0) and gained[1] == pytest.approx(1.0)


def test_the_rungs_and_readings_change_only_the_server_budget_and_the_weighting():
    base = asdict(REDUCED_PROFILE)
    for epochs in ladder.RUNGS:
        changed = {k for k, v in asdict(ladder.rung_params(epochs)).items() if v != base[k]}
        assert changed <= {"partitions", "participations", "table1_ratios", "algorithms", "server_epochs"}
    for reading in ladder.READINGS[1:]:
        params = ladder.reading_params(reading)
        assert (params.weighting, params.density_temperature) == (reading.weighting, reading.density_temperature)
        assert params.server_epochs == 20 and params.algorithms == "fedua"


@pytest.mark.parametrize("name", ["fedua_server5", "fedua_server20", "fedua_server20_std", "fedua_server20_perdim"])
def test_each_ladder_yaml_is_a_rung_or_reading_of_the_module(name):
    """The sweep runs the yamls and the chapter reads the module: the two must name the same runs."""
    from fedkd_core.chapters.fedua import experiments
    from fedkd_core.results import config_hash

    from_yaml = {config_hash(c) for c in experiments(profile(Params, f"reduced/{name}.yaml"))}
    from_module = {config_hash(config) for *_, config in ladder.ladder_configs()}
    assert from_yaml and from_yaml <= from_module


def test_every_ladder_run_has_its_committed_record_and_the_finding_is_computed_from_them():
    runs = ladder.ladder_runs(ROOT / "results")
    assert len(runs) == 3 * (1 + 2 * len(ladder.RUNGS) + len(ladder.READINGS) - 1)
    assert ladder.missing_text(runs) == "" and runs.accuracy.between(10, 100).all()
    table = ladder.ladder_table(runs)
    assert list(table["server epochs"].unique()) == list(ladder.RUNGS)
    assert "+9.7" in set(table["paper's gain (20 epochs)"])  # FedDF - FedAvg on the step split, the paper's Table 2
    finding = ladder.ladder_finding(runs)
    feddf_20 = ladder.gains(runs).query("method == 'feddf' and server_epochs == 20").gain.mean()
    assert f"{ladder.interval_text(feddf_20)} at 20" in finding
    assert len(ladder.readings_table(runs)) == len(ladder.READINGS)


def test_a_results_folder_without_the_ladder_says_what_is_missing(tmp_path):
    runs = ladder.ladder_runs(tmp_path)
    assert runs.accuracy.isna().all()
    assert ladder.missing_text(runs).startswith(f"{len(runs)} of the ladder's {len(runs)} runs have no record")
