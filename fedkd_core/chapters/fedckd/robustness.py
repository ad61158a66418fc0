"""Robustness of FedCKD > pFedSD and of the annealing gain to what the paper leaves open: the
variants of ``fedkd_core.chapters.robustness``'s grid around :data:`~.profiles.ROBUSTNESS_BASE`."""

from __future__ import annotations

from ..robustness import Variant

ROBUSTNESS = (
    Variant("chapter's settings, grid's cells", {}, "KL(teacher ‖ student) × τ², first round: global teacher only, γ = 0.99"),
    Variant("KL(student ‖ teacher)", {"kl_direction": "student_teacher"}, "the paper's literal KL(p_k, p_teacher)"),
    Variant("no τ² scaling", {"scale_t2": False}, "the paper's Eq. 4 has no τ²; pFedSD's code has it"),
    Variant("first round: CE only", {"first_round": "ce_only"}, "pFedSD's rule for a client without history"),
    Variant("first round: global model as both teachers", {"first_round": "global_twice"},
            "the other reading of Eq. 4 before a history exists"),
    Variant("γ = 0.95", {"gamma": 0.95}, "faster annealing: λ halves in about 14 rounds instead of 69"),
)
