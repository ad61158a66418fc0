"""Faults of the record folder, of parameters and of sweeps: each is refused before any
training, or gives one error naming the thing and the fix; a finished run is never lost."""

import json
from types import SimpleNamespace

import pytest

from fedkd_core import results
from fedkd_core.experiment import ExperimentConfig
from fedkd_core.federation import DataConfig
from fedkd_core.training import TrainConfig

TINY = ExperimentConfig("fedavg", data=DataConfig("mnist", num_clients=2, samples_per_client=40, local_test_size=40),
                        train=TrainConfig(epochs=1, batch_size=16), rounds=1, global_test_size=100)


def never_trains(*args, **kwargs):
    raise AssertionError("the run trained although its record could not be saved")


def test_an_unwritable_record_folder_is_refused_before_training(tmp_path, monkeypatch):
    blocker = tmp_path / "results"
    blocker.write_text("a file where the results folder should be")  # unwritable also for root
    monkeypatch.setattr(results, "simulate", never_trains)
    with pytest.raises(results.ResultsNotWritable, match=r"results folder .*results/custom/fedavg cannot be "
                                                         r"written .*FEDKD_RESULTS.*nothing was run"):
        results.run_experiment(TINY, root=blocker, progress=False)


def test_a_disk_too_full_for_a_run_is_refused_before_training(tmp_path, monkeypatch):
    monkeypatch.setattr(results.shutil, "disk_usage", lambda path: SimpleNamespace(free=5 * 2**20))
    monkeypatch.setattr(results, "simulate", never_trains)
    with pytest.raises(results.ResultsNotWritable, match=r"a disk with 5 MiB free, less than .*free some space"):
        results.run_experiment(TINY, root=tmp_path, progress=False)


def test_a_save_that_fails_after_training_puts_the_record_in_a_fallback_named_in_the_error(tmp_path, monkeypatch):
    fallback = tmp_path / "fallback"
    monkeypatch.setattr(results, "FALLBACK_FOLDERS", (tmp_path / "blocked" / "x", fallback))
    (tmp_path / "blocked").write_text("not a folder")
    write = results._write_atomically

    def full_disk(record, path):
        if path.is_relative_to(tmp_path / "results"):
            raise OSError(28, "No space left on device")
        return write(record, path)

    monkeypatch.setattr(results, "_write_atomically", full_disk)
    with pytest.raises(results.RecordNotSaved) as error:
        results.run_experiment(TINY, root=tmp_path / "results", progress=False)
    saved = fallback / "custom" / "fedavg" / f"{results.config_hash(TINY)}.json"
    assert f"The finished run is safe in {saved}" in str(error.value) and "mv " in str(error.value)
    assert results.read_record(saved).history[-1]["round"] == 1


def test_an_unreadable_record_is_named(tmp_path):
    path = results.record_path(TINY, "custom", tmp_path)
    path.mkdir(parents=True)  # unreadable as a file, also for root
    with pytest.raises(results.RecordError, match=f"results record {path} cannot be read .*delete it"):
        results.load_record(TINY, tmp_path)


# --- parameters: papermill's and a sweep's YAML, one ValueError naming each --------------------

@pytest.mark.parametrize("given, words", [
    ({"seeds": "abc"}, "parameter 'seeds' must be an integer (got 'abc', a str)"),
    ({"seeds": 1.5}, "parameter 'seeds' must be an integer (got 1.5, a float)"),
    ({"lr": True}, "parameter 'lr' must be a number (got True, a bool)"),
    ({"alphas": [0.1, 0.5]}, "parameter 'alphas' must be a string (a list is one comma-separated string)"),
    ({"alpha": 0.1}, "unknown parameter(s) 'alpha' (did you mean 'alphas'?)"),
    ({"local_epochs": 0}, "'local_epochs' must be >= 1: with no local epoch the clients never train"),
    ({"local_test_size": 0}, "'local_test_size' must be >= 1: an empty local test set gives no client accuracy"),
    ({"global_test_size": -5}, "'global_test_size' must be >= 0"),
])
def test_a_wrong_unknown_or_meaningless_parameter_is_one_value_error_naming_it(given, words):
    from fedkd_core.chapters import chapter_params, setting

    with pytest.raises(ValueError) as error:
        chapter_params(setting.Params, given)
    assert words in str(error.value)


def test_papermill_parameters_are_checked_as_a_sweeps_are():
    from fedkd_core.chapters import notebook_params, setting

    with pytest.raises(ValueError, match="'seeds' must be an integer"):
        notebook_params(setting.Params, {"seeds": "abc", "np": json})  # modules in the namespace are skipped
    assert notebook_params(setting.Params, {"alphas": 0.1, "lr": 1}).alphas == 0.1  # papermill's number for a list


def test_a_sweep_yaml_with_an_unknown_key_names_the_file_and_suggests_the_name(tmp_path, capsys):
    from fedkd_core import sweep

    params = tmp_path / "typo.yaml"
    params.write_text("profile: smoke\nalpha: 0.1\n")
    with pytest.raises(SystemExit, match=f"{params}: unknown parameter\\(s\\) 'alpha' \\(did you mean 'alphas'\\?\\)"):
        sweep.main(["setting", "--params", str(params), "--dry-run"])


@pytest.mark.parametrize("build, words", [
    (lambda: DataConfig("mnist", local_test_size=0), "local_test_size must be >= 1"),
    (lambda: ExperimentConfig(global_test_size=-5), "global_test_size must be None (the whole test split) or >= 1"),
    (lambda: ExperimentConfig(global_test_size=0), "global_test_size must be None"),
])
def test_configs_refuse_sizes_that_make_a_run_meaningless(build, words):
    with pytest.raises(ValueError, match=words.replace("(", "\\(").replace(")", "\\)")):
        build()


# --- sweeps: every unreadable record at once, a dead worker's run named ------------------------

@pytest.fixture
def smoke_sweep(tmp_path, monkeypatch):
    """A 4-run smoke grid of the setting chapter with its records under ``tmp_path``."""
    from fedkd_core import sweep

    monkeypatch.setenv("FEDKD_RESULTS", str(tmp_path / "results"))
    params = tmp_path / "smoke.yaml"
    params.write_text("profile: smoke\nalphas: '0.5,1.0'\nrounds: 1\nnum_clients: 2\nsamples_per_client: 40\n"
                      "local_test_size: 40\nglobal_test_size: 100\n")
    return params, sweep.load_grid("setting", params)[1]


def store_broken_records(configs) -> list:
    """Three broken records of ``configs[:3]``: invalid JSON, no history, no total seconds."""
    paths = [results.record_path(config, "smoke") for config in configs[:3]]
    good = {"config": configs[0].resolved(), "key": "k", "client_accuracies": [], "environment": {},
            "profile": "smoke", "history": [{"round": 1, "alma": 0.5}], "timings": {"total_seconds": 1.0}}
    for path, text in zip(paths, ["{ not json", json.dumps({**good, "history": []}),
                                  json.dumps({**good, "timings": {}})]):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return paths


def test_dry_run_and_sweep_name_every_unreadable_or_incomplete_record_at_once(smoke_sweep):
    from fedkd_core import sweep

    params, configs = smoke_sweep
    paths = store_broken_records(configs)
    for extra in (["--dry-run"], []):
        with pytest.raises(SystemExit) as stop:
            sweep.main(["setting", "--params", str(params), *extra])
        message = str(stop.value)
        assert message.startswith("3 stored record(s) cannot be read or are incomplete")
        assert all(str(path) in message for path in paths)
        assert "history is empty" in message and "lack 'total_seconds'" in message
    assert not results.record_path(configs[3], "smoke").exists()  # nothing ran


def test_a_record_with_an_empty_history_is_not_a_finished_run(tmp_path):
    path = results.record_path(TINY, "custom", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"config": TINY.resolved(), "key": "k", "history": [], "client_accuracies": [],
                                "timings": {"total_seconds": 1.0}, "environment": {}, "profile": "custom"}))
    with pytest.raises(results.RecordError, match="is incomplete: its history is empty"):
        results.is_finished(TINY, tmp_path)


def killed_worker(queue) -> None:
    import os
    import signal

    queue.put((os.getpid(), "start", "fedavg    mnist dirichlet(alpha=0.5) 2 clients seed=0"))
    queue.close()
    queue.join_thread()  # the report is on its way (a real run takes seconds after it), then the kill
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_worker_is_named_with_the_run_it_held(capsys):
    import multiprocessing

    from fedkd_core import sweep

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    worker = context.Process(target=killed_worker, args=(queue,))
    worker.start()
    assert sweep._follow([worker], queue, "setting", 1, 1) == 1
    out = capsys.readouterr()
    assert (f"FAILED worker {worker.pid} stopped (killed by SIGKILL" in out.out + out.err
            and "while running fedavg mnist dirichlet(alpha=0.5) 2 clients seed=0: run the sweep again" in out.out + out.err)


# --- a run interrupted mid-way resumes from its checkpoint, bit for bit --------------------------

class Interrupted(Exception):
    """A machine or job that stops mid-run."""


def interrupt_in_round(monkeypatch, stop_round: int) -> None:
    from fedkd_core import experiment

    run_round = experiment._run_round

    def stopping(algorithm, round_index, *args):
        if round_index == stop_round:
            raise Interrupted(f"stopped in round {round_index}")
        return run_round(algorithm, round_index, *args)

    monkeypatch.setattr(experiment, "_run_round", stopping)


def without_wall_time(history: list) -> list:
    return [{k: v for k, v in row.items() if k != "seconds"} for row in history]


RESUMED = ExperimentConfig(
    data=DataConfig("mnist", num_clients=3, samples_per_client=40, transfer_size=40, local_test_size=20),
    train=TrainConfig(epochs=1, batch_size=16, mixed_precision=False), rounds=4, participation=0.67,
    global_test_size=60, seed=1)
# FedDF's and FedUA's server distillation for 2 epochs, not the paper's 20 (most of their runs'
# seconds): a resumed run must restore what distillation draws and keeps, whatever its length.
RESUMED_PARAMS = {"feddf": {"server_epochs": 2}, "fedua": {"server_epochs": 2}}


@pytest.mark.parametrize("algorithm", sorted(__import__("fedkd_core.algorithms", fromlist=["ALGORITHMS"]).ALGORITHMS))
def test_a_run_interrupted_after_round_2_resumes_with_the_numbers_of_an_uninterrupted_run(algorithm, tmp_path,
                                                                                          monkeypatch):
    from dataclasses import replace

    from fedkd_core.leases import state_path

    config = replace(RESUMED, algorithm=algorithm, algorithm_params=RESUMED_PARAMS.get(algorithm, {}))
    whole = results.run_experiment(config, root=tmp_path / "whole", progress=False)
    with monkeypatch.context() as patch:
        interrupt_in_round(patch, 3)
        with pytest.raises(Interrupted):
            results.run_experiment(config, root=tmp_path / "cut", progress=False, checkpoint_every=0)
    state = state_path(tmp_path / "cut", "custom", results.config_hash(config))
    assert state.exists() and results.load_record(config, tmp_path / "cut") is None
    resumed = results.run_experiment(config, root=tmp_path / "cut", progress=False, checkpoint_every=0)
    assert resumed.timings["resumed_after_round"] == 2 and "resumed_after_round" not in whole.timings
    assert without_wall_time(resumed.history) == without_wall_time(whole.history)
    assert {k: resumed.timings[k] for k in ("bytes_up", "bytes_down")} == \
        {k: whole.timings[k] for k in ("bytes_up", "bytes_down")}
    assert not state.exists()  # deleted once the record is written


def test_a_resumed_run_is_told_only_of_the_rounds_it_runs(tmp_path, monkeypatch):
    from dataclasses import replace

    config = replace(RESUMED, algorithm="fedavg")
    whole, cut = [], []
    results.run_experiment(config, root=tmp_path / "whole", progress=False, on_round=lambda *r: whole.append(r))
    with monkeypatch.context() as patch:
        interrupt_in_round(patch, 3)
        with pytest.raises(Interrupted):
            results.run_experiment(config, root=tmp_path / "cut", progress=False, checkpoint_every=0,
                                   on_round=lambda *r: cut.append(r))
    results.run_experiment(config, root=tmp_path / "cut", progress=False, checkpoint_every=0,
                           on_round=lambda *r: cut.append(r))
    assert whole == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert cut == [(1, 4), (2, 4), (3, 4), (4, 4)]  # rounds 1-2, interrupted in 3; resumed: 3-4


def test_a_checkpoint_written_before_the_round_shapes_moved_still_loads():
    """A state pickled when the shapes were ``fedkd_core.algorithms.<module>`` loads from ``shapes/``."""
    import io
    import pickle

    from fedkd_core.algorithms.shapes.transfer_kd import TransferKDConfig
    from fedkd_core.checkpoint import _StateUnpickler

    config = TransferKDConfig(lam=0.25)
    saved = pickle.dumps(config, protocol=0).replace(b"fedkd_core.algorithms.shapes.transfer_kd",
                                                     b"fedkd_core.algorithms.transfer_kd")
    assert b"fedkd_core.algorithms.transfer_kd\n" in saved
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(saved)  # the old path is gone: only the checkpoint's unpickler maps it
    assert _StateUnpickler(io.BytesIO(saved), ctx=None).load() == config
