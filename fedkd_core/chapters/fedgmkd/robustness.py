"""Robustness of FedGMKD's claims to what the paper leaves open or states two ways: the variants of
``fedkd_core.chapters.robustness``'s grid around :data:`~.profiles.ROBUSTNESS_BASE`."""

from __future__ import annotations

from ..robustness import Variant

ROBUSTNESS = (
    Variant("chapter's settings, grid's cells", {},
            "Eq. 5 prototypes (BIC over 1-6 components), DAT a = b = 0.2 against the round's preliminary "
            "aggregate, KD on softmax(C(H)/T) vs Q, no clipping"),
    Variant("DAT against last round's knowledge", {"dat_reference": "previous"},
            "Algorithm 1 measures d against G of the previous round; appendix A.2 against the preliminary one"),
    Variant("DAT a = 0.4", {"dat_a": 0.4}, "the released code's a"),
    Variant("KD on tempered logits", {"kd_on": "logits"}, "Eq. 13 read literally: C(H)/T against Q/T"),
    Variant("gradient clipping 1.1", {"max_grad_norm": 1.1}, "the released code clips in rounds with knowledge"),
    Variant("GMM with 2-7 components", {"min_components": 2, "max_components": 7},
            "the paper's text; the code searches 1-6"),
)
