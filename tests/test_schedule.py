"""The phases' schedule of KnFu's round (issue 33): kept optimisers, the digest's learning rate,
the revisit, FedMD's original form, and the validation split the schedule is chosen on."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.algorithms.fedmd import l1_to_logits
from fedkd_core.algorithms.shapes.schedule import PhaseSchedule, parse_schedule, schedule_text
from fedkd_core.chapters import knfu
from fedkd_core.experiment import ExperimentConfig, _run_round, evaluate
from fedkd_core.federation import DataConfig, build_federated_data
from fedkd_core.models import InputShape, make_model
from fedkd_core.results import config_hash
from fedkd_core.training import OptimizerStates, TrainConfig, accuracy, train
from separability import assert_clients_separable


def tiny_data(**overrides):
    config = DataConfig("mnist", num_clients=3, samples_per_client=60, transfer_size=40, local_test_size=20)
    return build_federated_data(replace(config, **overrides), seed=0)


def make(algorithm: str, data, **params):
    ctx = Context(data=data, model_name="knfu_m1", train=TrainConfig(batch_size=20, mixed_precision=False, optimizer="adam",
                                                                     lr=1e-3), device=torch.device("cpu"), seed=0)
    return algorithm_class(algorithm)(algorithm_config(algorithm, params), ctx)


def weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_schedule_text_round_trips_and_bad_schedules_say_what_is_wrong():
    for text in ("fresh/-/0", "kept/0.0001/1", "kept/-/4"):
        assert schedule_text(parse_schedule(text)) == text
    assert parse_schedule("kept/1e-4/1") == PhaseSchedule("kept", 1e-4, 1)
    with pytest.raises(ValueError, match="OPTIMIZER_STATE/DIGEST_LR/REVISIT_EPOCHS"):
        parse_schedule("kept/1e-4")
    with pytest.raises(ValueError, match="optimizer_state must be one of"):
        parse_schedule("persistent/-/0")
    with pytest.raises(ValueError, match="revisit_epochs must be >= 0"):
        parse_schedule("fresh/-/-1")


def test_the_default_schedule_keeps_every_committed_key():
    params = knfu.PAPER_PROFILE
    implicit = knfu.experiments(params)[0]
    explicit = replace(implicit, algorithm_params=knfu.algorithm_params(params, implicit.algorithm, PhaseSchedule()))
    assert explicit.algorithm_params != implicit.algorithm_params
    assert config_hash(explicit) == config_hash(implicit)
    kept = replace(implicit, algorithm_params=knfu.algorithm_params(params, implicit.algorithm, PhaseSchedule("kept")))
    assert config_hash(kept) != config_hash(implicit)


def test_a_kept_optimiser_continues_where_it_stopped_as_one_long_run_would():
    """Two one-epoch calls with the client's kept Adam equal one two-epoch call; two fresh Adams do not
    (their moments restart)."""
    data = tiny_data()
    config = TrainConfig(batch_size=20, optimizer="adam", lr=1e-3, mixed_precision=False)
    shape = InputShape(1, 28, 10)
    indices = data.client_train[0]

    def run(split: str):
        model = make_model("knfu_m1", shape, seed=0)
        generator = torch.Generator().manual_seed(1)
        if split == "one call":
            train(model, data.dataset, indices, config, generator=generator, epochs=2)
        elif split == "kept":
            states = OptimizerStates()
            for _ in range(2):
                optimizer = states.optimizer(0, model, config, config.lr)
                train(model, data.dataset, indices, config, generator=generator, epochs=1, optimizer=optimizer)
                states.keep(0, optimizer)
        else:
            for _ in range(2):
                train(model, data.dataset, indices, config, generator=generator, epochs=1)
        return weights(model)

    assert torch.equal(run("kept"), run("one call"))
    assert not torch.equal(run("fresh"), run("one call"))


def test_the_digest_runs_at_its_own_learning_rate_and_the_revisit_follows_on_the_clients_data():
    """Local's round under ``fresh/1e-5/1``: E epochs at lr, its second phase at 1e-5, one more
    epoch at lr, all on D_n, in that order with one generator: rebuilt here step by step."""
    data = tiny_data()
    local = make("knfu_local", data, digest_lr=1e-5, revisit_epochs=1)
    local.begin_round(1)
    local.client_update(0, {})

    model = local.ctx.new_model()
    generator = local.generator(0)
    config, indices = local.ctx.train, data.client_train[0]
    train(model, data.dataset, indices, config, generator=generator)
    train(model, data.dataset, indices, replace(config, lr=1e-5), generator=generator, epochs=1)
    train(model, data.dataset, indices, config, generator=generator, epochs=1)
    assert torch.equal(weights(model), weights(local.models[0]))


def test_schedules_with_kept_optimisers_stay_separable_from_the_server():
    """The kept moments are client state: a replica given them through messages (Flower's case)
    runs the same rounds; with a fresh schedule the client sends no optimiser state at all."""
    data = tiny_data()
    for algorithm, params in (("knfu", {"optimizer_state": "kept", "revisit_epochs": 1}),
                              ("knfu_local", {"optimizer_state": "kept", "digest_lr": 1e-4}),
                              ("fedmd_original", {})):
        single, _ = assert_clients_separable(lambda: make(algorithm, data, **params), data, require_state=True)
        assert any(name.startswith("optimizers/") for name in single.client_state(0)), algorithm
    fresh = make("knfu", data)
    _run_round(fresh, 1, [0, 1, 2])
    assert not any(name.startswith("optimizers/") for name in fresh.client_state(0))


def test_fedmd_original_digests_the_average_of_the_clients_logits_with_l1():
    data = tiny_data()
    fedmd = make("fedmd_original", data)
    assert (fedmd.config.optimizer_state, fedmd.config.revisit_epochs) == ("kept", 4)
    fedmd.begin_round(1)
    uploads = {k: fedmd.client_update(k, {}) for k in range(3)}
    logits = [uploads[k]["soft_labels"] for k in range(3)]
    assert not torch.allclose(logits[0].sum(1), torch.ones(len(data.transfer)))  # logits, not probabilities
    fedmd.server_update(uploads)
    assert torch.allclose(fedmd.reply(1)["soft_labels"], (logits[0] + logits[1] + logits[2]) / 3)
    a, b = torch.tensor([[1.0, -2.0], [0.5, 0.0]]), torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    assert l1_to_logits(a, b).item() == pytest.approx((1 + 2 + 0.5 + 1) / 4)


def test_a_validation_split_is_held_out_of_each_clients_training_data_and_scored_on_it():
    full = tiny_data()
    held = tiny_data(validation_fraction=0.25)
    assert held.test_split == "train" and full.test_split == "test"
    for k in range(3):
        train_k, validation_k = held.client_train[k], held.client_test[k]
        assert len(validation_k) == 15 and len(train_k) == 45
        assert not set(train_k) & set(validation_k)
        assert set(train_k) | set(validation_k) == set(full.client_train[k])  # the same partition
    assert np.array_equal(held.global_test, np.sort(np.concatenate(held.client_test)))
    local = make("knfu_local", held)
    _run_round(local, 1, [0, 1, 2])
    scores = evaluate(local, held, held.global_test)["client_accuracies"]
    for k in range(3):  # scored on the held-out *training* images, never the test split
        assert scores[k] == accuracy(local.models[k], held.dataset, held.client_test[k], split="train")
    with pytest.raises(ValueError, match="validation_fraction"):
        DataConfig(validation_fraction=1.0)


def test_params_schedules_per_method_and_tuning_candidates():
    params = knfu.Params(schedules="knfu=kept/0.0001/1, fedmd=fresh/-/1")
    assert params.method_schedules() == {"knfu": PhaseSchedule("kept", 1e-4, 1), "fedmd": PhaseSchedule("fresh", None, 1)}
    by_method = {c.algorithm: c.algorithm_params for c in knfu.experiments(params)}
    assert by_method["knfu"]["optimizer_state"] == "kept" and "optimizer_state" not in by_method["knfu_local"]

    tuning = knfu.Params(tuning_schedules="fresh/-/0, kept/-/0, fresh/0.0001/1", validation_fraction=0.2,
                         algorithms="knfu,knfu_local,fedmd_original")
    configs = knfu.experiments(tuning)
    assert [c.algorithm for c in configs].count("knfu") == 3
    assert [c.algorithm for c in configs].count("fedmd_original") == 1  # its authors' schedule, not tuned
    assert all(c.data.validation_fraction == 0.2 for c in configs)
    assert len({config_hash(c) for c in configs}) == len(configs)
    for bad, match in (({"schedules": "fedmd_original=kept/-/1"}, "not a tuned method"),
                       ({"schedules": "knfu=kept/-/1", "tuning_schedules": "fresh/-/0"}, "either schedules"),
                       ({"validation_fraction": 1.0}, "validation_fraction")):
        with pytest.raises(ValueError, match=match):
            knfu.Params(**bad)


def test_a_tuning_run_never_reads_the_test_split(monkeypatch):
    """A whole simulated run with a validation split: every evaluation reads the training split."""
    from fedkd_core import experiment, training

    splits = []
    original = training.correct_predictions

    def spy(model, dataset, indices, *, split="test", mixed_precision=False):
        splits.append(split)
        return original(model, dataset, indices, split=split, mixed_precision=mixed_precision)

    monkeypatch.setattr(experiment, "correct_predictions", spy)
    config = ExperimentConfig(algorithm="knfu", data=DataConfig("mnist", num_clients=3, samples_per_client=40,
                                                                transfer_size=20, validation_fraction=0.25),
                              train=TrainConfig(batch_size=10, mixed_precision=False), rounds=2)
    experiment.simulate(config, progress=False)
    assert splits and set(splits) == {"train"}


def test_tuning_yaml_is_the_tuning_profile():
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[1] / "notebooks" / "params" / "tuning" / "knfu.yaml"
    assert knfu.Params(**yaml.safe_load(path.read_text())) == knfu.TUNING_PROFILE
    assert len(knfu.experiments(knfu.TUNING_PROFILE)) == 3 * 4 * 8


def fake_record(algorithm, schedule, alpha, alma):
    from types import SimpleNamespace

    s = parse_schedule(schedule)
    params = {"optimizer_state": s.optimizer_state, "digest_lr": s.digest_lr, "revisit_epochs": s.revisit_epochs}
    return SimpleNamespace(config={"algorithm": algorithm, "algorithm_params": params, "data": {"alpha": alpha}},
                           final={"alma": alma})


def test_each_method_keeps_the_schedule_with_the_best_mean_validation_alma_once_all_are_run():
    records = []
    for i, schedule in enumerate(knfu.CANDIDATES):
        for alpha in (0.1, 0.5, 1.0):
            # fedmd: "kept/-/1" best on average though not in every cell; knfu: the default best
            records.append(fake_record("fedmd", schedule, alpha,
                                       0.5 + 0.01 * i * (schedule == "kept/-/1") + 0.02 * (alpha == 0.1) * (i == 1)))
            records.append(fake_record("knfu", schedule, alpha, 0.9 - 0.01 * i))
    records.append(fake_record("knfu_local", "fresh/-/0", 0.1, 0.8))  # one run: no choice yet
    table = knfu.tuning_table(records)
    fedmd = table[table.algorithm == "fedmd"].set_index("schedule")
    assert fedmd.loc["kept/-/1", "validation ALMA (%)"] == pytest.approx(100 * (0.5 + 0.06))
    assert fedmd.loc["kept/-/1", knfu.GAIN_COLUMN] == pytest.approx(6.0)
    assert knfu.chosen_schedules(records) == {"fedmd": "kept/-/1", "knfu": "fresh/-/0"}
    tuned = knfu.tuned_params({"fedmd": "kept/-/1", "knfu": "fresh/-/0"})
    assert tuned.method_schedules() == {"knfu": PhaseSchedule(), "fedmd": PhaseSchedule("kept", None, 1)}
    assert tuned.datasets == "mnist"


def test_fedmd_original_yaml_is_its_profile_and_its_records_are_read_with_the_paper_profiles():
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[1] / "notebooks" / "params" / "paper" / "knfu_fedmd_original.yaml"
    assert knfu.Params(**yaml.safe_load(path.read_text())) == knfu.FEDMD_ORIGINAL_PROFILE
    configs = knfu.experiments(knfu.FEDMD_ORIGINAL_PROFILE)
    assert len(configs) == 36 and {c.algorithm for c in configs} == {"fedmd_original"}
    assert algorithm_config("fedmd_original", configs[0].algorithm_params).revisit_epochs == 4


def test_tuned_yaml_is_the_tuned_profile_with_the_schedules_the_committed_tuning_records_choose():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    path = root / "notebooks" / "params" / "paper" / "knfu_tuned.yaml"
    assert knfu.Params(**yaml.safe_load(path.read_text())) == knfu.TUNED_PROFILE
    committed = knfu.tuning_records(root / "results")
    assert knfu.TUNED_PROFILE == knfu.tuned_params(knfu.chosen_schedules(committed))
    configs = knfu.experiments(knfu.TUNED_PROFILE)
    assert len(configs) == 12 * 4 * 3 and {c.data.dataset for c in configs} == {"mnist"}
    # no tuned run shares a key with a run as first coded: the two sets of records never mix
    coded = knfu.experiments(replace(knfu.PAPER_PROFILE, datasets="mnist"))
    assert not {config_hash(c) for c in configs} & {config_hash(c) for c in coded}


def test_tuned_cifar_yaml_reruns_table_2_under_the_schedules_chosen_on_mnist():
    root = Path(__file__).resolve().parents[1]
    committed = knfu.tuning_records(root / "results")
    assert knfu.TUNED_CIFAR_PROFILE == knfu.tuned_params(knfu.chosen_schedules(committed), datasets="cifar10")
    configs = knfu.experiments(knfu.TUNED_CIFAR_PROFILE)
    assert len(configs) == 6 * 4 * 3 and {c.data.dataset for c in configs} == {"cifar10"}
    assert {c.rounds for c in configs} == {30}
    coded = knfu.experiments(replace(knfu.PAPER_PROFILE, datasets="cifar10"))
    assert not {config_hash(c) for c in configs} & {config_hash(c) for c in coded}


def run_record(algorithm, alpha, seed, alma, schedule="fresh/-/0"):
    """A record as the chapter's tables read it: final ALMA ``alma`` (history rising to it)."""
    from types import SimpleNamespace

    s = parse_schedule(schedule)
    config = {"algorithm": algorithm, "seed": seed, "rounds": 15, "train": {"mixed_precision": False},
              "data": {"dataset": "mnist", "alpha": alpha, "samples_per_client": 100},
              "algorithm_params": {"optimizer_state": s.optimizer_state, "digest_lr": s.digest_lr,
                                   "revisit_epochs": s.revisit_epochs}}
    history = [{"round": r, "alma": alma - 0.001 * (15 - r)} for r in range(1, 16)]
    return SimpleNamespace(config=config, final={"alma": alma}, history=history, profile="paper",
                           environment={"precision": "fp32", "device": "cpu"})


def test_schedules_are_compared_on_the_same_cells_and_seeds_and_a_reversed_claim_reads_as_changed():
    coded, tuned = [], []
    for alpha in (0.1, 0.5, 1.0):
        for seed in range(3):
            noise = 0.002 * seed
            coded += [run_record("knfu", alpha, seed, 0.90 + noise), run_record("fedmd", alpha, seed, 0.80 + noise)]
            # tuned: FedMD overtakes KnFu in every cell and seed
            tuned += [run_record("knfu", alpha, seed, 0.91 + noise, "kept/-/1"),
                      run_record("fedmd", alpha, seed, 0.95 + noise, "kept/-/1")]
    coded += [run_record("knfu", 0.25, 0, 0.5), run_record("fedmd", 0.25, 0, 0.1)]  # a cell not rerun: left out
    coded += [run_record("fedmd_original", 0.1, 0, 0.85)]  # a method not rerun: left out
    assert len(knfu.same_runs(coded, tuned)) == len(coded) - 3
    table = knfu.schedule_table(coded, tuned).set_index(["alpha", "method"])
    assert table.loc[(0.1, "FedMD"), "as coded"] == pytest.approx(80.2)
    assert table.loc[(0.1, "FedMD"), "tuned"] == pytest.approx(95.2)
    assert table.loc[(0.1, "FedMD"), "change (points)"] == pytest.approx(15.0)
    assert table.loc[(0.1, "FedMD"), "seeds"] == 3 and table.loc[(0.1, "FedMD"), "paper"] == pytest.approx(89.3)
    assert 0.25 not in table.index.get_level_values("alpha")
    changes = knfu.verdict_changes(coded, tuned).set_index("claim")
    assert changes.loc["KnFu > FedMD", knfu.tuning.CODED_VERDICT].startswith("holds")
    assert changes.loc["KnFu > FedMD", knfu.tuning.TUNED_VERDICT].startswith("does not hold")
    assert changes.loc["KnFu > FedMD", "verdict changed"] == "yes"
    assert knfu.verdict_changes(coded, []).empty
