"""Randomness per (seed, round, party): streams are reproducible, distinct, and a round gives
the same result whatever order its clients run in (what lets Flower workers agree with a local run)."""

import pytest
import torch

from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.experiment import _run_round
from fedkd_core.federation import DataConfig, build_federated_data
from fedkd_core.randomness import SERVER, party_generator, party_randomness, party_rng, party_seed
from fedkd_core.training import TrainConfig


def test_streams_are_reproducible_and_distinct_per_seed_round_party_and_phase():
    assert party_seed(0, 1, 2) == party_seed(0, 1, 2)
    seeds = {party_seed(s, r, p, phase) for s in (0, 1) for r in (0, 1, 2) for p in (SERVER, 0, 1, 9)
             for phase in ("update", "finish", "server")}
    assert len(seeds) == 2 * 3 * 4 * 3 and all(0 <= s < 2**63 for s in seeds)
    assert torch.equal(torch.randperm(50, generator=party_generator(3, 4, 5)),
                       torch.randperm(50, generator=party_generator(3, 4, 5)))
    assert party_rng(3, 4, 5).integers(1 << 30) == party_rng(3, 4, 5).integers(1 << 30)


def test_party_randomness_sets_and_restores_the_global_generator():
    torch.manual_seed(123)
    expected_after = torch.rand(3)
    torch.manual_seed(123)
    with party_randomness(0, 1, 2, "update"):
        first = torch.rand(3)
    with party_randomness(0, 1, 2, "update"):
        again = torch.rand(3)
    assert torch.equal(first, again) and torch.equal(torch.rand(3), expected_after)


def test_bad_phase_or_party_is_a_clear_error():
    with pytest.raises(ValueError, match="phase must be one of"):
        party_seed(0, 1, 0, "train")
    with pytest.raises(ValueError, match="party must be"):
        party_seed(0, 1, -2)


def one_round(algorithm: str, order: list[int], **params):
    data = build_federated_data(DataConfig("mnist", num_clients=3, samples_per_client=60, local_test_size=20), seed=0)
    train = TrainConfig(batch_size=20, mixed_precision=False)
    ctx = Context(data=data, model_name="knfu_m1", train=train, device=torch.device("cpu"), seed=0)
    method = algorithm_class(algorithm)(algorithm_config(algorithm, params), ctx)
    torch.manual_seed(999 + order[0])  # whatever the global state, the round must not depend on it
    _run_round(method, 1, order)
    return method


@pytest.mark.parametrize("algorithm", ["fedavg", "knfu", "fedmd", "pfedme"])
def test_a_round_does_not_depend_on_the_order_its_clients_run_in(algorithm):
    forward, backward = one_round(algorithm, [0, 1, 2]), one_round(algorithm, [2, 1, 0])
    for client in range(3):
        a, b = forward.personal_model(client).state_dict(), backward.personal_model(client).state_dict()
        assert all(torch.equal(a[name], b[name]) for name in a), client


def test_a_diverged_run_stops_naming_the_clients_whose_weights_are_not_finite():
    from fedkd_core.experiment import DivergedError, evaluate

    method = one_round("pfedme", [0, 1, 2], personal_lr=1e12)  # the inner steps blow θ up
    with pytest.raises(DivergedError, match=r"PFedMe diverged by round 1: non-finite weights in the models of clients \[0, 1, 2\]"):
        evaluate(method, method.ctx.data, method.ctx.data.global_test)
    healthy = one_round("pfedme", [0, 1, 2])
    assert 0 <= evaluate(healthy, healthy.ctx.data, healthy.ctx.data.global_test)["alma"] <= 1
