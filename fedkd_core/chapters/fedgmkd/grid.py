"""FedGMKD's parameters, its rows (methods and readings) and its grid: Table 1's CIFAR-10 block,
Table 3's ablation and Table 5's (λ, γ).

Every run is one method on CIFAR-10 Dir(alpha) with some number of clients that hold 500 images
each on average (the paper: 10 / 20 / 50 clients use 10 / 20 / 50 % of the training set). All runs
share one ``DataConfig`` (with FedMD's transfer set set aside for every method), so every method
sees the same clients.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...algorithms import algorithm_config
from ...experiment import ExperimentConfig
from ...federation import DataConfig
from ...report import parse_list
from ...tables import setting_text
from ...training import TrainConfig


@dataclass(frozen=True)
class Method:
    """A row of the chapter: its label, the registered algorithm and the settings FedGMKD's
    §4.4 (or, where it is silent, the method's official code) gives it; ``shown``: the fields of
    its config the hyperparameter table states although ``params`` leaves them at their defaults
    (the values the paper's settings are, where they are the defaults)."""

    label: str
    algorithm: str
    params: dict
    source: str
    shown: tuple[str, ...] = ()


# The paper's rows first (Table 1's order), then the readings the ablations need.
METHODS: dict[str, Method] = {
    "fedavg": Method("FedAvg", "fedavg", {"personal": "trained"}, "size-weighted mean; local acc = trained copy (code)"),
    "fedprox": Method("FedProx", "fedprox", {"mu": 0.5, "personal": "trained"}, "μ = 0.5 (§4.4; the code runs 0.01)"),
    "moon": Method("MOON", "moon", {"mu": 1.0, "temperature": 0.5}, "μ = 1 (§4.4), τ = 0.5, projection 256 (MOON code)"),
    "fedgen": Method("FedGen", "fedgen", {}, "generator hidden 512, 5 epochs/round, α = β = 10 ×0.98 (§4.4, FedGen code)",
                     ("hidden_dim", "generator_epochs", "generative_alpha", "generative_beta", "decay")),
    "fedmd": Method("FedMD", "fedmd_avg", {"lam": 0.05}, "λ = 0.05 on a labelled transfer set (the code leaks the test set)"),
    "fedproto": Method("FedProto", "fedproto", {"lam": 0.05}, "λ = 0.05 (§4.4), prototypes averaged over holders"),
    "fpl": Method("FPL", "fpl", {"weight": 0.1, "temperature": 0.02}, "λ = 0.1 (§4.4), FINCH, τ = 0.02 (FPL code)"),
    "fjord": Method("FjORD", "fjord", {}, "widths {0.2,…,1}, uniform tiers, self-distillation at T = 0.7 (§4.4)",
                    ("widths", "drop_scale", "distill", "temperature")),
    "fedgmkd": Method("FedGMKD", "fedgmkd", {"variant": "paper"}, "Eqs. 4-13: GMM prototypes, DAT a = b = 0.2"),
    "fedgmkd_code": Method("FedGMKD (code)", "fedgmkd", {"variant": "code"},
                           "the released code: prototypes in standardised space, its DAT, clipping 1.1"),
    "hk_dat": Method("HK + DAT", "fedgmkd", {"variant": "paper", "prototype": "mean"},
                     "Table 6: FedHKD's class-mean prototypes with DAT"),
    "only_ckf": Method("FedGMKD (only CKF)", "fedgmkd", {"variant": "paper", "dat_a": 0.0, "dat_b": 0.0},
                       "Table 3, our reading: knowledge weighted by class shares w_init alone"),
    "only_dat": Method("FedGMKD (only DAT)", "fedgmkd", {"variant": "paper", "lam": 0.0, "gamma": 0.0,
                                                         "model_weights": "code"},
                       "Table 3, our reading: CE only, models weighted by the code's DAT-style rule"),
}
PAPER_METHODS = ("fedavg", "fedprox", "moon", "fedgen", "fedmd", "fedproto", "fpl", "fjord", "fedgmkd")
FEDGMKD_ROWS = frozenset(key for key, method in METHODS.items() if method.algorithm == "fedgmkd")
TABLE3_METHODS = ("fedavg", "only_ckf", "only_dat", "fedgmkd")


def parse_pairs(text: str) -> list[tuple[float, float]]:
    """"0.06:0,0.06:0.02" -> [(0.06, 0.0), (0.06, 0.02)] (Table 5's (λ, γ) cells); "" -> []."""
    pairs = []
    for part in (p.strip() for p in str(text).split(",") if p.strip()):
        try:
            lam, gamma = (float(v) for v in part.split(":"))
        except ValueError:
            raise ValueError(f"table5 must be comma-separated 'lambda:gamma' pairs such as '0.06:0.02' (got {part!r})") from None
        if lam < 0 or gamma < 0:
            raise ValueError(f"table5's lambda and gamma must be >= 0 (got {part!r})")
        pairs.append((lam, gamma))
    return pairs


@dataclass(frozen=True)
class Params:
    """The notebook's parameters; the defaults are the smoke profile (seconds).

    ``clients`` lists the client counts of Table 1's columns; each column's clients hold
    ``samples_per_client`` images on average (pool = clients × samples_per_client, Dir(alpha)).
    ``methods`` are keys of :data:`METHODS`. ``ablation_alphas`` run Table 3's four methods
    (:data:`TABLE3_METHODS`, whatever ``methods`` lists) at other Dir(β) with the first client
    count (the paper's Tables 2-3: β 0.2 and 5); ``table5`` lists
    (λ, γ) pairs of FedGMKD at the first client count. ``last_rounds``: accuracies are the mean
    over that many last rounds (paper: 5).
    """

    profile: str = "smoke"
    methods: str = "fedavg,fedgmkd,fedgmkd_code"
    clients: str = "3"
    alpha: float = 0.5
    ablation_alphas: str = ""
    table5: str = ""
    seeds: int = 1
    model: str = "cnn5_code32"
    samples_per_client: int = 100
    transfer_size: int = 100
    rounds: int = 2
    local_epochs: int = 1
    batch_size: int = 32
    lr: float = 1e-3
    drop_last: bool = True
    max_components: int = 2
    # the choices the paper leaves open or states two ways, applied to the paper's FedGMKD rows
    # (fedkd_core.algorithms.fedgmkd.FedGMKDConfig; the robustness grid varies them)
    min_components: int = 1  # BIC range min..max (the code: 1..6; the text: 2..7)
    dat_a: float = 0.2  # a of Eq. (10) (the code: 0.4)
    dat_reference: str = "preliminary"  # what DAT's KL is measured against (appendix A.2; "previous": Algorithm 1)
    kd_on: str = "probs"  # "probs": softmax(C(H)/T) vs Q; "logits": the literal C(H)/T vs Q/T
    max_grad_norm: float = 0.0  # 0: no clipping (the code clips at 1.1)
    local_test_size: int = 20
    global_test_size: int = 200
    last_rounds: int = 5
    mixed_precision: bool | str = "auto"  # bf16 where native (fedkd_core.precision)
    reuse_reduced: bool = True  # show cells the committed reduced records cover instead of running them

    def __post_init__(self) -> None:
        for key in self.method_keys():
            if key not in METHODS:
                raise ValueError(f"methods must be among {sorted(METHODS)} (got {key!r})")
        for count in self.client_counts():
            if count < 2:
                raise ValueError(f"clients must all be >= 2 (got {count})")
        for alpha in [self.alpha] + self.ablation_alpha_values():
            if not alpha > 0:
                raise ValueError(f"alpha and ablation_alphas must be > 0 (got {alpha})")
        parse_pairs(self.table5)
        for name in ("seeds", "rounds", "batch_size", "samples_per_client", "max_components", "last_rounds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")
        for name in ("transfer_size", "local_test_size", "global_test_size", "local_epochs"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (got {getattr(self, name)})")
        if "fedmd" in self.method_keys() and self.transfer_size < 1:
            raise ValueError("transfer_size must be >= 1 when methods include fedmd (its public set)")
        experiments(self)  # every run's config validates its own fields (model, lr, ...)

    def method_keys(self) -> list[str]:
        return [m.strip() for m in parse_list(self.methods, str, "methods")]

    def client_counts(self) -> list[int]:
        return parse_list(self.clients, int, "clients")

    def ablation_alpha_values(self) -> list[float]:
        return parse_list(self.ablation_alphas, float, "ablation_alphas") if str(self.ablation_alphas).strip() else []

    @property
    def train(self) -> TrainConfig:
        return TrainConfig(epochs=self.local_epochs, batch_size=self.batch_size, lr=self.lr, optimizer="adam",
                           mixed_precision=self.mixed_precision, drop_last=self.drop_last)


def data_config(params: Params, num_clients: int, alpha: float | None = None) -> DataConfig:
    return DataConfig(dataset="cifar10", num_clients=num_clients, partition="dirichlet",
                      alpha=params.alpha if alpha is None else alpha,
                      pool_size=num_clients * params.samples_per_client, transfer_size=params.transfer_size,
                      local_test_size=params.local_test_size)


# The chapter's FedGMKD options (Params fields of the same name) that the paper's rows take unless
# the row sets the field itself (only CKF sets a = 0); the released code's row keeps its preset.
FEDGMKD_OPTIONS = ("min_components", "dat_a", "dat_reference", "kd_on", "max_grad_norm")


def paper_reading(key: str) -> bool:
    return key in FEDGMKD_ROWS and METHODS[key].params.get("variant") == "paper"


def method_params(params: Params, key: str, **extra) -> dict:
    """The algorithm params of row ``key``: FedGMKD rows get the chapter's GMM size, the paper's
    readings also the chapter's :data:`FEDGMKD_OPTIONS`."""
    settings = dict(METHODS[key].params)
    if paper_reading(key):
        settings = {**{name: getattr(params, name) for name in FEDGMKD_OPTIONS}, **settings}
    if key in FEDGMKD_ROWS:
        settings["max_components"] = params.max_components
    return {**settings, **extra}


def value_text(value) -> str:
    """A setting as the hyperparameter table states it: exact (0.98, 1e-05), a tuple as a set "{0.2, 0.4}"."""
    if isinstance(value, tuple):
        return "{" + ", ".join(setting_text(v) for v in value) + "}"
    return setting_text(value)


def used_here(params: Params, key: str) -> str:
    """Row ``key``'s settings as this profile runs them: :func:`method_params` and the config
    defaults its :attr:`Method.shown` names, "name value" each, comma-separated."""
    settings = method_params(params, key)
    config = algorithm_config(METHODS[key].algorithm, settings)
    shown = {**settings, **{name: getattr(config, name) for name in METHODS[key].shown}}
    return ", ".join(f"{name} {value_text(value)}" for name, value in shown.items())


# What §4.4 sets for every method (the shared row of the hyperparameter table).
SHARED_SOURCE = "§4.4: ResNet-18 (32-d code), Adam 1e-3, batch 64, 3 epochs, 50 rounds"


def shared_setting(params: Params) -> str:
    """What every method of ``params`` shares: model, optimiser, rounds, clients and data, seeds."""
    return (f"{params.model}; Adam lr {setting_text(params.lr)}, batch {params.batch_size}, "
            f"{params.local_epochs} local epochs, {params.rounds} rounds, participation 1, "
            f"{'an incomplete last batch skipped' if params.drop_last else 'every batch trained, incomplete ones too'}; "
            f"{', '.join(map(str, params.client_counts()))} clients with {params.samples_per_client} images each on average; "
            f"{params.seeds} seed(s)")


def settings_table(profiles: dict[str, Params]) -> pd.DataFrame:
    """The hyperparameter table: the shared settings, then each row of :data:`METHODS` that a
    profile runs, with one column per profile of ``profiles`` (heading -> params: what that profile
    runs it with, :func:`used_here`, or "not run") and the source of the settings."""
    def used(key: str, params: Params) -> str:
        return used_here(params, key) if key in params.method_keys() else "not run"

    keys = [key for key in METHODS if any(key in params.method_keys() for params in profiles.values())]
    rows = [{"method": "shared", **{heading: shared_setting(params) for heading, params in profiles.items()},
             "source": SHARED_SOURCE}]
    rows += [{"method": METHODS[key].label, **{heading: used(key, params) for heading, params in profiles.items()},
              "source": METHODS[key].source} for key in keys]
    return pd.DataFrame(rows)


def run_config(params: Params, key: str, num_clients: int, seed: int, alpha: float | None = None,
               extra: dict | None = None) -> ExperimentConfig:
    return ExperimentConfig(
        algorithm=METHODS[key].algorithm, algorithm_params=method_params(params, key, **(extra or {})),
        data=data_config(params, num_clients, alpha), model=params.model, train=params.train, rounds=params.rounds,
        participation=1.0, eval_every=1, global_test_size=params.global_test_size or None, seed=seed,
    )


def table1_grid(params: Params, seed: int) -> list[ExperimentConfig]:
    return [run_config(params, key, count, seed) for count in params.client_counts() for key in params.method_keys()]


def ablation_grid(params: Params, seed: int) -> list[ExperimentConfig]:
    """Table 3's four methods at each of ``ablation_alphas``, first client count."""
    first = params.client_counts()[0]
    return [run_config(params, key, first, seed, alpha) for alpha in params.ablation_alpha_values()
            for key in TABLE3_METHODS]


def table5_grid(params: Params, seed: int) -> list[ExperimentConfig]:
    first = params.client_counts()[0]
    return [run_config(params, "fedgmkd", first, seed, extra={"lam": lam, "gamma": gamma})
            for lam, gamma in parse_pairs(params.table5)]


def experiments(params: Params) -> list[ExperimentConfig]:
    """Every run once, seed-major: Table 1 (with the readings), then Tables 3 and 5."""
    ordered = [config for seed in range(params.seeds)
               for config in table1_grid(params, seed) + ablation_grid(params, seed) + table5_grid(params, seed)]
    unique = {}
    for config in ordered:
        unique.setdefault(repr(config), config)
    return list(unique.values())
