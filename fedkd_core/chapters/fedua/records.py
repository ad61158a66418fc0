"""Which committed records stand for which cells: the cell of a run, the scale fields, and what is
left to run once the committed reduced-profile records are shown (``experiments_to_run``)."""

from __future__ import annotations

from ...experiment import ExperimentConfig
from .. import method_differences as shared_method_differences, reuses_reduced, uncovered
from .grid import Params, experiments, partition_name
from .profiles import REDUCED_PROFILE


def reduced_profile_records(root=None) -> list:
    """The stored records of the reduced profile's grid (nothing is run)."""
    from ...results import stored_records

    return stored_records(experiments(REDUCED_PROFILE), root)


def cell_of(run) -> tuple:
    """(partition, participation, algorithm, selection, ratio) of an ExperimentConfig or RunRecord;
    selection and ratio are those of the distilled set (FedAvg: none, 1)."""
    if isinstance(run, ExperimentConfig):
        config = {"data": {"partition": run.data.partition, "alpha": run.data.alpha},
                  "participation": run.participation, "algorithm": run.algorithm,
                  "algorithm_params": run.resolved()["algorithm_params"]}
    else:
        config = run.config
    extra = config["algorithm_params"]
    ratio = extra.get("sample_ratio", 1.0)
    selection = extra.get("selection") if ratio < 1 else "all"
    return (partition_name(config["data"]), float(config["participation"]), config["algorithm"],
            selection or "all", float(ratio))


# The fields that only set the scale of a run or which cells run; two Params that agree on every
# other field run the same method, so a record of one can stand for a cell of the other.
SCALE_FIELDS = frozenset({"profile", "partitions", "algorithms", "participations", "table1_ratios",
                          "table1_selections", "seeds", "num_clients", "pool_size", "transfer_size",
                          "major_fraction", "rounds", "local_epochs", "server_epochs", "local_test_size",
                          "global_test_size", "eval_every", "reuse_reduced"})


def method_differences(params: Params, reference: Params = REDUCED_PROFILE) -> list[str]:
    """The method settings (model, optimiser, server lr, ...) in which ``params`` differs from
    ``reference``."""
    return shared_method_differences(params, reference, SCALE_FIELDS)


def experiments_to_run(params: Params, reduced_records: list | None = None) -> list[ExperimentConfig]:
    """What the notebook runs: the grid less the cells that committed reduced-profile records
    cover (shown from those records). Only when ``params`` runs the reduced profile's method
    (``method_differences`` empty) and ``reuse_reduced`` is on: with another server lr, model or
    optimiser every cell runs. The reduced and paper profiles run their whole grid."""
    configs = experiments(params)
    if not reuses_reduced(params, method_differences(params)):
        return configs
    return uncovered(configs, reduced_profile_records() if reduced_records is None else reduced_records, cell_of)
