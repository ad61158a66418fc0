"""Every registered algorithm, and a user's method registered in this process, gives identical
numbers on Flower as in-process, on the conformance suite's tiny config (fedkd_core.conformance).
Skipped without Flower, as test_flower.py is.

What Flower adds to an in-process run is split in two, and each part is tested where it is cheap:

* what depends on the algorithm: its messages and client states crossing as Flower records (every
  tensor through ``ArrayRecord`` and Flower's protobuf wire format, ``bfloat16`` widened, masks and
  integer tensors kept), each client step on a replica rebuilt from the config's JSON that keeps no
  client's state, each client's state kept in its node's ``Context.state`` between rounds and
  fetched back for evaluation (``query.state``). Every registered algorithm runs through fedkd's
  real ``FlowerClients`` and ``clientapp`` over an in-process grid (:class:`InProcessGrid`): the
  whole of ``fedkd_core.flower`` but Ray;
* what does not: Ray's worker processes, which import the package afresh and receive the records
  through Ray's object store. That runs once per round shape in test_flower.py (one Ray
  simulation: FedAvg, KnFu, FedCKD, FedPer, Selective-FD) and here for a method announced to
  child processes (FedAvgM from tests/plugin_methods.py). A fresh process cannot change an
  algorithm's numbers in a way the in-process checks miss: the conformance suite's determinism
  check runs every algorithm under different global generators, its separability check on a
  replica that keeps nothing between client steps.
"""

import os

import pytest

pytest.importorskip("flwr")

from fedkd_core.algorithms import ALGORITHMS, REGISTERED_ENV  # noqa: E402
from fedkd_core.conformance import CHECKS, PASSED, check, comparable, first_difference, tiny_config  # noqa: E402
from fedkd_core.experiment import simulate  # noqa: E402
from plugin_methods import FedAvgM, registry  # noqa: F401 (a fixture)  # noqa: E402


class InProcessGrid:
    """Flower's ``Grid`` with one node per client in this process: each message crosses Flower's
    wire format (protobuf) to fedkd's ``clientapp`` with that node's own ``Context`` (its state
    kept between messages, as a SuperNode keeps it), and the reply crosses back. Messages get
    their ids as the SuperLink gives them."""

    def __init__(self, num_clients: int):
        from flwr.app import Context, RecordDict

        self.contexts = {100 + k: Context(run_id=1, node_id=100 + k, node_config={"partition-id": k},
                                          state=RecordDict(), run_config={}) for k in range(num_clients)}
        self.sent = 0

    def get_node_ids(self):
        return list(self.contexts)

    def send_and_receive(self, messages, timeout=None):
        from flwr.common.serde import message_from_proto, message_to_proto

        from fedkd_core.flower import clientapp

        replies = []
        for message in messages:
            self.sent += 1
            message.metadata.__dict__["_message_id"] = f"message-{self.sent}"
            received = message_from_proto(message_to_proto(message))
            reply = clientapp(received, self.contexts[message.metadata.dst_node_id])
            replies.append(message_from_proto(message_to_proto(reply)))
        return replies


@pytest.fixture()
def in_a_flower_run(monkeypatch):
    """Flower's messages need the identity of the run they belong to."""
    from flwr.supercore.task_identity import TaskIdentity

    for field in ("_run_id", "_task_id", "_node_id"):
        monkeypatch.setattr(TaskIdentity, field, 1)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_registered_algorithm_gives_the_in_process_numbers_through_flowers_client_app(name, in_a_flower_run):
    from fedkd_core.flower import FlowerClients

    config = tiny_config(name)
    local = simulate(config, progress=False)
    grid = InProcessGrid(config.data.num_clients)
    remote = simulate(config, clients=FlowerClients(grid, config, timeout=None), progress=False)
    a, b = comparable(local["history"]), comparable(remote["history"])
    assert a == b, first_difference(a, b)
    assert grid.sent > 0 and any("fedkd-run0" in context.state for context in grid.contexts.values())


def test_a_user_method_registers_passes_and_runs_on_flower_in_other_processes(registry):
    """FedAvgM from an importable module: registered here, announced to child processes through the
    environment, so Flower's client processes (Ray workers, which import the package afresh and look
    the method up by name) run it: the "flower" check passes only if they found it."""
    findings = check(FedAvgM, name="fedavgm_test", flower=True)
    assert {f.check: f.status for f in findings} == {name: PASSED for name in [*CHECKS, "flower"]}, findings
    assert ALGORITHMS["fedavgm_test"] is FedAvgM
    assert "fedavgm_test=plugin_methods:FedAvgM" in os.environ[REGISTERED_ENV]
