"""Chapter "FedGMKD": the grid of Table 1's CIFAR-10 block and its ablations, the paper's numbers
as data, and the tables built from records.

Every run of the chapter is one method on CIFAR-10 Dir(alpha). The methods are rows of
:data:`METHODS`: the paper's nine plus three readings the notes call for — FedGMKD as its released
code computes it (Table 6's comparison needs it), FedHKD's mean prototypes with DAT (Table 6) and
Table 3's "only CKF" / "only DAT". Accuracies are means over the last ``last_rounds`` evaluated
rounds, as the paper's.

The chapter is a package, one concept per module; this file only gathers the names the notebook,
the sweep, the ledger, the robustness grids and ``compare`` use (``fedkd_core.contracts``):

- ``grid``: ``Params``, the rows (:data:`METHODS`) and the grid (what runs);
- ``profiles``: the reference profiles whose records are committed (``REDUCED_PROFILE``, ...);
- ``records``: which row and cell a record stands for, and what is left to run;
- ``paper``: the paper's tables, as data;
- ``tables``: our records as the paper's tables;
- ``analysis``: measurements beyond the tables (the prototype identity on real features and on a
  hand-made mixture, the models' sizes);
- ``claims``: the paper's claims, counted alike on its tables and on our records;
- ``redesign``: the 50-round redesign of the reduced profile, and how far its sweep has got;
- ``robustness``: the readings of what the paper leaves open that the robustness grid varies.
"""

from .analysis import (FIXED_COMPONENTS, TOLERANCES, hand_made_mixture, mixture_identity, parameter_count,
                       prototype_identity)
from .claims import (ABLATION_CLAIMS, EFFECT_CELL_KEYS, METHOD_COLUMN, PAPER_RUNS, TABLE1_CLAIMS, claim_effects,
                     effects_of, ledger_rows, observations, paper_observations, scale_text, verdict_basis,
                     verdict_basis_text, resting_text)
from .grid import (FEDGMKD_OPTIONS, FEDGMKD_ROWS, METHODS, PAPER_METHODS, TABLE3_METHODS, Method, Params, ablation_grid,
                   data_config, experiments, method_params, paper_reading, parse_pairs, run_config, settings_table,
                   shared_setting, table1_grid, table5_grid, used_here)
from .paper import DATASET_REASON, PAPER_MODEL, PAPER_ROUNDS, paper_table1, paper_table3, paper_table5, paper_table6, paper_times
from .profiles import REDESIGN_PROFILE, REDUCED_PROFILE, RERUNS, ROBUSTNESS_BASE, ROBUSTNESS_RERUN, profiles_shown
from .redesign import gate_sensitivity, gate_text, late_reading, redesign_records, round_budget_table, window_mean
from .records import SCALE_FIELDS, cell_of, experiments_to_run, method_differences, method_key, reduced_profile_records
from .robustness import ROBUSTNESS, robustness_grid
from .tables import (accuracy_per_profile, at_default_weights, cost_table, cost_tables, dat_shift_table, fedgmkd_cost, first_places,
                     first_places_text, gains_over, gains_text, history_frame, last_rounds_mean, long_accuracies,
                     ranking_summary, summary, table1_rows, table3_rows, table5_cells, table5_rows, time_ratios,
                     traffic_table, weight_pairs_text)

__all__ = [
    "RERUNS",
    "ABLATION_CLAIMS", "DATASET_REASON", "EFFECT_CELL_KEYS", "FEDGMKD_OPTIONS", "FEDGMKD_ROWS", "FIXED_COMPONENTS",
    "METHODS", "METHOD_COLUMN", "PAPER_METHODS", "PAPER_MODEL", "PAPER_ROUNDS", "PAPER_RUNS", "REDESIGN_PROFILE", "REDUCED_PROFILE",
    "redesign_records", "round_budget_table", "gate_sensitivity", "gate_text", "late_reading", "scale_text",
    "verdict_basis", "verdict_basis_text", "resting_text", "window_mean", "ROBUSTNESS", "ROBUSTNESS_BASE", "ROBUSTNESS_RERUN", "robustness_grid",
    "SCALE_FIELDS", "TABLE1_CLAIMS", "TABLE3_METHODS", "TOLERANCES", "Method", "Params", "ablation_grid",
    "accuracy_per_profile", "at_default_weights", "cell_of", "claim_effects", "cost_table", "cost_tables", "data_config",
    "effects_of", "experiments", "experiments_to_run", "fedgmkd_cost", "first_places", "first_places_text",
    "dat_shift_table", "gains_over", "gains_text", "hand_made_mixture", "history_frame", "last_rounds_mean", "ledger_rows",
    "long_accuracies", "method_differences", "method_key", "method_params", "mixture_identity", "observations",
    "paper_observations", "paper_reading", "paper_table1", "paper_table3", "paper_table5", "paper_table6",
    "paper_times", "parameter_count", "parse_pairs", "profiles_shown", "prototype_identity", "ranking_summary",
    "reduced_profile_records", "run_config", "settings_table", "shared_setting", "summary", "table1_grid",
    "table1_rows", "table3_rows", "table5_cells", "table5_grid", "table5_rows", "time_ratios", "traffic_table",
    "used_here", "weight_pairs_text",
]
