"""The check that a method's client state is separable from the server's (used by
test_client_state.py and each method's own tests): every client step runs on one replica that
keeps nothing between calls (state moved through messages, as a Flower client process does),
and that must give the single in-process algorithm's uploads, client states, personal
accuracies and global model."""

import torch

from fedkd_core.algorithms.base import message_bytes
from fedkd_core.experiment import _run_round, client_step, server_update
from fedkd_core.training import accuracy

SELECTIONS = [[0, 2], [1, 2], [0, 1]]  # participation 2 of 3, three rounds


def separated_run(make, selections=SELECTIONS):
    """Server and clients apart: the server copy never runs a client step; the replica serves
    every client. Returns (server, client states, bytes uploaded per round)."""
    server, replica = make(), make()
    states = {k: {} for k in sorted({k for selected in selections for k in selected})}
    traffic = []
    for round_index, selected in enumerate(selections, start=1):
        server.begin_round(round_index)
        uploads = {}
        for k in selected:
            uploads[k], states[k] = client_step(replica, round_index, k, "update", server.download(k), states[k])
        server_update(server, uploads)
        for k in selected:
            reply = server.reply(k)
            if reply is not None:
                _, states[k] = client_step(replica, round_index, k, "finish", reply, states[k])
        traffic.append(sum(message_bytes(m) for m in uploads.values()))
    return server, states, traffic


def assert_clients_separable(make, data, selections=SELECTIONS, require_state: bool = False):
    """``make()`` builds a fresh copy of the algorithm on ``data``. Asserts the separated run
    equals the single one; returns (single, server) for method-specific checks. ``require_state``:
    every client must keep something (methods with personal state)."""
    single = make()
    traffic = [_run_round(single, r, selected)["bytes_up"] for r, selected in enumerate(selections, start=1)]
    server, states, separated_traffic = separated_run(make, selections)
    assert separated_traffic == traffic
    for k, state in states.items():
        expected = single.client_state(k)
        assert state.keys() == expected.keys(), k
        assert expected or not require_state, k
        assert all(torch.equal(state[name], expected[name]) for name in expected), k
        server.load_client_state(k, state)  # evaluation: the server's state plus the client's
        assert accuracy(server.personal_model(k), data.dataset, data.client_test[k]) == \
            accuracy(single.personal_model(k), data.dataset, data.client_test[k])
    if single.global_model() is not None:
        a, b = single.global_model().state_dict(), server.global_model().state_dict()
        assert all(torch.equal(a[n], b[n]) for n in a)
    return single, server
