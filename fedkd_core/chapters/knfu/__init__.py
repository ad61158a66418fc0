"""Chapter "KnFu: Effective Knowledge Fusion": KnFu vs FedMD, Selective-FD and Local.

The grid is Table 1 (MNIST, Dir(alpha) x |D_n|) and Table 2 (CIFAR-10), every method on the
same partitions and initialisation within a seed. Within a dataset runs are ordered seed first,
so a sweep that stops early has every cell at seed 0 before any cell gets its second seed.
``experiments_to_run(params)`` leaves out the cells that committed paper-profile records cover.

The chapter is a package, one concept per module; this file only gathers the names the notebook,
the sweep, the ledger, the robustness grids and ``compare`` use (``fedkd_core.contracts``):

- ``grid``: ``Params`` and the grid (what runs);
- ``profiles``: the reference profiles whose records are committed (``PAPER_PROFILE``, ...);
- ``records``: which record stands for which cell, the paper profile's records, what is left to run;
- ``paper``: the paper's Tables 1-2, as data;
- ``tables``: our records as the paper's tables, and how they compare with the paper's;
- ``analysis``: the worked example of the fusion weights;
- ``tuning``: every method's phase schedule chosen on a validation split, and Table 1 rerun with it;
- ``claims``: the paper's claims, counted alike on its tables and on our records;
- ``robustness``: the readings of what the paper leaves open that the robustness grid varies.
"""

from .analysis import FusionExample, fusion_example, neighbour_agreement
from .figures import difference_summary, paired_caption, paired_differences, plot_paired_differences
from .claims import (AS_CODED_SUFFIX, EFFECT_CELL_KEYS, LOCAL_ON_CIFAR, METHOD_COLUMN, ORIGINAL_CIFAR_SUFFIX, ORIGINAL_CLAIM,
                     ORIGINAL_SUFFIX, PAPER_RUNS, ROBUSTNESS_ROW_PREFIX, TUNED_CIFAR_LABEL, TUNED_CIFAR_SUFFIX, TUNED_SECTION, TUNED_SUFFIX, claim_effects,
                     effects_of, gap_words, gaps_to_paper, ledger_rows, observations,
                     paper_observations, records_shown, robustness_claim, untuned_reasons, verdict_bases)
from .grid import (METHODS, MODEL_FOR, PAPER_BATCH_SIZE, SHARING, TUNED, Params, algorithm_params, batch_size_for,
                   data_config, experiments, train_config)
from .paper import paper_table1, paper_table2
from .profiles import (FEDMD_ORIGINAL_CIFAR_PROFILE, FEDMD_ORIGINAL_PROFILE, PAPER_PROFILE, RERUNS, ROBUSTNESS_BASE, TUNED_CIFAR_PROFILE, TUNED_PROFILE,
                       TUNING_PROFILE)
from .records import (ORIGINAL, READ_SEEDS, SCALE_FIELDS, cell_of, experiments_to_run, method_differences, originals_on,
                      paper_profile_records, profile_complete, reusable_paper_records)
from .robustness import ROBUSTNESS, ROBUSTNESS_BASE_NOTE, selective_fd_filter_table
from .tables import communication_table, final_table, history_frame, verdict
from .tuning import (CANDIDATES, DEFAULT, GAIN_COLUMN, chosen_schedules, schedule_gaps, same_runs, schedule_of, schedule_table, schedules_text,
                     tuned_cifar_records, tuned_params, tuned_records, tuning_finding, tuning_finding_text, tuning_records,
                     tuning_table, verdict_changes)

__all__ = [
    "RERUNS", "difference_summary", "paired_caption", "paired_differences", "plot_paired_differences",
    "AS_CODED_SUFFIX", "LOCAL_ON_CIFAR", "ORIGINAL_CIFAR_SUFFIX", "ORIGINAL_CLAIM", "ORIGINAL", "ORIGINAL_SUFFIX", "originals_on", "profile_complete", "gap_words", "gaps_to_paper", "CANDIDATES", "DEFAULT", "GAIN_COLUMN", "EFFECT_CELL_KEYS", "FEDMD_ORIGINAL_CIFAR_PROFILE", "FEDMD_ORIGINAL_PROFILE", "FusionExample", "METHODS", "METHOD_COLUMN",
    "MODEL_FOR", "PAPER_BATCH_SIZE", "PAPER_PROFILE", "PAPER_RUNS", "Params", "READ_SEEDS", "ROBUSTNESS",
    "ROBUSTNESS_BASE", "ROBUSTNESS_BASE_NOTE", "ROBUSTNESS_ROW_PREFIX", "SCALE_FIELDS", "SHARING", "TUNED", "TUNED_CIFAR_LABEL", "TUNED_CIFAR_PROFILE", "TUNED_CIFAR_SUFFIX", "TUNED_PROFILE", "TUNED_SECTION",
    "TUNED_SUFFIX", "TUNING_PROFILE", "algorithm_params", "batch_size_for", "cell_of", "chosen_schedules",
    "claim_effects", "communication_table", "data_config", "effects_of", "experiments", "experiments_to_run",
    "final_table", "fusion_example", "history_frame", "ledger_rows", "method_differences", "neighbour_agreement",
    "observations", "paper_observations", "paper_profile_records", "paper_table1", "paper_table2",
    "schedule_gaps", "schedules_text", "reusable_paper_records", "robustness_claim", "same_runs", "schedule_of", "schedule_table", "selective_fd_filter_table",
    "train_config", "tuned_cifar_records", "tuned_params", "tuned_records", "tuning_finding", "tuning_finding_text", "tuning_records", "tuning_table", "records_shown", "untuned_reasons", "verdict", "verdict_bases",
    "verdict_changes",
]
