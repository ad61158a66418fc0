"""The same runs on Flower (Ray simulation) as in-process: per-round client accuracies, global
accuracy, bytes and selected clients identical, with one Ray worker and with several."""

import pytest

pytest.importorskip("flwr")

from fedkd_core.experiment import ExperimentConfig, simulate  # noqa: E402
from fedkd_core.federation import DataConfig  # noqa: E402
from fedkd_core.training import TrainConfig  # noqa: E402

DATA = DataConfig("mnist", num_clients=4, samples_per_client=50, transfer_size=50, local_test_size=20)
TRAIN = TrainConfig(batch_size=16, mixed_precision=False)
CONFIGS = [ExperimentConfig(algorithm=name, data=DATA, model="knfu_m1", train=TRAIN, rounds=2, participation=0.5, seed=3)
           for name in ("fedavg", "knfu", "fedckd")]
COMPARED = ("round", "clients", "selected", "bytes_up", "bytes_down", "alma", "client_accuracies", "global_acc")


@pytest.fixture(scope="module")
def in_process():
    return [simulate(config, progress=False) for config in CONFIGS]


def assert_same_runs(in_process, on_flower):
    for config, local, remote in zip(CONFIGS, in_process, on_flower, strict=True):
        assert len(local["history"]) == len(remote["history"]) == 2
        for a, b in zip(local["history"], remote["history"]):
            assert {k: a[k] for k in COMPARED} == {k: b[k] for k in COMPARED}, config.algorithm
        assert local["totals"]["bytes_up"] == remote["totals"]["bytes_up"] > 0


def test_flower_simulation_with_one_worker_gives_the_in_process_numbers(in_process):
    from fedkd_core.flower import simulate_on_flower

    assert_same_runs(in_process, simulate_on_flower(CONFIGS, workers=1))


def test_the_command_with_two_workers_writes_the_in_process_records(in_process, tmp_path):
    """`python -m fedkd_core.flower A.yaml B.yaml C.yaml --workers 2`: one simulation, a record each."""
    import dataclasses
    import json
    import os
    import subprocess
    import sys

    import yaml

    from fedkd_core.results import config_hash

    paths = []
    for config in CONFIGS:
        raw = dataclasses.asdict(config)
        paths.append(tmp_path / f"{config.algorithm}.yaml")
        paths[-1].write_text(yaml.safe_dump(raw))
    env = {**os.environ, "FEDKD_RESULTS": str(tmp_path / "results"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "fedkd_core.flower", *map(str, paths), "--workers", "2",
                           "--profile", "flower"], env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads((tmp_path / "results" / "flower" / c.algorithm / f"{config_hash(c)}.json").read_text())
               for c in CONFIGS]
    assert all(r["environment"]["engine"] == "flower (ray, 2 workers)" for r in records)
    assert_same_runs(in_process, [{"history": r["history"], "totals": r["timings"]} for r in records])


def test_configs_of_one_simulation_must_have_the_same_number_of_clients():
    from dataclasses import replace

    from fedkd_core.flower import simulate_on_flower

    other = replace(CONFIGS[0], data=replace(DATA, num_clients=5))
    with pytest.raises(ValueError, match="same number of clients"):
        simulate_on_flower([CONFIGS[0], other])
