"""The same runs on Flower (Ray simulation) as in-process: per-round client accuracies, global
accuracy, bytes and selected clients identical, with two Ray workers (one worker: the conformance
check of a user's method, test_conformance_flower.py) and on Flower's deployment engine."""

import pytest

pytest.importorskip("flwr")

from fedkd_core.experiment import ExperimentConfig, simulate  # noqa: E402
from fedkd_core.federation import DataConfig  # noqa: E402
from fedkd_core.training import TrainConfig  # noqa: E402

DATA = DataConfig("mnist", num_clients=4, samples_per_client=50, transfer_size=50, local_test_size=20)
TRAIN = TrainConfig(batch_size=16, mixed_precision=False)
# global_test_size: the server scores on 200 test images, not MNIST's whole 10,000 (most of a run's
# seconds here, in every in-process and Flower run): what is compared is that both engines give the
# same numbers, which does not depend on how many images are scored.
GLOBAL_TEST = 200
CONFIGS = [ExperimentConfig(algorithm=name, data=DATA, model="knfu_m1", train=TRAIN, rounds=2, participation=0.5, seed=3,
                            global_test_size=GLOBAL_TEST)
           for name in ("fedavg", "knfu", "fedckd")]
# One method of each round shape (fedkd_core.algorithms.shapes: Algorithm, TransferDistillation,
# FromGlobal, PartialSharing) and Selective-FD (boolean masks in its messages, a tensor as client
# state) in one Ray simulation: Ray's part of Flower does not depend on the method, and every
# registered method crosses Flower's records and ClientApp in test_conformance_flower.py.
RAY_SHAPES = [*CONFIGS, *(ExperimentConfig(algorithm=name, data=DATA, model="knfu_m1", train=TRAIN, rounds=2,
                                           participation=0.5, seed=3, global_test_size=GLOBAL_TEST)
                          for name in ("fedper", "selective_fd"))]
COMPARED = ("round", "clients", "selected", "bytes_up", "bytes_down", "alma", "client_accuracies", "global_acc")


def write_config(config: ExperimentConfig, path):
    """``config`` as the YAML that ``python -m fedkd_core.flower`` and flower_app read."""
    import dataclasses

    import yaml

    path.write_text(yaml.safe_dump(dataclasses.asdict(config)))
    return path


def child_env(tmp_path, **extra) -> dict:
    """The environment of a command under test: its records under ``tmp_path``, one torch thread."""
    import os

    return {**os.environ, "FEDKD_RESULTS": str(tmp_path / "results"), "OMP_NUM_THREADS": "1", **extra}


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """This process computes with one torch thread, as each Flower client does (``_replica``):
    the reference runs and the ServerApp of the simulations run here, and on two busy cores a
    second thread made them ten times slower (OpenMP's threads wait on each other); the numbers
    do not depend on it (the clients' single thread already equals the in-process runs)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def in_process():
    return [simulate(config, progress=False) for config in RAY_SHAPES]


def assert_same_runs(in_process, on_flower):
    """The runs on Flower (the first len(on_flower) of RAY_SHAPES) equal the in-process ones."""
    assert 0 < len(on_flower) <= len(in_process)
    for config, local, remote in zip(RAY_SHAPES, in_process, on_flower):
        assert len(local["history"]) == len(remote["history"]) == 2
        for a, b in zip(local["history"], remote["history"]):
            assert {k: a[k] for k in COMPARED} == {k: b[k] for k in COMPARED}, config.algorithm
        assert local["totals"]["bytes_up"] == remote["totals"]["bytes_up"] > 0


def test_the_command_gives_the_in_process_numbers_stores_a_divergence_and_a_later_timeout_keeps_the_finished_records(
        in_process, tmp_path, monkeypatch, capsys):
    """`python -m fedkd_core.flower D.yaml A.yaml ... F.yaml --workers 2`, run as ``python -m`` runs it
    (the module executed as ``__main__``, whose guard hands over to the importable module; Ray's
    workers import the ClientApp from fedkd_core.flower_clientapp), in one simulation on two Ray
    workers:

    - D diverges (its clients' loss becomes NaN): it is stored as a divergence, as in-process, and
      the runs after it go on;
    - each round shape (RAY_SHAPES) gives the in-process numbers, and its record is saved when it
      ends, so a fault in a later run loses none of them;
    - that fault is a real one: F's clients must answer within 0.001 s, which they cannot, and the
      command stops with an error that says so.

    With two workers and four clients a run, each Ray worker process serves several clients in
    turn, which is what one worker checked apart before; one worker's numbers are still compared in
    test_conformance_flower.py (a user's method through conformance.check), and it runs in the
    scaling chapter. (One simulation for all of this: Ray's start, its workers' start-up and its
    shutdown are most of each such test's seconds.)"""
    import json
    import runpy
    import sys
    import warnings
    from dataclasses import replace

    from fedkd_core import flower
    from fedkd_core.results import config_hash, load_record

    diverging = replace(CONFIGS[0], train=replace(TRAIN, lr=1e30), seed=4)
    failing = replace(CONFIGS[0], seed=5)
    monkeypatch.setenv("FEDKD_RESULTS", str(tmp_path / "results"))
    real_clients = flower.FlowerClients

    def no_time_for_the_failing_run(grid, config, run=0, timeout=None, **kwargs):  # the ServerApp runs here
        return real_clients(grid, config, run, 0.001 if config == failing else timeout, **kwargs)

    monkeypatch.setattr(flower, "FlowerClients", no_time_for_the_failing_run)
    paths = [write_config(config, tmp_path / f"{i}.yaml")
             for i, config in enumerate([diverging, *RAY_SHAPES, failing])]
    monkeypatch.setattr(sys, "argv", ["fedkd_core.flower", *map(str, paths), "--workers", "2", "--profile", "custom"])
    with warnings.catch_warnings(), pytest.raises(
            RuntimeError, match=rf"Flower run {len(RAY_SHAPES) + 1}, round 0: .* did not answer within 0.001 s"):
        warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module is imported already (by this test)
        runpy.run_module("fedkd_core.flower", run_name="__main__")
    records = [load_record(config) for config in RAY_SHAPES]
    assert all(r is not None and r.environment["engine"] == "flower (ray, 2 workers)" for r in records)
    assert_same_runs(in_process, [{"history": r.history, "totals": r.timings} for r in records])
    assert load_record(failing) is None
    stored = json.loads((tmp_path / "results" / "custom" / "fedavg" / f"{config_hash(diverging)}.diverged.json")
                        .read_text())
    assert stored["round"] == 1 and stored["history"] == [] and "training loss became" in stored["error"]
    assert stored["environment"]["engine"] == "flower (ray, 2 workers)"
    assert "DIVERGED in round 1" in capsys.readouterr().out


def test_configs_of_one_simulation_must_have_the_same_number_of_clients():
    from dataclasses import replace

    from fedkd_core.flower import simulate_on_flower

    other = replace(CONFIGS[0], data=replace(DATA, num_clients=5))
    with pytest.raises(ValueError, match="same number of clients"):
        simulate_on_flower([CONFIGS[0], other])


class ScriptedGrid:
    """A stand-in for Flower's Grid whose nodes answer as scripted: "ok", "raise", "silent",
    "gone" (the SuperLink, node 1, answers for the node with Flower's "Node Unavailable" error) or
    "diverge" (as ``_run_client_step`` answers when the client's loss became NaN; node 10 + k holds
    client k). As Flower's grids do, sending gives each message its id and a reply names the
    message it answers."""

    def __init__(self, script: dict):
        self.script = script  # node id -> behaviour

    def get_node_ids(self):
        return list(self.script)

    def send_and_receive(self, messages, timeout=None):
        from types import SimpleNamespace

        from flwr.app import ConfigRecord, RecordDict

        replies = []
        for number, message in enumerate(messages):
            message.metadata.__dict__["_message_id"] = f"message-{number}"
            node = message.metadata.dst_node_id
            behaviour = self.script[node]
            if behaviour == "silent":
                continue
            replies.append(SimpleNamespace(
                metadata=SimpleNamespace(src_node_id=1 if behaviour == "gone" else node,
                                         reply_to_message_id=message.metadata.message_id),
                has_error=lambda b=behaviour: b in ("raise", "gone"),
                error=SimpleNamespace(reason="Error: Node Unavailable" if behaviour == "gone" else "ValueError: boom"),
                content=RecordDict({"cfg": ConfigRecord(
                    {"client": node - 10, **({"diverged": "training loss became nan (lr=1e+30)"}
                                             if behaviour == "diverge" else {})})})))
        return replies


@pytest.fixture()
def in_a_flower_run(monkeypatch):
    """Flower's messages need the identity of the run they belong to."""
    from flwr.supercore.task_identity import TaskIdentity

    for field in ("_run_id", "_task_id", "_node_id"):
        monkeypatch.setattr(TaskIdentity, field, 1)


def scripted_clients(script):
    from fedkd_core.flower import FlowerClients

    clients = FlowerClients(ScriptedGrid({10 + k: "ok" for k in range(len(script))}), CONFIGS[0], timeout=5.0)
    clients.grid = ScriptedGrid({10 + k: behaviour for k, behaviour in enumerate(script)})
    return clients


def test_a_client_that_raises_stops_the_run_naming_it_and_its_error(in_a_flower_run):
    clients = scripted_clients(["ok", "raise", "ok", "ok"])
    with pytest.raises(RuntimeError, match=r"round 3: client 1 raised: ValueError: boom"):
        clients._send("train.update", {k: {} for k in range(4)}, round_index=3)


def test_a_node_that_has_gone_is_named_by_the_message_it_did_not_answer(in_a_flower_run):
    """The SuperLink (node 1) answers for a SuperNode that stopped: the error names that client,
    not node 1, and nobody is reported silent."""
    clients = scripted_clients(["ok", "ok", "gone", "ok"])
    with pytest.raises(RuntimeError) as error:
        clients._send("train.update", {k: {} for k in range(4)}, round_index=2)
    assert "round 2: client 2 raised: Error: Node Unavailable (the run stops" in str(error.value)
    assert "node 1" not in str(error.value) and "did not answer" not in str(error.value)


def test_a_client_whose_training_diverged_stops_the_round_as_a_divergence_not_a_fault(in_a_flower_run):
    """experiment.simulate turns NonFiniteLoss into RunDiverged, as it does for an in-process client."""
    from fedkd_core.training import NonFiniteLoss

    clients = scripted_clients(["ok", "diverge", "ok", "diverge"])
    with pytest.raises(NonFiniteLoss, match=r"^client 1: training loss became nan \(lr=1e\+30\); client 3: "):
        clients._send("train.update", {k: {} for k in range(4)}, round_index=2)


def test_a_client_that_does_not_answer_in_time_stops_the_run_naming_it(in_a_flower_run):
    clients = scripted_clients(["ok", "ok", "silent", "silent"])
    with pytest.raises(RuntimeError, match=r"client 2, client 3 did not answer within 5.0 s \(waited 0.\d s\)"):
        clients._send("train.update", {k: {} for k in range(4)}, round_index=1)


def test_nodes_must_hold_the_partition_ids_of_the_run(in_a_flower_run):
    from fedkd_core.flower import FlowerClients

    with pytest.raises(RuntimeError, match="partition-id"):
        FlowerClients(ScriptedGrid({15 + k: "ok" for k in range(4)}), CONFIGS[0], timeout=5.0)


def test_ray_that_cannot_start_is_reported_with_the_fix():
    from fedkd_core.flower import simulate_on_flower

    with pytest.raises(RuntimeError, match=r"Ray could not start .*--shm-size.*--object-store-mb"):
        simulate_on_flower(CONFIGS[:1], workers=1, object_store_mb=10**9)  # a petabyte


def test_clients_rebuild_the_servers_config_from_the_message():
    from fedkd_core.experiment import config_from_dict
    from fedkd_core.flower import config_json
    from fedkd_core.results import config_hash
    import json

    for config in CONFIGS:
        sent = json.loads(config_json(config))
        assert config_from_dict(sent["config"]) == config and sent["key"] == config_hash(config)


def test_the_deployment_command_sequence_on_local_supernodes_gives_the_in_process_numbers(tmp_path):
    """flower_app/run_local.sh: a SuperLink and two SuperNodes on 127.0.0.1, then `flwr run`."""
    import dataclasses
    import json
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    from fedkd_core.experiment import simulate
    from fedkd_core.results import config_hash

    # One round: Flower starts a ClientApp process (torch imported, data built) for each message a
    # SuperNode gets, so each round costs every client two more processes. Round 1 already crosses
    # everything the deployment engine adds: the nodes' partition ids (whoami), the update, and
    # the client's state kept by its SuperNode between two processes (update, then the evaluation's
    # state query); later rounds are the same messages, and the Ray simulation tests above run two.
    config = dataclasses.replace(CONFIGS[0], data=dataclasses.replace(DATA, num_clients=2), participation=1.0,
                                 rounds=1)
    path = write_config(config, tmp_path / "run.yaml")
    with socket.socket() as probe:  # a free port for the SuperLink (the SuperNodes take the next two)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Each SuperExec (the SuperLink's and each SuperNode's) polls for a process to start every
    # second by default; once per message here, so a faster poll only removes idle waiting.
    env = child_env(tmp_path, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
                    FLWR_SUPEREXEC_TASK_POLL_INTERVAL="0.05")
    script = Path(__file__).resolve().parents[1] / "flower_app" / "run_local.sh"
    done = subprocess.run([str(script), str(path), str(port), "deployed"], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads((tmp_path / "results" / "deployed" / "fedavg" / f"{config_hash(config)}.json").read_text())
    assert record["environment"]["engine"] == "flower (deployment, 2 SuperNodes)"
    local = simulate(config, progress=False)
    for a, b in zip(local["history"], record["history"], strict=True):
        assert {k: a[k] for k in COMPARED} == {k: b[k] for k in COMPARED}


@pytest.mark.parametrize("gpus, workers, fraction", [(0, 2, 0.0), (1, 1, 1.0), (1, 4, 0.25), (2, 1, 1.0), (2, 4, 0.5)])
def test_clients_follow_the_server_onto_the_gpus(monkeypatch, gpus, workers, fraction):
    """By default each Ray client process gets a share of the GPUs (at most one each), so it trains
    on the device the server uses; Ray would hide the GPUs from a process that asks for none."""
    import torch

    from fedkd_core.flower import client_gpu_fraction

    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    assert client_gpu_fraction(workers) == fraction
