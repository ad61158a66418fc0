"""KnFu: Effective Knowledge Fusion (Seyedmohammadi, Atapour, Abouei, Mohammadi).

The round is :class:`~fedkd_core.algorithms.shapes.transfer_kd.TransferDistillation`'s; what is KnFu's
own is the fusion centre, :func:`fuse_knowledge` (Eqs. 5-9): each client receives a
personalised mix of all clients' soft labels, weighted by how close their estimated class
distributions (EPDs) are to its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .shapes.transfer_kd import Fusion, TransferDistillation, TransferKDConfig

# d_nm below this is treated as this (Eq. 7 would divide by zero for identical EPDs): identical
# EPDs get the largest finite weight 1/EPSILON^2, equal among themselves.
DISTANCE_EPSILON = 1e-6
# Probabilities are clamped to this inside the logarithm of the KL divergence (Eq. 6).
PROBABILITY_FLOOR = 1e-12


def estimated_distributions(soft_labels: torch.Tensor) -> torch.Tensor:
    """Eq. 5: p(Omega_n) = (1/K_t) sum_i F_n^i, the column mean of each client's soft labels."""
    return soft_labels.mean(dim=1)


def pairwise_kl(epd: torch.Tensor) -> torch.Tensor:
    """Eq. 6: d[n, m] = KL(p_n || p_m) = sum_j p_n,j log(p_n,j / p_m,j)."""
    log_p = epd.clamp_min(PROBABILITY_FLOOR).log()
    return (epd[:, None, :] * (log_p[:, None, :] - log_p[None, :, :])).sum(-1).clamp_min(0.0)


def fusion_weights(epd: torch.Tensor, beta: float, epsilon: float = DISTANCE_EPSILON) -> torch.Tensor:
    """Eqs. 6-9's weight matrix, row-normalised: row n says how client n mixes the clients.

    w[n, m] = 1 / max(d[n, m], epsilon)^2 (Eq. 7) for m != n and
    w[n, n] = beta * max_{m != n} w[n, m] (Eq. 8; the maximum excludes the infinite self term).
    A single client keeps its own knowledge (weight 1).
    """
    clients = epd.shape[0]
    if clients == 1:
        return torch.ones(1, 1, dtype=epd.dtype)
    weights = 1.0 / pairwise_kl(epd).clamp_min(epsilon) ** 2
    off_diagonal = ~torch.eye(clients, dtype=torch.bool)
    largest = weights.masked_fill(~off_diagonal, 0.0).amax(dim=1)
    weights = torch.where(off_diagonal, weights, torch.diag_embed(beta * largest))
    return weights / weights.sum(dim=1, keepdim=True)


def fuse_knowledge(soft_labels: torch.Tensor, beta: float = 10.0,
                   epsilon: float = DISTANCE_EPSILON) -> tuple[torch.Tensor, torch.Tensor]:
    """KnFu's fusion centre (Eqs. 5-9).

    ``soft_labels``: (N clients, K_t transfer samples, C classes) probabilities F_n.
    Returns ``(fused, weights)``: F_n^agg = sum_m weights[n, m] F_m of the same shape (Eq. 9), and
    the row-normalised (N, N) weight matrix. Computed in float64, returned in the input dtype.
    """
    if soft_labels.dim() != 3:
        raise ValueError(f"soft_labels must have shape (clients, samples, classes) (got {tuple(soft_labels.shape)})")
    if not beta > 0:
        raise ValueError(f"beta must be > 0 (got {beta})")
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0 (got {epsilon})")
    probabilities = soft_labels.double()
    weights = fusion_weights(estimated_distributions(probabilities), beta, epsilon)
    fused = torch.einsum("nm,mkc->nkc", weights, probabilities)
    return fused.to(soft_labels.dtype), weights.to(soft_labels.dtype)


@dataclass(frozen=True)
class KnFuConfig(TransferKDConfig):
    """beta: the self-weight multiplier of Eq. 8 (10 in all of the paper's experiments)."""

    beta: float = 10.0
    epsilon: float = DISTANCE_EPSILON

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.beta > 0:
            raise ValueError(f"beta must be > 0 (got {self.beta})")
        if not self.epsilon > 0:
            raise ValueError(f"epsilon must be > 0 (got {self.epsilon})")


class KnFu(TransferDistillation):
    """Personalised fusion: client n distils towards F_n^agg of Eq. 9."""

    Config = KnFuConfig

    def __init__(self, config: KnFuConfig, ctx):
        super().__init__(config, ctx)
        self.weights: torch.Tensor | None = None  # the last round's weight matrix (for the chapter)

    def fuse(self, soft_labels, masks):
        clients = sorted(soft_labels)
        fused, self.weights = fuse_knowledge(torch.stack([soft_labels[k] for k in clients]),
                                             self.config.beta, self.config.epsilon)
        return {k: Fusion(fused[i]) for i, k in enumerate(clients)}
