"""Measurements beyond the tables: the worked example of KnFu's fusion weights (one short run whose
last weight matrix the notebook shows) and whether those weights go to semantic neighbours."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...algorithms import Context, algorithm_class, algorithm_config
from ...experiment import ExperimentConfig, default_device
from ...federation import build_federated_data
from .grid import MODEL_FOR, Params, algorithm_params, data_config, train_config


@dataclass(frozen=True)
class FusionExample:
    weights: np.ndarray  # (N, N) row-normalised fusion weights of the last round
    epd: np.ndarray  # (N, C) the clients' EPDs (Eq. 5)
    histograms: np.ndarray  # (N, C) the clients' training label counts
    alma: float  # ALMA after the example's rounds


def fusion_example(params: Params, dataset: str = "mnist") -> FusionExample:
    """Run ``example_rounds`` rounds of KnFu and keep the server's last weight matrix."""
    from ...algorithms.knfu import estimated_distributions
    from ...experiment import evaluate

    config = ExperimentConfig(
        algorithm="knfu", algorithm_params=algorithm_params(params, "knfu"),
        data=data_config(params, dataset, params.example_alpha, params.example_size), model=MODEL_FOR[dataset],
        train=train_config(params, params.example_size), rounds=params.example_rounds, seed=0,
    )
    data = build_federated_data(config.data, config.seed)
    ctx = Context(data=data, model_name=config.model, train=config.train, device=default_device(), seed=config.seed)
    knfu = algorithm_class("knfu")(algorithm_config("knfu", config.algorithm_params), ctx)
    clients = range(data.num_clients)
    for round_index in range(1, config.rounds + 1):
        knfu.begin_round(round_index)
        uploads = {k: knfu.client_update(k, knfu.download(k)) for k in clients}
        knfu.server_update(uploads)
        for k in clients:
            knfu.client_finish(k, knfu.reply(k))
    soft = torch.stack([uploads[k]["soft_labels"] for k in clients]).double()
    alma = evaluate(knfu, data, data.global_test, config.train.mixed_precision)["alma"]
    return FusionExample(knfu.weights.double().cpu().numpy(), estimated_distributions(soft).cpu().numpy(),
                         data.train_histograms(), alma)


def neighbour_agreement(weights: np.ndarray, histograms: np.ndarray) -> dict:
    """Do semantic neighbours get the weight? Compares each client's off-diagonal fusion weights
    with how close the other clients' *true* label distributions are to its own.

    Returns the Spearman correlation over all off-diagonal pairs between w_nm and
    -KL(q_n || q_m) (q: label histograms, add-one smoothed), and the share of clients whose
    heaviest neighbour is among their 3 truly closest clients (chance: 3 / (N - 1)).
    """
    from scipy.stats import spearmanr

    q = (histograms + 1.0) / (histograms + 1.0).sum(axis=1, keepdims=True)
    closeness = -(q[:, None, :] * (np.log(q[:, None, :]) - np.log(q[None, :, :]))).sum(-1)
    n = len(weights)
    off = ~np.eye(n, dtype=bool)
    rho = spearmanr(weights[off], closeness[off]).statistic if n > 2 else float("nan")
    top = min(3, n - 1)
    hits = []
    for i in range(n):
        others = np.flatnonzero(off[i])
        heaviest = others[np.argmax(weights[i, others])]
        closest = others[np.argsort(-closeness[i, others])[:top]]
        hits.append(heaviest in closest)
    return {"spearman": float(rho), "heaviest_is_close": float(np.mean(hits)), "chance": top / max(n - 1, 1)}
