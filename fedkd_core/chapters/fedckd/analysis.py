"""Measurements of the chapter beyond its tables: forgetting when the global model arrives (Fig. 1b)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...algorithms import Context, algorithm_class, algorithm_config
from ...experiment import ExperimentConfig, clients_finish, clients_update, default_device, select_clients, server_update
from ...federation import build_federated_data
from ...training import accuracy


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
