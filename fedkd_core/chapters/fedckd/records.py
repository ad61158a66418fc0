"""Which committed records stand for which cells: the cell of a run, the scale fields, and what is
left to run once the committed reduced-profile records are shown (``experiments_to_run``)."""

from __future__ import annotations

import json
from dataclasses import replace

from ... import verdicts as V
from ...experiment import ExperimentConfig
from .. import method_differences as shared_method_differences, reuses_reduced, uncovered
from .grid import METHOD_NAMES, SETTING_OF_PARTITION, Params, grids
from .profiles import PAPER_FMNIST100, REDUCED_PROFILE

# Seeds beyond the profile's three are read where committed (notebooks/params/reduced/fedckd_5seeds.yaml
# adds seeds 3 and 4): the records of seed s have the same keys whichever yaml ran them.
READ_SEEDS = 10


def reduced_records_by_grid(root=None) -> dict[str, list]:
    """The stored records of each grid of the reduced profile, every committed seed below
    :data:`READ_SEEDS` (nothing is run)."""
    from ...results import stored_records

    return {name: stored_records(configs, root)
            for name, configs in grids(replace(REDUCED_PROFILE, seeds=READ_SEEDS)).items()}


def reduced_profile_records(root=None) -> list:
    """The stored records of the reduced profile's grid, each once (nothing is run)."""
    unique = {record.key: record for records in reduced_records_by_grid(root).values() for record in records}
    return list(unique.values())


def paper_scale_records(root=None) -> list:
    """The committed records of :data:`PAPER_FMNIST100` (Tables I, II and IV), each once (nothing is run)."""
    from ...results import stored_records

    grid = grids(PAPER_FMNIST100)
    unique = {record.key: record for record in stored_records(grid["main"] + grid["annealing"], root)}
    return list(unique.values())  # FedCKD's γ = 0.99 runs are in both grids


def paper_column(root=None) -> tuple[list, list]:
    """Tables I-II's cells of :data:`PAPER_FMNIST100` as far as they have run: the committed records
    of its main grid and the runs of it that diverged (``results.Divergence``; nothing is run)."""
    from ...results import stored_divergences, stored_records

    configs = grids(PAPER_FMNIST100)["main"]
    return stored_records(configs, root), stored_divergences(configs, root)


def paper_annealing(root=None) -> list:
    """Table IV's pair at the column's scale (:data:`PAPER_FMNIST100`'s annealing grid, γ = 0.99 and
    γ = 1): the committed records of it so far (nothing is run)."""
    from ...results import stored_records

    return stored_records(grids(PAPER_FMNIST100)["annealing"], root)


MACHINE_CHECKS = "machine_checks"  # results/machine_checks/<profile>/<algorithm>/<key>.json (results/README.md)


def machine_checks(diverged, root=None) -> list[tuple]:
    """(divergence, record) for each run of ``diverged`` that was run again on another machine and
    finished there: the record of the same config (same key) kept under
    ``<results>/machine_checks/``, where it does not take the diverged run's place in the
    tables or verdicts. It tells a config that diverges wherever it runs from one that diverged under
    one run's random draws and rounding only."""
    from ...results import read_record, results_dir

    checks = results_dir(root) / MACHINE_CHECKS
    found = []
    for divergence in diverged:
        paths = sorted(checks.glob(f"*/{divergence.algorithm}/{divergence.key}.json"))
        found += [(divergence, read_record(path)) for path in paths[:1]]
    return found


def device_kind(run) -> str:
    """"GPU" or "CPU": the kind of device a record or divergence ran on (its ``environment``)."""
    from ...results import on_gpu

    return "GPU" if on_gpu(run) else "CPU"


def divergence_tally(records, diverged, checks) -> list[dict]:
    """For each (method, partition) with a run checked on another machine (:func:`machine_checks`):
    how many of its runs diverged on each kind of device, counting the column's records, its
    divergences and the checks' records, and Fisher's exact test (two-sided) of whether the kind of
    device and diverging are related, where both kinds ran."""
    from scipy.stats import fisher_exact

    def setting_of(run) -> tuple:
        return run.config["algorithm"], run.config["data"]["partition"]

    tally = []
    for algorithm, partition in dict.fromkeys(setting_of(d) for d, _ in checks):
        finished = [r for r in list(records) + [r for _, r in checks] if setting_of(r) == (algorithm, partition)]
        failed = [d for d in diverged if setting_of(d) == (algorithm, partition)]
        counts = {kind: (sum(device_kind(d) == kind for d in failed),
                         sum(device_kind(r) == kind for r in finished + failed)) for kind in ("GPU", "CPU")}
        (gpu_failed, gpu_runs), (cpu_failed, cpu_runs) = counts["GPU"], counts["CPU"]
        p = (fisher_exact([[gpu_failed, gpu_runs - gpu_failed], [cpu_failed, cpu_runs - cpu_failed]])[1]
             if gpu_runs and cpu_runs else float("nan"))
        tally.append({"algorithm": algorithm, "partition": partition, "counts": counts, "p": float(p)})
    return tally


def divergence_tally_text(records, diverged, checks) -> str:
    """:func:`divergence_tally` in words ("" where nothing was checked): "pFedSD, pathological: 2 of
    2 runs diverged on a GPU, 0 of 3 on a CPU (Fisher's exact test, two-sided p = 0.10)"."""
    lines = []
    for row in divergence_tally(records, diverged, checks):
        counts = ", ".join(f"{failed} of {runs} run{'s' if runs != 1 else ''} diverged on a {kind}"
                           for kind, (failed, runs) in row["counts"].items() if runs)
        test = f" (Fisher's exact test, two-sided {V.p_text(row['p'])})" if row["p"] == row["p"] else ""
        lines.append(f"{METHOD_NAMES.get(row['algorithm'], row['algorithm'])}, {row['partition']}: {counts}{test}")
    if not lines:
        return ""
    return ("Counting every run of these cells, the checks included: " + "; ".join(lines) + ". So few runs "
            "cannot tell the kind of device from chance unless p is small"
            + (", and the kind of device is not all that differs: " + OTHER_MASKS if _other_masks(checks) else "")
            + ".")


def machine_check_text(checks) -> str:
    """What :func:`machine_checks` found, in words ("" where none)."""
    if not checks:
        return ""
    from ...cpuinfo import machine_text

    lines = [f"{METHOD_NAMES.get(d.algorithm, d.algorithm)}, {d.config['data']['partition']}, seed {d.config['seed']}: "
             f"diverged on {machine_text(d.environment.get('device_name'))} in round {d.round}, "
             f"finished on {machine_text(r.environment.get('device_name'))} at "
             f"{r.final['alma'] * 100:.2f}% after {r.config['rounds']} rounds" for d, r in checks]
    pair = (f"These pairs are not one computation under two machines' rounding: {OTHER_MASKS}. A config that "
            "diverges under one draw and finishes under another" if _other_masks(checks) else
            "Each pair drew the same dropout masks (from the CPU generator on both machines), so it differs only by "
            "rounding; a config that diverges under one machine's rounding and not under another's")
    train = checks[0][0].config.get("train", {})
    setting = (f" ({train.get('optimizer', 'sgd').upper()} lr {train['lr']:g}, momentum {train.get('momentum', 0):g}, "
               "no gradient clipping)" if "lr" in train else "")
    return ("The same config run again on another machine (`results/machine_checks/`, read by no table or "
            "verdict): " + "; ".join(lines) + f". {pair} sits at the edge of stability at this learning rate{setting}.")


# Why a GPU run and a CPU rerun of one config, made before dropout masks were drawn on the host
# (fedkd_core.randomness.MASK_GENERATOR), are two different random runs and not one run rounded twice.
OTHER_MASKS = ("the GPU runs drew their dropout masks (pFedSD's CNN has a Dropout2d) from the GPU's own "
               "generator, the CPU reruns from the CPU's, so each pair differs in its random draws, not only in "
               "its rounding")


def _other_masks(checks) -> bool:
    """Whether a run of ``checks`` (pairs of a divergence and a record) drew its dropout masks from a
    device's own generator (:func:`fedkd_core.randomness.mask_generator_of`): then a pair is two draws."""
    from ...randomness import PREDATES, mask_generator_of

    return any(mask_generator_of(run.environment) == PREDATES for pair in checks for run in pair)


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
