"""Chapter "FedUA": the grids of Tables 1-3, the paper's numbers, and the tables built from records.

Three grids share one ``Params``: Table 2 (FedAvg / FedDF / FedUA x partitions, C = 1), Table 3
(the same methods on the first partition, step, at lower participation C) and Table 1 (FedDF with
Random or BALD sample selection at each sample ratio SR, step, C = 1). ``experiments(params)`` is
their union; ``experiments_to_run(params)`` leaves out the cells that committed reduced-profile
records cover.

The chapter is a package, one concept per module; this file only gathers the names the notebook,
the sweep, the ledger, the robustness grids and ``compare`` use (``fedkd_core.contracts``):

- ``grid``: ``Params`` and the three grids (what runs);
- ``choices``: the choices the paper leaves open, one column per profile shown;
- ``profiles``: the reference profiles whose records are committed (``REDUCED_PROFILE``, ...);
- ``records``: which cell a record stands for, and what is left to run;
- ``paper``: the paper's tables, as data, and its printed percentages checked;
- ``tables``: our records as the paper's tables;
- ``claims``: the paper's claims, counted alike on its tables and on our records;
- ``robustness``: the readings of what the paper leaves open that the robustness grid varies.
"""

from .claims import (CHAPTER, EFFECT_CELL_KEYS, METHOD_COLUMN, PAPER_RUNS, claim_effects, effects_of, ledger_rows, observations,
                     distillation_gain, paper_observations, plateau_check, read_at_scale)
from .choices import OPEN_CHOICES, choices_columns, open_choices_table
from .grid import (METHODS, SELECTION_NAMES, Params, algorithm_params, data_config, experiments, feature_dimension,
                   lr_schedule_text,
                   parse_partition, partition_name, run_config, table1_config, table1_grid, table2_grid, table3_grid)
from .paper import (derived_rows, paper_changes, paper_table1, paper_table2, paper_table3, printed_check,
                    relative_changes, rounds_to)
from .profiles import REDUCED_PROFILE, ROBUSTNESS_BASE, profiles_shown
from .records import SCALE_FIELDS, cell_of, experiments_to_run, method_differences, reduced_profile_records
from .robustness import ROBUSTNESS, ROBUSTNESS_BASE_NOTE, ROBUSTNESS_ROW_PREFIX
from .tables import (history_frame, jitter_counts, partition_names, step_check, step_checks, summary, table1_rows,
                     table2_rows, table3_rows)

__all__ = [
    "CHAPTER", "EFFECT_CELL_KEYS", "METHODS", "METHOD_COLUMN", "OPEN_CHOICES", "PAPER_RUNS", "REDUCED_PROFILE", "ROBUSTNESS", "distillation_gain", "read_at_scale", "ROBUSTNESS_BASE_NOTE", "ROBUSTNESS_ROW_PREFIX",
    "ROBUSTNESS_BASE", "SCALE_FIELDS", "SELECTION_NAMES", "Params", "algorithm_params", "cell_of", "choices_columns", "claim_effects",
    "data_config", "derived_rows", "effects_of", "experiments", "feature_dimension", "experiments_to_run", "history_frame",
    "jitter_counts", "ledger_rows", "lr_schedule_text", "method_differences", "observations", "open_choices_table", "paper_changes", "paper_observations",
    "paper_table1", "paper_table2", "paper_table3", "parse_partition", "plateau_check", "partition_name", "partition_names",
    "printed_check", "profiles_shown", "reduced_profile_records", "relative_changes", "rounds_to", "run_config",
    "step_check", "step_checks", "summary", "table1_config", "table1_grid", "table1_rows", "table2_grid",
    "table2_rows", "table3_grid", "table3_rows",
]
