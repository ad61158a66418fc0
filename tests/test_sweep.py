"""Sweep workers share a grid through claim files: every run once, killed workers taken over."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

from fedkd_core import leases, sweep
from fedkd_core.results import config_hash, load_record
from plugin_methods import registry  # noqa: F401 (a fixture)


def test_a_claim_is_held_by_one_worker_until_released(tmp_path):
    path = leases.claim_path(tmp_path, "paper", "abc")
    assert leases.try_claim(path)
    assert not leases.try_claim(path)  # held by this live process
    leases.release(path)
    assert leases.try_claim(path)


def test_the_claim_of_a_dead_worker_is_stale_and_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    path = leases.claim_path(tmp_path, "paper", "abc")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname(), "started": 0}))
    assert leases.is_stale(path)
    assert leases.try_claim(path)
    assert json.loads(path.read_text())["pid"] == os.getpid()


def test_a_claim_from_another_host_is_stale_only_when_old(tmp_path):
    path = leases.claim_path(tmp_path, "paper", "abc")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"pid": 1, "host": "elsewhere", "started": 0}))
    assert not leases.is_stale(path, stale_after=3600)
    os.utime(path, (0, 0))
    assert leases.is_stale(path, stale_after=3600)


# The smoke profile made smaller still (20 images per client, 20 local and 50 global test images
# instead of 100, 100 and 500): what these tests check is who runs which run and what the sweep
# says, not the numbers, so their runs need be no larger than that. (Not the diverging runs below:
# with one batch per epoch, a loss made non-finite by the first step would never be seen.)
SMALL = "samples_per_client: 20\nlocal_test_size: 20\nglobal_test_size: 50\n"


@pytest.fixture
def smoke_grid(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDKD_RESULTS", str(tmp_path / "results"))
    # one torch thread per worker (the sweep's own knob for cores shared with other work): on two
    # busy cores a second thread made each run several times slower; what runs where is the same
    monkeypatch.setenv("FEDKD_SWEEP_THREADS", "1")
    params = tmp_path / "smoke.yaml"
    params.write_text("profile: smoke\nalphas: '0.5,1.0'\nrounds: 1\n" + SMALL)
    return params


def test_two_workers_run_every_run_of_the_grid_exactly_once(smoke_grid, tmp_path, capsys):
    _, configs = sweep.load_grid("setting", smoke_grid)
    sweep.main(["setting", "--params", str(smoke_grid), "--workers", "2"])
    out = capsys.readouterr()
    assert all(load_record(c) is not None for c in configs)
    assert (out.out + out.err).count("ALMA") == len(configs)  # one line per run: none ran twice
    assert not list((tmp_path / "results" / ".claims").rglob("*.claim"))
    sweep.main(["setting", "--params", str(smoke_grid), "--dry-run"])
    assert f"{len(configs)} done, 0 claimed by running workers, 0 left" in capsys.readouterr().out


def test_dry_run_counts_live_claims_apart_from_what_is_left(smoke_grid, tmp_path, capsys):
    params, configs = sweep.load_grid("setting", smoke_grid)
    from fedkd_core.results import config_hash, results_dir
    assert leases.try_claim(leases.claim_path(results_dir(), params.profile, config_hash(configs[0])))
    sweep.main(["setting", "--params", str(smoke_grid), "--dry-run"])
    assert f"0 done, 1 claimed by running workers, {len(configs) - 1} left" in capsys.readouterr().out


def test_the_dry_run_says_which_runs_resume_from_a_checkpoint(smoke_grid, capsys):
    params, configs = sweep.load_grid("setting", smoke_grid)
    from fedkd_core.results import config_hash, results_dir
    sweep.main(["setting", "--params", str(smoke_grid), "--dry-run"])
    assert "checkpoint" not in capsys.readouterr().out
    state = leases.state_path(results_dir(), params.profile, config_hash(configs[1]))
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_bytes(b"saved")
    sweep.main(["setting", "--params", str(smoke_grid), "--dry-run"])
    assert f"1 of them resume from a checkpoint (their last saved round): {sweep.describe(configs[1])}" in capsys.readouterr().out


def test_workers_must_be_positive(smoke_grid):
    with pytest.raises(SystemExit):
        sweep.main(["setting", "--params", str(smoke_grid), "--workers", "0"])


def test_a_claim_whose_pid_now_belongs_to_another_process_is_stale(tmp_path):
    path = leases.claim_path(tmp_path, "paper", "abc")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"pid": os.getpid(), "process_start": -1, "host": socket.gethostname(), "started": 0}))
    assert leases.is_stale(path)  # same pid, other start time: the pid was reused after a restart


def test_release_never_deletes_another_workers_claim(tmp_path):
    path = leases.claim_path(tmp_path, "paper", "abc")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"pid": 1, "host": socket.gethostname(), "started": 0}))
    leases.release(path)
    assert path.exists()


def test_a_stale_claim_taken_over_by_another_worker_first_is_given_back(tmp_path, monkeypatch):
    path = leases.claim_path(tmp_path, "paper", "abc")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"pid": -5, "host": socket.gethostname(), "started": 0}))  # a dead worker's
    other = json.dumps({"pid": 1, "host": socket.gethostname(), "started": 1})  # a live worker's claim
    real_rename = os.rename

    def rename_after_another_worker_took_over(src, dst):
        path.write_text(other)  # between our judgement and our rename, another worker took it over
        real_rename(src, dst)

    monkeypatch.setattr(leases.os, "rename", rename_after_another_worker_took_over)
    assert not leases.try_claim(path)
    assert path.read_text() == other  # the other worker's claim is back in place


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _descendants(pid: int) -> list[int]:
    children = _children(pid)
    return children + [grandchild for child in children for grandchild in _descendants(child)]


def _is_helper(pid: int) -> bool:
    """multiprocessing's fork server or resource tracker (a worker forked by the fork server has
    the server's command line, but the server, not the sweep, is its parent)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            text = cmdline.read().decode(errors="replace")
    except OSError:
        return False
    return "forkserver" in text or "resource_tracker" in text


def _workers(sweep_pid: int) -> list[int]:
    """The sweep's running worker processes: its descendants less its helpers (:func:`_is_helper`)."""
    helpers = {child for child in _children(sweep_pid) if _is_helper(child)}
    return [pid for pid in _descendants(sweep_pid) if pid not in helpers and _alive(pid)]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to find the workers")
def test_a_sweep_stopped_with_sigterm_leaves_no_worker_running(smoke_grid):
    import signal
    import time

    sweep_process = subprocess.Popen([sys.executable, "-m", "fedkd_core.sweep", "setting", "--params", str(smoke_grid),
                                      "--workers", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    workers = []
    while len(workers) < 2 and time.time() < deadline:  # wait for the two workers to start
        workers = _workers(sweep_process.pid)
        time.sleep(0.2)
    assert len(workers) >= 2, "the sweep did not start its workers"
    helpers = [p for p in _descendants(sweep_process.pid) if p not in workers]  # fork server, resource tracker
    sweep_process.send_signal(signal.SIGTERM)
    sweep_process.wait(timeout=60)
    time.sleep(0.5)
    assert not [p for p in workers if _alive(p)]  # stopped by the sweep, not at the end of their runs
    deadline = time.time() + 10  # the helpers exit once they see the sweep's pipes close
    while [p for p in helpers if _alive(p)] and time.time() < deadline:
        time.sleep(0.1)
    assert not [p for p in helpers if _alive(p)]


def test_the_dry_run_estimates_what_is_left_from_the_pace_of_like_runs():
    from types import SimpleNamespace

    def config(algorithm, clients):
        return {"algorithm": algorithm, "model": "cnn", "data": {"dataset": "cifar10", "num_clients": clients}}

    def record(algorithm, clients, seconds, machine="AMD EPYC (family 23 model 1, AVX2)"):
        return SimpleNamespace(config=config(algorithm, clients), timings={"total_seconds": seconds},
                               environment={"device_name": machine})

    done = [record("fedavg", 10, 100.0), record("fedavg", 10, 120.0), record("fedavg", 50, 500.0)]
    # like runs go by their own kind's mean; a kind never done by the mean of every done run
    assert sweep.estimated_seconds([config("fedavg", 10), config("fedavg", 50)], done) == 110.0 + 500.0
    assert sweep.estimated_seconds([config("moon", 20)], done) == 240.0
    assert sweep.estimated_seconds([config("fedavg", 10)], []) is None
    # runs of a kind made on this machine count first: another CPU of the same name may be 3x slower
    zen4 = "AMD EPYC (family 25 model 17, AVX512-BF16)"
    mixed = done + [record("fedavg", 10, 40.0, zen4)]
    assert sweep.estimated_seconds([config("fedavg", 10), config("fedavg", 50)], mixed, here=zen4) == 40.0 + 500.0
    assert sweep.estimated_seconds([config("fedavg", 10)], mixed) == (100.0 + 120.0 + 40.0) / 3


def test_a_kind_not_run_yet_goes_by_its_algorithms_pace_in_a_reference_profile_scaled_to_this_grid():
    """A grid that has run FedAvg only, twice as slow per unit of work as the reference profile's
    FedAvg: pFedMe, 5x FedAvg in the reference, is estimated at 5 x 2 x FedAvg's reference pace, not
    at FedAvg's (the mean of the runs done), which would make it look 5x cheaper."""
    from types import SimpleNamespace

    def config(algorithm, clients):
        return {"algorithm": algorithm, "model": "cnn", "rounds": 1, "data": {"dataset": "fmnist", "num_clients": clients,
                                                                             "samples_per_client": 100}}

    def record(algorithm, clients, seconds):
        return SimpleNamespace(config=config(algorithm, clients), timings={"total_seconds": seconds}, environment={})

    done = [record("fedavg", 100, 2 * 100 * 100.0)]  # pace 2 per unit of work
    reference = [record("fedavg", 20, 20 * 100.0), record("pfedme", 20, 5 * 20 * 100.0)]  # paces 1 and 5
    assert sweep.calibrated_paces(done, reference) == {"fedavg": 2.0, "pfedme": 10.0}
    assert sweep.estimated_seconds([config("pfedme", 100)], done, reference=reference) == 10.0 * 100 * 100
    assert sweep.estimated_seconds([config("pfedme", 100)], done) == 2.0 * 100 * 100  # no reference: the mean
    assert sweep.estimated_seconds([config("moon", 100)], done, reference=reference) == 2.0 * 100 * 100
    assert sweep.calibrated_paces(done, [record("moon", 20, 1.0)]) == {}  # nothing shared: nothing to scale by


def test_the_dry_run_scales_a_kinds_pace_by_each_runs_rounds_epochs_and_samples():
    from types import SimpleNamespace

    def config(samples, rounds=30, epochs=1, pool=None):
        return {"algorithm": "knfu", "model": "knfu_m2", "rounds": rounds, "train": {"epochs": epochs},
                "data": {"dataset": "cifar10", "num_clients": 20, "samples_per_client": samples, "pool_size": pool}}

    done = [SimpleNamespace(config=config(500), timings={"total_seconds": 350.0}, environment={}),
            SimpleNamespace(config=config(500), timings={"total_seconds": 370.0}, environment={})]
    assert sweep.run_work(config(1000)) == 2 * sweep.run_work(config(500)) == 30 * 20 * 1000
    assert sweep.run_work(config(None, pool=4000)) == 30 * 4000  # a pool shared out by the partition
    assert sweep.estimated_seconds([config(1000)], done) == pytest.approx(720.0)  # twice the data: twice the time
    assert sweep.estimated_seconds([config(500, rounds=15, epochs=2)], done) == pytest.approx(360.0)


def test_the_dry_run_names_the_pace_and_machine_once_runs_are_done(smoke_grid, capsys):
    sweep.main(["setting", "--params", str(smoke_grid), "--limit", "1"])
    capsys.readouterr()
    sweep.main(["setting", "--params", str(smoke_grid), "--dry-run"])
    out = capsys.readouterr().out
    assert "1 done" in out and "left: about" in out and "at the pace of the 1 run done" in out
    assert "1 of them on this machine's" in out


def test_runs_are_claimed_seed_by_seed_in_grid_order_within_a_seed():
    from types import SimpleNamespace
    grid = [SimpleNamespace(algorithm=a, seed=s) for a in ("fedavg", "moon") for s in (0, 1, 2)]
    order = [(c.algorithm, c.seed) for c in sweep.run_order(grid)]
    assert order == [("fedavg", 0), ("moon", 0), ("fedavg", 1), ("moon", 1), ("fedavg", 2), ("moon", 2)]


def test_the_estimate_reads_in_minutes_below_an_hour():
    assert [sweep.duration_text(s) for s in (5, 150, 3599, 3600, 5400)] == ["1 min", "2 min", "60 min", "1.0 h", "1.5 h"]


def test_a_run_that_diverges_is_stored_reported_and_the_sweep_goes_on(tmp_path, monkeypatch, capsys):
    """A diverged run is a result (the method fails under that config), not a fault that stops
    the other runs: it is stored as <key>.diverged.json, counted as run, and never retried."""
    from fedkd_core.results import load_divergence

    monkeypatch.setenv("FEDKD_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FEDKD_SWEEP_THREADS", "1")  # as in smoke_grid
    params = tmp_path / "smoke.yaml"
    params.write_text("profile: smoke\nalphas: '0.5'\nrounds: 1\nlr: 1.0e+30\nmixed_precision: false\n")
    _, configs = sweep.load_grid("setting", params)
    sweep.main(["setting", "--params", str(params), "--workers", "1"])  # no SystemExit: nothing failed
    out = capsys.readouterr()
    assert (out.out + out.err).count("DIVERGED") == len(configs) == 2  # Local and FedAvg, lr 1e30
    assert all(load_divergence(c) is not None and load_record(c) is None for c in configs)
    assert not list((tmp_path / "results" / ".claims").rglob("*.claim"))
    sweep.main(["setting", "--params", str(params), "--dry-run"])
    assert "0 done, 2 diverged (stored), 0 claimed by running workers, 0 left" in capsys.readouterr().out


def test_a_claim_from_another_host_with_a_heartbeat_is_stale_after_missed_beats(tmp_path):
    path = leases.claim_path(tmp_path, "paper", "abc")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"pid": 1, "host": "elsewhere", "started": 0, "heartbeat": 60.0}))
    beat = time.time() - 60.0 * (leases.MISSED_BEATS - 1)  # a few beats missed: maybe a slow disk
    os.utime(path, (beat, beat))
    assert not leases.is_stale(path)
    beat = time.time() - 60.0 * (leases.MISSED_BEATS + 1)  # the host or its worker is gone
    os.utime(path, (beat, beat))
    assert leases.is_stale(path)  # not 24 hours later


def test_a_heartbeat_touches_the_claims_it_holds_and_no_other(tmp_path):
    held, released, gone = (leases.claim_path(tmp_path, "paper", key) for key in ("held", "released", "gone"))
    assert leases.try_claim(held, heartbeat=0.05) and leases.try_claim(released) and leases.try_claim(gone)
    assert json.loads(held.read_text())["heartbeat"] == 0.05
    for path in (held, released, gone):
        os.utime(path, (0, 0))
    with leases.Heartbeat(every=0.05) as heartbeat:
        for path in (held, released, gone):
            heartbeat.add(path)
        heartbeat.discard(released)
        gone.unlink()
        time.sleep(0.5)
    assert held.stat().st_mtime > time.time() - 60 and released.stat().st_mtime == 0
    assert not gone.exists()  # a claim released or taken over meanwhile is not brought back


def test_ray_options_that_contradict_each_other_are_usage_errors(smoke_grid, capsys):
    for argv, message in ((["--ray", "local", "--workers", "2"], "--workers starts local processes"),
                          (["--cpus", "2"], "--cpus only apply with --ray"),
                          (["--ray", "auto", "--cpus", "2"], "--cpus sizes the cluster --ray local starts"),
                          (["--ray", "local", "--run-gpus", "1.5"], "--run-gpus must be between 0 and 1"),
                          (["--ray", "local", "--run-cpus", "0"], "--run-cpus must be > 0")):
        with pytest.raises(SystemExit):
            sweep.main(["setting", "--params", str(smoke_grid), *argv])
        assert message in capsys.readouterr().err


def test_without_ray_installed_the_ray_sweep_says_how_to_install_it(smoke_grid, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(SystemExit, match=r"--ray needs Ray.*pip install -e '.\[flower\]'.*--workers N"):
        sweep.main(["setting", "--params", str(smoke_grid), "--ray", "local"])


def test_a_robustness_sweep_on_ray_takes_the_runs_in_the_local_sweeps_order(tmp_path, monkeypatch):
    """The Ray path gets what is left in the order a local sweep takes it: variant by variant."""
    from fedkd_core import ray_sweep

    monkeypatch.setenv("FEDKD_RESULTS", str(tmp_path / "results"))
    sent = {}
    monkeypatch.setattr(ray_sweep, "run_on_ray", lambda configs, profile, options, **kw: sent.update(
        configs=configs, profile=profile, options=options) or 0)
    params = "notebooks/params/robustness/knfu.yaml"
    argv = ["knfu", "--params", params, "--robustness", "--variant", "R = 30 rounds", "--ray", "auto",
            "--run-gpus", "0.5"]
    sweep.main(argv)
    _, grid = sweep.load_grid("knfu", params, robustness=True, variants=("R = 30 rounds",))
    assert [config_hash(c) for c in sent["configs"]] == [config_hash(c) for c in grid] and grid
    assert sent["options"].address == "auto" and sent["options"].run_gpus == 0.5


def test_a_committed_reduced_yaml_runs_its_whole_grid_and_a_copy_elsewhere_is_refused(tmp_path):
    """reduced/fedua.yaml (cnn5, a decaying local lr) is a committed reference profile labelled
    "reduced": the sweep runs all of it; the same file with another model, outside
    notebooks/params/ is a user's run labelled "reduced", refused with the guard's advice."""
    from fedkd_core.chapters import fedua
    from fedkd_core.sweep import load_grid

    committed = ROOT / "notebooks" / "params" / "reduced" / "fedua.yaml"
    params, configs = load_grid("fedua", committed)
    assert params.model == "cnn5" and len(configs) == len(fedua.experiments(params)) == 69
    assert {c.train.lr_decay_at for c in configs} == {(13, 25)}
    copy = tmp_path / "fedua.yaml"
    copy.write_text(committed.read_text().replace("model: cnn5", "model: resnet8"))
    with pytest.raises(ValueError, match="profile custom"):
        load_grid("fedua", copy)


def test_the_dry_run_of_a_rerun_paces_its_methods_not_run_yet_by_the_chapters_reference_profile():
    from fedkd_core.chapters import fedckd

    committed = Path(__file__).resolve().parents[1] / "results"
    reference = sweep.pace_reference("fedckd", fedckd.PAPER_FMNIST100, committed)
    assert len(reference) == len(fedckd.experiments(fedckd.REDUCED_PROFILE))  # every run committed
    assert {record.profile for record in reference} == {"reduced"}
    assert {record.config["algorithm"] for record in reference} >= {"fedavg", "pfedme"}
    assert sweep.pace_reference("fedckd", fedckd.REDUCED_PROFILE, committed) == []  # not a rerun
    assert sweep.pace_reference("setting", None, committed) == []  # a chapter without reruns


def _live_claim(root, profile: str, key: str, started: float):
    """A claim of ``key`` under ``profile`` held by this (live) process, started at ``started``."""
    path = leases.claim_path(root, profile, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**leases._this_process(), "started": started, "heartbeat": 60.0}))
    return path


def test_of_two_profiles_sharing_a_run_the_claim_started_first_keeps_it(tmp_path):
    """FedGMKD's 50-round robustness grid (profile robustness) shares runs with the 50-round rerun
    (profile reduced): whichever claimed first runs it, the profile's name breaking a tie, and a
    stale claim elsewhere does not hold a run back."""
    _live_claim(tmp_path, "reduced", "abc", started=100.0)
    _live_claim(tmp_path, "robustness", "abc", started=200.0)
    assert leases.yields_to_another(tmp_path, "robustness", "abc")
    assert not leases.yields_to_another(tmp_path, "reduced", "abc")
    _live_claim(tmp_path, "robustness", "abc", started=100.0)  # the same instant: "reduced" sorts first
    assert leases.yields_to_another(tmp_path, "robustness", "abc")
    assert not leases.yields_to_another(tmp_path, "reduced", "abc")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leases.claim_path(tmp_path, "reduced", "abc").write_text(
        json.dumps({"pid": int(dead.stdout), "host": socket.gethostname(), "started": 0.0}))
    assert not leases.yields_to_another(tmp_path, "robustness", "abc")
    assert leases.live_claims_of(tmp_path, "abc") == [leases.claim_path(tmp_path, "robustness", "abc")]


def test_a_checkpoint_left_under_another_profile_is_adopted_unless_its_worker_lives(tmp_path):
    other = leases.state_path(tmp_path, "reduced", "abc")
    other.parent.mkdir(parents=True)
    other.write_bytes(b"saved round 7")
    _live_claim(tmp_path, "reduced", "abc", started=1.0)
    assert not leases.adopt_state(tmp_path, "robustness", "abc")  # its worker still runs it
    leases.release(leases.claim_path(tmp_path, "reduced", "abc"))
    assert leases.adopt_state(tmp_path, "robustness", "abc")
    assert leases.state_path(tmp_path, "robustness", "abc").read_bytes() == b"saved round 7" and not other.exists()
    assert not leases.adopt_state(tmp_path, "robustness", "abc")  # nothing left to adopt


def test_a_sweep_leaves_a_run_that_a_sweep_of_another_profile_holds_and_counts_it_claimed(smoke_grid, capsys):
    params, configs = sweep.load_grid("setting", smoke_grid)
    from fedkd_core.results import results_dir
    held = config_hash(configs[0])
    _live_claim(results_dir(), "another_profile", held, started=0.0)
    sweep.main(["setting", "--params", str(smoke_grid), "--dry-run"])
    assert f"0 done, 1 claimed by running workers, {len(configs) - 1} left" in capsys.readouterr().out
    sweep.main(["setting", "--params", str(smoke_grid), "--workers", "1"])
    assert load_record(configs[0]) is None and all(load_record(c) is not None for c in configs[1:])


def test_a_robustness_reruns_dry_run_paces_by_the_grid_it_reruns():
    """FedGMKD's 50-round grid goes by the 15-round grid's committed runs (every variant's), and
    only when asked for the robustness grid: no rerun of the chapter's own grid has its params."""
    from fedkd_core.chapters import fedgmkd

    reference = sweep.pace_reference("fedgmkd", fedgmkd.ROBUSTNESS_RERUN, ROOT / "results", robustness=True)
    variant_keys = {config_hash(c) for c in fedgmkd.experiments(fedgmkd.ROBUSTNESS_BASE)}
    assert reference and any(record.key not in variant_keys for record in reference)  # the variants' FedGMKD runs
    assert all(record.config["rounds"] == 15 for record in reference)
    assert sweep.pace_reference("fedgmkd", fedgmkd.ROBUSTNESS_RERUN, ROOT / "results") == []


# --- a long run shows its rounds while it runs -----------------------------------------------------

def test_round_progress_says_the_round_reached_and_the_time_left_at_this_sessions_pace():
    from types import SimpleNamespace

    reports, now = [], iter([0.0, 120.0, 180.0, 6000.0])
    on_round = sweep.round_progress(SimpleNamespace(algorithm="pfedsd", seed=1), lambda *report: reports.append(report),
                                    clock=lambda: next(now))
    on_round(4, 100)  # resumed after round 3: one round this session, in 120 s
    on_round(5, 100)  # two rounds in 180 s: 90 s a round, 95 rounds left
    on_round(100, 100)
    assert reports == [("round", "pfedsd s1 round 4/100, 3.2 h left"), ("round", "pfedsd s1 round 5/100, 2.4 h left"),
                       ("round", "pfedsd s1 round 100/100")]


def round_reporting_worker(queue) -> None:
    import os

    pid = os.getpid()
    for kind, text in (("start", "fedavg mnist seed=0"), ("round", "fedavg s0 round 1/2, 1 min left"),
                       ("round", "fedavg s0 round 2/2"), ("done", "fedavg mnist seed=0: ALMA 0.5000 (2 s)")):
        queue.put((pid, kind, text))
    queue.close()
    queue.join_thread()


def test_the_sweep_shows_the_rounds_of_running_runs_and_counts_them_as_no_failure(capsys):
    import multiprocessing

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    worker = context.Process(target=round_reporting_worker, args=(queue,))
    worker.start()
    assert sweep._follow([worker], queue, "setting", 1, 1) == 0
    out = capsys.readouterr()
    shown = out.out + out.err
    assert "fedavg s0 round 1/2, 1 min left" in shown and "fedavg mnist seed=0: ALMA 0.5000 (2 s)" in shown
    assert "FAILED" not in shown


def test_a_sweep_worker_reports_every_round_of_its_runs(smoke_grid, tmp_path):
    params, configs = sweep.load_grid("setting", smoke_grid)
    reports = []
    sweep.work("setting", smoke_grid, 1, lambda kind, text: reports.append((kind, text)))
    kinds = [kind for kind, _ in reports]
    assert kinds == ["start"] + ["round"] * configs[0].rounds + ["done"]
    assert reports[-2][1] == f"{configs[0].algorithm} s{configs[0].seed} round {configs[0].rounds}/{configs[0].rounds}"


def test_the_dry_runs_pace_reads_runs_made_on_this_machines_kind_of_device(monkeypatch):
    """A GPU run (several sharing the device) must not set a CPU's pace, nor the reverse; where no
    run was made on this kind of device, every run is all there is to go by."""
    from types import SimpleNamespace

    import torch

    from fedkd_core import sweep

    cpu = SimpleNamespace(environment={"device": "cpu"})
    old = SimpleNamespace(environment={})  # a record that does not say: a CPU's
    gpu = SimpleNamespace(environment={"device": "cuda:0"})
    monkeypatch.setattr(sweep, "default_device", lambda: torch.device("cpu"))
    assert sweep.like_this_machine([cpu, gpu, old]) == [cpu, old]
    assert sweep.like_this_machine([gpu]) == [gpu]
    monkeypatch.setattr(sweep, "default_device", lambda: torch.device("cuda"))
    assert sweep.like_this_machine([cpu, gpu, old]) == [gpu]


def test_a_worker_goes_by_the_pipe_of_the_sweep_that_started_it_whoever_its_parent_process_is(monkeypatch):
    """A worker forked by the fork server has the server as its parent process, not the sweep: it
    asks multiprocessing's handle on the process that started it whether the sweep still runs."""
    import multiprocessing

    class Starter:
        pid, alive = 4242, True

        def is_alive(self):
            return self.alive

    starter = Starter()
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: starter)
    assert sweep.sweep_alive(4242) and sweep.sweep_alive(None)
    starter.alive = False
    assert not sweep.sweep_alive(4242)  # the sweep has gone, though the fork server (the parent) lives on
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: None)  # not started by multiprocessing
    assert sweep.sweep_alive(os.getppid()) and not sweep.sweep_alive(os.getppid() + 100_000)


@pytest.mark.parametrize("value, threads", [("3", 3), (" 2 ", 2), ("4,2", None), ("0", None), ("", None), (None, None)])
def test_a_worker_takes_the_one_thread_count_omp_num_threads_gives(monkeypatch, value, threads):
    if value is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert sweep.omp_threads() == threads


def test_a_method_registered_here_runs_on_workers_whose_fork_server_an_earlier_sweep_started(registry, tmp_path,
                                                                                              monkeypatch):
    """A user's method registered in this process (announced through FEDKD_ALGORITHMS) runs on a
    sweep's workers, also when an earlier sweep here started the fork server before it was registered."""
    from fedkd_core.algorithms import register
    from plugin_methods import FedAvgM

    monkeypatch.setenv("FEDKD_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FEDKD_SWEEP_THREADS", "1")
    grid = "profile: smoke\nalphas: '0.5'\nrounds: 1\nmixed_precision: false\nalgorithms: {}\n"
    (tmp_path / "first.yaml").write_text(grid.format("local"))
    sweep.main(["setting", "--params", str(tmp_path / "first.yaml"), "--workers", "1"])
    register("fedavgm_sweep", FedAvgM)
    (tmp_path / "plugin.yaml").write_text(grid.format("fedavgm_sweep"))
    _, configs = sweep.load_grid("setting", tmp_path / "plugin.yaml")
    sweep.main(["setting", "--params", str(tmp_path / "plugin.yaml"), "--workers", "1"])  # SystemExit on a failure
    assert configs and all(load_record(c) is not None for c in configs)
