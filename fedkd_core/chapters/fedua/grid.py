"""FedUA's parameters and its grids: Table 2 (partitions), Table 3 (participation C) and Table 1
(FedDF with sample selection).

Table 2 runs FedAvg / FedDF / FedUA x partitions at C = 1, Table 3 the same methods on the first
partition (step) at lower participation C, Table 1 FedDF with Random or BALD sample selection at
each sample ratio SR (step, C = 1). ``experiments(params)`` is their union, seed-major for Tables
2-3 first, so a sweep that stops early has whole seeds of the headline tables before the ablation
starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...experiment import ExperimentConfig
from ...federation import DataConfig
from ...report import parse_list
from ...training import TrainConfig, decay_rounds

METHODS = {"fedavg": "FedAvg", "feddf": "FedDF", "fedua": "FedUA"}
SELECTION_NAMES = {"random": "Random", "bald": "BALD"}


def parse_partition(name: str) -> tuple[str, float | None]:
    """"step" -> ("step", None); "dir0.1" -> ("dirichlet", 0.1)."""
    name = name.strip()
    if name == "step":
        return "step", None
    if name.startswith("dir"):
        try:
            alpha = float(name[3:])
        except ValueError:
            alpha = math.nan
        if alpha > 0:
            return "dirichlet", alpha
    raise ValueError(f"partitions must be 'step' or 'dir<alpha>' such as 'dir0.1' (got {name!r})")


def partition_name(data: dict) -> str:
    """The chapter's name of a record's partition ("step", "dir0.1")."""
    return "step" if data["partition"] == "step" else f"dir{data['alpha']:g}"


@dataclass(frozen=True)
class Params:
    """The notebook's parameters; the defaults are the smoke profile (seconds).

    ``pool_size`` images of CIFAR-10's training split go to the clients and ``transfer_size``
    others form the unlabelled server set U (paper: 40,000 and 10,000). ``participations`` other
    than 1 run Table 3 on the first partition; an empty ``table1_ratios`` skips Table 1.
    ``global_test_size`` 0 evaluates on the whole test split.
    """

    profile: str = "smoke"
    partitions: str = "step"
    algorithms: str = "fedavg,feddf,fedua"
    participations: str = "1.0"
    table1_ratios: str = "0.5"
    table1_selections: str = "random,bald"
    seeds: int = 1
    model: str = "cnn5"
    num_clients: int = 4
    pool_size: int = 400
    transfer_size: int = 100
    major_fraction: float = 0.8
    rounds: int = 2
    local_epochs: int = 1
    batch_size: int = 32
    lr: float = 0.01
    local_lr_decay: str = "0.3,0.6"  # fractions of the rounds at which the local lr is multiplied by 0.1, e.g. "0.3,0.6" (FedBE's setup); "" keeps it constant
    momentum: float = 0.9
    weight_decay: float = 2e-4
    augment: str = "crop_flip"
    server_epochs: int = 1
    server_batch_size: int = 128
    server_lr: float = 1e-3
    temperature: float = 1.0
    sample_ratio: float = 0.6
    weighting: str = "density"  # FedUA's teacher weights: "density" (Eq. 2b) or "density_std" (fedkd_core.algorithms.fedua)
    density_temperature: float = 1.0  # tau in softmax over teachers of log p_k(x) / tau (1: the densities normalised)
    local_test_size: int = 50
    global_test_size: int = 200
    eval_every: int = 1
    mixed_precision: bool | str = "auto"  # bf16 where native (fedkd_core.precision)
    reuse_reduced: bool = True  # skip cells the committed reduced records cover (same method only)

    def __post_init__(self) -> None:
        for name in parse_list(self.partitions, str, "partitions"):
            parse_partition(name)
        for name in parse_list(self.algorithms, str, "algorithms"):
            if name.strip() not in METHODS:
                raise ValueError(f"algorithms must be among {sorted(METHODS)} (got {name.strip()!r})")
        for c in parse_list(self.participations, float, "participations"):
            if not 0 < c <= 1:
                raise ValueError(f"participations must be in (0, 1] (got {c})")
        for ratio in self.ratios():
            if not 0 < ratio <= 1:
                raise ValueError(f"table1_ratios must be in (0, 1] (got {ratio})")
        for selection in parse_list(self.table1_selections, str, "table1_selections"):
            if selection.strip() not in SELECTION_NAMES:
                raise ValueError(f"table1_selections must be among {sorted(SELECTION_NAMES)} (got {selection.strip()!r})")
        for name in ("seeds", "num_clients", "rounds", "batch_size", "server_batch_size", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")
        for name in ("local_test_size", "global_test_size", "local_epochs", "server_epochs"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (got {getattr(self, name)})")
        try:
            decay_rounds(self.decay_fractions(), self.rounds)
        except ValueError as error:
            raise ValueError(f"local_lr_decay {self.local_lr_decay!r} with rounds = {self.rounds}: {error}") from None
        experiments(self)  # every run's config validates its own fields (model, lr, sample_ratio, ...)

    def ratios(self) -> list[float]:
        return parse_list(self.table1_ratios, float, "table1_ratios") if str(self.table1_ratios).strip() else []

    @property
    def train(self) -> TrainConfig:
        return TrainConfig(epochs=self.local_epochs, batch_size=self.batch_size, lr=self.lr, momentum=self.momentum,
                           weight_decay=self.weight_decay, mixed_precision=self.mixed_precision, augment=self.augment,
                           lr_decay_at=decay_rounds(self.decay_fractions(), self.rounds))

    def decay_fractions(self) -> list[float]:
        return parse_list(self.local_lr_decay, float, "local_lr_decay") if str(self.local_lr_decay).strip() else []


def feature_dimension(model: str) -> int:
    """The width of ``model``'s penultimate features on CIFAR-10, where FedUA fits its GDA (cnn5: 84,
    the CIFAR ResNets: 64)."""
    from ...models import MODELS, InputShape

    return MODELS[model](InputShape(3, 32, 10)).head.in_features


def lr_schedule_text(params: Params) -> str:
    """The local lr schedule of ``params`` in words, from the rounds :func:`~fedkd_core.training.decay_rounds`
    places its decays at: "constant", or "×0.1 at rounds 13 and 25 of 40 (after 30% and 60% of the
    rounds)". A decay comes once at least its fraction of the rounds has trained, so with few
    rounds it falls later than its fraction (rounded up to a whole round), and a decay that would
    come after the last round never fires; the text gives the share of the rounds actually trained
    before each decay and names the configured fraction wherever the two differ."""
    fractions = sorted(params.decay_fractions())
    if not fractions:
        return "constant"
    placed = list(zip(decay_rounds(fractions, params.rounds), fractions))
    fired = [(r, f) for r, f in placed if r <= params.rounds]
    late = [(r, f) for r, f in placed if r > params.rounds]
    late_text = (f"the {' and '.join(f'{f:.0%}' for _, f in late)} decay{'s' * (len(late) > 1)} would come at "
                 f"round{'s' * (len(late) > 1)} {' and '.join(str(r) for r, _ in late)}, after the last round")
    if not fired:
        return f"constant ({late_text})"
    rounds = " and ".join(str(r) for r, _ in fired)
    shares = " and ".join(f"{(r - 1) / params.rounds:.0%}" for r, _ in fired)
    rounded = [f for r, f in fired if abs((r - 1) - f * params.rounds) > 1e-9]
    notes = ([f"the {' and '.join(f'{f:.0%}' for f in rounded)} decay{' is' if len(rounded) == 1 else 's are'} "
              f"rounded up to a whole round"] if rounded else []) + ([late_text] if late else [])
    return (f"×0.1 at round{'s' * (len(fired) > 1)} {rounds} of {params.rounds} (after {shares} of the rounds)"
            + "".join(f"; {note}" for note in notes))


def algorithm_params(params: Params, algorithm: str, **extra) -> dict:
    """The chapter's server settings as each method's Config takes them (FedAvg: none)."""
    if algorithm == "fedavg":
        return {}
    server = {"server_epochs": params.server_epochs, "server_batch_size": params.server_batch_size,
              "server_lr": params.server_lr, "temperature": params.temperature}
    if algorithm == "fedua":
        server["sample_ratio"] = params.sample_ratio
        server["weighting"] = params.weighting
        server["density_temperature"] = params.density_temperature
    return {**server, **extra}


def data_config(params: Params, partition: str) -> DataConfig:
    kind, alpha = parse_partition(partition)
    return DataConfig(dataset="cifar10", num_clients=params.num_clients, partition=kind,
                      alpha=alpha if alpha is not None else 0.5, major_fraction=params.major_fraction,
                      pool_size=params.pool_size, transfer_size=params.transfer_size,
                      local_test_size=params.local_test_size)


def run_config(params: Params, algorithm: str, partition: str, participation: float, seed: int,
               extra: dict | None = None) -> ExperimentConfig:
    return ExperimentConfig(
        algorithm=algorithm, algorithm_params=algorithm_params(params, algorithm, **(extra or {})),
        data=data_config(params, partition), model=params.model, train=params.train, rounds=params.rounds,
        participation=participation, eval_every=params.eval_every,
        global_test_size=params.global_test_size or None, seed=seed,
    )


def _algorithms(params: Params) -> list[str]:
    return [a.strip() for a in parse_list(params.algorithms, str, "algorithms")]


def _partitions(params: Params) -> list[str]:
    return [p.strip() for p in parse_list(params.partitions, str, "partitions")]


def table2_grid(params: Params, seed: int) -> list[ExperimentConfig]:
    return [run_config(params, algorithm, partition, 1.0, seed)
            for partition in _partitions(params) for algorithm in _algorithms(params)]


def table3_grid(params: Params, seed: int) -> list[ExperimentConfig]:
    return [run_config(params, algorithm, _partitions(params)[0], c, seed)
            for c in parse_list(params.participations, float, "participations") if c != 1.0
            for algorithm in _algorithms(params)]


def table1_config(params: Params, selection: str, ratio: float, seed: int) -> ExperimentConfig:
    """FedDF with ``selection`` at sample ratio ``ratio`` on the first partition. At ratio 1 both
    rules keep all of U, so that cell is plain FedDF (one run serves both rows)."""
    extra = {} if ratio >= 1.0 else {"selection": selection, "sample_ratio": ratio}
    return run_config(params, "feddf", _partitions(params)[0], 1.0, seed, extra)


def table1_grid(params: Params, seed: int) -> list[ExperimentConfig]:
    return [table1_config(params, selection.strip(), ratio, seed)
            for selection in parse_list(params.table1_selections, str, "table1_selections")
            for ratio in params.ratios()]


def experiments(params: Params) -> list[ExperimentConfig]:
    """Every run of the chapter once: Tables 2-3 seed by seed, then Table 1 seed by seed."""
    ordered = [config for seed in range(params.seeds) for config in table2_grid(params, seed) + table3_grid(params, seed)]
    ordered += [config for seed in range(params.seeds) for config in table1_grid(params, seed)]
    unique = {}
    for config in ordered:
        unique.setdefault(repr(config), config)
    return list(unique.values())
