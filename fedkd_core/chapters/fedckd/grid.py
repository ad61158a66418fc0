"""FedCKD's parameters and its three grids: Tables I-III (main), Table IV (annealing), Table V (sensitivity).

Three grids share one ``Params``: the main comparison (Tables I-III, Figs. 4-5: datasets x
practical/pathological x client scenarios x methods x seeds), the annealing ablation (Table IV:
FedCKD with γ = 1) and the sensitivity study (Table V: α, participation r, backbones).
``experiments(params)`` is their union.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...algorithms import algorithm_config
from ...experiment import ExperimentConfig
from ...federation import DataConfig
from ...report import parse_list
from ...training import TrainConfig

# The model of each dataset: pFedSD's simple CNNs (FedCKD: "adhering to the model outlined in [7]").
MODEL_FOR = {"fashion_mnist": "pfedsd_cnn_mnist", "cifar10": "cnn5", "cifar100": "pfedsd_cnn_cifar100"}

# Classes per client in the pathological setting, s = 2 / 2 / 20 (section IV-A).
CLASSES_PER_CLIENT = {"fashion_mnist": 2, "cifar10": 2, "cifar100": 20}
SETTINGS = {"practical": "dirichlet", "pathological": "pathological"}
METHODS = ["fedavg", "fedprox", "fedper", "lg_fedavg", "pfedme", "fedfomo", "pfedsd", "fedckd"]
METHOD_NAMES = {"local": "Local", "fedavg": "FedAvg", "fedprox": "FedProx", "fedper": "FedPer",
                "lg_fedavg": "LG-FedAvg", "pfedme": "pFedMe", "fedfomo": "FedFomo", "pfedsd": "pFedSD",
                "fedckd": "FedCKD"}
SETTING_OF_PARTITION = {partition: setting for setting, partition in SETTINGS.items()}


@dataclass(frozen=True)
class Scenario:
    """n clients, participation r, T rounds (FedCKD: 20 / 1.0 / 50 and 100 / 0.1 / 100)."""

    clients: int
    participation: float
    rounds: int


def parse_scenarios(text: str) -> list[Scenario]:
    """"20:1.0:50,100:0.1:100" -> [Scenario(20, 1.0, 50), Scenario(100, 0.1, 100)]."""
    scenarios = []
    for part in parse_list(text, str, "scenarios"):
        try:
            n, r, t = part.strip().split(":")
            scenario = Scenario(int(n), float(r), int(t))
        except ValueError as error:
            raise ValueError(f"scenarios must be comma-separated n:r:T triples (got {part!r})") from error
        if scenario.clients < 1 or not 0 < scenario.participation <= 1 or scenario.rounds < 1:
            raise ValueError(f"scenarios need n >= 1, 0 < r <= 1, T >= 1 (got {part!r})")
        scenarios.append(scenario)
    return scenarios


def _names(text: str, known, name: str, allow_empty: bool = False) -> list[str]:
    if allow_empty and not str(text).strip():
        return []
    values = [v.strip() for v in parse_list(text, str, name)]
    for value in values:
        if value not in known:
            raise ValueError(f"{name} must be among {sorted(known)} (got {value!r})")
    return values


@dataclass(frozen=True)
class Params:
    """The notebook's parameters; the defaults are the smoke profile. ``pool_size`` 0 splits the
    whole training split; empty ``annealing_datasets`` / ``sensitivity_dataset`` skip Tables IV / V."""

    profile: str = "smoke"
    datasets: str = "fashion_mnist"
    settings: str = "practical"
    scenarios: str = "4:1.0:2"
    algorithms: str = "fedavg,pfedsd,fedckd"
    seeds: int = 1
    alpha: float = 0.1
    pool_size: int = 600
    local_test_size: int = 100
    global_test_size: int = 500
    local_epochs: int = 1
    batch_size: int = 64
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 1e-5
    max_grad_norm: float = 0.0  # 0: no clipping (the paper); > 0 clips every method's local steps: a deviation
    mixed_precision: bool | str = "auto"  # bf16 where native (fedkd_core.precision)
    eval_every: int = 1
    fedprox_mu: float = 0.01
    annealing_datasets: str = ""
    sensitivity_dataset: str = ""
    sensitivity_alphas: str = "0.01,0.1,1.0"
    sensitivity_participations: str = "0.2,0.6,1.0"
    sensitivity_models: str = "resnet8,mobilenet_v2"
    forgetting_rounds: int = 2
    # the choices the paper leaves open (fedkd_core.algorithms.fedckd; the robustness grid varies them)
    kl_direction: str = "teacher_student"  # pFedSD and FedCKD
    scale_t2: bool = True  # pFedSD and FedCKD
    first_round: str = "global_only"  # FedCKD
    gamma: float = 0.99  # FedCKD's annealing
    reuse_reduced: bool = True  # show cells the committed reduced records cover instead of running them

    def __post_init__(self) -> None:
        algorithm_config("fedckd", algorithm_params(self, "fedckd"))  # kl_direction, first_round, gamma
        _names(self.datasets, MODEL_FOR, "datasets")
        _names(self.settings, SETTINGS, "settings")
        _names(self.algorithms, METHOD_NAMES, "algorithms")
        _names(self.annealing_datasets, MODEL_FOR, "annealing_datasets", allow_empty=True)
        _names(self.sensitivity_dataset, MODEL_FOR, "sensitivity_dataset", allow_empty=True)
        parse_scenarios(self.scenarios)
        for alpha in [self.alpha, *parse_list(self.sensitivity_alphas, float, "sensitivity_alphas")]:
            if not alpha > 0:
                raise ValueError(f"alpha and sensitivity_alphas must be > 0 (got {alpha})")
        for r in parse_list(self.sensitivity_participations, float, "sensitivity_participations"):
            if not 0 < r <= 1:
                raise ValueError(f"sensitivity_participations must be in (0, 1] (got {r})")
        for name in ("seeds", "local_epochs", "batch_size", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")
        for name in ("pool_size", "local_test_size", "global_test_size", "forgetting_rounds", "fedprox_mu"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (got {getattr(self, name)})")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0 (got {self.lr})")
        if self.max_grad_norm < 0:
            raise ValueError(f"max_grad_norm must be >= 0 (0: no clipping; got {self.max_grad_norm})")

    @property
    def train(self) -> TrainConfig:
        return TrainConfig(epochs=self.local_epochs, batch_size=self.batch_size, lr=self.lr,
                           momentum=self.momentum, weight_decay=self.weight_decay,
                           mixed_precision=self.mixed_precision, max_grad_norm=self.max_grad_norm or None)


def scenarios_text(params: Params) -> str:
    """The client scenarios of ``params`` as a reader reads them: "n = 20, r = 1, T = 15"; several
    joined by "; "."""
    return "; ".join(f"n = {s.clients}, r = {s.participation:g}, T = {s.rounds}" for s in parse_scenarios(params.scenarios))


def images_text(params: Params) -> str:
    """The training images the clients split: "4,000 training images (200 per client at n = 20)",
    or "the whole training split" where ``pool_size`` is 0."""
    if not params.pool_size:
        return "the whole training split"
    shares = ", ".join(f"{params.pool_size // s.clients:,} per client at n = {s.clients}"
                       for s in parse_scenarios(params.scenarios))
    return f"{params.pool_size:,} training images ({shares})"


def scale_text(params: Params) -> str:
    """The scale of a profile in one line, read from ``params``: "reduced: fashion_mnist, n = 20,
    r = 1, T = 15, 4,000 training images (200 per client at n = 20), E = 5". The seeds are left to
    the records' evidence line (a profile's committed seeds may outnumber its ``seeds``)."""
    return (f"{params.profile}: {params.datasets.replace(',', ', ')}, {scenarios_text(params)}, "
            f"{images_text(params)}, E = {params.local_epochs}")


def algorithm_params(params: Params, algorithm: str) -> dict:
    """The chapter's settings as each method's Config takes them: FedProx's μ; the KL's direction
    and τ² scaling for pFedSD and FedCKD; FedCKD's first-round rule and annealing γ."""
    distillation = {"kl_direction": params.kl_direction, "scale_t2": params.scale_t2}
    by_method = {"fedprox": {"mu": params.fedprox_mu}, "pfedsd": distillation,
                 "fedckd": {**distillation, "first_round": params.first_round, "gamma": params.gamma}}
    return by_method.get(algorithm, {})


def data_config(params: Params, dataset: str, setting: str, clients: int, alpha: float | None = None) -> DataConfig:
    return DataConfig(
        dataset=dataset, num_clients=clients, partition=SETTINGS[setting],
        alpha=params.alpha if alpha is None else alpha, classes_per_client=CLASSES_PER_CLIENT[dataset],
        pool_size=params.pool_size or None, local_test_size=params.local_test_size,
    )


def run_config(params: Params, algorithm: str, data: DataConfig, scenario: Scenario, seed: int,
               model: str | None = None, extra: dict | None = None) -> ExperimentConfig:
    return ExperimentConfig(
        algorithm=algorithm, algorithm_params={**algorithm_params(params, algorithm), **(extra or {})},
        data=data, model=model or MODEL_FOR[data.dataset], train=params.train, rounds=scenario.rounds,
        participation=scenario.participation, eval_every=params.eval_every,
        global_test_size=params.global_test_size or None, seed=seed,
    )


def main_grid(params: Params) -> list[ExperimentConfig]:
    """Tables I-III, Figs. 4-5: dataset x setting x scenario x method x seed."""
    return [
        run_config(params, algorithm, data_config(params, dataset, setting, scenario.clients), scenario, seed)
        for dataset in _names(params.datasets, MODEL_FOR, "datasets")
        for setting in _names(params.settings, SETTINGS, "settings")
        for scenario in parse_scenarios(params.scenarios)
        for algorithm in _names(params.algorithms, METHOD_NAMES, "algorithms")
        for seed in range(params.seeds)
    ]


def annealing_grid(params: Params) -> list[ExperimentConfig]:
    """Table IV: FedCKD with annealing (γ = ``params.gamma``, paper 0.99) and without (γ = 1),
    practical, first scenario."""
    scenario = parse_scenarios(params.scenarios)[0]
    return [
        run_config(params, "fedckd", data_config(params, dataset, "practical", scenario.clients), scenario, seed,
                   extra={"gamma": gamma})
        for dataset in _names(params.annealing_datasets, MODEL_FOR, "annealing_datasets", allow_empty=True)
        for gamma in (params.gamma, 1.0)
        for seed in range(params.seeds)
    ]


def sensitivity_grid(params: Params) -> list[ExperimentConfig]:
    """Table V: vary α, then r, then the backbone, around (α, first scenario, the dataset's CNN)."""
    datasets = _names(params.sensitivity_dataset, MODEL_FOR, "sensitivity_dataset", allow_empty=True)
    if not datasets:
        return []
    dataset, base = datasets[0], parse_scenarios(params.scenarios)[0]
    variants = (
        [(data_config(params, dataset, "practical", base.clients, alpha), base, None)
         for alpha in parse_list(params.sensitivity_alphas, float, "sensitivity_alphas")]
        + [(data_config(params, dataset, "practical", base.clients), replace(base, participation=r), None)
           for r in parse_list(params.sensitivity_participations, float, "sensitivity_participations")]
        + [(data_config(params, dataset, "practical", base.clients), base, model.strip())
           for model in parse_list(params.sensitivity_models, str, "sensitivity_models")]
    )
    return [run_config(params, algorithm, data, scenario, seed, model=model)
            for data, scenario, model in variants
            for algorithm in _names(params.algorithms, METHOD_NAMES, "algorithms")
            for seed in range(params.seeds)]


def grids(params: Params) -> dict[str, list[ExperimentConfig]]:
    """The three grids by name: "main" (Tables I-III), "annealing" (IV), "sensitivity" (V)."""
    return {"main": main_grid(params), "annealing": annealing_grid(params), "sensitivity": sensitivity_grid(params)}


def experiments(params: Params) -> list[ExperimentConfig]:
    """Every run of the chapter, each once."""
    unique = {}
    for config in [c for grid in grids(params).values() for c in grid]:
        unique.setdefault(repr(config), config)
    return list(unique.values())
