"""Chapter "The federated setting": Local vs FedAvg across datasets and Dirichlet alpha."""

from __future__ import annotations

from dataclasses import dataclass

from ..algorithms import algorithm_class
from ..experiment import ExperimentConfig
from ..federation import DataConfig
from ..report import parse_list
from ..training import TrainConfig

# The model each dataset is trained with in this chapter (KnFu's M1 and M2).
MODEL_FOR = {"mnist": "knfu_m1", "fashion_mnist": "knfu_m1", "cifar10": "knfu_m2"}


@dataclass(frozen=True)
class Params:
    """The chapter's parameters; defaults are the smoke profile. 0 for samples_per_client means
    the whole training pool is split (no fixed client size)."""

    profile: str = "smoke"
    datasets: str = "mnist"
    alphas: str = "0.5"
    algorithms: str = "local,fedavg"
    seeds: int = 1
    num_clients: int = 4
    samples_per_client: int = 100
    local_test_size: int = 100
    global_test_size: int = 500
    rounds: int = 2
    participation: float = 1.0
    local_epochs: int = 1
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    mixed_precision: bool | str = "auto"  # bf16 where native (fedkd_core.precision)

    def __post_init__(self) -> None:
        for alpha in parse_list(self.alphas, float, "alphas"):
            if not alpha > 0:
                raise ValueError(f"alphas must all be > 0 (got {alpha})")
        for name in parse_list(self.datasets, str, "datasets"):
            if name.strip() not in MODEL_FOR:
                raise ValueError(f"datasets must be among {sorted(MODEL_FOR)} (got {name.strip()!r})")
        for name in parse_list(self.algorithms, str, "algorithms"):
            algorithm_class(name.strip())
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1 (got {self.seeds})")
        if self.samples_per_client < 0:
            raise ValueError(f"samples_per_client must be >= 0 (got {self.samples_per_client})")
        experiments(self)  # every run's config validates its own fields (num_clients, rounds, ...)


def experiments(params: Params) -> list[ExperimentConfig]:
    """Every (dataset, alpha, algorithm, seed) run of the chapter."""
    train = TrainConfig(epochs=params.local_epochs, batch_size=params.batch_size, lr=params.lr,
                        momentum=params.momentum, mixed_precision=params.mixed_precision)
    configs = []
    for dataset in (d.strip() for d in parse_list(params.datasets, str, "datasets")):
        for alpha in parse_list(params.alphas, float, "alphas"):
            data = DataConfig(
                dataset=dataset, num_clients=params.num_clients, partition="dirichlet", alpha=alpha,
                samples_per_client=params.samples_per_client or None,
                local_test_size=params.local_test_size,
            )
            for algorithm in (a.strip() for a in parse_list(params.algorithms, str, "algorithms")):
                for seed in range(params.seeds):
                    configs.append(ExperimentConfig(
                        algorithm=algorithm, data=data, model=MODEL_FOR[dataset], train=train,
                        rounds=params.rounds, participation=params.participation,
                        global_test_size=params.global_test_size or None, seed=seed,
                    ))
    return configs
