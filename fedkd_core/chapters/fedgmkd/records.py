"""Which committed records stand for which cells: the row and cell of a run, the scale fields, and
what is left to run once the committed reduced-profile records are shown (``experiments_to_run``)."""

from __future__ import annotations

import json
from dataclasses import asdict

from ...algorithms import algorithm_config
from ...experiment import ExperimentConfig
from .. import method_differences as shared_method_differences, reuses_reduced, uncovered
from .grid import FEDGMKD_OPTIONS, METHODS, Params, experiments, paper_reading
from .profiles import REDUCED_PROFILE


def reduced_profile_records(root=None) -> list:
    """The stored records of the reduced profile's grid (nothing is run)."""
    from ...results import stored_records

    return stored_records(experiments(REDUCED_PROFILE), root)


# Fields that only set the scale of a run or which cells run.
SCALE_FIELDS = frozenset({"profile", "methods", "clients", "ablation_alphas", "table5", "seeds", "samples_per_client",
                          "transfer_size", "rounds", "local_epochs", "local_test_size", "global_test_size",
                          "last_rounds", "reuse_reduced"})


def method_differences(params: Params, reference: Params = REDUCED_PROFILE) -> list[str]:
    return shared_method_differences(params, reference, SCALE_FIELDS)


def experiments_to_run(params: Params, reduced_records: list | None = None) -> list[ExperimentConfig]:
    """The grid less the cells that committed reduced-profile records cover, when ``params`` runs
    the reduced profile's method and ``reuse_reduced`` is on (the reduced and paper profiles run
    their whole grid)."""
    configs = experiments(params)
    if not reuses_reduced(params, method_differences(params)):
        return configs
    return uncovered(configs, reduced_profile_records() if reduced_records is None else reduced_records, cell_of)


def method_key(algorithm: str, algorithm_params: dict) -> str | None:
    """The row of :data:`METHODS` a run with these resolved ``algorithm_params`` belongs to (the
    GMM size and, for the paper's readings, the chapter's :data:`FEDGMKD_OPTIONS` aside; FedGMKD's row also takes Table 5's other (λ, γ), which :func:`cell_of` keeps).
    Both sides are compared as JSON data (a stored record's tuples are lists)."""
    from ...results import ADDED_FIELDS

    algorithm_params = json.loads(json.dumps(algorithm_params))
    # a field added since a record was written reads as its original value (results.ADDED_FIELDS)
    added = {name: value for (section, name), value in ADDED_FIELDS.items() if section == "algorithm_params"}
    for key, method in METHODS.items():
        if method.algorithm != algorithm:
            continue
        expected = json.loads(json.dumps(asdict(algorithm_config(algorithm, method.params))))
        options = set(FEDGMKD_OPTIONS) - set(method.params) if paper_reading(key) else set()
        ignored = {"max_components"} | options | ({"lam", "gamma"} if key == "fedgmkd" else set())
        if all(algorithm_params.get(name, added.get(name)) == value for name, value in expected.items()
               if name not in ignored):
            return key
    return None


def cell_of(run) -> tuple:
    """(method, clients, alpha, lam, gamma) of an ExperimentConfig or RunRecord; lam/gamma are
    FedGMKD's (None for other methods)."""
    if isinstance(run, ExperimentConfig):
        config = {"algorithm": run.algorithm, "algorithm_params": run.resolved()["algorithm_params"],
                  "data": {"num_clients": run.data.num_clients, "alpha": run.data.alpha}}
    else:
        config = run.config
    extra = config["algorithm_params"]
    key = method_key(config["algorithm"], extra)
    fedgmkd_weights = (extra.get("lam"), extra.get("gamma")) if config["algorithm"] == "fedgmkd" else (None, None)
    return (key, int(config["data"]["num_clients"]), float(config["data"]["alpha"]), *fedgmkd_weights)
