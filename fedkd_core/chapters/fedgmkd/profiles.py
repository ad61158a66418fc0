"""FedGMKD's reference profiles, the ones whose records are committed."""

from __future__ import annotations

from dataclasses import replace

from .grid import PAPER_METHODS, Params

# The reduced profile (notebooks/params/reduced/fedgmkd.yaml holds the same values; a test checks it):
# the Table 1 block with every method, the released code's FedGMKD and Table 6's HK + DAT at three
# client counts, and Table 3 (the ablation at β 0.2 and 5, 10 clients), three seeds, at a size that
# 2 CPU cores finish in hours. Its records are committed under results/reduced/ and shown in every profile.
REDUCED_PROFILE = Params(
    profile="reduced", methods=",".join(PAPER_METHODS + ("fedgmkd_code", "hk_dat")), clients="10,20,50",
    ablation_alphas="0.2,5", seeds=3,
    model="cnn5_code32", samples_per_client=500, transfer_size=500, rounds=15, local_epochs=3, batch_size=64,
    max_components=6, local_test_size=200, global_test_size=0, mixed_precision=False,
)

# The base the variants change (notebooks/params/robustness/fedgmkd.yaml; a test checks it): the
# reduced profile's Table 1 block with the paper's nine methods. The variants change only FedGMKD,
# so the eight baselines' records serve every variant (9 new FedGMKD runs per variant).
ROBUSTNESS_BASE = replace(REDUCED_PROFILE, profile="robustness", methods=",".join(PAPER_METHODS), ablation_alphas="")
