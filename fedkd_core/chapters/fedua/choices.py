"""The choices FedUA's paper leaves open, as the chapter's hyperparameter table: one row per choice
(:class:`~..card.Setting`), one column per profile whose values the page shows: the reduced
profile, whose committed records fill every table and the verdicts, and, if different, the
profile this page executed (:func:`~..datafiles.profile_columns`). Every value is read from the
profile's ``Params`` and the methods' configs as the runs build them (:func:`.grid.algorithm_params`),
nothing typed."""

from __future__ import annotations

import pandas as pd

from ...algorithms import algorithm_config
from ..card import Setting, settings_table
from ..datafiles import profile_columns
from .grid import Params, algorithm_params, lr_schedule_text
from .profiles import REDUCED_PROFILE


def _feddf(params: Params):
    return algorithm_config("feddf", algorithm_params(params, "feddf"))


def _fedua(params: Params):
    return algorithm_config("fedua", algorithm_params(params, "fedua"))


def _server_optimiser(params: Params) -> str:
    config = _feddf(params)
    return f"SGD lr {config.server_lr:g}, momentum {config.server_momentum:g}, wd {config.server_weight_decay:g}"


OPEN_CHOICES = [
    Setting("local optimiser", "SGD, cross-entropy (§4.1b)",
            lambda p: f"SGD lr {p.lr:g}, momentum {p.momentum:g}, wd {p.weight_decay:g}",
            "lr, momentum, wd unstated: FedBE run.sh / options.py (FedUA reuses FedBE's setup)"),
    Setting("local augmentation", "unstated", lambda p: p.augment, "FedBE main.py: random crop (pad 4) + flip on clients"),
    Setting("server optimiser", "SGD, batch 128, KL (§4.1b)", _server_optimiser,
            "FedBE models/Update.py ServerUpdate (hard-coded)"),
    Setting("distillation temperature T", "unstated", lambda p: _feddf(p).temperature, "FedDF (KL_temperature = 1)"),
    Setting("sample ratio SR of Tables 2–3", "unstated", lambda p: _fedua(p).sample_ratio, "Table 1's best BALD ratio"),
    Setting("teacher weights", "normalised density (Eq. 2b, lost)", lambda p: _fedua(p).weighting,
            "softmax over teachers of log p_k, τ = 1"),
    Setting("GDA covariance", "unstated", lambda p: "1/(n−1), pooled for n = 1, jitter", "DDU gmm_fit (float64, jitter search)"),
    Setting("student start", "FedAvg of the teachers (§3.3)", lambda p: "FedAvg (sample-size weights)", "§3.3"),
    Setting("ResNet shortcut", "ResNet-32 (FedBE: option A, zero-padding)",
            lambda p: f"1×1 projection ({p.model})" if "resnet" in p.model else f"none: {p.model} has no shortcut",
            "fedkd_core.models.cifar_resnet"),
    Setting("FedDF baseline", "FedDF", lambda p: "FedBE's vanilla distillation",
            "FedUA §4.1b describes it; FedDF's Adam/cosine/early-stopping recipe needs labelled server data"),
    Setting("ensemble target", "weighted ensemble (Eq. 2b)",
            lambda p: f"softmax of the weighted mean of logits, T = {_feddf(p).temperature:g}",
            "FedDF averages logits; FedBE distils averaged *probabilities*, sharpened — so our FedDF row is a hybrid of the two"),
    Setting("server step size", "unstated", lambda p: f"lr {_feddf(p).server_lr:g} on batch-mean KL",
            "FedBE divides its KL by the number of classes, so its effective step is ~10× smaller than ours"),
    Setting("local lr schedule", "unstated", lr_schedule_text,
            "FedBE (whose setup FedUA reuses) decays the local lr ×0.1 at 30% and 60% of the rounds"),
    Setting("sample selection rule", "BALD above a threshold \"empirically determined\" (§3.2)", lambda p: "top SR by BALD",
            "no threshold value is given; Table 1 is indexed by the sample ratio SR, so we keep the top SR share"),
]


def choices_columns(params: Params) -> dict[str, Params]:
    """The profiles the open-choices table gives values for, by heading: :data:`REDUCED_PROFILE`
    (its committed records fill the tables and the verdicts) and this page's ``params``; one column
    when the page runs the reduced profile itself."""
    return profile_columns([(REDUCED_PROFILE, "the committed records"), (params, "this page")])


def open_choices_table(params: Params) -> pd.DataFrame:
    """The choices the paper leaves open, one column per profile of :func:`choices_columns`; show it
    with ``tables.show(table, settings=["paper", *choices_columns(params)])``."""
    return settings_table(OPEN_CHOICES, choices_columns(params)).rename(columns={"parameter": "choice"})
