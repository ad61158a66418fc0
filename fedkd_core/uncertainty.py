"""Uncertainty of an ensemble of teachers: entropy, BALD, density weights, sample selection.

Used by FedUA and by FedDF's selection ablation (FedUA Table 1). The teachers are the client
models of a round: ``probs`` has shape (teachers, samples, classes).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch


def entropy(probs: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """-sum p log p along ``dim``, natural log, with 0 log 0 = 0."""
    return -torch.special.xlogy(probs, probs).sum(dim)


def bald_scores(probs: torch.Tensor) -> torch.Tensor:
    """BALD mutual information I(y; w | x) = H(mean_t p_t) - mean_t H(p_t) (FedUA Eqs. 3-4),
    from (teachers, samples, classes) probabilities; (samples,) scores in [0, log C]."""
    if probs.dim() != 3:
        raise ValueError(f"probs must be (teachers, samples, classes) (got shape {tuple(probs.shape)})")
    probs = probs.double()
    return (entropy(probs.mean(0)) - entropy(probs).mean(0)).clamp_min(0.0)


def teacher_weights(log_densities: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Per-sample weights of the teachers: the softmax over teachers of log p_k(x) / temperature,
    i.e. the densities normalised across teachers (FedUA Eq. 2b, reconstructed).

    ``log_densities`` is (teachers, samples); a sample no teacher gives a finite density gets
    uniform weights.
    """
    if log_densities.dim() != 2:
        raise ValueError(f"log_densities must be (teachers, samples) (got shape {tuple(log_densities.shape)})")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 (got {temperature})")
    scaled = log_densities.double() / temperature
    hopeless = ~torch.isfinite(scaled.max(0).values)
    scaled[:, hopeless] = 0.0
    return torch.softmax(scaled, dim=0)


def ensemble_targets(logits: torch.Tensor, weights: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """softmax(sum_k w_k(x) l_k(x) / T): (teachers, samples, classes) logits and (teachers, samples)
    weights -> (samples, classes) target probabilities (FedUA §3.3; FedDF ``avg_logits`` when
    the weights are uniform)."""
    mixed = (weights.unsqueeze(-1).to(logits.dtype) * logits).sum(0)
    return torch.softmax(mixed.float() / temperature, dim=-1)


# --- which samples of the unlabelled server set the student learns from ---------------------------

Selector = Callable[[torch.Tensor, int, np.random.Generator], np.ndarray]


def _top_scores(scores: torch.Tensor, count: int, rng: np.random.Generator) -> np.ndarray:
    order = np.argsort(-scores.double().cpu().numpy(), kind="stable")
    return np.sort(order[:count])


def _random(scores: torch.Tensor, count: int, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(len(scores), size=count, replace=False))


SELECTIONS: dict[str, Selector] = {
    "bald": _top_scores,  # the highest BALD scores (FedUA §3.2)
    "random": _random,  # a uniform draw of the same size (FedUA Table 1's "Random")
}


def check_selection(selection: str) -> None:
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {sorted(SELECTIONS)} (got {selection!r})")


def select_samples(scores: torch.Tensor, ratio: float, selection: str, rng: np.random.Generator) -> np.ndarray:
    """Positions of the ceil(ratio * N) samples kept by ``selection`` ("bald": the highest scores,
    stable on ties; "random": a uniform draw from ``rng``). A ratio of 1 keeps every sample
    without drawing, so both rules coincide there."""
    check_selection(selection)
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"ratio must be in (0, 1] (got {ratio})")
    count = math.ceil(ratio * len(scores) - 1e-9)
    if count >= len(scores):
        return np.arange(len(scores))
    return SELECTIONS[selection](scores, count, rng)
