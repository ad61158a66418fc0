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
