"""FedCKD's reference profiles, the ones whose records are committed, read from their yaml under
``notebooks/params/`` (:func:`fedkd_core.chapters.datafiles.profile`); ``tests/test_profiles.py``
checks that their records are the committed ones and how they derive from one another."""

from __future__ import annotations

from ..datafiles import profile
from ..ledger import Rerun
from .grid import Params

# The paper's setting for Tables I-II's Fashion-MNIST column — n = 20, r = 1, E = 5, batch 64, SGD
# lr 0.01 momentum 0.9, all eight methods, 3 seeds, practical and pathological — with a fifteenth of
# the training images (4,000: 200 per client) and 15 rounds instead of 50, plus Table IV's annealing
# pair on Fashion-MNIST (the paper's is on CIFAR-100, not offline here). Sized, before it ran, from an
# estimate of about 3.5 hours on 2 AVX2 cores: on an AMD EPYC, with both cores running a worker, a
# FedAvg round of 20 clients x 300 images x 5 epochs took 28-31 s (FedAvg and FedProx, 20 rounds: 729 s
# and 758 s) and pFedMe (K = 5 inner steps per batch) does about 5 times FedAvg's work, so 6,000 images
# and 20 rounds came to about 6.6 hours; 4,000 images and 15 rounds do half of that work. What its
# committed records took, measured, is in the yaml's "Measured cost" header and the chapter's
# Reproduce box (card.measured_times).
REDUCED_PROFILE = profile(Params, "reduced/fedckd.yaml")

# Tables I-II's Fashion-MNIST n = 100 / r = 0.1 / T = 100 column and Table IV's pair at the paper's
# full scale: the reduced profile at the paper's scale.
PAPER_FMNIST100 = profile(Params, "paper/fedckd_fmnist100.yaml")

# The base the robustness variants change: the reduced profile with only the methods the claims compare.
ROBUSTNESS_BASE = profile(Params, "robustness/fedckd.yaml")


# The reruns the verdicts move onto once every run is finished (FedCKD's claim by claim, once every run
# a claim compares is: ``claims.verdict_basis``), and the rows they decide (the Claims page shows how
# far each has got; the rows' scale says which records they rest on now).
RERUNS = (Rerun("FedCKD", PAPER_FMNIST100, "paper/fedckd_fmnist100.yaml",
                "every FedCKD row, claim by claim", pace_reference=REDUCED_PROFILE),)
