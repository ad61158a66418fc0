"""FedCKD's reference profiles, the ones whose records are committed."""

from __future__ import annotations

from dataclasses import replace

from .grid import Params

# The reduced profile (notebooks/params/reduced/fedckd.yaml holds the same values; a test checks it):
# the paper's setting for Tables I-II's Fashion-MNIST column — n = 20, r = 1, E = 5, batch 64, SGD
# lr 0.01 momentum 0.9, all eight methods, 3 seeds, practical and pathological — with a fifteenth of
# the training images (4,000: 200 per client) and 15 rounds instead of 50, plus Table IV's annealing
# pair on Fashion-MNIST (the paper's is on CIFAR-100, not offline here). Sized for about 3.5 hours on
# 2 AVX2 cores: on an AMD EPYC, with both cores running a worker, a FedAvg round of 20 clients x 300
# images x 5 epochs took 28-31 s (FedAvg and FedProx, 20 rounds: 729 s and 758 s) and pFedMe (K = 5
# inner steps per batch) does about 5 times FedAvg's work, so 6,000 images and 20 rounds came to about
# 6.6 hours; 4,000 images and 15 rounds do half of that work.
REDUCED_PROFILE = Params(
    profile="reduced", datasets="fashion_mnist", settings="practical,pathological", scenarios="20:1.0:15",
    algorithms="fedavg,fedprox,fedper,lg_fedavg,pfedme,fedfomo,pfedsd,fedckd", seeds=3, alpha=0.1, pool_size=4000,
    local_test_size=200, global_test_size=0, local_epochs=5, batch_size=64, lr=0.01, momentum=0.9, weight_decay=1e-5,
    eval_every=1, fedprox_mu=0.01, annealing_datasets="fashion_mnist", sensitivity_dataset="", forgetting_rounds=2,
    mixed_precision=False,
)

# Tables I-II's Fashion-MNIST n = 100 / r = 0.1 / T = 100 column and Table IV's pair at the paper's
# full scale (notebooks/params/paper/fedckd_fmnist100.yaml holds the same values; a test checks it).
PAPER_FMNIST100 = replace(REDUCED_PROFILE, profile="paper", scenarios="100:0.1:100", pool_size=0, local_test_size=500,
                          forgetting_rounds=10)

# The base the variants change (notebooks/params/robustness/fedckd.yaml; a test checks it): the
# reduced profile with only the methods the claims compare.
ROBUSTNESS_BASE = replace(REDUCED_PROFILE, profile="robustness", algorithms="pfedsd,fedckd")
