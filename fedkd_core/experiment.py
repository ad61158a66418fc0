"""One experiment: its frozen configuration and the simulation that runs it.

A round: select clients (``participation``), send each its download, let it work and upload,
let the server work, send any reply, then evaluate every client's personal model on its local
test set (ALMA) and the global model, if any, on the global test set. Bytes are counted from the
actual messages; seconds are wall time of the round's work (evaluation excluded).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from .algorithms import Context, algorithm_class, algorithm_config
from .algorithms.shapes.base import message_bytes
from .checkpoint import Checkpoints, RunState
from .federation import DataConfig, FederatedData, build_federated_data
from .models import check_model_name
from .precision import reproducible
from .prediction_memo import PredictionMemo
from .randomness import SERVER, party_randomness
from .training import NonFiniteLoss, TrainConfig, correct_predictions


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that decides a run's outcome. Its hash keys the run's record."""

    algorithm: str = "fedavg"
    algorithm_params: dict = field(default_factory=dict)
    data: DataConfig = field(default_factory=DataConfig)
    model: str = "knfu_m1"
    train: TrainConfig = field(default_factory=TrainConfig)
    rounds: int = 10
    participation: float = 1.0
    eval_every: int = 1
    global_test_size: int | None = None  # None: the whole test split
    seed: int = 0

    def __post_init__(self) -> None:
        algorithm_config(self.algorithm, self.algorithm_params)  # validates name and params
        check_model_name(self.model)
        if not isinstance(self.rounds, int) or self.rounds < 1:
            raise ValueError(f"rounds must be an integer >= 1 (got {self.rounds!r})")
        if not 0.0 < self.participation <= 1.0:
            raise ValueError(f"participation must be in (0, 1] (got {self.participation})")
        if self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1 (got {self.eval_every})")
        if self.global_test_size is not None and self.global_test_size < 1:
            raise ValueError(f"global_test_size must be None (the whole test split) or >= 1 "
                             f"(got {self.global_test_size})")

    def resolved(self) -> dict:
        """The config as plain data, algorithm params filled in with their defaults."""
        as_dict = asdict(self)
        as_dict["algorithm_params"] = asdict(algorithm_config(self.algorithm, self.algorithm_params))
        return as_dict


def config_from_dict(raw: dict) -> ExperimentConfig:
    """An ExperimentConfig from plain data (the fields of ExperimentConfig; ``data`` and ``train``
    nested), as YAML, JSON or a stored record's ``config`` give it."""
    return ExperimentConfig(**{**raw, "data": DataConfig(**raw.get("data", {})),
                               "train": TrainConfig(**raw.get("train", {}))})


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def select_clients(rng: np.random.Generator, num_clients: int, participation: float) -> list[int]:
    count = max(1, int(round(participation * num_clients)))
    return sorted(rng.choice(num_clients, size=count, replace=False).tolist())


def cuda_devices() -> list[int]:
    return list(range(torch.cuda.device_count()))


def simulate(
    config: ExperimentConfig,
    *,
    data: FederatedData | None = None,
    device: torch.device | None = None,
    progress: bool = True,
    clients=None,
    checkpoints: Checkpoints | None = None,
    on_round: Callable[[int, int], None] | None = None,
) -> dict:
    """Run ``config`` and return its history, final per-client accuracies and totals (plain data).
    ``clients`` runs the client steps (default: in this process, ``IN_PROCESS``; Flower:
    ``fedkd_core.flower``).

    torch's global generators (dropout masks and any other implicit randomness) are seeded from
    ``config.seed`` for the run and restored afterwards, so a run depends on its config alone,
    not on what ran before it in the same process.

    With ``checkpoints`` (in-process clients only: Flower's clients keep their own states) the run
    saves its state every ``checkpoints.every_seconds`` and, when a saved state exists, resumes
    from it; the outcome then says so (``resumed_after_round``, and ``seconds_before``: the wall
    time of the sessions before this one).

    ``on_round(round_index, rounds)`` is called after each round this session runs (a sweep's
    workers report their runs' progress with it).

    A run whose training loss or weights become non-finite stops with :class:`RunDiverged`
    (the round and the history so far).
    """
    device = device or default_device()
    with torch.random.fork_rng(devices=cuda_devices()), reproducible(device):
        torch.manual_seed(int(np.random.default_rng([config.seed, 5]).integers(2**62)))
        return _simulate(config, data or build_federated_data(config.data, config.seed),
                         device, progress, clients, checkpoints, on_round)


def _simulate(config: ExperimentConfig, data: FederatedData, device: torch.device, progress: bool,
              clients=None, checkpoints: Checkpoints | None = None,
              on_round: Callable[[int, int], None] | None = None) -> dict:
    began = time.perf_counter()
    clients = clients or IN_PROCESS
    ctx = Context(data=data, model_name=config.model, train=config.train, device=device, seed=config.seed)
    algorithm = algorithm_class(config.algorithm)(algorithm_config(config.algorithm, config.algorithm_params), ctx)
    sampler = np.random.default_rng([config.seed, 2])
    global_test = _global_test_indices(data, config)
    memo = PredictionMemo()  # unchanged models (clients that sat rounds out) are not scored again
    history = []
    totals = {"train_seconds": 0.0, "bytes_up": 0, "bytes_down": 0}
    resumed = checkpoints.load(ctx) if checkpoints else None
    if resumed:
        algorithm, history, totals = resumed.algorithm, resumed.history, resumed.totals
        restore_generators(sampler, resumed)
    first = resumed.round + 1 if resumed else 1
    bar = tqdm(range(first, config.rounds + 1), desc=f"{config.algorithm} {config.data.dataset}",
               disable=not progress, leave=False)
    for round_index in bar:
        try:
            start = time.perf_counter()
            traffic = _run_round(algorithm, round_index,
                                 select_clients(sampler, data.num_clients, config.participation), clients)
            seconds = time.perf_counter() - start
            totals = {"train_seconds": totals["train_seconds"] + seconds,
                      "bytes_up": totals["bytes_up"] + traffic["bytes_up"],
                      "bytes_down": totals["bytes_down"] + traffic["bytes_down"]}
            if round_index % config.eval_every == 0 or round_index == config.rounds:
                with clients.states_for_evaluation(algorithm, list(range(data.num_clients))):
                    scores = evaluate(algorithm, data, global_test, config.train.mixed_precision, memo)
                row = {"round": round_index, **traffic, "seconds": seconds, **scores, **algorithm.round_metrics()}
                history.append(row)
                bar.set_postfix(alma=f"{row['alma']:.3f}")
        except (NonFiniteLoss, DivergedError) as error:  # a client's loss, or a model's weights, became non-finite
            raise RunDiverged(str(error), round_index, history) from error
        if on_round:
            on_round(round_index, config.rounds)
        if checkpoints and checkpoints.due() and round_index < config.rounds:
            checkpoints.save(run_state(checkpoints.key, round_index, algorithm, history, totals, sampler,
                                       (resumed.seconds if resumed else 0.0) + time.perf_counter() - began))
    outcome = {"history": history, "client_accuracies": history[-1]["client_accuracies"], "totals": totals}
    return {**outcome, "resumed_after_round": resumed.round, "seconds_before": resumed.seconds} if resumed else outcome


def run_state(key: str, round_index: int, algorithm, history: list, totals: dict, sampler, seconds: float) -> RunState:
    """What a run's next round starts from (see fedkd_core.checkpoint)."""
    return RunState(key=key, round=round_index, algorithm=algorithm, history=history, totals=totals,
                    sampler=sampler.bit_generator.state, torch_rng=torch.get_rng_state(),
                    cuda_rng=torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [], seconds=seconds)


def restore_generators(sampler, state: RunState) -> None:
    """Put the client sampler and torch's global generators where ``state`` left them."""
    sampler.bit_generator.state = state.sampler
    torch.set_rng_state(state.torch_rng)
    if state.cuda_rng:
        torch.cuda.set_rng_state_all(state.cuda_rng)


class InProcessClients:
    """Clients run on the algorithm itself, one after another (the default engine). Another
    engine (fedkd_core.flower) implements the same three methods with clients elsewhere."""

    def update(self, algorithm, downloads: dict) -> dict:
        """Each client's update of the downloaded message; returns the uploads. Consumes
        ``downloads``: each message is dropped once its client has used it, so a round holds one
        message per client (a download or an upload), not both (a model per client on a GPU)."""
        return {k: self.step(algorithm, k, "update", downloads.pop(k)) for k in list(downloads)}

    def finish(self, algorithm, replies: dict) -> None:
        """Each client's use of the server's reply (two-phase methods)."""
        for k, message in replies.items():
            self.step(algorithm, k, "finish", message)

    @contextmanager
    def states_for_evaluation(self, algorithm, clients: list[int]):
        """Make ``clients``' states available on ``algorithm`` while it is evaluated."""
        yield

    @staticmethod
    def step(algorithm, client: int, phase: str, message: dict):
        """One client step under that client's randomness for (seed, round, phase)."""
        with party_randomness(algorithm.ctx.seed, algorithm.round, client, phase):
            return getattr(algorithm, CLIENT_STEPS[phase])(client, message)


IN_PROCESS = InProcessClients()
CLIENT_STEPS = {"update": "client_update", "finish": "client_finish"}


def _run_round(algorithm, round_index: int, selected: list[int], clients=IN_PROCESS) -> dict:
    """One round: downloads, client updates, server update, replies and client finishes; the
    bytes of every message. Client steps run where ``clients`` runs them."""
    algorithm.begin_round(round_index)
    downloads = {k: algorithm.download(k) for k in selected}
    bytes_down = sum(message_bytes(m) for m in downloads.values())
    uploads = {k: on_device(m, algorithm.ctx.device) for k, m in clients.update(algorithm, downloads).items()}
    del downloads  # consumed in-process; Flower's engine has sent them
    server_update(algorithm, uploads)
    replies = _replies(algorithm, selected)
    if replies:
        clients.finish(algorithm, replies)
    return {"clients": len(selected), "selected": list(selected),
            "bytes_up": sum(message_bytes(m) for m in uploads.values()),
            "bytes_down": bytes_down + sum(message_bytes(m) for m in replies.values())}


def on_device(message: dict, device: torch.device) -> dict:
    """``message`` with its tensors on ``device``: the server's step reads uploads on its own device,
    wherever the clients ran (a Flower client's upload arrives as host tensors). In-process, a no-op."""
    return {name: t.to(device) for name, t in message.items()}


def clients_update(algorithm, selected: list[int]) -> dict:
    """In-process downloads and client updates of ``selected`` (the round's first half); the uploads."""
    return IN_PROCESS.update(algorithm, {k: algorithm.download(k) for k in selected})


def clients_finish(algorithm, selected: list[int]) -> None:
    """In-process replies and client finishes of ``selected`` (the round's last step)."""
    IN_PROCESS.finish(algorithm, _replies(algorithm, selected))


def _replies(algorithm, selected: list[int]) -> dict:
    """The server's second-phase messages of the round, for the clients that get one."""
    return {k: reply for k in selected if (reply := algorithm.reply(k)) is not None}


def client_step(replica, round_index: int, client: int, phase: str, message: dict, state: dict) -> tuple:
    """Run client ``client``'s ``phase`` ("update" or "finish") of round ``round_index`` on
    ``replica``, a copy of the algorithm that keeps no client's state, starting from ``state``
    (what ``client_state`` returned last time; {} at first). Returns (the step's output, the
    client's new state). This is what a client process does (fedkd_core.flower); in-process and
    there, the same (seed, round, client) randomness makes the numbers the same."""
    replica.begin_round(round_index)
    replica.load_client_state(client, state)
    try:
        output = InProcessClients.step(replica, client, phase, message)
        return output, replica.client_state(client)
    finally:
        replica.drop_client_state(client)


def server_update(algorithm, uploads: dict) -> None:
    """The server's step of the round, under the server's randomness for (seed, round)."""
    with party_randomness(algorithm.ctx.seed, algorithm.round, SERVER, "server"):
        algorithm.server_update(uploads)


class DivergedError(FloatingPointError):
    """A run's models have non-finite weights: its accuracies would be meaningless."""


class RunDiverged(FloatingPointError):
    """A run whose training loss or weights became non-finite: a result (the method fails under
    this config), not a fault of the run. ``round_index``: the round in which it was found (a
    loss: the round it happened in; non-finite weights: the round evaluated, the same with
    ``eval_every`` 1). ``history``: the rounds evaluated before it (see :func:`simulate`)."""

    def __init__(self, message: str, round_index: int, history: list):
        super().__init__(message)
        self.round_index = round_index
        self.history = history

    def __reduce__(self):  # pickles across a sweep's worker processes
        return type(self), (str(self), self.round_index, self.history)


def has_nonfinite_weights(model: torch.nn.Module) -> bool:
    return any(not bool(torch.isfinite(p).all()) for p in model.parameters())


def all_finite(models: list[torch.nn.Module]) -> bool:
    """Whether every weight of ``models`` is finite, read with one host sync (not one per tensor)."""
    flags = [torch.isfinite(p).all() for model in models for p in model.parameters()]
    return bool(torch.stack(flags).all()) if flags else True


def check_finite(algorithm, users: dict) -> None:
    """Stop a diverged run with the clients whose models are no longer finite, instead of
    recording the accuracy of NaN predictions (a constant, near-chance ALMA) round after round."""
    global_model = algorithm.global_model()
    if all_finite([model for model, _ in users.values()] + ([global_model] if global_model is not None else [])):
        return
    broken = sorted(k for model, clients in users.values() if has_nonfinite_weights(model) for k in clients)
    if broken or (global_model is not None and has_nonfinite_weights(global_model)):
        raise DivergedError(
            f"{type(algorithm).__name__} diverged by round {algorithm.round}: non-finite weights in "
            f"{'the global model' if not broken else f'the models of clients {broken}'}; "
            "lower its learning rate(s) or check its hyperparameters")


def evaluate(algorithm, data: FederatedData, global_test: np.ndarray, mixed_precision: bool | str = False,
             memo: PredictionMemo | None = None) -> dict:
    """ALMA and its spread over clients; the global model's accuracy when there is one.

    Each distinct model is run once, over the union of the test samples it is scored on (all of
    FedAvg's clients use the global model), and every client's accuracy is read off that run.
    With a ``memo`` (one per run) a model byte-identical to one scored in the previous evaluation
    on the same samples is not run again (:mod:`fedkd_core.prediction_memo`); the scores are the same.
    A model with non-finite weights raises :class:`DivergedError`.
    """
    global_model = algorithm.global_model()
    users: dict[int, tuple[torch.nn.Module, list[int]]] = {}
    for k in range(data.num_clients):
        model = algorithm.personal_model(k)
        users.setdefault(id(model), (model, []))[1].append(k)
    if global_model is not None:
        users.setdefault(id(global_model), (global_model, []))
    check_finite(algorithm, users)
    accuracies, global_acc = [float("nan")] * data.num_clients, None
    if memo is not None:
        memo.start_evaluation()
    for model, clients in users.values():
        scored = [data.client_test[k] for k in clients] + ([global_test] if model is global_model else [])
        union = np.unique(np.concatenate(scored))

        def score(model=model, union=union) -> np.ndarray:
            return correct_predictions(model, data.dataset, union, split=data.test_split,
                                       mixed_precision=mixed_precision)

        correct = score() if memo is None else memo.outcome(model, union, data.test_split, str(mixed_precision), score)
        for k in clients:
            accuracies[k] = _share_correct(correct, union, data.client_test[k])
        if model is global_model:
            global_acc = _share_correct(correct, union, global_test)
    return {
        "alma": float(np.nanmean(accuracies)),
        "client_acc_std": float(np.nanstd(accuracies)),
        "client_accuracies": accuracies,
        "global_acc": global_acc,
    }


def _share_correct(correct: np.ndarray, union: np.ndarray, indices: np.ndarray) -> float:
    """The share of ``indices`` predicted correctly, given ``correct`` over the sorted ``union``."""
    return float(correct[np.searchsorted(union, indices)].mean()) if len(indices) else float("nan")


def _global_test_indices(data: FederatedData, config: ExperimentConfig) -> np.ndarray:
    if config.global_test_size is None or config.global_test_size >= len(data.global_test):
        return data.global_test
    rng = np.random.default_rng([config.seed, 4])
    return np.sort(rng.choice(data.global_test, size=config.global_test_size, replace=False))
