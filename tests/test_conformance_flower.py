"""Every registered algorithm, and a user's method registered in this process, gives identical
numbers on Flower (Ray simulation) as in-process, on the conformance suite's tiny config
(fedkd_core.conformance). Slow (a Ray start each); skipped without Flower, as test_flower.py is."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from fedkd_core.algorithms import ALGORITHMS, REGISTERED_ENV  # noqa: E402
from fedkd_core.conformance import CHECKS, PASSED, check, comparable, tiny_config  # noqa: E402
from fedkd_core.experiment import simulate  # noqa: E402
from plugin_methods import FedAvgM, registry  # noqa: F401 (a fixture)  # noqa: E402

TESTS = Path(__file__).resolve().parent


def test_every_registered_algorithm_gives_the_in_process_numbers_on_flower():
    """One Flower simulation (one Ray start) runs every algorithm's tiny config, one after another."""
    from fedkd_core.flower import simulate_on_flower

    configs = [tiny_config(name) for name in sorted(ALGORITHMS)]
    on_flower = simulate_on_flower(configs, workers=1)
    for config, remote in zip(configs, on_flower, strict=True):
        assert isinstance(remote, dict), (config.algorithm, remote)
        local = simulate(config, progress=False)
        assert comparable(local["history"]) == comparable(remote["history"]), config.algorithm


def test_a_user_method_registers_passes_and_runs_on_flower_in_other_processes(registry):
    """FedAvgM from an importable module: registered here, announced to child processes, so
    Flower's client processes (which import the package afresh) run it too."""
    findings = check(FedAvgM, name="fedavgm_test", flower=True)
    assert {f.check: f.status for f in findings} == {name: PASSED for name in [*CHECKS, "flower"]}, findings
    assert ALGORITHMS["fedavgm_test"] is FedAvgM
    assert "fedavgm_test=plugin_methods:FedAvgM" in os.environ[REGISTERED_ENV]
    child = subprocess.run([sys.executable, "-c", "from fedkd_core.algorithms import ALGORITHMS; "
                            "print(ALGORITHMS['fedavgm_test'].__qualname__)"],
                           env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])},
                           capture_output=True, text=True, timeout=300)
    assert child.stdout.strip() == "FedAvgM", child.stderr[-2000:]
