"""KnFu's parameters and its grid: Table 1 (MNIST, Dir(alpha) x |D_n|) and Table 2 (CIFAR-10),
every method on the same partitions and initialisation within a seed.

Within a dataset runs are ordered seed first, so a sweep that stops early has every cell at seed 0
before any cell gets its second seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...algorithms.shapes.schedule import PhaseSchedule, parse_schedule, schedule_fields
from ...experiment import ExperimentConfig
from ...federation import DataConfig
from ...report import parse_list
from ...training import TrainConfig

MODEL_FOR = {"mnist": "knfu_m1", "cifar10": "knfu_m2"}
METHODS = {"knfu": "KnFu", "fedmd": "FedMD", "knfu_local": "Local", "selective_fd": "Selective-FD",
           "fedmd_original": "FedMD (original form)"}
# The methods whose phase schedule is tuned (issue 33): the paper's four. FedMD's original form
# runs its authors' schedule (fedkd_core.algorithms.fedmd.FedMDOriginalConfig).
TUNED = ("knfu", "fedmd", "knfu_local", "selective_fd")
SHARING = ("knfu", "fedmd", "selective_fd")
# Sec. IV-A: "a batch size of 128, 64, 32, 16, and 8 samples for local data sizes of 1000, 500,
# 200, 100, and 50"; other sizes use the same ratio (|D_n| / 6.25), rounded to a power of two.
PAPER_BATCH_SIZE = {50: 8, 100: 16, 200: 32, 500: 64, 1000: 128}


def batch_size_for(samples_per_client: int) -> int:
    if samples_per_client in PAPER_BATCH_SIZE:
        return PAPER_BATCH_SIZE[samples_per_client]
    return max(1, 2 ** int(round(np.log2(samples_per_client / 6.25))))


@dataclass(frozen=True)
class Params:
    """The notebook's parameters; defaults are the smoke profile (seconds).

    ``mnist_*`` / ``cifar_*`` are comma-separated grids of Dir(alpha) and |D_n|; a dataset runs
    only when listed in ``datasets``. The transfer set has |D_n| samples (the paper's fairness
    rule). ``example_*`` set the worked example of the fusion weights.

    The phases' schedule (:mod:`fedkd_core.algorithms.shapes.schedule`): ``schedules`` gives methods
    their own, ``"knfu=kept/0.0001/1, fedmd=fresh/-/1"`` (a method not named keeps the chapter's
    fresh-optimiser round); ``tuning_schedules`` runs every tuned method under each of the listed
    schedules (``"fresh/-/0, kept/0.0001/1"``), for choosing one on ``validation_fraction`` of the
    clients' own data held out (never on the test data).
    """

    profile: str = "smoke"
    datasets: str = "mnist"
    mnist_alphas: str = "0.5"
    mnist_sizes: str = "50"
    cifar_alphas: str = "0.1,0.5,1"
    cifar_sizes: str = "500,1000"
    algorithms: str = "knfu,fedmd,knfu_local,selective_fd"
    seeds: int = 1
    num_clients: int = 4
    rounds: int = 2
    cifar_rounds: int = 2
    local_test_size: int = 100
    eval_every: int = 1
    optimizer: str = "adam"
    lr: float = 0.001
    momentum: float = 0.0
    local_epochs: int = 1
    finetune_epochs: int = 1
    lam: float = 1.0
    beta: float = 10.0
    entropy_threshold: float = 0.5
    mixed_precision: bool | str = "auto"  # bf16 where native (fedkd_core.precision)
    example_alpha: float = 0.5
    example_size: int = 50
    example_rounds: int = 1
    schedules: str = ""
    tuning_schedules: str = ""
    validation_fraction: float = 0.0

    def __post_init__(self) -> None:
        self.method_schedules()  # raises on a malformed schedule
        self.candidate_schedules()
        if self.schedules.strip() and self.tuning_schedules.strip():
            raise ValueError("give either schedules (one per method) or tuning_schedules (candidates), not both")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must be in [0, 1) (got {self.validation_fraction})")
        for name in ("datasets", "algorithms"):
            allowed = MODEL_FOR if name == "datasets" else METHODS
            for value in parse_list(getattr(self, name), str, name):
                if value.strip() not in allowed:
                    raise ValueError(f"{name} must be among {sorted(allowed)} (got {value.strip()!r})")
        for name in ("mnist_alphas", "cifar_alphas"):
            if any(not a > 0 for a in parse_list(getattr(self, name), float, name)):
                raise ValueError(f"{name} must all be > 0 (got {getattr(self, name)!r})")
        for name in ("mnist_sizes", "cifar_sizes"):
            if any(n < 1 for n in parse_list(getattr(self, name), int, name)):
                raise ValueError(f"{name} must all be >= 1 (got {getattr(self, name)!r})")
        positive = ("seeds", "num_clients", "rounds", "cifar_rounds", "local_test_size", "eval_every",
                    "local_epochs", "example_size", "example_rounds")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")
        if not self.example_alpha > 0:
            raise ValueError(f"example_alpha must be > 0 (got {self.example_alpha})")

    def method_schedules(self) -> dict[str, PhaseSchedule]:
        """``schedules`` as {method: schedule}."""
        chosen = {}
        for entry in parse_list(self.schedules, str, "schedules") if self.schedules.strip() else []:
            method, _, text = entry.partition("=")
            if method.strip() not in TUNED:
                raise ValueError(f"schedules: {method.strip()!r} is not a tuned method (one of {list(TUNED)}); "
                                 f"write METHOD=STATE/LR/REVISIT")
            chosen[method.strip()] = parse_schedule(text)
        return chosen

    def candidate_schedules(self) -> list[PhaseSchedule]:
        """``tuning_schedules`` as a list (empty: no tuning grid)."""
        if not self.tuning_schedules.strip():
            return []
        return [parse_schedule(text) for text in parse_list(self.tuning_schedules, str, "tuning_schedules")]

    def schedules_of(self, algorithm: str) -> list[PhaseSchedule | None]:
        """The schedules ``algorithm`` runs under (None: its Config's own)."""
        if algorithm not in TUNED:
            return [None]
        candidates = self.candidate_schedules()
        return candidates or [self.method_schedules().get(algorithm)]

    def grid(self, dataset: str) -> tuple[list[int], list[float]]:
        prefix = "mnist" if dataset == "mnist" else "cifar"
        return (parse_list(getattr(self, f"{prefix}_sizes"), int, f"{prefix}_sizes"),
                parse_list(getattr(self, f"{prefix}_alphas"), float, f"{prefix}_alphas"))


def algorithm_params(params: Params, algorithm: str, schedule: PhaseSchedule | None = None) -> dict:
    """The chapter's shared hyperparameters, as each method's Config accepts them, with ``schedule``
    (None: the method's own)."""
    common = {"finetune_epochs": params.finetune_epochs}
    extra = {
        "knfu": {"lam": params.lam, "beta": params.beta},
        "fedmd": {"lam": params.lam},
        "fedmd_original": {},
        "selective_fd": {"lam": params.lam, "entropy_threshold": params.entropy_threshold},
        "knfu_local": {},
    }
    return {**common, **extra[algorithm], **(schedule_fields(schedule) if schedule else {})}


def data_config(params: Params, dataset: str, alpha: float, size: int) -> DataConfig:
    return DataConfig(dataset=dataset, num_clients=params.num_clients, partition="dirichlet", alpha=alpha,
                      samples_per_client=size, transfer_size=size, local_test_size=params.local_test_size,
                      validation_fraction=params.validation_fraction)


def train_config(params: Params, size: int) -> TrainConfig:
    return TrainConfig(epochs=params.local_epochs, batch_size=batch_size_for(size), lr=params.lr,
                       momentum=params.momentum, optimizer=params.optimizer,
                       mixed_precision=params.mixed_precision)


def experiments(params: Params) -> list[ExperimentConfig]:
    """Every (dataset, seed, |D_n|, alpha, method) run: per dataset, seed-major, so a sweep that
    stops early has every cell of a dataset at seed 0 before any cell gets seed 1."""
    configs = []
    for dataset in (d.strip() for d in parse_list(params.datasets, str, "datasets")):
        sizes, alphas = params.grid(dataset)
        rounds = params.rounds if dataset == "mnist" else params.cifar_rounds
        for seed in range(params.seeds):
            for size in sizes:
                for alpha in alphas:
                    for algorithm in (a.strip() for a in parse_list(params.algorithms, str, "algorithms")):
                        configs.extend(ExperimentConfig(
                            algorithm=algorithm, algorithm_params=algorithm_params(params, algorithm, schedule),
                            data=data_config(params, dataset, alpha, size), model=MODEL_FOR[dataset],
                            train=train_config(params, size), rounds=rounds, eval_every=params.eval_every,
                            seed=seed,
                        ) for schedule in params.schedules_of(algorithm))
    return configs
