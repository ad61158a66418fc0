"""Which committed records stand for which cells: the cell of a run, the scale fields, the paper
profile's records, and what is left to run once they are shown (``experiments_to_run``)."""

from __future__ import annotations

from dataclasses import replace

from ...experiment import ExperimentConfig
from .. import method_differences as shared_method_differences, uncovered
from .grid import Params, experiments
from .profiles import FEDMD_ORIGINAL_CIFAR_PROFILE, FEDMD_ORIGINAL_PROFILE, PAPER_PROFILE

# Seeds beyond the profile's three are read where committed (notebooks/params/paper/knfu_mnist5.yaml
# adds seeds 3 and 4 to Table 1): the records of seed s have the same keys whichever yaml ran them.
READ_SEEDS = 10
# FedMD in its original form (its authors' schedule, not tuned), run beside the paper profile's grid.
ORIGINAL = "fedmd_original"


def paper_profile_records(root=None) -> list:
    """The stored records of the paper profile's grid, every seed below :data:`READ_SEEDS` that
    is committed, and of FedMD's original form in Table 1's and Table 2's cells
    (:data:`FEDMD_ORIGINAL_PROFILE`, :data:`FEDMD_ORIGINAL_CIFAR_PROFILE`; nothing is run)."""
    from ...results import stored_records

    grid = [*experiments(replace(PAPER_PROFILE, seeds=READ_SEEDS)), *experiments(FEDMD_ORIGINAL_PROFILE),
            *experiments(FEDMD_ORIGINAL_CIFAR_PROFILE)]
    return stored_records(grid, root)


def profile_complete(profile: Params, records, root=None) -> bool:
    """Whether ``records`` and the diverged runs stored under ``root`` are every run of ``profile``:
    a rerun's verdicts move onto its runs only then, never onto a seed or a cell of it (a diverged
    run has no accuracy: the claims are judged on the cells and seeds where every method they
    compare finished, as elsewhere)."""
    from ...results import every_run_finished

    return every_run_finished(experiments(profile), records, root)


def originals_on(records, dataset: str) -> list:
    """The records of FedMD in its original form among ``records``, on ``dataset``."""
    return [r for r in records if r.config["algorithm"] == ORIGINAL and r.config["data"]["dataset"] == dataset]


def cell_of(run) -> tuple:
    """(dataset, alpha, |D_n|, algorithm) of an ExperimentConfig or a RunRecord."""
    if isinstance(run, ExperimentConfig):
        return run.data.dataset, float(run.data.alpha), run.data.samples_per_client, run.algorithm
    data = run.config["data"]
    return data["dataset"], float(data["alpha"]), data["samples_per_client"], run.config["algorithm"]


# The fields that only set a run's size or which cells run: a paper-profile record may stand for a
# cell of any Params that agrees with the paper profile on every other field (the method).
SCALE_FIELDS = frozenset({"profile", "datasets", "mnist_alphas", "mnist_sizes", "cifar_alphas", "cifar_sizes",
                          "algorithms", "seeds", "num_clients", "rounds", "cifar_rounds", "local_test_size",
                          "eval_every", "example_alpha", "example_size", "example_rounds"})


def method_differences(params: Params) -> list[str]:
    """The method settings (optimiser, lr, lambda, ...) in which ``params`` differs from the paper
    profile; with any, the paper-profile records do not stand for its cells."""
    return shared_method_differences(params, PAPER_PROFILE, SCALE_FIELDS)


def reusable_paper_records(params: Params, root=None) -> list:
    """The paper-profile records that may stand for cells of ``params``: all of them when it runs
    the paper profile's method, none otherwise (``-p lr 0.01`` runs and shows every cell anew)."""
    return [] if method_differences(params) else paper_profile_records(root)


def experiments_to_run(params: Params, paper_records: list | None = None) -> list[ExperimentConfig]:
    """What the notebook runs: the grid less the cells that committed paper-profile records cover
    (those cells are shown from the paper records; pass them when already loaded). The paper
    profile itself runs its whole grid, and so does a profile with another method."""
    configs = experiments(params)
    if params.profile == PAPER_PROFILE.profile or method_differences(params):
        return configs
    return uncovered(configs, paper_profile_records() if paper_records is None else paper_records, cell_of)
