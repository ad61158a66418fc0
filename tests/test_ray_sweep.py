"""A sweep on a Ray cluster writes what a local sweep writes, and survives its faults.

One local Ray cluster (2 CPUs) serves the whole module: starting Ray costs 10-20 s. The sweep
finds this process already connected and uses that cluster (``ray_sweep.connect``)."""

import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[flower]'): the Ray sweep is untested")

from fedkd_core import leases, ray_sweep, sweep  # noqa: E402
from fedkd_core.experiment import ExperimentConfig, RunDiverged  # noqa: E402
from fedkd_core.federation import DataConfig  # noqa: E402
from fedkd_core.results import config_hash, load_record, run_experiment  # noqa: E402
from fedkd_core.training import TrainConfig  # noqa: E402

# The wrapped tasks below are defined here: Ray's workers get them by value, not by importing this file.
import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])

# Runs smaller than the smoke profile's (20 images per client, 20 local and 50 global test images;
# TINY scores 50 test images, not MNIST's whole 10,000): these tests check where runs go and what
# comes back, which does not depend on how much each run trains or scores.
SMALL = "samples_per_client: 20\nlocal_test_size: 20\nglobal_test_size: 50\n"
SMOKE = "profile: smoke\nalphas: '0.5'\nrounds: 2\nmixed_precision: false\n" + SMALL
# (the diverging runs keep the smoke profile's 100 images: with one batch per epoch, a loss made
# non-finite by the first step would never be seen; they stop in round 1, before any scoring)
DIVERGING = "profile: smoke\nalphas: '1.0'\nrounds: 1\nlr: 1.0e+30\nmixed_precision: false\n"
TINY = ExperimentConfig(algorithm="fedavg", data=DataConfig("mnist", num_clients=2, samples_per_client=20,
                                                           local_test_size=10),
                        model="knfu_m1", train=TrainConfig(batch_size=10, mixed_precision=False), rounds=1,
                        global_test_size=50)


@pytest.fixture(scope="module")
def cluster():
    started = ray_sweep.connect(ray_sweep.RayOptions("local", cpus=2))
    yield
    if started:
        ray.shutdown()


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDKD_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


def stored_files(root: Path) -> dict[str, dict]:
    """Every record and divergence under ``root`` (path relative to it -> JSON), claims aside."""
    return {str(p.relative_to(root)): json.loads(p.read_text()) for p in sorted(root.rglob("*.json"))
            if ".claims" not in p.parts}


def outcome_part(stored: dict) -> dict:
    """What a run computed: a record or divergence without where and how long it ran."""
    history = [{k: v for k, v in row.items() if k != "seconds"} for row in stored["history"]]
    return {**{k: v for k, v in stored.items() if k not in ("timings", "environment")}, "history": history}


def test_a_ray_sweep_writes_the_records_and_divergences_an_in_process_run_writes(cluster, results, tmp_path, capsys):
    """Keys, per-round numbers, per-client accuracies and the diverged runs' files are those of an
    in-process run; each record names the node it ran on; a rerun finds nothing left."""
    grids = []
    for name, text in (("smoke", SMOKE), ("diverging", DIVERGING)):
        (tmp_path / f"{name}.yaml").write_text(text)
        grids.append(tmp_path / f"{name}.yaml")
    for grid in grids:
        sweep.main(["setting", "--params", str(grid), "--ray", "local"])
    out = "".join(capsys.readouterr())

    local_root = tmp_path / "in-process"
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each Ray task (--run-cpus 1)
    try:
        for grid in grids:
            for config in sweep.load_grid("setting", grid)[1]:
                try:
                    run_experiment(config, root=local_root, profile="smoke", progress=False)
                except RunDiverged:
                    pass
    finally:
        torch.set_num_threads(threads)

    on_ray, in_process = stored_files(results), stored_files(local_root)
    assert sorted(on_ray) == sorted(in_process) and len(on_ray) == 4
    assert sum(name.endswith(".diverged.json") for name in on_ray) == 2
    for name in on_ray:
        assert outcome_part(on_ray[name]) == outcome_part(in_process[name]), name
        env = on_ray[name]["environment"]
        assert env["host"] and env["ray_node_id"] == ray.get_runtime_context().get_node_id() and env["device"] == "cpu"
    assert out.count("ALMA") == 2 and out.count("DIVERGED") == 2
    assert not list(results.rglob("*.claim"))
    sweep.main(["setting", "--params", str(grids[0]), "--ray", "local"])  # resumes: nothing left, nothing started
    assert "2 done, 0 claimed by running workers, 0 left" in capsys.readouterr().out


def failing_in_the_run(config, *args, **kwargs):
    """A task whose run raises inside training for one config (too many samples asked for)."""
    if config.seed == 1:
        config = replace(config, data=replace(config.data, samples_per_client=10**6))
    return ray_sweep.run_one(config, *args, **kwargs)


def test_a_run_that_raises_is_reported_with_its_config_and_traceback_and_the_sweep_goes_on(cluster, results, capsys):
    configs = [TINY, replace(TINY, seed=1)]
    failures = ray_sweep.run_on_ray(configs, "smoke", ray_sweep.RayOptions("local"), task=failing_in_the_run)
    out = "".join(capsys.readouterr())
    assert failures == 1
    assert load_record(configs[0]) is not None and load_record(configs[1]) is None
    assert f"FAILED {configs[1]} (key {config_hash(configs[1])}" in out
    assert '"seed": 1' in out and "Traceback" in out and "samples_per_client must be" in out
    assert not list(results.rglob("*.claim"))


def crashing_once(marker: str):
    """A task whose worker process dies the first time it runs (as on a node that dies)."""
    def task(config, *args, **kwargs):
        if not os.path.exists(marker):
            Path(marker).touch()
            os._exit(1)
        return ray_sweep.run_one(config, *args, **kwargs)
    return task


def test_a_task_whose_worker_dies_is_retried_and_without_retries_is_reported(cluster, results, tmp_path, capsys):
    retried = ray_sweep.run_on_ray([TINY], "smoke", ray_sweep.RayOptions("local", max_retries=1),
                                   task=crashing_once(str(tmp_path / "first")))
    assert retried == 0 and load_record(TINY) is not None
    other = replace(TINY, seed=2)
    failed = ray_sweep.run_on_ray([other], "smoke", ray_sweep.RayOptions("local", max_retries=0),
                                  task=crashing_once(str(tmp_path / "second")))
    out = "".join(capsys.readouterr())
    assert failed == 1 and load_record(other) is None
    assert f"FAILED {other}" in out and "Worker" in out and not list(results.rglob("*.claim"))


def sleeping(config, *args, **kwargs):
    time.sleep(120)
    return ray_sweep.run_one(config, *args, **kwargs)


def test_ctrl_c_cancels_the_tasks_and_leaves_no_record_and_no_claim(cluster, results, monkeypatch, capsys):
    cancelled = []
    real_cancel = ray.cancel

    def interrupted_wait(*args, **kwargs):
        time.sleep(1.0)  # the tasks have started
        raise KeyboardInterrupt

    def recording_cancel(ref, **kwargs):
        cancelled.append(ref)
        real_cancel(ref, **kwargs)

    monkeypatch.setattr(ray, "wait", interrupted_wait)
    monkeypatch.setattr(ray, "cancel", recording_cancel)
    configs = [replace(TINY, seed=s) for s in (5, 6, 7)]
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        ray_sweep.run_on_ray(configs, "smoke", ray_sweep.RayOptions("local"), task=sleeping)
    assert len(cancelled) == 3
    for ref in cancelled:
        with pytest.raises((ray.exceptions.TaskCancelledError, ray.exceptions.WorkerCrashedError)):
            ray.get(ref, timeout=30)
    assert time.perf_counter() - start < 60  # not the two minutes the tasks would have slept
    assert "stopped: 3 run(s) cancelled" in "".join(capsys.readouterr())
    assert not list(results.rglob("*.json")) and not list(results.rglob("*.claim")) and not list(results.rglob("*.tmp"))


def test_runs_claimed_by_a_live_worker_are_left_to_it(cluster, results, capsys):
    from fedkd_core.results import results_dir

    held = replace(TINY, seed=8)
    claim = leases.claim_path(results_dir(), "smoke", config_hash(held))
    assert leases.try_claim(claim)  # this live process: as another sweep's worker would
    assert ray_sweep.run_on_ray([held], "smoke", ray_sweep.RayOptions("local")) == 0
    assert load_record(held) is None and claim.exists()


def test_ray_that_cannot_start_or_be_joined_says_why_and_what_to_do(monkeypatch):
    def failing_init(*args, **kwargs):
        raise ConnectionError("no GCS there")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", failing_init)
    with pytest.raises(SystemExit, match=r"Ray could not start a cluster on this machine \(ConnectionError: no GCS "
                                         r"there\).*'ray stop'.*--workers N.*Nothing was run"):
        ray_sweep.connect(ray_sweep.RayOptions("local"))
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    start = time.perf_counter()
    with pytest.raises(SystemExit, match=rf"could not join the Ray cluster at '127.0.0.1:{port}' \(ConnectionError: "
                                         r"nothing answers.*'ray start --head'.*book/cluster.md.*Nothing was run"):
        ray_sweep.connect(ray_sweep.RayOptions(f"127.0.0.1:{port}"))
    assert time.perf_counter() - start < 30  # Ray alone retries an absent head for minutes


def test_runs_no_node_can_take_are_refused_before_anything_waits_for_ever():
    nodes = [{"Alive": True, "Resources": {"CPU": 16.0, "GPU": 1.0}}, {"Alive": False, "Resources": {"CPU": 64.0}}]
    ray_sweep.check_feasible(nodes, 4, 0.25)
    with pytest.raises(SystemExit, match=r"no node of the Ray cluster has the 32 CPU\(s\) and 0 GPU\(s\).*"
                                         r"16 CPUs, 1 GPUs"):
        ray_sweep.check_feasible(nodes, 32, 0)
    assert ray_sweep.run_gpus(ray_sweep.RayOptions("auto"), cluster_gpus=8) == 0.25  # --per-gpu 4, as locally
    assert ray_sweep.run_gpus(ray_sweep.RayOptions("auto"), cluster_gpus=0) == 0
    assert ray_sweep.run_gpus(ray_sweep.RayOptions("auto", run_gpus=0.5), cluster_gpus=8) == 0.5


def test_a_run_another_profiles_live_sweep_claimed_first_is_left_and_a_stopped_ones_checkpoint_adopted(results):
    """As a local sweep does (tests/test_sweep.py): two profiles may share a run (FedGMKD's 50-round
    grid and rerun), so the driver leaves a run that a live sweep of another profile claimed first,
    and takes over the checkpoint that a stopped one left, so the task resumes from it."""
    from fedkd_core.results import results_dir

    root = results_dir()
    held, saved, free = (replace(TINY, seed=seed) for seed in (11, 12, 13))
    other = leases.claim_path(root, "robustness", config_hash(held))
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_text(json.dumps({**leases._this_process(), "started": 0.0, "heartbeat": 60.0}))
    left = leases.state_path(root, "robustness", config_hash(saved))
    left.write_bytes(b"saved round 3")
    with leases.Heartbeat() as heartbeat:
        taken = ray_sweep._claim_pending([held, saved, free], "smoke", None, heartbeat)
    assert [config for config, _ in taken] == [saved, free]
    assert not leases.claim_path(root, "smoke", config_hash(held)).exists()  # ours released, theirs kept
    assert other.exists()
    assert leases.state_path(root, "smoke", config_hash(saved)).read_bytes() == b"saved round 3" and not left.exists()
    for _, claim in taken:
        leases.release(claim)
