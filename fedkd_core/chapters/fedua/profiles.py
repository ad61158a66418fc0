"""FedUA's reference profiles, the ones whose records are committed."""

from __future__ import annotations

from dataclasses import replace

from .grid import Params

# The reduced profile (notebooks/params/reduced/fedua.yaml holds the same values; a test checks
# it): the paper's design at a size that 2 CPU cores finish in hours. Its records are committed
# under results/reduced/ and the chapter shows them whatever profile it is executed with.
REDUCED_PROFILE = Params(
    profile="reduced", partitions="step,dir0.1,dir0.5", participations="1.0,0.7,0.4",
    table1_ratios="0.2,0.4,0.6,0.8,1.0", seeds=3, model="resnet8", num_clients=10, pool_size=4000,
    transfer_size=1000, major_fraction=0.98, rounds=10, local_epochs=3, server_epochs=3, local_test_size=100,
    global_test_size=0, eval_every=2, mixed_precision=False,
)

# The base the variants change (notebooks/params/robustness/fedua.yaml; a test checks it): the
# reduced profile's Tables 2 and 3 (all three methods, three partitions, C = 1, 0.7, 0.4, 3 seeds);
# Table 1's selection runs are left out. The chapter's reading is the committed reduced records.
ROBUSTNESS_BASE = replace(REDUCED_PROFILE, profile="robustness", table1_ratios="")
