"""Chapter "FedCKD": the experiment grid of Tables I-V and Figs. 1, 4, 5, and the paper's numbers.

Three grids share one ``Params``: the main comparison (Tables I-III, Figs. 4-5: datasets x
practical/pathological x client scenarios x methods x seeds), the annealing ablation (Table IV:
FedCKD with γ = 1) and the sensitivity study (Table V: α, participation r, backbones).
``experiments(params)`` is their union; ``experiments_to_run(params)`` leaves out the cells that
committed reduced-profile records cover (see :func:`records_and_runs`), and the resumable sweep runs that.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..algorithms import Context, algorithm_class, algorithm_config
from ..data import data_dir
from ..experiment import ExperimentConfig, clients_finish, clients_update, default_device, select_clients, server_update
from ..federation import DataConfig, build_federated_data
from ..report import parse_list, record_precision
from ..training import TrainConfig, accuracy
from . import method_differences as shared_method_differences, reuses_reduced, uncovered

# The model of each dataset: pFedSD's simple CNNs (FedCKD: "adhering to the model outlined in [7]").
MODEL_FOR = {"fashion_mnist": "pfedsd_cnn_mnist", "cifar10": "cnn5", "cifar100": "pfedsd_cnn_cifar100"}
# Classes per client in the pathological setting, s = 2 / 2 / 20 (section IV-A).
CLASSES_PER_CLIENT = {"fashion_mnist": 2, "cifar10": 2, "cifar100": 20}
SETTINGS = {"practical": "dirichlet", "pathological": "pathological"}
METHODS = ["fedavg", "fedprox", "fedper", "lg_fedavg", "pfedme", "fedfomo", "pfedsd", "fedckd"]
METHOD_NAMES = {"local": "Local", "fedavg": "FedAvg", "fedprox": "FedProx", "fedper": "FedPer",
                "lg_fedavg": "LG-FedAvg", "pfedme": "pFedMe", "fedfomo": "FedFomo", "pfedsd": "pFedSD",
                "fedckd": "FedCKD"}


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

    @property
    def train(self) -> TrainConfig:
        return TrainConfig(epochs=self.local_epochs, batch_size=self.batch_size, lr=self.lr,
                           momentum=self.momentum, weight_decay=self.weight_decay,
                           mixed_precision=self.mixed_precision)


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


# --- Fig. 1: forgetting -----------------------------------------------------------------------

def forgetting_trace(config: ExperimentConfig, rounds: int) -> pd.DataFrame:
    """Each selected client's accuracy on its local test set just *before* it receives the
    global model (its own model after local training) and just *after* (the freshly averaged
    global model that replaces it), round by round (FedCKD Fig. 1b).

    Runs ``config``'s algorithm (one that keeps personal models and a global model, e.g.
    FedCKD or pFedSD) for ``rounds`` rounds outside the record cache.
    """
    data = build_federated_data(config.data, config.seed)
    ctx = Context(data=data, model_name=config.model, train=config.train, device=default_device(), seed=config.seed)
    algorithm = algorithm_class(config.algorithm)(algorithm_config(config.algorithm, config.algorithm_params), ctx)
    if algorithm.global_model() is None:
        raise ValueError(f"algorithm {config.algorithm!r} has no global model to receive")
    sampler = np.random.default_rng([config.seed, 2])
    amp = config.train.mixed_precision
    rows = []
    for round_index in range(1, rounds + 1):
        algorithm.begin_round(round_index)
        selected = select_clients(sampler, data.num_clients, config.participation)
        uploads = clients_update(algorithm, selected)
        before = {k: accuracy(algorithm.personal_model(k), data.dataset, data.client_test[k], mixed_precision=amp)
                  for k in selected}
        server_update(algorithm, uploads)
        clients_finish(algorithm, selected)
        for k in selected:
            after = accuracy(algorithm.global_model(), data.dataset, data.client_test[k], mixed_precision=amp)
            rows.append({"round": round_index, "client": k, "before": before[k], "after": after})
    return pd.DataFrame(rows)


# --- The paper's numbers ----------------------------------------------------------------------

PAPER_COLUMNS = ["fedavg", "fedprox", "fedper", "lg_fedavg", "pfedme", "fedfomo", "pfedsd", "fedckd"]

# Table I (practical, Dir(0.1)) and Table II (pathological, s = 2/2/20): mean ± std over 3 seeds, %.
_TABLE_I = {
    ("fashion_mnist", 20): "90.15 0.10 90.05 0.13 96.30 0.03 95.22 0.22 93.24 0.08 95.38 0.04 96.57 0.08 96.61 0.06",
    ("fashion_mnist", 100): "86.82 0.39 76.78 0.30 94.99 0.17 91.41 0.08 92.05 0.08 92.06 0.14 95.97 0.06 95.98 0.04",
    ("cifar10", 20): "50.44 0.68 50.50 0.78 80.74 0.47 78.61 0.31 79.51 0.28 79.29 0.34 82.08 0.46 82.94 0.13",
    ("cifar10", 100): "49.04 0.80 42.11 0.95 78.89 0.90 71.60 1.52 74.62 0.72 73.16 0.65 80.22 0.24 81.41 0.35",
    ("cifar100", 20): "32.24 0.32 32.50 0.55 52.12 0.22 40.71 0.05 38.42 0.71 44.67 0.37 55.27 0.30 57.25 0.07",
    ("cifar100", 100): "29.13 0.18 14.27 0.35 44.45 0.64 21.61 0.21 27.07 0.25 26.48 0.27 48.91 0.77 50.20 0.39",
}
_TABLE_II = {
    ("fashion_mnist", 20): "75.71 0.27 75.40 1.06 99.42 0.01 99.15 0.04 98.76 0.03 99.28 0.01 99.45 0.01 99.49 0.01",
    ("fashion_mnist", 100): "84.13 0.44 74.38 0.90 97.28 0.12 95.70 0.08 94.87 0.03 96.14 0.41 97.42 0.04 97.49 0.02",
    ("cifar10", 20): "45.37 0.53 45.86 1.12 91.69 0.10 92.21 0.36 89.69 0.39 91.66 0.17 92.52 0.24 92.83 0.16",
    ("cifar10", 100): "43.52 1.70 38.24 1.39 86.66 0.24 79.25 1.63 80.47 1.10 81.62 0.54 86.81 0.32 87.24 0.20",
    ("cifar100", 20): "31.92 0.23 32.16 0.32 55.57 0.26 45.48 0.63 38.66 1.21 48.84 0.11 59.54 0.01 60.70 0.02",
    ("cifar100", 100): "27.88 0.35 13.32 0.37 47.01 0.50 18.96 0.30 26.96 0.30 25.21 0.63 50.99 0.43 52.48 0.15",
}
# Table III (practical, n = 100): mean accuracy ± std *across the 100 clients*, %.
_TABLE_III = {
    "fedper": "94.69 5.08 79.25 10.20 44.45 5.93", "lg_fedavg": "91.31 7.20 72.56 12.26 21.78 4.95",
    "pfedme": "92.14 6.82 75.43 11.29 26.82 5.07", "fedfomo": "91.96 6.79 73.09 11.91 26.43 5.52",
    "pfedsd": "95.92 3.88 80.17 9.23 48.62 6.00", "fedckd": "96.03 3.98 81.02 8.84 49.86 5.56",
}
# Table V (CIFAR-100, n = 20): columns α = 0.01, 0.1, 1; r = 0.2, 0.6, 1.0; ResNet-8, MobileNetV2.
_TABLE_V_COLUMNS = [("alpha", 0.01), ("alpha", 0.1), ("alpha", 1.0), ("participation", 0.2),
                    ("participation", 0.6), ("participation", 1.0), ("model", "resnet8"), ("model", "mobilenet_v2")]
_TABLE_V = {
    "fedavg": "29.02 0.43 31.54 0.35 33.78 0.33 28.09 0.15 31.54 0.35 32.24 0.32 23.57 1.72 31.92 1.10",
    "fedprox": "18.19 0.44 21.23 0.46 31.42 0.43 16.52 0.42 21.23 0.46 32.50 0.55 20.81 0.66 31.36 0.75",
    "fedper": "64.47 0.43 52.14 0.65 34.12 0.27 53.25 0.13 52.14 0.65 52.12 0.22 57.20 0.68 59.74 0.38",
    "lg_fedavg": "54.27 0.64 37.77 0.08 21.36 0.58 29.53 0.73 37.77 0.08 40.71 0.05 16.02 0.26 18.26 1.33",
    "pfedme": "46.97 0.67 38.64 0.38 24.95 0.35 36.97 0.52 38.64 0.38 38.42 0.71 32.96 0.98 42.88 0.77",
    "fedfomo": "58.52 0.37 44.14 0.21 29.41 0.03 42.42 0.29 44.14 0.21 44.67 0.37 45.62 0.31 41.87 0.34",
    "pfedsd": "67.11 0.58 56.61 0.34 37.81 0.33 55.24 0.55 56.61 0.34 55.27 0.30 59.74 0.90 63.28 0.28",
    "fedckd": "67.85 0.26 57.11 0.27 40.64 0.36 56.81 0.28 57.11 0.27 57.25 0.07 60.30 0.10 63.45 0.27",
}


def _pairs(text: str) -> list[tuple[float, float]]:
    numbers = [float(x) for x in text.split()]
    return list(zip(numbers[::2], numbers[1::2]))


def paper_accuracy_table(setting: str) -> pd.DataFrame:
    """Table I ("practical") or II ("pathological") as rows (dataset, clients, algorithm, mean, std)."""
    table = {"practical": _TABLE_I, "pathological": _TABLE_II}[setting]
    return pd.DataFrame([
        {"dataset": dataset, "clients": n, "algorithm": algorithm, "mean": mean, "std": std}
        for (dataset, n), text in table.items()
        for algorithm, (mean, std) in zip(PAPER_COLUMNS, _pairs(text))
    ])


def paper_table3() -> pd.DataFrame:
    """Table III: (algorithm, dataset, mean, client_std) at n = 100, practical setting."""
    return pd.DataFrame([
        {"algorithm": algorithm, "dataset": dataset, "mean": mean, "client_std": std}
        for algorithm, text in _TABLE_III.items()
        for dataset, (mean, std) in zip(["fashion_mnist", "cifar10", "cifar100"], _pairs(text))
    ])


def paper_table4() -> pd.DataFrame:
    """Table IV: FedCKD on CIFAR-100, n = 20, practical, with and without annealing."""
    return pd.DataFrame([{"dataset": "cifar100", "annealing": False, "mean": 57.08, "std": 0.15},
                         {"dataset": "cifar100", "annealing": True, "mean": 57.25, "std": 0.07}])


def paper_table5() -> pd.DataFrame:
    """Table V: (algorithm, varied, value, mean, std) on CIFAR-100, n = 20.

    As printed, the α = 0.1 column equals the r = 0.6 column and the r = 1.0 column equals
    Table I (CIFAR-100, n = 20), although r = 1.0 is said to be the default of the study.
    """
    return pd.DataFrame([
        {"algorithm": algorithm, "varied": varied, "value": value, "mean": mean, "std": std}
        for algorithm, text in _TABLE_V.items()
        for (varied, value), (mean, std) in zip(_TABLE_V_COLUMNS, _pairs(text))
    ])


def offline_copy(dataset: str) -> bool:
    """Whether ``dataset`` is in the offline data directory (CIFAR-100 is not, here)."""
    return (data_dir() / f"{dataset}.npz").exists()


# --- Tables of ours -----------------------------------------------------------------------------

SETTING_OF_PARTITION = {partition: setting for setting, partition in SETTINGS.items()}
NOT_REPRODUCED = "not reproduced: no offline copy of {dataset} here"


def summary(records) -> pd.DataFrame:
    """One tidy row per run: what varies in this chapter, final and best-round ALMA, client std."""
    rows = []
    for record in records:
        config, final = record.config, record.final
        rows.append({
            "dataset": config["data"]["dataset"],
            "setting": SETTING_OF_PARTITION[config["data"]["partition"]],
            "clients": config["data"]["num_clients"],
            "participation": config["participation"],
            "rounds": config["rounds"],
            "alpha": config["data"]["alpha"],
            "model": config["model"],
            "algorithm": config["algorithm"],
            "gamma": config["algorithm_params"].get("gamma"),
            "seed": config["seed"],
            "alma": final["alma"],
            "best_alma": max(row["alma"] for row in record.history),
            "client_std": final["client_acc_std"],
            "client_accuracies": record.client_accuracies,
            "profile": record.profile,
            "precision": record_precision(record),
        })
    return pd.DataFrame(rows)


def compare_accuracy(ours: pd.DataFrame, setting: str) -> pd.DataFrame:
    """Table I or II: the paper's cells beside ours (final ALMA, mean ± std over seeds, %), one
    row per profile that ran the cell, with its rounds.

    Our runs are set beside the paper's scenario of the nearest client scale (n = 20 or 100;
    column ``our n`` says what ran). Cells of datasets without an offline copy say so; other
    cells without a run say "not run".
    """
    from ..report import compare_with_paper, mean_std_per_profile

    keys = ["dataset", "clients", "algorithm"]
    frame = ours[ours.setting == setting] if len(ours) else pd.DataFrame(columns=keys + ["alma", "profile", "rounds"])
    frame = frame.assign(our_n=frame.clients, clients=[paper_scale(n) for n in frame.clients])
    per_profile = mean_std_per_profile(frame, keys, "alma")
    table = compare_with_paper(per_profile, paper_accuracy_table(setting), keys, digits=2)
    our_n = frame.groupby(keys + ["profile"])["our_n"].agg(lambda n: ",".join(str(v) for v in sorted(set(n))))
    table.insert(3, "our n", [our_n.get(tuple(row), "") for row in table[keys + ["profile"]].itertuples(index=False)])
    missing = [not offline_copy(d) for d in table.dataset]
    table.loc[missing, "ours"] = [NOT_REPRODUCED.format(dataset=d) for d in table.dataset[missing]]
    table["algorithm"] = table.algorithm.map(METHOD_NAMES)
    return table


def paper_scale(clients: int) -> int:
    """The paper's client scale (20 or 100) a run of ``clients`` clients is compared with."""
    return 20 if clients < 60 else 100


def per_client_difference(ours: pd.DataFrame, better: str = "fedckd", worse: str = "pfedsd") -> pd.DataFrame:
    """Fig. 5: per-client final accuracy of ``better`` minus ``worse`` (same config and seed), %."""
    keys = ["profile", "dataset", "setting", "clients", "participation", "alpha", "model", "seed"]
    a = ours[(ours.algorithm == better) & ours.gamma.ne(1.0)].set_index(keys)
    b = ours[ours.algorithm == worse].set_index(keys)
    rows = []
    for key in a.index.intersection(b.index):
        diff = (np.asarray(a.loc[key, "client_accuracies"]) - np.asarray(b.loc[key, "client_accuracies"])) * 100
        rows += [{**dict(zip(keys, key)), "client": k, "difference": d} for k, d in enumerate(diff)]
    return pd.DataFrame(rows)


# --- the claims, counted alike on the paper's tables and on ours ----------------------------------

PERSONALISED = ("fedper", "lg_fedavg", "pfedme", "fedfomo", "pfedsd", "fedckd")


def paper_accuracy_tables() -> pd.DataFrame:
    """Tables I and II as one long frame with a ``setting`` column."""
    return pd.concat([paper_accuracy_table(s).assign(setting=s) for s in SETTINGS], ignore_index=True)


# The reduced profile (notebooks/params/reduced/fedckd.yaml holds the same values; a test checks it):
# the paper's setting for Tables I-II's Fashion-MNIST column — n = 20, r = 1, E = 5, batch 64, SGD
# lr 0.01 momentum 0.9, all eight methods, 3 seeds, practical and pathological — with a fifteenth of
# the training images (4,000: 200 per client) and 15 rounds instead of 50, plus Table IV's annealing
# pair on Fashion-MNIST (the paper's is on CIFAR-100, not offline here). Sized for about 3.5 hours on
# 2 AVX2 cores: on an AMD EPYC, with both cores running a worker, a FedAvg round of 20 clients x 300
# images x 5 epochs took 28-31 s (FedAvg and FedProx, 20 rounds: 729 s and 758 s) and pFedMe (K = 5
# inner steps per batch) does about 5 times FedAvg's work, so 6,000 images and 20 rounds came to about
# 6.6 hours; 4,000 images and 15 rounds do half of that work.
REDUCED_PROFILE = Params(
    profile="reduced", datasets="fashion_mnist", settings="practical,pathological", scenarios="20:1.0:15",
    algorithms="fedavg,fedprox,fedper,lg_fedavg,pfedme,fedfomo,pfedsd,fedckd", seeds=3, alpha=0.1, pool_size=4000,
    local_test_size=200, global_test_size=0, local_epochs=5, batch_size=64, lr=0.01, momentum=0.9, weight_decay=1e-5,
    eval_every=1, fedprox_mu=0.01, annealing_datasets="fashion_mnist", sensitivity_dataset="", forgetting_rounds=2,
    mixed_precision=False,
)


# Seeds beyond the profile's three are read where committed (notebooks/params/reduced/fedckd_5seeds.yaml
# adds seeds 3 and 4): the records of seed s have the same keys whichever yaml ran them.
READ_SEEDS = 10


def reduced_records_by_grid(root=None) -> dict[str, list]:
    """The stored records of each grid of the reduced profile, every committed seed below
    :data:`READ_SEEDS` (nothing is run)."""
    from ..results import stored_records

    return {name: stored_records(configs, root)
            for name, configs in grids(replace(REDUCED_PROFILE, seeds=READ_SEEDS)).items()}


def reduced_profile_records(root=None) -> list:
    """The stored records of the reduced profile's grid, each once (nothing is run)."""
    unique = {record.key: record for records in reduced_records_by_grid(root).values() for record in records}
    return list(unique.values())


def cell_of(run) -> tuple:
    """(dataset, setting, clients, participation, alpha, model, algorithm, gamma) of an
    ExperimentConfig or RunRecord: what a table cell holds whatever the scale (pool, rounds,
    epochs); gamma is FedCKD's annealing (None for other methods)."""
    config = run.resolved() if isinstance(run, ExperimentConfig) else run.config
    data = config["data"]
    return (data["dataset"], SETTING_OF_PARTITION[data["partition"]], int(data["num_clients"]),
            float(config["participation"]), float(data["alpha"]), config["model"], config["algorithm"],
            config["algorithm_params"].get("gamma"))


# The fields that only set the scale of a run or which cells run: two Params that agree on every
# other field run the same methods, so a record of one can stand for a cell of the other.
SCALE_FIELDS = frozenset({"profile", "datasets", "settings", "scenarios", "algorithms", "seeds", "alpha", "pool_size",
                          "local_test_size", "global_test_size", "local_epochs", "eval_every", "annealing_datasets",
                          "sensitivity_dataset", "sensitivity_alphas", "sensitivity_participations",
                          "sensitivity_models", "forgetting_rounds", "reuse_reduced"})


def method_differences(params: Params, reference: Params = REDUCED_PROFILE) -> list[str]:
    """The method settings (optimiser, KL direction, γ, ...) in which ``params`` differs from ``reference``."""
    return shared_method_differences(params, reference, SCALE_FIELDS)


def _unique(records: list) -> list:
    """``records`` without repeats (one run loaded twice is two objects with one config)."""
    return list({json.dumps(record.config, sort_keys=True): record for record in records}.values())


def records_and_runs(params: Params, reduced: dict[str, list] | None = None) -> dict[str, tuple[list, list]]:
    """Per grid of ``params``: (the committed reduced-profile records it shows, its configs still
    to run). Every grid shows the reduced profile's records of the same grid, labelled with their
    profile, in every profile. When ``params`` runs the reduced profile's method with
    ``reuse_reduced`` on (:func:`fedkd_core.chapters.reuses_reduced`), a cell that a reduced
    record of *any* grid covers is shown from it and not run (e.g. Table V's α = 0.1 column is
    Table I's cell). ``reduced`` stands in for :func:`reduced_records_by_grid`."""
    reduced = reduced_records_by_grid() if reduced is None else reduced
    every = _unique([record for records in reduced.values() for record in records])
    skip = reuses_reduced(params, method_differences(params))
    out = {}
    for name, configs in grids(params).items():
        cells = {cell_of(config) for config in configs}
        covering = [record for record in every if cell_of(record) in cells] if skip else []
        shown = _unique(reduced.get(name, []) + covering)
        out[name] = (shown, uncovered(configs, covering, cell_of))
    return out


def experiments_to_run(params: Params, reduced: dict[str, list] | None = None) -> list[ExperimentConfig]:
    """The configs of every grid that :func:`records_and_runs` leaves to run, each once."""
    unique = {}
    for _, configs in records_and_runs(params, reduced).values():
        for config in configs:
            unique.setdefault(repr(config), config)
    return list(unique.values())


ANNEALING_CLAIM = "annealing helps (γ < 1 > γ = 1)"

# Tables I-II's Fashion-MNIST n = 100 / r = 0.1 / T = 100 column and Table IV's pair at the paper's
# full scale (notebooks/params/paper/fedckd_fmnist100.yaml holds the same values; a test checks it).
PAPER_FMNIST100 = replace(REDUCED_PROFILE, profile="paper", scenarios="100:0.1:100", pool_size=0, local_test_size=500,
                          forgetting_rounds=10)


def paper_scale_records(root=None) -> list:
    """The committed records of :data:`PAPER_FMNIST100` (Tables I, II and IV; nothing is run)."""
    from ..results import stored_records

    grid = grids(PAPER_FMNIST100)
    return stored_records(grid["main"] + grid["annealing"], root)


def ledger_rows(root=None) -> pd.DataFrame:
    """FedCKD's claims for the book's Claims page: judged on the paper-scale Fashion-MNIST n = 100
    records where some claim has a cell there (every method of a cell committed), else on the
    committed reduced-profile records (n = 20, 200 images per client, 15 rounds: cells that are
    still rising do not count). Table IV's annealing pair runs on Fashion-MNIST; the paper's is
    on CIFAR-100, so its side of that claim is CIFAR-100's."""
    from .ledger import evidence, judged_rows

    module = sys.modules[__name__]
    paper = paper_scale_records(root)
    if paper and effects_of(observations(paper)).drop(columns=list(EFFECT_CELL_KEYS) + ["seed"]).notna().any().any():
        return judged_rows("FedCKD", module, paper, "fedckd.html#verdict", "paper: Fashion-MNIST n = 100, r = 0.1, T = 100",
                           evidence(paper), enforce_gate=False, sections={ANNEALING_CLAIM: "fedckd.html#table-iv-annealing"})
    records = reduced_profile_records(root)
    return judged_rows("FedCKD", module, records, "fedckd.html#verdict",
                       "reduced: n = 20, 200 images per client, 15 rounds", evidence(records),
                       sections={ANNEALING_CLAIM: "fedckd.html#table-iv-annealing"})


# --- robustness of FedCKD > pFedSD and of the annealing gain (fedkd_core.chapters.robustness) ----

def _robustness_variants():
    from .robustness import Variant

    return (
        Variant("as in this chapter", {}, "KL(teacher ‖ student) × τ², first round: global teacher only, γ = 0.99"),
        Variant("KL(student ‖ teacher)", {"kl_direction": "student_teacher"}, "the paper's literal KL(p_k, p_teacher)"),
        Variant("no τ² scaling", {"scale_t2": False}, "the paper's Eq. 4 has no τ²; pFedSD's code has it"),
        Variant("first round: CE only", {"first_round": "ce_only"}, "pFedSD's rule for a client without history"),
        Variant("first round: global model as both teachers", {"first_round": "global_twice"},
                "the other reading of Eq. 4 before a history exists"),
        Variant("γ = 0.95", {"gamma": 0.95}, "faster annealing: λ halves in about 14 rounds instead of 69"),
    )


ROBUSTNESS = _robustness_variants()
# The base the variants change (notebooks/params/robustness/fedckd.yaml; a test checks it): the
# reduced profile with only the methods the claims compare.
ROBUSTNESS_BASE = replace(REDUCED_PROFILE, profile="robustness", algorithms="pfedsd,fedckd")
EFFECT_CELL_KEYS = ("dataset", "setting", "clients")
METHOD_COLUMN = "algorithm"
# The paper reports mean ± std without saying over how many runs; we assume 3, as ours.
PAPER_RUNS = 3
CONSTANT = "fedckd_constant"  # FedCKD with γ = 1 (no annealing), Table IV's other row


def observations(records) -> pd.DataFrame:
    """One row per run of Tables I, II and IV: its cell, method (FedCKD with γ = 1 as
    ``fedckd_constant``), seed, ALMA at the last round ("final") and at its best round ("best"),
    and what the convergence gate reads (evaluations, late gain in points)."""
    from ..verdicts import trajectory

    frame = summary(records)
    if not len(frame):
        return pd.DataFrame(columns=list(EFFECT_CELL_KEYS) + ["algorithm", "seed", "final", "best", "evaluations",
                                                                "late_gain", "rounds", "profile"])
    stats = pd.DataFrame([trajectory(r.history, "alma", r.config["rounds"]) for r in records])
    constant = (frame.algorithm == "fedckd") & (frame.gamma == 1.0)
    return frame[list(EFFECT_CELL_KEYS) + ["seed", "rounds", "profile"]].assign(
        algorithm=frame.algorithm.where(~constant, CONSTANT), **{c: stats[c] for c in stats})


def paper_observations() -> pd.DataFrame:
    """Tables I-II, and Table IV's FedCKD without annealing, in :func:`observations`' columns with
    the paper's mean and std (%). Table IV's FedCKD with annealing is Table I's CIFAR-100 cell."""
    constant = paper_table4()[lambda f: ~f.annealing].assign(algorithm=CONSTANT, setting="practical", clients=20)
    return pd.concat([paper_accuracy_tables(), constant.drop(columns="annealing")], ignore_index=True)


def effects_of(frame: pd.DataFrame, value: str = "final") -> pd.DataFrame:
    """Per (dataset, setting, clients, seed), each claim's effect on ``value`` (positive where it
    holds): FedCKD − pFedSD; FedCKD − the best other method; the worst personalised method − the
    better of FedAvg and FedProx; FedCKD with annealing − FedCKD with γ = 1. A claim needs all the
    methods it names in the cell and seed."""
    keys = list(EFFECT_CELL_KEYS) + ["seed"]
    wide = frame.pivot_table(index=keys, columns="algorithm", values=value)
    effects = pd.DataFrame(index=wide.index)
    has = set(wide.columns)

    def margin(better: list[str], worse: list[str]) -> pd.Series:
        return (wide[better].min(axis=1) - wide[worse].max(axis=1)).where(wide[better + worse].notna().all(axis=1))

    if {"fedckd", "pfedsd"} <= has:
        effects["FedCKD > pFedSD"] = margin(["fedckd"], ["pfedsd"])
    others = [a for a in METHODS if a != "fedckd" and a in has]
    if "fedckd" in has and len(others) > 1:  # with one other method it is "FedCKD > that method"
        effects["FedCKD best of the methods run"] = margin(["fedckd"], others)
    generic, personal = [a for a in ("fedavg", "fedprox") if a in has], [a for a in PERSONALISED if a in has]
    if generic and personal:
        effects["every personalised method beats FedAvg and FedProx"] = margin(personal, generic)
    if {"fedckd", CONSTANT} <= has:
        effects[ANNEALING_CLAIM] = margin(["fedckd"], [CONSTANT])
    return effects.reset_index()


def claim_effects(records) -> pd.DataFrame:
    """Per (dataset, setting, clients, seed): each claim's effect on final ALMA (:func:`effects_of`)."""
    return effects_of(observations(records), "final")
