"""The "Scaling out" page's measurement: what it times, how it is stored, bad parameters."""

import pytest

from fedkd_core.chapters import scaling


def test_in_process_measurement_times_every_round_of_the_configured_run(tmp_path):
    params = scaling.Params(clients="3,5", workers="", rounds=3, samples_per_client=10)
    measured = scaling.measure(params)
    assert [(row["engine"], row["clients"]) for row in measured["rows"]] == [("in-process", 3), ("in-process", 5)]
    for row in measured["rows"]:
        assert 0 < row["later_round_s"] and 0 < row["first_round_s"] <= row["total_s"]
    assert measured["overhead"] is None  # needs a Flower engine to compare with
    assert measured["machine"]["cores"] >= 1 and measured["machine"]["cpu"]
    path = scaling.save_measurement(measured, root=tmp_path)
    assert path.parent == tmp_path / "scaling" and scaling.saved_measurements(tmp_path) == [measured]
    assert list(scaling.table(measured).columns[:2]) == ["engine", "clients"]


def test_the_timed_run_is_fedavg_on_every_client_evaluated_each_round():
    config = scaling.run_config(scaling.Params(clients="7", samples_per_client=12), 7, local_epochs=0)
    assert (config.algorithm, config.participation, config.eval_every) == ("fedavg", 1.0, 1)
    assert (config.data.num_clients, config.data.samples_per_client, config.train.epochs) == (7, 12, 0)


@pytest.mark.parametrize("field, value, message", [
    ("rounds", 1, "rounds must be >= 2"),
    ("clients", "0,4", "clients must all be >= 1"),
    ("workers", "2,0", "workers must all be >= 1"),
])
def test_bad_parameters_are_named(field, value, message):
    with pytest.raises(ValueError, match=message):
        scaling.Params(**{field: value})


def test_the_sweep_has_nothing_to_run_for_this_page():
    assert scaling.experiments(scaling.Params()) == []
