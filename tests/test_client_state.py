"""A client's state is separable from the server's: running every client step on one shared
replica (state moved through messages, as a Flower client process does) gives the same models,
uploads and accuracies as the single in-process algorithm."""

import pytest
import torch

from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.algorithms.base import message_bytes
from fedkd_core.experiment import _run_round, client_step, server_update
from fedkd_core.federation import DataConfig, build_federated_data
from fedkd_core.training import TrainConfig, accuracy

SELECTIONS = [[0, 2], [1, 2], [0, 1]]  # participation 2 of 3, three rounds


def make(algorithm: str, data):
    train = TrainConfig(batch_size=20, mixed_precision=False)
    ctx = Context(data=data, model_name="knfu_m1", train=train, device=torch.device("cpu"), seed=0)
    return algorithm_class(algorithm)(algorithm_config(algorithm, {}), ctx)


def tiny_data():
    return build_federated_data(DataConfig("mnist", num_clients=3, samples_per_client=60, local_test_size=20), seed=0)


def separated_run(algorithm: str, data):
    """Server and clients apart: the server copy never runs a client step; the replica serves
    every client and keeps nothing between calls."""
    server, replica, states = make(algorithm, data), make(algorithm, data), {k: {} for k in range(3)}
    traffic = []
    for round_index, selected in enumerate(SELECTIONS, start=1):
        server.begin_round(round_index)
        uploads, up = {}, 0
        for k in selected:
            uploads[k], states[k] = client_step(replica, round_index, k, "update", server.download(k), states[k])
            up += message_bytes(uploads[k])
        server_update(server, uploads)
        for k in selected:
            reply = server.reply(k)
            if reply is not None:
                _, states[k] = client_step(replica, round_index, k, "finish", reply, states[k])
        traffic.append(up)
    return server, replica, states, traffic


@pytest.mark.parametrize("algorithm", ["fedavg", "knfu", "fedmd", "selective_fd", "knfu_local", "fedckd", "pfedsd",
                                       "pfedme", "fedper", "lg_fedavg", "fedfomo", "fedprox", "local", "fedgmkd", "moon",
                                       "fedproto", "fpl", "fedgen", "fjord"])  # fedmd_avg needs a transfer set: its own test
def test_clients_on_a_replica_give_the_same_run_as_one_algorithm(algorithm):
    data = tiny_data()
    single = make(algorithm, data)
    traffic = [_run_round(single, r, selected)["bytes_up"] for r, selected in enumerate(SELECTIONS, start=1)]
    server, replica, states, separated_traffic = separated_run(algorithm, data)
    assert separated_traffic == traffic
    for k in range(3):
        expected = single.client_state(k)
        assert states[k].keys() == expected.keys(), k
        assert all(torch.equal(states[k][name], expected[name]) for name in expected), k
        server.load_client_state(k, states[k])  # evaluation: the server's state plus the client's
        assert accuracy(server.personal_model(k), data.dataset, data.client_test[k]) == \
            accuracy(single.personal_model(k), data.dataset, data.client_test[k])
    if single.global_model() is not None:
        a, b = single.global_model().state_dict(), server.global_model().state_dict()
        assert all(torch.equal(a[n], b[n]) for n in a)


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
