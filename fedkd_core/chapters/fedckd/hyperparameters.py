"""FedCKD's hyperparameter table: for every setting, the paper's value, the value of each profile
whose numbers the page shows (the reduced records in the tables, the profile the verdicts rest on,
this page's own run) and its source, each value read from that profile's ``Params`` and the
methods' configs (:func:`fedkd_core.chapters.card.settings_table`), nothing typed."""

from __future__ import annotations

from dataclasses import fields

import pandas as pd

from ...algorithms import algorithm_config
from ...precision import check_mixed_precision, precision_name
from ..card import Setting, settings_table
from ..datafiles import profile_columns
from .grid import Params, algorithm_params, images_text, scenarios_text
from .profiles import PAPER_FMNIST100, REDUCED_PROFILE

# What the paper says of each field of fedkd_core.algorithms.fedckd.FedCKDConfig, and our source:
# a field without an entry here is a KeyError, so a new choice of the method cannot go unlisted.
METHOD_CHOICES = {
    "lam": ("λ = 0.50", "§IV-A"),
    "temperature": ("τ = 3", "§IV-A"),
    "gamma": ("γ = 0.99 per round", "§IV-A; exponent t − 1 is our choice"),
    "kl_direction": ("KL(p_k^τ, p_t^τ), direction unstated", "pFedSD `_divergence`: KL(teacher ‖ student)"),
    "scale_t2": ("unstated", "pFedSD `_divergence` multiplies by τ²"),
    "first_round": ("no historical model yet: unstated", "our choice; pFedSD uses CE only"),
    "untrained_client": ("unstated", "never-selected clients are evaluated with the global model"),
    "aggregation": ("|D_k| / |D|", "Algorithm 1, normalised over the selected clients"),
}


def method_config(params: Params, algorithm: str):
    """``algorithm``'s config as ``params`` runs it (its defaults and the chapter's settings)."""
    return algorithm_config(algorithm, algorithm_params(params, algorithm))


def fedckd_field(name: str):
    """The reader of one FedCKDConfig field's value in a profile."""
    return lambda params: getattr(method_config(params, "fedckd"), name)


def method_settings() -> list[Setting]:
    """One row per field of FedCKD's config, in the config's order."""
    config = method_config(Params(), "fedckd")
    return [Setting(f.name, METHOD_CHOICES[f.name][0], fedckd_field(f.name), METHOD_CHOICES[f.name][1])
            for f in fields(config)]


def precision_text(setting) -> str:
    """"fp32", "bf16", or "auto: bf16 where native, else fp32" for a ``mixed_precision`` setting."""
    check_mixed_precision(setting)
    return "auto: bf16 where native, else fp32" if setting == "auto" else precision_name(bool(setting))


def pfedsd_text(params: Params) -> str:
    config = method_config(params, "pfedsd")
    return f"{config.lam:g}, {config.temperature:g}"


def pfedme_text(params: Params) -> str:
    config = method_config(params, "pfedme")
    return f"{config.inner_steps}, {config.lam:g}, {config.personal_lr:g}, {config.beta:g}"


def fedfomo_text(params: Params) -> str:
    config = method_config(params, "fedfomo")
    return f"{config.num_models}, {config.val_fraction:g}"


TRAINING_SETTINGS = [
    Setting("datasets", "Fashion-MNIST, CIFAR-10, CIFAR-100", lambda p: p.datasets.replace(",", ", "), "§IV-A"),
    Setting("clients n, participation r, rounds T", "n = 20, r = 1, T = 50; n = 100, r = 0.1, T = 100",
            scenarios_text, "§IV-A"),
    Setting("training images split among the clients", "the whole dataset", images_text,
            "pFedSD's code pools the train and test images; we split the training split only"),
    Setting("local test images per client", "20% of the client's share (pFedSD's code)",
            lambda p: p.local_test_size, "ours: drawn from the test split, the client's class proportions"),
    Setting("seeds", "unstated (mean ± std)", lambda p: p.seeds, "ours"),
    Setting("local epochs E", 5, lambda p: p.local_epochs, "§IV-A"),
    Setting("batch size", 64, lambda p: p.batch_size, "§IV-A"),
    Setting("SGD lr / momentum / weight decay", "0.01 / 0.9 / 1e-5",
            lambda p: f"{p.lr:g} / {p.momentum:g} / {p.weight_decay:g}", "§IV-A"),
    Setting("precision (mixed_precision)", "unstated", lambda p: precision_text(p.mixed_precision),
            "ours (results/README.md)"),
    Setting("FedProx μ", "unstated", lambda p: method_config(p, "fedprox").mu, "common value"),
    Setting("pFedSD λ, τ", "as FedCKD (\"in line with [7]\")", pfedsd_text, "official parser defaults are 1, 1"),
    Setting("pFedMe K, λ, η_p, β", "as pFedSD's paper", pfedme_text,
            "official README's CNN command (its η_p = 0.09 for an MLP diverged here)"),
    Setting("FedFomo M, validation share", "as pFedSD's paper", fedfomo_text, "PFLlib"),
    Setting("FedPer / LG-FedAvg shared part", "body / head", lambda p: "model.features / model.head", "PFLlib"),
]


def settings_columns(params: Params, verdicts: Params, moved: int = 0) -> dict[str, Params]:
    """The profiles whose values the table gives: the reduced profile (its committed records fill
    the tables), ``verdicts`` (the profile the verdicts rest on, :func:`~.claims.verdict_basis`),
    the paper-scale column where ``moved`` claims rest on it already, and this page's ``params``; a
    profile in several roles is one column (:func:`datafiles.profile_columns`)."""
    early = [(PAPER_FMNIST100, f"verdicts of {moved} claim{'s' if moved > 1 else ''}")] if moved else []
    return profile_columns([(REDUCED_PROFILE, "the committed records"), (verdicts, "other verdicts" if moved else "verdicts"), *early,
                            (params, "this page")])


def hyperparameter_table(params: Params, verdicts: Params, moved: int = 0) -> pd.DataFrame:
    """The chapter's hyperparameter table: FedCKD's choices, then the training and baselines'
    settings, one column per profile of :func:`settings_columns`."""
    return settings_table(method_settings() + TRAINING_SETTINGS, settings_columns(params, verdicts, moved))
