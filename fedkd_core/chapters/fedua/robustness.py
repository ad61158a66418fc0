"""Robustness of FedUA's claims to what the paper leaves open: the variants of
``fedkd_core.chapters.robustness``'s grid around :data:`~.profiles.ROBUSTNESS_BASE`."""

from __future__ import annotations

from ..robustness import Variant
from .claims import MODEL_TEXT, design_text
from .profiles import ROBUSTNESS_BASE

ROBUSTNESS_BASE_NOTE = (f"Its base is the reduced profile's first design ({design_text(ROBUSTNESS_BASE)}, "
                        f"evaluated every {ROBUSTNESS_BASE.eval_every}), not the redesign the chapter's verdicts use: "
                        "not rerun yet, so no cell passes the convergence gate")

# How the Claims page's robustness text starts for FedUA's rows: the grid is not at the verdicts' design.
ROBUSTNESS_ROW_PREFIX = (f"grid on the reduced profile's first design ({MODEL_TEXT.get(ROBUSTNESS_BASE.model, ROBUSTNESS_BASE.model)}, {ROBUSTNESS_BASE.rounds} "
                         "rounds), not rerun on the current one: ")

ROBUSTNESS = (
    Variant("chapter's settings, grid's cells", {},
            "server SGD lr 1e-3 on batch-mean KL at T = 1; FedUA keeps the 60% of U with the highest BALD score "
            "and weights teachers by their densities (τ = 1); clients train with crop + flip"),
    Variant("server lr 1e-4", {"server_lr": 1e-4},
            "FedBE's server loss also averages the KL over the classes: with batch-mean KL that is lr 1e-4"),
    Variant("server lr 1e-2", {"server_lr": 1e-2}, "ten times ours: a server that moves the student further"),
    Variant("distillation T = 3", {"temperature": 3.0}, "a common KD temperature; FedDF's code uses T = 1"),
    Variant("FedUA on all of U", {"sample_ratio": 1.0},
            "Tables 2-3's ratio is not stated; 1 keeps every sample and isolates the density weighting"),
    Variant("FedUA keeps 80% of U", {"sample_ratio": 0.8}, "Table 1's second-best BALD ratio"),
    Variant("standardised densities", {"weighting": "density_std"},
            "each teacher's log-density standardised by its own training features: weights less near one-hot"),
    Variant("no augmentation", {"augment": "none"}, "FedUA does not say; FedBE's code trains clients with crop + flip"),
)
