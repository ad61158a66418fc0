"""A client's state is separable from the server's: running every client step on one shared
replica (state moved through messages, as a Flower client process does) gives the same models,
uploads and accuracies as the single in-process algorithm. Every registered algorithm is checked
so by tests/test_conformance.py; here, the state's round trip and the "trained" personal model."""

import pytest
import torch

from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.experiment import _run_round
from fedkd_core.federation import DataConfig, build_federated_data
from fedkd_core.training import TrainConfig, accuracy
from separability import assert_clients_separable


def make(algorithm: str, data):
    train = TrainConfig(batch_size=20, mixed_precision=False)
    ctx = Context(data=data, model_name="knfu_m1", train=train, device=torch.device("cpu"), seed=0)
    return algorithm_class(algorithm)(algorithm_config(algorithm, {}), ctx)


def tiny_data():
    return build_federated_data(DataConfig("mnist", num_clients=3, samples_per_client=60, local_test_size=20), seed=0)


def test_a_client_state_round_trip_restores_the_personal_model():
    data = tiny_data()
    method = make("knfu", data)
    _run_round(method, 1, [0, 1, 2])
    state = method.client_state(1)
    assert state and all(name.startswith("models/") for name in state)
    before = accuracy(method.personal_model(1), data.dataset, data.client_test[1])
    method.drop_client_state(1)
    assert method.client_state(1) == {}
    method.load_client_state(1, state)
    assert accuracy(method.personal_model(1), data.dataset, data.client_test[1]) == before


@pytest.mark.parametrize("algorithm", ["fedavg", "fedprox"])
def test_personal_trained_scores_each_client_with_its_trained_copy(algorithm):
    """FedGMKD's released code scores every method's local accuracy with the client's model right
    after local training; ``personal="trained"`` keeps that copy as the client's state."""
    data = tiny_data()
    train = TrainConfig(batch_size=20, mixed_precision=False)

    def make_trained():
        ctx = Context(data=data, model_name="knfu_m1", train=train, device=torch.device("cpu"), seed=0)
        return algorithm_class(algorithm)(algorithm_config(algorithm, {"personal": "trained"}), ctx)

    single, _ = assert_clients_separable(make_trained, data, require_state=True)
    default = make(algorithm, data)
    for r, selected in enumerate([[0, 2], [1, 2], [0, 1]], start=1):
        _run_round(default, r, selected)
    for k in range(3):
        assert default.personal_model(k) is default.global_model()
        assert single.personal_model(k) is not single.global_model()
    # the global models agree: the option changes only what a client is scored with
    a, b = single.global_model().state_dict(), default.global_model().state_dict()
    assert all(torch.equal(a[n], b[n]) for n in a)
    with pytest.raises(ValueError, match="personal"):
        algorithm_config(algorithm, {"personal": "best"})
