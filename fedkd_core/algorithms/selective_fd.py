"""Selective-FD (Shao, Wu, Zhang, Nature Communications 2024), in KnFu's round.

Two selectors decide which knowledge is shared:

* **client side** — each client estimates the density ratio r(x) = p_local(x) / p_aux(x) of its
  own inputs against a uniform auxiliary distribution over the input box with KuLSIF (Kanamori
  et al., 2012; a Gaussian kernel on raw normalised pixels, as in the official code
  ``shaojiawei07/Selective-FD``: ``KuLSIF.py``, ``data/MNISTTrainDataset.py``). A transfer
  sample is *accepted* by client n when r_n(x) exceeds the first quartile of r_n on held-out
  local samples; the client uploads soft labels of accepted samples only (plus the mask).
* **server side** — the ensemble of a sample is the mean of the accepting clients' soft labels;
  samples no client accepts, or whose ensemble entropy exceeds a threshold, are dropped.
  Every client distils (Eq. 10's loss, KL on kept samples only) towards the same ensemble.

Simplifications, stated: the selection is input-space only, so it is computed once per client
and cached (the official demo does the same). The official code fits on 5% of ~5,400 local
samples; with KnFu's 50-1,000 samples a client fits on ``fit_fraction`` of them and takes the
quartile on the rest. The official ``KuLSIF.py`` multiplies by the regularised Gram matrix where
the estimator needs its inverse; here the textbook solve is used (with the code's settings the
alpha term is ~1e-20 either way, leaving a Gaussian kernel density of the local data). The
server-side entropy threshold is not in the official code and its value was not found in the
paper's text available here: it is a free parameter, a fraction of ln C.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .shapes.transfer_kd import Fusion, TransferDistillation, TransferKDConfig

REFERENCE_DIM = 784  # the kernel width below is given for MNIST's 784 pixels


def gaussian_kernel(a: torch.Tensor, b: torch.Tensor, sigma: float) -> torch.Tensor:
    """k(a_i, b_j) = exp(-||a_i - b_j||^2 / (2 sigma^2)), in float64 (values reach 1e-20)."""
    return torch.exp(-torch.cdist(a.double(), b.double()) ** 2 / (2 * sigma**2))


@dataclass(frozen=True)
class KuLSIF:
    """The fitted estimator r(x) = sum_j alpha_j k(x, a_j) + 1/(m lambda) sum_i k(x, x_i)."""

    known: torch.Tensor  # (m, d) samples of the numerator density (the client's inputs)
    auxiliary: torch.Tensor  # (n, d) samples of the denominator density (uniform)
    alpha: torch.Tensor  # (n,)
    sigma: float
    lam: float

    def ratio(self, x: torch.Tensor) -> torch.Tensor:
        negative = gaussian_kernel(x, self.auxiliary, self.sigma) @ self.alpha
        positive = gaussian_kernel(x, self.known, self.sigma).mean(dim=1) / self.lam
        return negative + positive


def fit_kulsif(known: torch.Tensor, auxiliary: torch.Tensor, sigma: float, lam: float) -> KuLSIF:
    """alpha = -(K11/n + lambda I)^{-1} K12 1_m / (n m lambda) (Kanamori et al., 2012)."""
    n, m = len(auxiliary), len(known)
    k11 = gaussian_kernel(auxiliary, auxiliary, sigma)
    k12 = gaussian_kernel(auxiliary, known, sigma)
    lhs = k11 / n + lam * torch.eye(n, dtype=torch.float64)
    alpha = -torch.linalg.solve(lhs, k12.sum(dim=1) / (n * m * lam))
    return KuLSIF(known.double(), auxiliary.double(), alpha, sigma, lam)


def client_selection(estimator: KuLSIF, held_out: torch.Tensor, candidates: torch.Tensor,
                     quantile: float = 0.25) -> torch.Tensor:
    """Accept candidates whose ratio exceeds the ``quantile`` of the ratios of held-out local data."""
    threshold = torch.quantile(estimator.ratio(held_out), quantile)
    return estimator.ratio(candidates) > threshold


def selective_ensemble(soft_labels: torch.Tensor, accepted: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sample, the mean soft label over the clients that accepted it.

    ``soft_labels`` (N, K, C), ``accepted`` (N, K) bool. Returns the (K, C) ensemble (zero rows
    where nobody accepted) and the (K,) mask of samples at least one client accepted.
    """
    votes = accepted.to(soft_labels.dtype)
    count = votes.sum(dim=0)
    ensemble = (votes[..., None] * soft_labels).sum(dim=0) / count.clamp_min(1)[:, None]
    return ensemble, count > 0


def entropy(probabilities: torch.Tensor) -> torch.Tensor:
    """H(p) = -sum_c p_c ln p_c per row (0 ln 0 = 0)."""
    p = probabilities.double()
    return -(p * p.clamp_min(1e-30).log()).sum(dim=-1)


def server_selection(ensemble: torch.Tensor, threshold: float) -> torch.Tensor:
    """Keep samples whose ensemble entropy is at most ``threshold`` * ln C (ambiguity filter).
    A threshold of 1 or more keeps every sample: the filter is off, as in the official code,
    which has no server-side selector (a uniform row computed in float can exceed ln C)."""
    if threshold >= 1:
        return torch.ones(ensemble.shape[0], dtype=torch.bool, device=ensemble.device)
    return entropy(ensemble) <= threshold * math.log(ensemble.shape[-1])


@dataclass(frozen=True)
class SelectiveFDConfig(TransferKDConfig):
    """kernel_width: Gaussian kernel width at 784 input dimensions (official code: 5), scaled by
    sqrt(d / 784) for other inputs; kulsif_lambda: KuLSIF's regulariser (None: 1/sqrt(aux_samples),
    as in the code); aux_samples: uniform auxiliary samples (code: 250); fit_fraction: share of
    the local data the estimator is fitted on (the rest sets the quartile); quantile: the
    acceptance threshold (code: first quartile); entropy_threshold: server-side filter, a fraction
    of ln C (not given by the source: the official code has no server-side selector; 0.5 is our
    reading of the paper, 1 turns the filter off)."""

    kernel_width: float = 5.0
    kulsif_lambda: float | None = None
    aux_samples: int = 250
    fit_fraction: float = 0.5
    quantile: float = 0.25
    entropy_threshold: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        checks = {
            "kernel_width": self.kernel_width > 0,
            "aux_samples": self.aux_samples >= 1,
            "fit_fraction": 0 < self.fit_fraction < 1,
            "quantile": 0 <= self.quantile <= 1,
            "entropy_threshold": self.entropy_threshold > 0,
            "kulsif_lambda": self.kulsif_lambda is None or self.kulsif_lambda > 0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"{name} is out of range (got {getattr(self, name)!r})")


class SelectiveFD(TransferDistillation):
    Config = SelectiveFDConfig
    CLIENT_STATE = ("models", "accepted")

    def __init__(self, config: SelectiveFDConfig, ctx):
        super().__init__(config, ctx)
        self.accepted: dict[int, torch.Tensor] = {}
        self.kept: torch.Tensor | None = None  # the last round's server-side selection (for the chapter)
        self.accepted_any: torch.Tensor | None = None  # samples at least one client accepted

    def upload_mask(self, client: int) -> torch.Tensor:
        if client not in self.accepted:
            self.accepted[client] = self._select(client)
        return self.accepted[client]

    def _select(self, client: int) -> torch.Tensor:
        """The client-side selector: fit KuLSIF on part of D_n, threshold on the rest."""
        data, config = self.ctx.data, self.config
        dataset = data.dataset
        inputs = dataset.to_float(dataset.x_train[torch.as_tensor(data.client_train[client])]).flatten(1)
        candidates = dataset.to_float(dataset.x_train[torch.as_tensor(data.transfer)]).flatten(1)
        if len(inputs) < 2:  # nothing to hold out: accept everything
            return torch.ones(len(candidates), dtype=torch.bool)
        generator = torch.Generator().manual_seed(self.ctx.seed * 100_003 + client)
        order = torch.randperm(len(inputs), generator=generator)
        cut = min(max(1, int(round(config.fit_fraction * len(inputs)))), len(inputs) - 1)
        low, high = float(inputs.min()), float(inputs.max())
        auxiliary = low + (high - low) * torch.rand(config.aux_samples, inputs.shape[1], generator=generator,
                                                     dtype=torch.float64)
        sigma = config.kernel_width * math.sqrt(inputs.shape[1] / REFERENCE_DIM)
        lam = config.kulsif_lambda or 1 / math.sqrt(config.aux_samples)
        estimator = fit_kulsif(inputs[order[:cut]], auxiliary, sigma, lam)
        return client_selection(estimator, inputs[order[cut:]], candidates, config.quantile)

    def fuse(self, soft_labels, masks):
        clients = sorted(soft_labels)
        ensemble, any_accepted = selective_ensemble(torch.stack([soft_labels[k] for k in clients]),
                                                    torch.stack([masks[k] for k in clients]))
        self.accepted_any = any_accepted
        self.kept = any_accepted & server_selection(ensemble, self.config.entropy_threshold)
        return {k: Fusion(ensemble, self.kept) for k in clients}

    def round_metrics(self) -> dict:
        """The share of transfer samples some client accepted and the share the server's entropy
        filter then kept (what each client distils on), stored per round in the record."""
        if self.kept is None:
            return {}
        return {"accepted_fraction": float(self.accepted_any.float().mean()),
                "kept_fraction": float(self.kept.float().mean())}
