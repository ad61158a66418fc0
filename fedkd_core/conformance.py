"""Does a method keep the contract? ``check(MyMethod)`` runs it on a tiny real config and says.

    from fedkd_core.conformance import check
    check(MyMethod)                # raises ConformanceError listing every check that failed
    check(MyMethod, flower=False)  # without the Flower run (seconds instead of a minute)

The checks (each one catches a way a method can give numbers that are not what they claim):

* **contract**: the members of :class:`fedkd_core.contracts.AlgorithmProtocol` are there, the
  steps a method must write are written, every ``CLIENT_STATE`` attribute holds per-client state,
  and the tiny config offers what the method ``NEEDS``;
* **separability**: every client step run on one replica that keeps nothing between calls (its
  state moved through ``client_state`` / ``load_client_state``, as a Flower client process does)
  gives the single in-process algorithm's uploads, client states, personal accuracies and global
  model. Fails for a client step that reads the server's attributes, or a server step that reads
  what a client kept instead of what it uploaded;
* **determinism**: two runs of one config give the same per-round numbers, whatever the global
  random generators held before (fails for a method drawing from ``np.random`` or an unseeded
  generator instead of ``self.generator(client)``);
* **messages**: every message is a dict of tensors, the bytes a run records are those of the
  messages sent, and no client's upload shares memory with another's (an upload that is a view of
  the worker model is overwritten by the next client in-process, not on Flower);
* **flower**: the same config on Flower (one Ray worker) gives identical per-round numbers. Needs
  ``flwr`` and a class importable by its module (not one defined in a notebook).

``tests/test_conformance.py`` runs them for every registered algorithm.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import torch

from .algorithms import ALGORITHMS, Algorithm, Context, algorithm_class, algorithm_config, register
from .algorithms.shapes.base import message_bytes
from .contracts import AlgorithmProtocol, check_needs, missing_members
from .experiment import (ExperimentConfig, InProcessClients, _run_round, client_step, default_device, server_update,
                         simulate)
from .federation import DataConfig, FederatedData, build_federated_data
from .training import TrainConfig, accuracy

# Three clients with a transfer set (distillation methods need one), two of them per round.
TINY_DATA = DataConfig("mnist", num_clients=3, samples_per_client=60, transfer_size=30, local_test_size=20)
TINY_TRAIN = TrainConfig(batch_size=20, mixed_precision=False)
SELECTIONS = [[0, 2], [1, 2], [0, 1]]  # participation 2 of 3, three rounds (separability)
# What a run's per-round rows must agree on between two runs of one config (not its seconds).
COMPARED = ("round", "clients", "selected", "bytes_up", "bytes_down", "alma", "client_accuracies", "global_acc")
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


# The global test images a tiny run is scored on. The checks compare two runs for identical numbers;
# scoring the whole 10,000-image split took most of a check's time (60% of a tiny FedAvg run), and
# these 500 are still ten times the clients' own test images, which every round scores too.
TINY_GLOBAL_TEST = 500

# The fewest epochs and steps with which every loop of these methods still runs at least twice. What
# the checks catch (a step reading another party's state, an unseeded draw, an upload that is a view,
# an operation a GPU refuses) shows in the first two passes of a loop; the methods' defaults repeat
# them 4 to 20 times (FedDF's and FedUA's 20 server epochs, FedGen's 25 generator steps a round, the
# original FedMD's 4 revisit epochs, pFedMe's 5 inner steps per batch, FedGMKD's BIC over 1 to 6
# mixture components per class), which was most of the time of the tests that run every algorithm.
# Explicit ``params`` override these (the methods' own tests run their defaults).
TINY_PARAMS = {
    "feddf": {"server_epochs": 2},
    "fedua": {"server_epochs": 2},
    "fedgen": {"generator_epochs": 1, "generator_steps_per_epoch": 2},
    "fedmd_original": {"revisit_epochs": 2},
    "pfedme": {"inner_steps": 2},
    "fedgmkd": {"max_components": 2},
}


def tiny_params(name: str, params: dict | None = None) -> dict:
    """``params`` over :data:`TINY_PARAMS`' shorter loops for ``name`` (none for other methods)."""
    return {**TINY_PARAMS.get(name, {}), **(params or {})}


def tiny_config(name: str, params: dict | None = None, data: DataConfig = TINY_DATA, model: str = "knfu_m1",
                rounds: int = 2) -> ExperimentConfig:
    """Two rounds of ``name`` on :data:`TINY_DATA`, two of three clients per round, seed 0, scored on
    :data:`TINY_GLOBAL_TEST` images of the global test split; ``params`` over :func:`tiny_params`."""
    return ExperimentConfig(algorithm=name, algorithm_params=tiny_params(name, params), data=data, model=model,
                            train=TINY_TRAIN, rounds=rounds, participation=2 / 3, seed=0,
                            global_test_size=TINY_GLOBAL_TEST)


@dataclass(frozen=True)
class Finding:
    """One check's outcome: ``status`` is passed, failed or skipped; ``detail`` says what was
    compared, or what went wrong."""

    check: str
    status: str
    detail: str


class ConformanceError(AssertionError):
    """A method that failed one or more checks (the message lists them)."""


def check(method, *, name: str | None = None, params: dict | None = None, config: ExperimentConfig | None = None,
          flower: bool = True, raise_on_failure: bool = True) -> list[Finding]:
    """Run every check on ``method`` (a class, or a registered name) and return the findings; a
    class not yet registered is registered under ``name`` (default: its class name, lower case).
    ``params``: the method's Config fields; ``config``: another tiny config than :func:`tiny_config`.
    ``flower=False`` skips the Flower run. Raises :class:`ConformanceError` listing the failed
    checks unless ``raise_on_failure`` is False."""
    name = registered_name(method, name)
    config = config or tiny_config(name, params)
    data = build_federated_data(config.data, config.seed)
    with shared_runs():
        findings = [run_check(label, function, config, data) for label, function in CHECKS.items()]
        findings.append(run_check("flower", flower_check, config, data) if flower
                        else Finding("flower", SKIPPED, "not asked (flower=False)"))
    failed = [f for f in findings if f.status == FAILED]
    if failed and raise_on_failure:
        raise ConformanceError(f"{name} fails {len(failed)} conformance check(s):\n"
                               + "\n".join(f"- {f.check}: {f.detail}" for f in failed))
    return findings


def registered_name(method, name: str | None = None) -> str:
    """The name ``method`` (a class or a name) is registered under, registering a class that is not."""
    if isinstance(method, str):
        algorithm_class(method)  # a ValueError listing the names when it is unknown
        return method
    known = [key for key, cls in ALGORITHMS.items() if cls is method]
    if name is None and known:
        return known[0]
    name = name or method.__name__.lower()
    register(name, method)
    return name


def run_check(label: str, function, config: ExperimentConfig, data: FederatedData) -> Finding:
    """``function(config, data)`` as a Finding: passed with its return text, failed with the
    assertion's or error's text, skipped when it raises :class:`Skipped`."""
    try:
        return Finding(label, PASSED, function(config, data))
    except Skipped as why:
        return Finding(label, SKIPPED, str(why))
    except Exception as error:  # noqa: BLE001 - any error of the method is a failed check, named
        return Finding(label, FAILED, f"{type(error).__name__}: {error}")


class Skipped(Exception):
    """A check that cannot run here (the message says why)."""


def fresh(config: ExperimentConfig, data: FederatedData, device: torch.device = torch.device("cpu")) -> Algorithm:
    """A new copy of ``config``'s algorithm on ``data`` (what a server or a client replica starts from)."""
    ctx = Context(data=data, model_name=config.model, train=config.train, device=device, seed=config.seed)
    return algorithm_class(config.algorithm)(algorithm_config(config.algorithm, config.algorithm_params), ctx)


# --- the checks ------------------------------------------------------------------------------------

def contract_check(config: ExperimentConfig, data: FederatedData) -> str:
    method = fresh(config, data)
    cls = type(method)
    missing = missing_members(method, AlgorithmProtocol)
    assert not missing, f"missing members of AlgorithmProtocol: {missing}"
    unwritten = [step for step in ("client_update", "personal_model") if getattr(cls, step) is getattr(Algorithm, step)]
    assert not unwritten, f"{cls.__qualname__} must write {unwritten} (Algorithm's raise NotImplementedError)"
    for field in cls.CLIENT_STATE:
        holder = getattr(method, field, None)
        assert holder is not None and all(hasattr(holder, m) for m in ("__contains__", "__getitem__", "__delitem__")), \
            f"CLIENT_STATE names {field!r}, which must be a dict from client to model or tensor (or PersonalModels)"
    check_needs(cls.__qualname__, cls.NEEDS, [config])
    kept = ", ".join(cls.CLIENT_STATE) or "none"
    needs = ", ".join(sorted(cls.NEEDS)) or "none"
    return (f"members present; state each client keeps between rounds (CLIENT_STATE): {kept}; "
            f"what a run must offer beyond the clients' data (NEEDS): {needs}")


def separability_check(config: ExperimentConfig, data: FederatedData) -> str:
    assert_clients_separable(lambda: fresh(config, data), data)
    return f"{len(SELECTIONS)} rounds with every client step on a stateless replica equal the single algorithm's"


def determinism_check(config: ExperimentConfig, data: FederatedData) -> str:
    # whatever the global generators held, the run must not depend on it
    first, second = (comparable(recorded_run(config, data, global_seed=seed).history) for seed in (11, 22))
    assert first == second, f"two runs of one config differ: {first_difference(first, second)}"
    return f"two runs of {config.rounds} rounds gave identical per-round numbers"


# --- the runs the checks look at, made once per check() ---------------------------------------------

@dataclass(frozen=True)
class RecordedRun:
    """A run's per-round rows and every message it sent (its :class:`RecordingClients`)."""

    history: list[dict]
    messages: RecordingClients


_runs: dict | None = None  # the runs of the check() in progress (None: none, nothing is kept)


@contextmanager
def shared_runs():
    """While it lasts, :func:`recorded_run` makes each run once, so that the determinism check's first
    run is also the run whose messages the messages check reads and the in-process run the Flower
    check compares with. Each check made a run of its own before: the same config on the same device
    (the messages check's config scored every round, as a tiny config does anyway), only under
    other global generators, which a run that passes the determinism check does not depend on."""
    global _runs
    _runs = {}
    try:
        yield
    finally:
        _runs = None


def recorded_run(config: ExperimentConfig, data: FederatedData, device: torch.device = torch.device("cpu"),
                 global_seed: int = 11) -> RecordedRun:
    """``config`` run in-process on ``device``, its messages recorded, after the global generators
    (torch's, numpy's, Python's) were seeded with ``global_seed`` (they are restored after). Within
    :func:`shared_runs`, a run asked for again is the one made before."""
    key = (repr(config), str(device), global_seed)
    if _runs is not None and key in _runs:
        return _runs[key]
    spy = RecordingClients()
    saved = torch.get_rng_state(), np.random.get_state(), random.getstate()
    try:
        torch.manual_seed(global_seed), np.random.seed(global_seed), random.seed(global_seed)
        history = simulate(config, data=data, device=device, progress=False, clients=spy)["history"]
    finally:  # the caller's generators as they were
        torch.set_rng_state(saved[0]), np.random.set_state(saved[1]), random.setstate(saved[2])
    run = RecordedRun(history, spy)
    if _runs is not None:
        _runs[key] = run
    return run


class RecordingClients(InProcessClients):
    """In-process clients that keep every message of the run, round by round."""

    def __init__(self):
        self.rounds: list[dict] = []

    def update(self, algorithm, downloads: dict) -> dict:
        sent = dict(downloads)  # the engine consumes ``downloads``
        uploads = super().update(algorithm, downloads)
        self.rounds.append({"downloads": sent, "uploads": uploads, "replies": {}})
        return uploads

    def finish(self, algorithm, replies: dict) -> None:
        self.rounds[-1]["replies"] = replies
        super().finish(algorithm, replies)


def messages_check(config: ExperimentConfig, data: FederatedData) -> str:
    run = recorded_run(replace(config, eval_every=1), data)  # every round scored: a row per round's messages
    history = run.history
    for row, sent in zip(history, run.messages.rounds, strict=True):
        for kind, messages in sent.items():
            for client, message in messages.items():
                assert_is_message(message, f"round {row['round']}, {kind[:-1]} of client {client}")
        assert row["bytes_up"] == sum(map(message_bytes, sent["uploads"].values())), f"round {row['round']}: bytes up"
        down = [*sent["downloads"].values(), *sent["replies"].values()]
        assert row["bytes_down"] == sum(map(message_bytes, down)), f"round {row['round']}: bytes down"
        assert_no_shared_memory(sent["uploads"], row["round"])
    total = sum(row["bytes_up"] + row["bytes_down"] for row in history)
    return f"{total:,} bytes in {len(history)} rounds, every message a dict of tensors, no upload sharing memory"


def assert_is_message(message, where: str) -> None:
    assert isinstance(message, dict), f"{where} is a {type(message).__name__}, not a dict of tensors"
    wrong = {k: type(v).__name__ for k, v in message.items() if not (isinstance(k, str) and isinstance(v, torch.Tensor))}
    assert not wrong, f"{where} holds values that are not tensors under str keys, so their bytes go uncounted: {wrong}"


def assert_no_shared_memory(uploads: dict, round_index: int) -> None:
    """No two clients' uploads share storage (one would be the other client's numbers in-process)."""
    owner: dict[int, int] = {}
    for client, message in uploads.items():
        for name, tensor in message.items():
            pointer = tensor.untyped_storage().data_ptr()
            if tensor.numel() and owner.setdefault(pointer, client) != client:
                raise AssertionError(f"round {round_index}: {name!r} of client {client}'s upload shares memory with "
                                     f"client {owner[pointer]}'s: upload detached copies (parameters_message does)")


def flower_check(config: ExperimentConfig, data: FederatedData) -> str:
    cls = algorithm_class(config.algorithm)
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        raise Skipped(f"{cls.__qualname__} is defined in {cls.__module__} (a notebook or a function): Flower's client "
                      "processes import a method by its module; put it in a module to run this check")
    try:
        from .flower import simulate_on_flower
    except ImportError as error:
        raise Skipped(f"Flower is not installed ({error})") from None
    remote = simulate_on_flower([config], workers=1)[0]
    if not isinstance(remote, dict):
        raise AssertionError(f"on Flower the run diverged: {remote}")
    local = comparable(recorded_run(config, data, default_device()).history)
    assert local == comparable(remote["history"]), \
        f"Flower and in-process differ: {first_difference(local, comparable(remote['history']))}"
    return f"{config.rounds} rounds on Flower (1 Ray worker) equal the in-process run"


CHECKS = {"contract": contract_check, "separability": separability_check, "determinism": determinism_check,
          "messages": messages_check}


def comparable(history: list[dict]) -> list[dict]:
    """A run's per-round rows restricted to :data:`COMPARED` (not its seconds)."""
    return [{key: row.get(key) for key in COMPARED} for row in history]


def first_difference(a: list[dict], b: list[dict]) -> str:
    for row_a, row_b in zip(a, b):
        for key in COMPARED:
            if row_a[key] != row_b[key]:
                return f"round {row_a['round']}, {key}: {row_a[key]} vs {row_b[key]}"
    return f"{len(a)} vs {len(b)} rounds"


# --- separability, also used by each method's own tests -------------------------------------------

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


def assert_clients_separable(make, data: FederatedData, selections=SELECTIONS, require_state: bool = False):
    """``make()`` builds a fresh copy of the algorithm on ``data``. Asserts the separated run
    equals the single one; returns (single, server) for method-specific checks. ``require_state``:
    every client must keep something (methods with personal state)."""
    single = make()
    traffic = [_run_round(single, r, selected)["bytes_up"] for r, selected in enumerate(selections, start=1)]
    server, states, separated_traffic = separated_run(make, selections)
    assert separated_traffic == traffic, f"bytes uploaded per round: {separated_traffic} apart vs {traffic} together"
    for k, state in states.items():
        expected = single.client_state(k)
        assert state.keys() == expected.keys(), f"client {k}'s state holds {sorted(state)} apart, {sorted(expected)} together"
        assert expected or not require_state, f"client {k} keeps no state"
        different = [name for name in expected if not torch.equal(state[name], expected[name])]
        assert not different, f"client {k}'s state differs apart and together in {different[:3]}"
        server.load_client_state(k, state)  # evaluation: the server's state plus the client's
        apart = accuracy(server.personal_model(k), data.dataset, data.client_test[k])
        together = accuracy(single.personal_model(k), data.dataset, data.client_test[k])
        assert apart == together, f"client {k}'s personal model scores {apart} apart, {together} together"
    if single.global_model() is not None:
        a, b = single.global_model().state_dict(), server.global_model().state_dict()
        different = [n for n in a if not torch.equal(a[n], b[n])]
        assert not different, f"the global model differs apart and together in {different[:3]}"
    return single, server


# --- what "learns" means: better than always answering a client's largest class -------------------

def majority_scores(data: FederatedData) -> dict:
    """The scores of the trivial method that answers each client's largest training class
    (``alma``: the mean over clients of that class's share of the client's local test set) and
    the pooled largest class everywhere (``global_acc`` on the global test set). A method that
    learns must beat these, not 1/C: under label skew the first is far above chance."""
    labels = data.dataset.y_train.numpy() if hasattr(data.dataset.y_train, "numpy") else np.asarray(data.dataset.y_train)
    test_labels = np.asarray(data.dataset.y_test)
    classes = data.num_classes
    shares, pooled = [], np.zeros(classes)
    for train, test in zip(data.client_train, data.client_test):
        counts = np.bincount(labels[np.asarray(train)], minlength=classes)
        pooled += counts
        shares.append(float(np.mean(test_labels[np.asarray(test)] == counts.argmax())))
    return {"alma": float(np.mean(shares)),
            "global_acc": float(np.mean(test_labels[np.asarray(data.global_test)] == pooled.argmax()))}
