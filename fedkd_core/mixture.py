"""FedGMKD's per-class Gaussian mixtures in torch, on the run's device, batched over classes and
component counts.

One call fits, for every class j of a client that holds at least two samples and every component
count k in ``min_components..min(N_j, max_components)``, a full-covariance Gaussian mixture by EM,
and keeps per class the k of lowest BIC: the search of the released code (scikit-learn's
``GaussianMixture(k, covariance_type="full")`` for each k in turn), done as one batch.

The algorithm is scikit-learn's, step for step (``sklearn/mixture/_gaussian_mixture.py``,
``sklearn/cluster/_kmeans.py``), in float64:

* **initialisation**: k-means (``init_params="kmeans"``: ``KMeans(k, n_init=1)``): k-means++
  seeding with ``2 + int(log k)`` local trials per centre, candidates drawn in proportion to the
  squared distance to the nearest chosen centre (inverse CDF of a uniform draw, as scikit-learn's
  ``searchsorted``), then Lloyd iterations (at most 300) until the labels stop changing or the
  centres' total squared shift is at most 1e-4 times the class's mean per-feature variance, then
  the labels of the final centres. One-hot labels are the responsibilities of the first M-step.
* **EM**: M-step (``nk = Σ r + 10 eps``, means, covariances centred on the new means plus
  ``reg_covar`` 1e-6 on the diagonal, weights normalised, precision Cholesky factors), E-step
  (log densities through the precision factors, log-sum-exp), stopping when the mean
  log-likelihood changes by less than ``tol`` 1e-3, at most 100 iterations, then a final E-step.
  A fit whose covariance has no Cholesky factor at any M-step is dropped, as scikit-learn's
  ``ValueError`` is skipped by the search.
* **BIC** ``-2 n · mean log-likelihood + p log n`` with ``p = k d(d+1)/2 + k d + k - 1``; the
  lowest wins, the smallest k on a tie (scikit-learn's strict ``<`` in a loop over k).

What differs is the random draws. scikit-learn draws k-means++'s candidates from numpy's
RandomState; here they are ``torch.rand`` draws of a CPU ``torch.Generator`` seeded with the
fit's ``random_state``, made before any arithmetic, in a fixed shape (classes x component counts
x centres x trials) and moved to the device: the same seed gives the same initial centres on
every device, and a class's draws depend on its class index, not on the other classes. Two
further differences, both only where scikit-learn's own fit is degenerate: a k-means cluster
that empties keeps its centre (scikit-learn moves it to a far point), and nothing warns.

So where k-means finds the same partition from both seedings (separated clusters), the fits are
the same fits up to rounding: same k, same means, weights and covariances (to ~1e-9 relative
here). Where the data have several local optima (overlapping clusters, real features) the two
seedings can end in different optima and the BIC can pick another k; the prototype FedGMKD
uploads does not depend on it: Eq. (5) averaged over the class is Σ_m (Σ_n γ_nm / N) μ_m, which
every M-step makes the class mean, so both backends give the class mean up to the EM tolerance:
on a trained model's CIFAR-10 features ~1e-15 of the largest entry apart (same k there); on a
class that EM overfits (6 components on 30 samples in 3-d) each backend may sit ~1e-3 of the
data's scale from the mean, scikit-learn's as much as ours (``tests/test_mixture.py``).

Layout. A client's classes hold very different numbers of samples (Dirichlet splits), so the
samples are not padded to the largest class: each class's samples, in their original order, are
cut into tiles of ``tile`` rows (the last one padded and masked), and the heavy products run over
(tiles, slots, rows, features), where a *slot* is one component m of one component count k of
the tile's class (k = 1..6 gives 21 slots). Sums over a class's tiles are products with a (class,
tile) 0/1 matrix, which add in a fixed order on a GPU too (same inputs, same bits). Only
k-means++ seeding uses a (class, largest class) padded layout. Fits that have converged are
frozen (``torch.where``), so running more iterations than a fit needs changes nothing, and the
loop stops when every fit has stopped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

REG_COVAR = 1e-6  # scikit-learn's GaussianMixture defaults
TOL = 1e-3
MAX_ITER = 100
KMEANS_MAX_ITER = 300  # scikit-learn's KMeans defaults
KMEANS_TOL = 1e-4
TILE = 32  # rows per tile (16-64 time alike on a client of 300 CIFAR-10 features); see the module docstring
LOG_2PI = math.log(2 * math.pi)
# Small constant tensors are made on the host and copied to the device (``.to(device)``), never
# made there by a factory call: the same code then runs under fedkd_core.devicecheck's stand-in.


def local_trials(k: int) -> int:
    """k-means++'s candidates per centre (scikit-learn: ``2 + int(np.log(n_clusters))``)."""
    return 2 + int(np.log(k))


# --- layout -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Slots:
    """The components of every fit of one class: slot s is component ``m[s]`` of the fit with
    ``ks[g[s]]`` components. ``flat`` places a slot in a (fits, largest k) grid."""

    ks: list[int]  # the component counts fitted, ascending
    k: torch.Tensor  # (S,) components of the slot's fit
    m: torch.Tensor  # (S,) the slot's component within its fit
    g: torch.Tensor  # (S,) index of the slot's fit in ks
    flat: torch.Tensor  # (S,) g * K + m
    onehot: torch.Tensor  # (S, G) float64, slot -> fit

    @classmethod
    def build(cls, ks: list[int], device) -> "Slots":
        pairs = [(k, m, g) for g, k in enumerate(ks) for m in range(k)]
        k, m, g = (torch.tensor(column, dtype=torch.long) for column in zip(*pairs))
        onehot = torch.nn.functional.one_hot(g, len(ks)).double()
        return cls(ks, *(t.to(device) for t in (k, m, g, g * max(ks) + m, onehot)))

    @property
    def fits(self) -> int:
        return len(self.ks)

    @property
    def largest(self) -> int:
        return max(self.ks)

    def grid(self, values: torch.Tensor, fill: float) -> torch.Tensor:
        """(..., S, R) -> (..., G, K, R): each fit's components side by side, ``fill`` past k."""
        out = values.new_full((*values.shape[:-2], self.fits * self.largest, values.shape[-1]), fill)
        out[..., self.flat, :] = values
        return out.view(*values.shape[:-2], self.fits, self.largest, values.shape[-1])

    def grid_last(self, values: torch.Tensor, fill: float) -> torch.Tensor:
        """(..., R, S) -> (..., R, G, K): :meth:`grid` with the slots last."""
        out = values.new_full((*values.shape[:-1], self.fits * self.largest), fill)
        out[..., self.flat] = values
        return out.view(*values.shape[:-1], self.fits, self.largest)

    def per_fit(self, values: torch.Tensor) -> torch.Tensor:
        """(..., S) -> (..., G): the sum over each fit's components."""
        return values @ self.onehot


@dataclass(frozen=True)
class Tiles:
    """The fitted classes' samples cut into tiles of equal rows: ``x`` (Q, T, d), ``valid`` (Q, T)
    float64 (0 on padding), ``owner`` (Q,) the tile's class among the fitted ones."""

    x: torch.Tensor
    valid: torch.Tensor
    owner: torch.Tensor
    classes: int
    owner_matrix: torch.Tensor  # (F, Q) float64, 1 where tile q is class f's

    def class_sum(self, values: torch.Tensor) -> torch.Tensor:
        """(Q, ...) -> (F, ...): sums over each class's tiles, as a product with the owner matrix
        (CUDA's index_add_ adds in an order that varies from run to run; a matmul's is fixed)."""
        return (self.owner_matrix @ values.reshape(values.shape[0], -1)).reshape(self.classes, *values.shape[1:])


def cut_into_tiles(x: torch.Tensor, rows: list[np.ndarray], tile: int) -> Tiles:
    """Tiles of ``tile`` rows (fewer if every class is smaller) of each class's ``rows`` of ``x``."""
    tile = max(1, min(tile, max(len(r) for r in rows)))
    index, valid, owner = [], [], []
    for f, r in enumerate(rows):
        pieces = -(-len(r) // tile)
        padded = np.zeros(pieces * tile, dtype=np.int64)
        padded[:len(r)] = r
        index.append(padded.reshape(pieces, tile))
        valid.append((np.arange(pieces * tile) < len(r)).reshape(pieces, tile))
        owner += [f] * pieces
    device = x.device
    index_t = torch.as_tensor(np.concatenate(index)).to(device)
    owner_matrix = torch.as_tensor(np.arange(len(rows))[:, None] == np.array(owner)[None], dtype=torch.float64)
    return Tiles(x[index_t], torch.as_tensor(np.concatenate(valid), dtype=torch.float64).to(device),
                 torch.as_tensor(owner).to(device), len(rows), owner_matrix.to(device))


# --- k-means initialisation -----------------------------------------------------------------------

def kmeans_plus_plus(padded: torch.Tensor, counts: torch.Tensor, slots: Slots, first: torch.Tensor,
                     trials: torch.Tensor) -> torch.Tensor:
    """k-means++ centres (F, S, d) of every fit from the padded classes ``padded`` (F, N, d) with
    ``counts`` (F,) rows each. ``first`` (F, G) and ``trials`` (F, G, K-1, L) are uniform draws."""
    classes, rows, _ = padded.shape
    G, K = slots.fits, slots.largest
    row_ok = (torch.arange(rows).to(padded.device) < counts[:, None]).double()  # (F, N)
    last = (counts - 1)[:, None, None]
    start = (first * counts[:, None]).long().clamp(max=last[..., 0])  # (F, G)
    take = lambda index: torch.gather(padded[:, None].expand(classes, G, rows, -1), 2,  # noqa: E731
                                      index[..., None].expand(*index.shape, padded.shape[-1]))
    centres = [take(start[..., None])[:, :, 0]]  # (F, G, d) each
    closest = ((padded[:, None] - centres[0][:, :, None]) ** 2).sum(-1) * row_ok[:, None]  # (F, G, N)
    wanted = torch.tensor([local_trials(k) for k in slots.ks])  # (G,)
    for c in range(1, K):
        potential = closest.sum(-1)  # (F, G)
        targets = trials[:, :, c - 1] * potential[..., None]  # (F, G, L)
        candidates = torch.searchsorted(closest.cumsum(-1).contiguous(), targets.contiguous()).clamp(max=last)
        points = take(candidates)  # (F, G, L, d)
        distance = ((padded[:, None, None] - points[:, :, :, None]) ** 2).sum(-1)  # (F, G, L, N)
        candidate_closest = torch.minimum(closest[:, :, None], distance) * row_ok[:, None, None]
        candidate_potential = candidate_closest.sum(-1)  # (F, G, L)
        unused = (torch.arange(trials.shape[-1]) >= wanted[:, None]).to(padded.device)  # (G, L)
        best = candidate_potential.masked_fill(unused, math.inf).argmin(-1)  # (F, G), first of equals
        closest = torch.gather(candidate_closest, 2, best[:, :, None, None].expand(-1, -1, 1, rows))[:, :, 0]
        centres.append(torch.gather(points, 2, best[:, :, None, None].expand(-1, -1, 1, points.shape[-1]))[:, :, 0])
    grid = torch.stack(centres, 2)  # (F, G, K, d)
    return grid[:, slots.g, slots.m]  # (F, S, d)


def nearest_centre(tiles: Tiles, centres: torch.Tensor, slots: Slots) -> torch.Tensor:
    """(Q, G, T) index of each row's nearest centre in each fit of its class (first of equals)."""
    c = centres[tiles.owner]  # (Q, S, d)
    distance = (c * c).sum(-1)[:, None] - 2 * tiles.x @ c.mT  # (Q, T, S), ‖x‖² left out (argmin)
    return slots.grid_last(distance, math.inf).argmin(-1).transpose(1, 2)  # a contiguous argmin


def one_hot_labels(labels: torch.Tensor, tiles: Tiles, slots: Slots) -> torch.Tensor:
    """(Q, G, T) labels -> (Q, S, T) one-hot responsibilities in the slot layout, 0 on padding."""
    return (labels[:, slots.g] == slots.m[:, None]).double() * tiles.valid[:, None]


def kmeans_labels(tiles: Tiles, centres: torch.Tensor, slots: Slots, tolerance: torch.Tensor,
                  check_every: int) -> torch.Tensor:
    """Lloyd's iterations from ``centres`` (F, S, d) for every fit, frozen per fit once converged
    (labels unchanged, or total squared centre shift <= ``tolerance`` (F,)); the labels (Q, G, T)
    of the final centres."""
    active = torch.ones(tiles.classes, slots.fits, dtype=torch.bool).to(centres.device)
    previous = None
    for iteration in range(KMEANS_MAX_ITER):
        labels = nearest_centre(tiles, centres, slots)
        hot = one_hot_labels(labels, tiles, slots)  # (Q, S, T)
        counts = tiles.class_sum(hot.sum(-1))  # (F, S)
        sums = tiles.class_sum(hot @ tiles.x)  # (F, S, d)
        updated = torch.where(counts[..., None] > 0, sums / counts.clamp_min(1)[..., None], centres)
        shift = slots.per_fit(((updated - centres) ** 2).sum(-1))  # (F, G)
        if previous is None:
            strict = torch.zeros_like(active)
        else:
            changed = ((labels != previous).double() * tiles.valid[:, None]).sum(-1)  # (Q, G)
            strict = tiles.class_sum(changed) == 0
        moving = active & ~strict
        centres = torch.where(moving[:, slots.g, None], updated, centres)
        active = moving & ~(shift <= tolerance[:, None])
        previous = labels
        if iteration % check_every == check_every - 1 and not bool(active.any()):
            break
    return nearest_centre(tiles, centres, slots)


# --- EM ---------------------------------------------------------------------------------------------

class Gaussians(NamedTuple):
    """Every slot's component: log weight (F, S), mean (F, S, d), precision Cholesky factor
    (F, S, d, d) and its log determinant (F, S); ``failed`` (F, G): a covariance without a factor."""

    log_weight: torch.Tensor
    mean: torch.Tensor
    precision_chol: torch.Tensor
    log_det: torch.Tensor
    failed: torch.Tensor


def m_step(tiles: Tiles, resp: torch.Tensor, counts: torch.Tensor, slots: Slots) -> Gaussians:
    """scikit-learn's M-step from responsibilities ``resp`` (Q, S, T) (0 on padding)."""
    eps = torch.finfo(torch.float64).eps
    nk = tiles.class_sum(resp.sum(-1)) + 10 * eps  # (F, S)
    mean = tiles.class_sum(resp @ tiles.x) / nk[..., None]  # (F, S, d)
    diff = tiles.x[:, None] - mean[tiles.owner][:, :, None]  # (Q, S, T, d)
    scatter = tiles.class_sum((resp[..., None] * diff).mT @ diff)  # (F, S, d, d)
    d = tiles.x.shape[-1]
    eye = torch.eye(d, dtype=torch.float64).to(tiles.x.device)
    covariance = scatter / nk[..., None, None] + REG_COVAR * eye
    chol, info = torch.linalg.cholesky_ex(covariance)
    precision_chol = torch.linalg.solve_triangular(chol, eye.expand_as(chol), upper=False).mT
    log_det = torch.log(torch.diagonal(precision_chol, dim1=-2, dim2=-1)).sum(-1)
    weight = nk / slots.per_fit(nk)[:, slots.g]
    failed = slots.per_fit((info != 0).double()) > 0
    return Gaussians(torch.log(weight), mean, precision_chol, log_det, failed)


def e_step(tiles: Tiles, gaussians: Gaussians, slots: Slots) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(x) per fit (Q, G, T) and the log responsibilities (Q, S, T)."""
    L = gaussians.precision_chol[tiles.owner]  # (Q, S, d, d)
    y = tiles.x[:, None] @ L - gaussians.mean[tiles.owner][:, :, None] @ L  # (Q, S, T, d)
    d = tiles.x.shape[-1]
    log_prob = (-0.5 * (d * LOG_2PI + (y * y).sum(-1))
                + (gaussians.log_det + gaussians.log_weight)[tiles.owner][..., None])  # (Q, S, T)
    norm = torch.logsumexp(slots.grid(log_prob, -math.inf), dim=2)  # (Q, G, T)
    return norm, log_prob - norm[:, slots.g]


def mean_log_likelihood(tiles: Tiles, norm: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """(F, G) the mean over each class's samples of log p(x) (scikit-learn's lower bound / score)."""
    return tiles.class_sum((norm * tiles.valid[:, None]).sum(-1)) / counts[:, None]


def keep(active: torch.Tensor, new: Gaussians, old: Gaussians, slots: Slots) -> Gaussians:
    """``new`` where the fit is still ``active`` (F, G), ``old`` elsewhere."""
    per_slot = active[:, slots.g]
    out = [torch.where(per_slot.view(*per_slot.shape, *[1] * (n.dim() - 2)), n, o)
           for n, o in zip(new[:4], old[:4])]
    return Gaussians(*out, old.failed | (active & new.failed))


class Mixtures(NamedTuple):
    """The BIC-best mixture of every fitted class (F rows, in the order of ``classes``)."""

    classes: list[int]  # the fitted classes' labels
    components: torch.Tensor  # (F,) k of the lowest BIC, 0 where no fit succeeded
    weights: torch.Tensor  # (F, K) π, zero past k
    means: torch.Tensor  # (F, K, d) μ, zero past k
    responsibility_mean: torch.Tensor  # (F, K) the mean over the class of γ (Eq. 4), zero past k
    bic: torch.Tensor  # (F, G) every fit's BIC (inf: dropped or not fitted)
    ks: list[int]  # the component counts of bic's columns


def fit_class_mixtures(x: torch.Tensor, labels: torch.Tensor, num_classes: int, *, min_components: int = 1,
                       max_components: int = 6, random_state: int = 0, tile: int = TILE,
                       check_every: int = 1) -> Mixtures:
    """The BIC-best full-covariance mixture of every class with two samples or more, fitted by
    batched EM in float64 on ``x``'s device. ``check_every``: how many iterations between the
    checks whether every fit has stopped (each check waits for a GPU; frozen fits make the
    result independent of it)."""
    x = x.detach().double()
    device = x.device
    y = labels.detach().cpu().numpy()
    rows_of = [np.flatnonzero(y == j) for j in range(num_classes)]
    classes = [j for j in range(num_classes) if len(rows_of[j]) >= max(2, min_components)]
    K_all = list(range(min_components, max_components + 1))
    if not classes:
        empty = torch.zeros(0, dtype=torch.long)
        return Mixtures([], empty, x.new_zeros(0, 0), x.new_zeros(0, 0, x.shape[1]), x.new_zeros(0, 0),
                        x.new_zeros(0, len(K_all)), K_all)
    counts_np = np.array([len(rows_of[j]) for j in classes])
    ks = [k for k in K_all if k <= counts_np.max()]
    slots = Slots.build(ks, device)
    counts = torch.as_tensor(counts_np, dtype=torch.float64).to(device)
    fit_ok = torch.as_tensor(np.array([[k <= n for k in ks] for n in counts_np])).to(device)  # (F, G)

    # The draws: one fixed-shape block from the seed, indexed by class label and component count.
    generator = torch.Generator().manual_seed(int(random_state))
    trial_slots = local_trials(max_components)
    first_all = torch.rand((num_classes, len(K_all)), generator=generator, dtype=torch.float64)
    trials_all = torch.rand((num_classes, len(K_all), max(max_components - 1, 1), trial_slots),
                            generator=generator, dtype=torch.float64)
    pick = torch.as_tensor(classes)
    first = first_all[pick][:, :len(ks)].to(device)
    trials = trials_all[pick][:, :len(ks), :max(slots.largest - 1, 1)].to(device)

    tiles = cut_into_tiles(x, [rows_of[j] for j in classes], tile)
    largest = int(counts_np.max())
    index = np.zeros((len(classes), largest), dtype=np.int64)
    for f, j in enumerate(classes):
        index[f, :len(rows_of[j])] = rows_of[j]
    row_ok = torch.as_tensor(np.arange(largest) < counts_np[:, None], dtype=torch.float64).to(device)[..., None]
    padded = x[torch.as_tensor(index).to(device)] * row_ok  # (F, N, d), zero rows past each class
    class_mean = padded.sum(1) / counts[:, None]
    variance = (((padded - class_mean[:, None]) ** 2 * row_ok).sum(1) / counts[:, None]).mean(1)  # np.var's

    centres = kmeans_plus_plus(padded, counts.long(), slots, first, trials)
    labels_k = kmeans_labels(tiles, centres, slots, KMEANS_TOL * variance, check_every)
    gaussians = m_step(tiles, one_hot_labels(labels_k, tiles, slots), counts, slots)

    active = fit_ok & ~gaussians.failed
    lower = torch.full_like(counts[:, None].expand(-1, len(ks)), -math.inf).clone()
    for iteration in range(MAX_ITER):
        norm, log_resp = e_step(tiles, gaussians, slots)
        bound = mean_log_likelihood(tiles, norm, counts)
        new = m_step(tiles, log_resp.exp() * tiles.valid[:, None], counts, slots)
        gaussians = keep(active, new, gaussians, slots)
        converged = (bound - lower).abs() < TOL
        lower = torch.where(active, bound, lower)
        active = active & ~converged & ~new.failed
        if iteration % check_every == check_every - 1 and not bool(active.any()):
            break

    norm, log_resp = e_step(tiles, gaussians, slots)
    score = mean_log_likelihood(tiles, norm, counts)
    d = x.shape[1]
    k_t = torch.tensor(ks, dtype=torch.float64).to(device)
    parameters = k_t * d * (d + 1) / 2 + k_t * d + k_t - 1
    bic = -2 * score * counts[:, None] + parameters * torch.log(counts)[:, None]
    bic = torch.where(fit_ok & ~gaussians.failed & torch.isfinite(bic), bic, math.inf)
    best = bic.argmin(1)  # (F,), the first of equals: the smallest k
    found = torch.isfinite(bic.gather(1, best[:, None]))[:, 0]

    responsibility = tiles.class_sum((log_resp.exp() * tiles.valid[:, None]).sum(-1)) / counts[:, None]  # (F, S)
    chosen = (slots.g[None] == best[:, None]) & found[:, None]  # (F, S)
    K = slots.largest
    weights = x.new_zeros(len(classes), K)
    means = x.new_zeros(len(classes), K, d)
    gamma = x.new_zeros(len(classes), K)
    f_index, s_index = torch.nonzero(chosen, as_tuple=True)
    m_index = slots.m[s_index]
    weights[f_index, m_index] = gaussians.log_weight[f_index, s_index].exp()
    means[f_index, m_index] = gaussians.mean[f_index, s_index]
    gamma[f_index, m_index] = responsibility[f_index, s_index]
    components = torch.where(found, torch.as_tensor(ks).to(device)[best], 0)
    bic_all = x.new_full((len(classes), len(K_all)), math.inf)
    bic_all[:, :len(ks)] = bic
    return Mixtures(classes, components.cpu(), weights, means, gamma, bic_all, K_all)


# --- FedGMKD's prototypes -------------------------------------------------------------------------

def standardise(x: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Each class's features standardised as scikit-learn's ``StandardScaler`` does (population
    variance; a constant feature is divided by 1)."""
    x = x.double()
    one_hot = torch.nn.functional.one_hot(labels, num_classes).double()  # (N, C)
    n = one_hot.sum(0).clamp_min(1)[:, None]
    mean = (one_hot.T @ x) / n  # (C, d)
    diff = x - mean[labels]
    var = (one_hot.T @ diff ** 2) / n
    eps = torch.finfo(torch.float64).eps
    constant = var <= n * eps * var + (n * mean * eps) ** 2
    return diff / torch.where(constant, 1.0, var.sqrt())[labels]


def class_mixture_prototypes(features: torch.Tensor, labels: torch.Tensor, num_classes: int, prototype: str,
                             *, min_components: int = 1, max_components: int = 6, random_state: int = 0,
                             tile: int = TILE, check_every: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(C, d) float64 prototypes on ``features``' device and (C,) int64 component counts (CPU) of
    FedGMKD's "gmm" rule (Eq. 5 of the BIC-best mixture averaged over the class: Σ_m γ̄_m μ_m) or
    "code" rule (Σ_m π_m μ_m on per-class standardised features), as ``fedgmkd.gmm_prototype`` /
    ``code_prototype`` compute them with scikit-learn: a single sample is its own prototype (0
    under "code"), an absent class is 0, and a class whose every fit failed gets its mean."""
    if prototype not in ("gmm", "code"):
        raise ValueError(f"prototype must be 'gmm' or 'code' for a mixture fit (got {prototype!r})")
    x = features.detach().double()
    labels = labels.detach().to(x.device)
    if prototype == "code":
        x = standardise(x, labels, num_classes)
    counts = torch.bincount(labels, minlength=num_classes)[:num_classes].cpu()
    one_hot = torch.nn.functional.one_hot(labels, num_classes).double()
    prototypes = (one_hot.T @ x) / counts.clamp_min(1).to(x.device, torch.float64)[:, None]  # means; x itself if n = 1
    components = torch.zeros(num_classes, dtype=torch.long)
    mixtures = fit_class_mixtures(x, labels, num_classes, min_components=min_components,
                                  max_components=max_components, random_state=random_state, tile=tile,
                                  check_every=check_every)
    if mixtures.classes:
        mix = mixtures.responsibility_mean if prototype == "gmm" else mixtures.weights
        fitted = (mix[..., None] * mixtures.means).sum(1)  # (F, d)
        found = mixtures.components > 0
        rows = torch.as_tensor(mixtures.classes)[found]
        prototypes[rows.to(x.device)] = fitted[found.to(x.device)]
        components[rows] = mixtures.components[found]
    return prototypes, components
