"""Gaussian discriminant analysis of a model's features: FedUA's feature-space density (Eqs. 1-2a).

A client fits, on the penultimate features z = f(x) of its own labelled data, one Gaussian per
class it holds (mean, covariance with 1/(n-1), prior n_c / n) and the mixture density

    p(z) = sum_{c: n_c > 0} q(c) N(z; mu_c, Sigma_c)

(DDU's ``gmm_fit`` and ``compute_density``, Mukhoti et al. 2023). Everything is float64.

Degenerate covariances are the rule, not the exception: FedBE's step split leaves 10 images of a
minor class in a 64-d feature space (rank <= 9), and ReLU features can be dead for a whole class.
So a class with a single sample takes the client's pooled within-class covariance, and one jitter
is added to every class's diagonal: the first of :data:`JITTERS` (relative to the mean feature
variance) for which every Cholesky factorisation succeeds, DDU's search order. The jitter chosen
is kept (``relative_jitter``) so a reader can see how much regularisation a client needed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# Relative jitters tried in order (DDU tries 0, the smallest double, then 1e-308 ... 1e-1 absolute;
# relative to the feature scale, steps from 1e-12 are enough in float64).
JITTERS = (0.0, *(10.0 ** e for e in range(-12, 1)))
MESSAGE_KEYS = ("gda_mean", "gda_cov", "gda_count", "gda_jitter", "gda_logp_stats")


@dataclass(frozen=True)
class FeatureDensity:
    """Per-class Gaussians of one client's features. Classes with ``counts == 0`` are absent."""

    means: torch.Tensor  # (C, d) float64
    covariances: torch.Tensor  # (C, d, d) float64, regularised (positive definite for present classes)
    counts: torch.Tensor  # (C,) int64 training samples per class
    relative_jitter: float  # what was added to the diagonal, in units of the mean feature variance

    @property
    def present(self) -> torch.Tensor:
        return self.counts > 0

    def log_priors(self) -> torch.Tensor:
        """log q(c) = log(n_c / n); -inf for absent classes."""
        counts = self.counts.double()
        return torch.log(counts / counts.sum().clamp_min(1))

    def class_log_densities(self, z: torch.Tensor) -> torch.Tensor:
        """(N, C) log N(z; mu_c, Sigma_c) for every row of ``z``; -inf for absent classes."""
        z = z.to(self.means.device, torch.float64)
        out = torch.full((len(z), len(self.counts)), -math.inf, dtype=torch.float64, device=z.device)
        dim = z.shape[1]
        for c in torch.nonzero(self.present).flatten().tolist():
            factor = torch.linalg.cholesky(self.covariances[c])
            centred = (z - self.means[c]).T  # (d, N)
            solved = torch.linalg.solve_triangular(factor, centred, upper=False)
            mahalanobis = (solved ** 2).sum(0)
            log_det = 2.0 * torch.log(torch.diagonal(factor)).sum()
            out[:, c] = -0.5 * (dim * math.log(2 * math.pi) + log_det + mahalanobis)
        return out

    def log_prob(self, z: torch.Tensor) -> torch.Tensor:
        """(N,) log p(z) = logsumexp_c (log q(c) + log N(z; mu_c, Sigma_c)) over present classes."""
        return torch.logsumexp(self.class_log_densities(z) + self.log_priors(), dim=1)

    def posterior(self, z: torch.Tensor) -> torch.Tensor:
        """(N, C) p(c | z) under the mixture (zero for absent classes): FedUA Fig. 9's distribution."""
        return torch.softmax(self.class_log_densities(z) + self.log_priors(), dim=1)

    def to_message(self) -> dict[str, torch.Tensor]:
        """What a client uploads: float32 means and covariances, int64 counts, the jitter it needed."""
        return {"gda_mean": self.means.float(), "gda_cov": self.covariances.float(), "gda_count": self.counts.clone(),
                "gda_jitter": torch.tensor([self.relative_jitter], dtype=torch.float32)}

    @classmethod
    def from_message(cls, message: dict[str, torch.Tensor]) -> "FeatureDensity":
        """The density a server rebuilds from an upload (float64; re-regularised if float32
        rounding made a covariance lose definiteness)."""
        counts = message["gda_count"].long()
        covariances, extra = regularise(message["gda_cov"].double(), counts > 0)
        return cls(message["gda_mean"].double(), covariances, counts, float(message["gda_jitter"]) + extra)


def fit_feature_density(features: torch.Tensor, labels: torch.Tensor, num_classes: int,
                        shrinkage: float = 0.0) -> FeatureDensity:
    """Fit the GDA of ``features`` (N, d) with integer ``labels`` (N,) over ``num_classes`` classes.

    Covariances use 1/(n_c - 1); a class with one sample takes the pooled within-class
    covariance; ``shrinkage`` in [0, 1] mixes every class covariance with the pooled one
    (0: none, the default); then :func:`regularise` makes them positive definite.
    """
    if not 0.0 <= shrinkage <= 1.0:
        raise ValueError(f"shrinkage must be in [0, 1] (got {shrinkage})")
    z = torch.as_tensor(features).detach().to(torch.float64)
    y = torch.as_tensor(labels).detach().long().to(z.device)
    if z.dim() != 2 or len(z) != len(y):
        raise ValueError(f"features must be (N, d) with one label per row (got {tuple(z.shape)} and {tuple(y.shape)})")
    if len(y) and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes}) (got {int(y.min())}..{int(y.max())})")
    dim = z.shape[1]
    counts = torch.bincount(y, minlength=num_classes).cpu()
    means = torch.zeros(num_classes, dim, dtype=torch.float64, device=z.device)
    scatter = torch.zeros(num_classes, dim, dim, dtype=torch.float64, device=z.device)
    for c in torch.nonzero(counts).flatten().tolist():
        members = z[y == c]
        means[c] = members.mean(0)
        centred = members - means[c]
        scatter[c] = centred.T @ centred
    pooled = pooled_covariance(scatter, counts)
    covariances = torch.zeros_like(scatter)
    for c in torch.nonzero(counts).flatten().tolist():
        own = scatter[c] / (counts[c] - 1) if counts[c] > 1 else pooled
        covariances[c] = (1 - shrinkage) * own + shrinkage * pooled
    covariances, jitter = regularise(covariances, counts > 0)
    return FeatureDensity(means, covariances, counts.to(z.device), jitter)


def pooled_covariance(scatter: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Within-class covariance pooled over classes: sum_c S_c / (n - classes present); the
    identity's scale of the features when no class has two samples."""
    present = int((counts > 0).sum())
    degrees = int(counts.sum()) - present
    dim = scatter.shape[-1]
    if degrees <= 0:
        return torch.eye(dim, dtype=scatter.dtype, device=scatter.device)
    return scatter.sum(0) / degrees


def regularise(covariances: torch.Tensor, present: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Add the first relative jitter of :data:`JITTERS` that makes every present class's
    covariance Cholesky-factorable; return the covariances and that jitter."""
    present = present.to(covariances.device)
    chosen = covariances[present]
    if len(chosen) == 0:
        return covariances, 0.0
    scale = float(torch.diagonal(chosen, dim1=-2, dim2=-1).mean())
    scale = scale if scale > 0 and math.isfinite(scale) else 1.0
    eye = torch.eye(covariances.shape[-1], dtype=covariances.dtype, device=covariances.device)
    for jitter in JITTERS:
        candidate = chosen + jitter * scale * eye
        if bool((torch.linalg.cholesky_ex(candidate).info == 0).all()):
            out = covariances.clone()
            out[present] = candidate
            return out, jitter
    raise FloatingPointError(
        f"feature covariances are not positive definite even with a jitter of {JITTERS[-1]} x the mean "
        "feature variance; the features are probably not finite"
    )
