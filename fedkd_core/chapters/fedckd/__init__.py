"""Chapter "FedCKD": the experiment grid of Tables I-V and Figs. 1, 4, 5, and the paper's numbers.

Three grids share one ``Params``: the main comparison (Tables I-III, Figs. 4-5), the annealing
ablation (Table IV) and the sensitivity study (Table V). ``experiments(params)`` is their union;
``experiments_to_run(params)`` leaves out the cells that committed reduced-profile records cover
(see :func:`records_and_runs`), and the resumable sweep runs that.

The chapter is a package, one concept per module; this file only gathers the names the notebook,
the sweep, the ledger, the robustness grids and ``compare`` use (``fedkd_core.contracts``):

- ``grid``: ``Params`` and the three grids (what runs);
- ``profiles``: the reference profiles whose records are committed (``REDUCED_PROFILE``, ...);
- ``records``: which record stands for which cell, and what is left to run;
- ``paper``: the paper's tables, as data;
- ``tables``: our records as the paper's tables;
- ``analysis``: measurements beyond the tables (Fig. 1b's forgetting, the losses' sharpness);
- ``hyperparameters``: the hyperparameter table, one column per profile whose numbers are shown;
- ``claims``: the paper's claims, counted alike on its tables and on our records;
- ``divergence``: the per-step trace of a diverged run's rerun, its figure and what it shows;
- ``robustness``: the readings of what the paper leaves open that the robustness grid varies.
"""

from .analysis import (forgetting_by_round, forgetting_text, forgetting_trace, kl_sharpness, logit_sharpness,
                       stored_forgetting_trace, trace_provenance)
from .clipped import CLIPPED, clipped_caveat, clipped_cell, clipped_table, clipped_text
from .divergence import determinism_check_text, determinism_checks, plot_trace, trace_caption, trace_text, traces_finding_text
from .divergence import traces as divergence_traces
from .claims import (ANNEALING_CLAIM, CONSTANT, EFFECT_CELL_KEYS, METHOD_COLUMN, PAPER_RUNS, PERSONALISED,
                     VerdictBasis, claim_effects, diverged_seeds, divergences_text, effects_of, ledger_rows, observations,
                     paper_observations, verdict_basis, verdict_basis_text)
from .grid import (CLASSES_PER_CLIENT, METHODS, METHOD_NAMES, MODEL_FOR, SETTINGS, SETTING_OF_PARTITION, Params,
                   Scenario, algorithm_params, annealing_grid, data_config, experiments, grids, images_text,
                   main_grid, parse_scenarios, run_config, scale_text, scenarios_text, sensitivity_grid)
from .hyperparameters import hyperparameter_table, settings_columns
from .paper import (ACCURACY_TABLES, paper_accuracy_table, paper_accuracy_tables, paper_table3, paper_table4,
                    paper_table5)
from .profiles import PAPER_FMNIST100, REDUCED_PROFILE, RERUNS, ROBUSTNESS_BASE
from .records import (READ_SEEDS, SCALE_FIELDS, cell_of, divergence_tally, divergence_tally_text, experiments_to_run,
                      machine_check_text, machine_checks,
                      method_differences, paper_annealing, paper_column,
                      paper_scale_records,
                      records_and_runs, reduced_profile_records, reduced_records_by_grid)
from .robustness import ROBUSTNESS
from .tables import (NOT_REPRODUCED, annealing_gains, annealing_seed_gains, annealing_table, best_round_table, compare_accuracy, divergence_rates,
                     divergence_rates_text, fairness_table, fig5_differences, fig5_scale_text, offline_copy, paper_scale, per_client_counts, per_client_difference,
                     sensitivity_table, summary)

__all__ = [
    "RERUNS",
    "ACCURACY_TABLES", "ANNEALING_CLAIM", "CLASSES_PER_CLIENT", "CONSTANT", "EFFECT_CELL_KEYS", "METHODS",
    "METHOD_COLUMN", "METHOD_NAMES", "MODEL_FOR", "NOT_REPRODUCED", "PAPER_FMNIST100", "PAPER_RUNS", "PERSONALISED",
    "Params", "READ_SEEDS", "VerdictBasis", "REDUCED_PROFILE", "ROBUSTNESS", "ROBUSTNESS_BASE", "SCALE_FIELDS", "SETTINGS",
    "SETTING_OF_PARTITION", "Scenario", "algorithm_params", "annealing_gains", "annealing_grid", "annealing_seed_gains", "annealing_table",
    "cell_of", "claim_effects", "compare_accuracy", "data_config", "effects_of", "experiments", "experiments_to_run",
    "best_round_table", "fairness_table", "fig5_differences", "fig5_scale_text", "forgetting_by_round", "forgetting_text", "forgetting_trace", "stored_forgetting_trace", "trace_provenance", "grids",
    "hyperparameter_table", "images_text", "kl_sharpness", "ledger_rows", "logit_sharpness",
    "main_grid", "method_differences", "observations", "offline_copy", "paper_accuracy_table", "paper_accuracy_tables",
    "CLIPPED", "clipped_caveat", "read_at_scale", "clipped_cell", "clipped_table", "clipped_text", "traces_finding_text",
    "diverged_seeds", "divergence_traces", "determinism_checks", "determinism_check_text", "plot_trace", "trace_caption", "trace_text", "divergence_rates", "divergence_rates_text", "divergences_text", "divergence_tally", "divergence_tally_text", "machine_check_text", "machine_checks", "paper_annealing", "paper_column", "paper_observations", "paper_scale", "paper_scale_records", "paper_table3", "paper_table4", "paper_table5",
    "parse_scenarios", "per_client_counts", "per_client_difference", "records_and_runs", "reduced_profile_records",
    "reduced_records_by_grid", "run_config", "scale_text", "scenarios_text", "sensitivity_grid", "sensitivity_table",
    "settings_columns", "summary", "verdict_basis", "verdict_basis_text",
]


def read_at_scale() -> str:
    """The caveat under the chapter's verdict box (ledger_pages.verdict_box): the column's divergences
    and the clipped deviation (:func:`clipped_caveat`)."""
    return clipped_caveat(short=False)
