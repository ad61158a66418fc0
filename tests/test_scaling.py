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


def test_the_summary_gives_each_engines_round_time_relative_to_in_process_and_the_overhead():
    measurement = {"rows": [
        {"engine": "in-process", "clients": 20, "later_round_s": 2.0},
        {"engine": "flower, 1 worker", "clients": 20, "later_round_s": 3.0},
        {"engine": "flower, 2 workers", "clients": 20, "later_round_s": 1.5},
        {"engine": "in-process", "clients": 100, "later_round_s": 10.0},
        {"engine": "flower, 1 worker", "clients": 100, "later_round_s": 12.5}],
        "overhead": {"clients": 100, "messages_per_round": 200, "in_process_round_s": 0.5, "flower_round_s": 1.3,
                     "seconds_per_message": 0.004}}
    assert scaling.summary_text(measurement).splitlines() == [
        "- **20 clients**: in-process 2.00 s per round; relative to it, flower, 1 worker: 1.50×; flower, 2 workers: 0.75×.",
        "- **100 clients**: in-process 10.00 s per round; relative to it, flower, 1 worker: 1.25×.",
        "- **Overhead per message** (zero local epochs, 100 clients, 1 worker): 4.0 ms (1.30 s vs 0.50 s per round of "
        "200 messages)."]
    assert len(scaling.summary_text({**measurement, "overhead": None}).splitlines()) == 2
