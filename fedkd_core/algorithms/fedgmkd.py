"""FedGMKD (Zhang, Shan, Han, NeurIPS 2024): cluster knowledge fusion + discrepancy-aware aggregation.

Each round a selected client starts from the global model W^{r-1} and trains it with Eq. (13),

    L = CE(C(F(x)), y) + λ · ‖F(x) − H_y‖² + γ · (1/J) Σ_j ‖softmax(C(H_j)/T) − Q_j‖²,

(round 1, before any global knowledge exists: CE alone). The trained model is the client's personal
model (local accuracy, as the released code measures it). The client then computes its *cluster
knowledge* (CKF, Eqs. 3-7) on its training data: per class j a prototype feature ĥ_i^j from a
Gaussian mixture (Eq. 5) and a soft prediction q̂_i^j, the class mean of softmax(C(F(x))/T), and
uploads model, prototypes, soft predictions and class counts. The server aggregates the knowledge
per class with the discrepancy-aware weights of Eqs. (9)-(11),

    w_init = N_i^j / Σ_i N_i^j,   d_i^j = KL(q̂_i^j ‖ Q̂_j),   w_i = ReLU(w_init − a·d + b) / Σ ReLU(·),

into G = {(H_j, Q_j)} (Eq. 12), which the clients download from round 2 on, and averages the models.

The paper and its released code (SereinZY/FedGMKD) differ in many places (notes:
shared/specs/fedgmkd.md); ``variant`` picks a coherent preset and each difference is a field:

* ``prototype``: "gmm" is Eq. (5) on the raw features, averaged over the class's samples, with
  1..max_components components chosen by BIC. Averaged this way it *is* the class mean (at an EM
  fixed point Σ_n γ_nm = N π_m, and Σ_m π_m μ_m = mean(h) exactly after every M-step), so it equals
  "mean" (FedHKD's hyper-knowledge) up to the EM tolerance. "code" standardises each class's
  features and uploads Σ_m π_m μ_m in standardised space, which is numerically the zero vector.
* ``dat_reference``: the Q̂_j that d is measured against: "preliminary" (Appendix A.2: the
  w_init-weighted mean of this round's q̂), "previous" (Algorithm 1: last round's Q_j), "code"
  (KL(softmax(H_j^prev) ‖ softmax(ĥ_i^j)) / dim on prototype *features*, weights normalised
  over all selected clients, so classes not held by everyone are sub-normalised).
* ``dat_init``: w_init as the client's share of class j (Eq. 9) or its raw total sample count (code).
* ``model_weights``: "size" (FedAvg's |D_i|) or the code's ReLU(n_i − 0.2·‖p_i − 1/C‖₂ + 0.2).
* ``loss_form``: "paper" (Eq. 13, squared L2 norms summed over dimensions) or "code"
  (MSELoss and KLDivLoss, both means over all elements, KL(Q_j ‖ softmax(C(H_j)/T))). In both forms
  ``lam`` weights the feature term and ``gamma`` the prediction term, as in the paper's text (the
  code's ``lam``/``gamma`` are the other way round; both are 0.06 by default).
* ``max_grad_norm``: the code clips the gradient norm to 1.1 in the rounds with knowledge.
* ``mixture_backend`` (not a reading of the paper: where the "gmm"/"code" mixtures are fitted):
  "sklearn", one scikit-learn fit per class and component count on the host CPU (every committed
  record), or "torch", all of a client's fits as one batched EM on the run's device
  (:mod:`fedkd_core.mixture`: scikit-learn's algorithm, k-means++ seeded from a torch generator).
  The uploaded prototypes agree to ~1e-15 of the largest entry on trained features (both are the
  class mean, fact 5), but the fits are not bit-identical, so the backend is part of a record's key.

Not reproduced from the released code (its bugs): per-class weight lists that are never reset (every
class used class 0's numerator), and weights attached to the wrong clients by mixing client ids
with list positions.

Where the code's first round differs from ours: it computes the clients' knowledge *before* local
training, so its round 0 knowledge comes from the random initial model and is only used as the
reference of the next round's discrepancies. Here knowledge is computed after training (Algorithm 1),
and a class with no previous reference is compared, in the "code" rule, with the plain mean over
the selected clients of this round's prototypes (the code's round-0 rule); in the "previous" rule,
with the preliminary aggregate.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, NamedTuple

import numpy as np
import torch
from torch.nn import functional as F

from ..aggregate import weighted_average
from ..host_threads import on_one_host_thread
from ..training import cross_entropy_loss, predict_features, train
from .shapes.base import Algorithm, Message, parameters_message
from .shapes.from_global import UNTRAINED_CLIENT_MODEL, FromGlobal, check_choice, frozen_copy

if TYPE_CHECKING:
    from sklearn.mixture import GaussianMixture

# scikit-learn is imported where a mixture is fitted, not with the package: it takes a third of
# `import fedkd_core.algorithms` (2.5 s of ~8 on a 2-core Xeon), which every process pays (each
# chapter's kernel, sweep worker, Flower and Ray worker), most of which never fit a mixture.

# --- configuration ------------------------------------------------------------------------------

# What ``variant`` sets for every field left at None. "paper": the paper's equations; "code": the
# released code's choices (shared/specs/fedgmkd.md §2), without its indexing bugs.
PRESETS = {
    "paper": dict(prototype="gmm", dat_a=0.2, dat_reference="preliminary", dat_init="class_share",
                  model_weights="size", loss_form="paper", max_grad_norm=0.0),
    "code": dict(prototype="code", dat_a=0.4, dat_reference="code", dat_init="client_count",
                 model_weights="code", loss_form="code", max_grad_norm=1.1),
}


@dataclass(frozen=True)
class FedGMKDConfig:
    """FedGMKD's parameters (paper names). Fields left at None take ``variant``'s value
    (:data:`PRESETS`), so ``FedGMKDConfig(variant="code", prototype="mean")`` is the code with
    FedHKD's mean prototypes. ``max_grad_norm`` 0 means no clipping."""

    lam: float = 0.06  # λ, feature alignment ‖F(x) − H_y‖² (Eq. 13); Table 5 optimum (§4.4's "0.6" is a typo)
    gamma: float = 0.06  # γ, prediction alignment (Eq. 13)
    temperature: float = 0.6  # T (code option.py)
    variant: str = "paper"
    prototype: str | None = None  # "gmm" | "mean" | "code"
    min_components: int = 1  # BIC range of the per-class GMM (code: 1..6; paper text: 2-7)
    max_components: int = 6
    dat_a: float | None = None  # a of Eq. (10): paper 0.2, code 0.4 (its knowledge weights)
    dat_b: float = 0.2  # b of Eq. (10)
    dat_reference: str | None = None  # "preliminary" | "previous" | "code"
    dat_init: str | None = None  # "class_share" | "client_count"
    model_weights: str | None = None  # "size" | "code"
    loss_form: str | None = None  # "paper" | "code"
    kd_on: str = "probs"  # paper form: softmax(C(H)/T) vs Q ("logits": the literal C(H)/T vs Q/T)
    max_grad_norm: float | None = None  # paper: 0 (off); code: 1.1, in rounds with knowledge
    untrained_client: str = "global"
    # Where the "gmm"/"code" mixtures are fitted: "sklearn" (scikit-learn on the host CPU, one class
    # and component count at a time: every committed record) or "torch" (fedkd_core.mixture: batched
    # EM on the run's device; the same prototypes within the EM tolerance, not bit-identical, so a
    # field: "sklearn" is results.ADDED_FIELDS' old value and keeps the committed records' keys).
    mixture_backend: str = "sklearn"

    def __post_init__(self) -> None:
        check_choice(self.variant, PRESETS, "variant")
        for name, value in PRESETS[self.variant].items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        check_choice(self.prototype, PROTOTYPES, "prototype")
        check_choice(self.dat_reference, DAT_REFERENCES, "dat_reference")
        check_choice(self.dat_init, DAT_INITS, "dat_init")
        check_choice(self.model_weights, MODEL_WEIGHTS, "model_weights")
        check_choice(self.loss_form, LOSS_FORMS, "loss_form")
        check_choice(self.kd_on, KD_INPUTS, "kd_on")
        check_choice(self.untrained_client, UNTRAINED_CLIENT_MODEL, "untrained_client")
        check_choice(self.mixture_backend, MIXTURE_BACKENDS, "mixture_backend")
        for name in ("lam", "gamma", "dat_a", "dat_b", "max_grad_norm"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0 (got {getattr(self, name)})")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (got {self.temperature})")
        if not (isinstance(self.min_components, int) and self.min_components >= 1):
            raise ValueError(f"min_components must be an integer >= 1 (got {self.min_components!r})")
        if not (isinstance(self.max_components, int) and self.max_components >= self.min_components):
            raise ValueError(f"max_components must be an integer >= min_components={self.min_components} "
                             f"(got {self.max_components!r})")


# --- cluster knowledge fusion (client side, Eqs. 3-7) ---------------------------------------------

def best_gmm_by_bic(x: np.ndarray, min_components: int, max_components: int,
                    random_state: int) -> GaussianMixture | None:
    """The full-covariance GMM with the lowest BIC among min..min(N, max) components (the released
    code's search); fits that raise ValueError are skipped; None when none succeeded."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    best, lowest = None, np.inf
    for components in range(min_components, min(len(x), max_components) + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            try:
                gmm = GaussianMixture(components, covariance_type="full", random_state=random_state).fit(x)
            except ValueError:
                continue
        bic = gmm.bic(x)
        if bic < lowest:
            best, lowest = gmm, bic
    return best


def eq5_prototype(x: np.ndarray, gmm: GaussianMixture) -> np.ndarray:
    """Eq. (5), ĥ = Σ_m γ_m(h) μ_m with the responsibilities γ of Eq. (4), averaged over the
    class's samples h (equal to mean(x) up to the EM tolerance)."""
    return (gmm.predict_proba(x) @ gmm.means_).mean(0)


def gmm_prototype(x: np.ndarray, **fit) -> tuple[np.ndarray, int]:
    """The paper's prototype on raw features: Eq. (5) of the BIC-best GMM; a single sample is its
    own prototype; the class mean if no fit succeeded."""
    if len(x) == 1:
        return x[0], 0
    gmm = best_gmm_by_bic(x, **fit)
    return (x.mean(0), 0) if gmm is None else (eq5_prototype(x, gmm), gmm.n_components)


def mean_prototype(x: np.ndarray, **fit) -> tuple[np.ndarray, int]:
    """FedHKD's hyper-knowledge: the class mean of the features (no mixture is fitted)."""
    return x.mean(0), 0


def code_prototype(x: np.ndarray, **fit) -> tuple[np.ndarray, int]:
    """The released code's prototype (ClientFedGMKD.local_CKF_aggregation): standardise the class's
    features, fit the BIC-best GMM and take Σ_m π_m μ_m, in standardised space. Every M-step makes
    Σ_m π_m μ_m the mean of the data, here 0, so this is the zero vector up to rounding."""
    from sklearn.preprocessing import StandardScaler

    z = StandardScaler().fit_transform(x)
    if len(x) == 1:
        return z[0], 0
    gmm = best_gmm_by_bic(z, **fit)
    return (z.mean(0), 0) if gmm is None else (gmm.weights_ @ gmm.means_, gmm.n_components)


PROTOTYPES: dict[str, Callable[..., tuple[np.ndarray, int]]] = {
    "gmm": gmm_prototype, "mean": mean_prototype, "code": code_prototype}

MIXTURE_BACKENDS = ("sklearn", "torch")


class ClientKnowledge(NamedTuple):
    """A client's CKF K_i (Eq. 7) for every class; rows of absent classes are zero."""

    prototypes: torch.Tensor  # (C, d) float32, ĥ_i^j
    counts: torch.Tensor  # (C,) int64, N_i^j
    soft_predictions: torch.Tensor | None  # (C, C) float32, q̂_i^j (None without logits)
    components: torch.Tensor  # (C,) int64, GMM components chosen by BIC (0: no mixture fitted)


def class_prototypes(features: torch.Tensor, labels: torch.Tensor, num_classes: int,
                     logits: torch.Tensor | None = None, *, temperature: float = 1.0, prototype: str = "gmm",
                     min_components: int = 1, max_components: int = 6, random_state: int = 0,
                     mixture_backend: str = "sklearn") -> ClientKnowledge:
    """Per class j: the prototype ĥ^j of ``prototype``'s rule (Eq. 5 for "gmm") on the features
    (fitted in float64), the count N^j, and the soft prediction q̂^j = mean of softmax(logits/T)
    (Eq. 3 with the code's temperature; the class mean, which Eq. 5 on z reduces to). The mixtures
    are fitted by ``mixture_backend``: "sklearn" on one host thread (:func:`host_class_prototypes`),
    "torch" batched on the features' device (:mod:`fedkd_core.mixture`)."""
    check_choice(prototype, PROTOTYPES, "prototype")
    check_choice(mixture_backend, MIXTURE_BACKENDS, "mixture_backend")
    if mixture_backend == "sklearn" or prototype == "mean":
        return host_class_prototypes(features, labels, num_classes, logits, temperature=temperature,
                                     prototype=prototype, min_components=min_components,
                                     max_components=max_components, random_state=random_state)
    from ..mixture import class_mixture_prototypes

    fitted, components = class_mixture_prototypes(features, labels, num_classes, prototype,
                                                  min_components=min_components, max_components=max_components,
                                                  random_state=random_state)
    y = labels.detach().cpu().numpy()
    counts = np.bincount(y, minlength=num_classes)[:num_classes]
    return ClientKnowledge(fitted.float().cpu(), torch.as_tensor(counts, dtype=torch.int64),
                           soft_predictions(logits, y, counts, num_classes, temperature), components)


@on_one_host_thread
def host_class_prototypes(features: torch.Tensor, labels: torch.Tensor, num_classes: int,
                          logits: torch.Tensor | None = None, *, temperature: float = 1.0, prototype: str = "gmm",
                          min_components: int = 1, max_components: int = 6, random_state: int = 0) -> ClientKnowledge:
    """:func:`class_prototypes` with scikit-learn's fits, one class and component count at a time,
    on one host thread (:mod:`fedkd_core.host_threads`)."""
    check_choice(prototype, PROTOTYPES, "prototype")
    x = features.detach().double().cpu().numpy()
    y = labels.detach().cpu().numpy()
    prototypes = np.zeros((num_classes, x.shape[1]))
    components = np.zeros(num_classes, dtype=np.int64)
    counts = np.bincount(y, minlength=num_classes)[:num_classes]
    for j in np.flatnonzero(counts):
        prototypes[j], components[j] = PROTOTYPES[prototype](
            x[y == j], min_components=min_components, max_components=max_components, random_state=random_state)
    return ClientKnowledge(torch.as_tensor(prototypes, dtype=torch.float32), torch.as_tensor(counts, dtype=torch.int64),
                           soft_predictions(logits, y, counts, num_classes, temperature), torch.as_tensor(components))


def soft_predictions(logits: torch.Tensor | None, y: np.ndarray, counts: np.ndarray, num_classes: int,
                     temperature: float) -> torch.Tensor | None:
    """(C, C) float32 q̂^j, the class means of softmax(logits/T) (None without logits)."""
    soft = None
    if logits is not None:
        probabilities = F.softmax(logits.detach().double().cpu() / temperature, dim=1)
        one_hot = F.one_hot(torch.as_tensor(y, dtype=torch.long), num_classes).double()
        soft = (one_hot.T @ probabilities / torch.as_tensor(counts).clamp_min(1).unsqueeze(1)).float()
    return soft


# --- discrepancy-aware aggregation (server side, Eqs. 8-12) ---------------------------------------

def kl_rows(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """KL(p_i ‖ q_i) = Σ_c p log(p/q) for each row (terms with p = 0 are 0)."""
    p, q = p.double(), q.double()
    return torch.where(p > 0, p * (p.clamp_min(1e-300).log() - q.clamp_min(1e-300).log()), 0.0).sum(-1)


def relu_adjusted_weights(initial: torch.Tensor, discrepancy: torch.Tensor, holders: torch.Tensor, a: float,
                          b: float, over_all_clients: bool = False) -> torch.Tensor:
    """Eq. (10): ReLU(w_init − a·d + b), normalised over the clients holding the class (or, as the
    released code does, over all selected clients, so non-holders dilute the others). Clients
    without the class get 0. If every ReLU of a holder is 0, the weights fall back to w_init."""
    raw = torch.relu(initial.double() - a * discrepancy.double() + b)
    held = torch.where(holders, raw, 0.0)
    if held.sum() <= 0:
        fallback = torch.where(holders, initial.double(), 0.0)
        return fallback / fallback.sum()
    return held / (raw.sum() if over_all_clients else held.sum())


def discrepancy_aware_weights(counts, soft_predictions, reference, a: float = 0.2, b: float = 0.2) -> torch.Tensor:
    """The paper's DAT weights of one class j (Eqs. 9-11): ``counts`` (clients,) N_i^j,
    ``soft_predictions`` (clients, classes) q̂_i^j, ``reference`` (classes,) Q̂_j. Returns (clients,)
    weights summing to 1 over the clients that hold the class (0 for the others)."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    holders = counts > 0
    initial = counts / counts.sum()
    discrepancy = kl_rows(torch.as_tensor(soft_predictions), torch.as_tensor(reference).expand(len(counts), -1))
    return relu_adjusted_weights(initial, torch.where(holders, discrepancy, 0.0), holders, a, b)


class GlobalKnowledge(NamedTuple):
    """The global CKF G (Eq. 12): per class j, H_j and Q_j, and whether any client held j."""

    H: torch.Tensor  # (C, d) float32
    Q: torch.Tensor  # (C, C) float32
    has: torch.Tensor  # (C,) bool
    held_rows: tuple[torch.Tensor, torch.Tensor] | None = None  # (H[has], Q[has]) when gathered once

    KEYS = ("ckf/H", "ckf/Q", "ckf/has")

    def held(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(H_j, Q_j) of the J classes in G. A boolean mask's gather waits for the device, so a
        client gathers them once (:meth:`from_message`), not at every training step."""
        return self.held_rows if self.held_rows is not None else (self.H[self.has], self.Q[self.has])

    def to_message(self) -> Message:
        return dict(zip(self.KEYS, (self.H.float(), self.Q.float(), self.has.bool())))

    @classmethod
    def from_message(cls, message: Message, device: torch.device | None = None) -> "GlobalKnowledge | None":
        if cls.KEYS[0] not in message:
            return None
        knowledge = cls(*(message[key].to(device) for key in cls.KEYS))
        return knowledge._replace(held_rows=knowledge.held())


class ClassUploads(NamedTuple):
    """The selected clients' knowledge of one class j, stacked over clients."""

    counts: torch.Tensor  # (K,) N_i^j
    totals: torch.Tensor  # (K,) n_i, each client's whole sample count
    prototypes: torch.Tensor  # (K, d) ĥ_i^j (zero rows for non-holders)
    soft: torch.Tensor  # (K, C) q̂_i^j

    @property
    def holders(self) -> torch.Tensor:
        return self.counts > 0


# w_init of Eq. (9): the client's share of class j, or (code) its raw total sample count.
DAT_INITS: dict[str, Callable[[ClassUploads], torch.Tensor]] = {
    "class_share": lambda c: c.counts.double() / c.counts.sum(),
    "client_count": lambda c: c.totals.double(),
}


def preliminary_reference(c: ClassUploads, initial: torch.Tensor) -> torch.Tensor:
    """Q̂_j of Appendix A.2: the w_init-weighted mean of this round's soft predictions."""
    w = torch.where(c.holders, initial, 0.0)
    return (w / w.sum()) @ c.soft.double()


def soft_kl_to_preliminary(c: ClassUploads, initial: torch.Tensor, previous: tuple | None) -> torch.Tensor:
    """Eq. (11) against the preliminary aggregate: d_i = KL(q̂_i ‖ Q̂_j)."""
    return kl_rows(c.soft, preliminary_reference(c, initial).expand_as(c.soft))


def soft_kl_to_previous(c: ClassUploads, initial: torch.Tensor, previous: tuple | None) -> torch.Tensor:
    """Eq. (11) against last round's Q_j (Algorithm 1); the preliminary aggregate when there is none."""
    reference = previous[1] if previous is not None else preliminary_reference(c, initial)
    return kl_rows(c.soft, reference.double().expand_as(c.soft))


def feature_kl_to_previous(c: ClassUploads, initial: torch.Tensor, previous: tuple | None) -> torch.Tensor:
    """The released code's discrepancy: F.kl_div(log_softmax(ĥ_i), softmax(H_prev)), i.e.
    KL(softmax(H_prev) ‖ softmax(ĥ_i)) / dim. Without a previous H_j: the plain mean over the
    selected clients of this round's prototypes (the code's round-0 aggregate)."""
    reference = previous[0] if previous is not None else c.prototypes.double().sum(0) / len(c.counts)
    p = F.softmax(reference.double(), dim=-1).expand_as(c.prototypes)
    return kl_rows(p, F.softmax(c.prototypes.double(), dim=-1)) / c.prototypes.shape[1]


@dataclass(frozen=True)
class DatReference:
    discrepancy: Callable[[ClassUploads, torch.Tensor, tuple | None], torch.Tensor]
    over_all_clients: bool  # normalise over all selected clients (code) instead of the holders


DAT_REFERENCES = {
    "preliminary": DatReference(soft_kl_to_preliminary, over_all_clients=False),
    "previous": DatReference(soft_kl_to_previous, over_all_clients=False),
    "code": DatReference(feature_kl_to_previous, over_all_clients=True),
}


def class_weights(c: ClassUploads, previous: tuple | None, config: FedGMKDConfig) -> torch.Tensor:
    """The DAT weights of one class under ``config``'s rules (Eqs. 9-11 or the code's)."""
    initial = DAT_INITS[config.dat_init](c)
    rule = DAT_REFERENCES[config.dat_reference]
    discrepancy = torch.where(c.holders, rule.discrepancy(c, initial, previous), 0.0)
    return relu_adjusted_weights(initial, discrepancy, c.holders, config.dat_a, config.dat_b, rule.over_all_clients)


def aggregate_knowledge(counts: torch.Tensor, prototypes: torch.Tensor, soft: torch.Tensor,
                        previous: GlobalKnowledge | None,
                        config: FedGMKDConfig) -> tuple[GlobalKnowledge, torch.Tensor]:
    """Eq. (12) for every class: H_j = Σ_i w_i^j ĥ_i^j, Q_j = Σ_i w_i^j q̂_i^j over the selected
    clients; classes held by nobody are absent (``has`` False, zero rows). ``counts`` (K, C),
    ``prototypes`` (K, C, d), ``soft`` (K, C, C). Returns G and the weights (C, K)."""
    clients, num_classes = counts.shape
    H = torch.zeros(num_classes, prototypes.shape[2], dtype=torch.float64)
    Q = torch.zeros(num_classes, soft.shape[2], dtype=torch.float64)
    weights = torch.zeros(num_classes, clients, dtype=torch.float64)
    has = counts.sum(0) > 0
    for j in torch.nonzero(has).flatten().tolist():
        c = ClassUploads(counts[:, j], counts.sum(1), prototypes[:, j].double(), soft[:, j].double())
        before = (previous.H[j], previous.Q[j]) if previous is not None and previous.has[j] else None
        weights[j] = class_weights(c, before, config)
        H[j], Q[j] = weights[j] @ c.prototypes, weights[j] @ c.soft
    return GlobalKnowledge(H.float(), Q.float(), has), weights


# --- model weights ------------------------------------------------------------------------------

CODE_MODEL_A = CODE_MODEL_B = 0.2  # the released code's model-weight constants (ServerFedGMKD.py)


def code_model_weights(counts: torch.Tensor) -> torch.Tensor:
    """The released code's model weights: ReLU(n_i − 0.2·‖p_i − 1/C‖₂ + 0.2), p_i the client's class
    histogram (a ≈ size weighting, since n_i is a raw count)."""
    n = counts.sum(1).double()
    p = counts.double() / n.clamp_min(1).unsqueeze(1)
    distance = (p - 1.0 / counts.shape[1]).norm(dim=1)
    return torch.relu(n - CODE_MODEL_A * distance + CODE_MODEL_B)


MODEL_WEIGHTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "size": lambda counts: counts.sum(1).double(),  # FedAvg, Eq. (2)
    "code": code_model_weights,
}


# --- local objective (Eq. 13) -------------------------------------------------------------------

def aligned_targets(features: torch.Tensor, labels: torch.Tensor, knowledge: GlobalKnowledge) -> torch.Tensor:
    """H_y for samples whose class is in G; the (detached) feature itself otherwise (no pull)."""
    has = knowledge.has[labels].unsqueeze(1)
    return torch.where(has, knowledge.H[labels].to(features.dtype), features.detach())


def squared_distance_term(features, labels, knowledge) -> torch.Tensor:
    """Eq. (13)'s feature term: (1/B) Σ ‖F(x) − H_y‖²₂ (summed over the dimensions)."""
    return ((features.float() - aligned_targets(features, labels, knowledge).float()) ** 2).sum(1).mean()


def mse_term(features, labels, knowledge) -> torch.Tensor:
    """The code's MSELoss(F, target): the same, averaged over B·d elements (1/d of Eq. 13's)."""
    return F.mse_loss(features.float(), aligned_targets(features, labels, knowledge).float())


# Eq. (13) compares C(H_j)/T with Q_j/T; read as probabilities ("probs": softmax(C(H_j)/T) vs Q_j,
# the text's "predictions on the global prototypes") or literally ("logits": C(H_j)/T vs Q_j/T).
KD_INPUTS = {
    "probs": lambda logits, q, t: (F.softmax(logits / t, dim=1), q),
    "logits": lambda logits, q, t: (logits / t, q / t),
}


def squared_prediction_term(head, knowledge, temperature, kd_on="probs") -> torch.Tensor:
    """Eq. (13)'s prediction term: (1/J) Σ_j ‖C(H_j)/T − Q_j/T‖²₂ over the classes in G (J of them)."""
    H, Q = knowledge.held()
    logits = head(H).float()
    student, target = KD_INPUTS[kd_on](logits, Q.float(), temperature)
    return ((student - target) ** 2).sum(1).mean()


def kl_mean_term(head, knowledge, temperature, kd_on="probs") -> torch.Tensor:
    """The code's KLDivLoss(log softmax(C(H)/T), Q), reduction "mean" (over all J·C elements):
    Σ_j KL(Q_j ‖ softmax(C(H_j)/T)) / (J·C)."""
    H, Q = knowledge.held()
    log_student = F.log_softmax(head(H).float() / temperature, dim=1)
    return F.kl_div(log_student, Q.float(), reduction="sum") / log_student.numel()


class LossForm(NamedTuple):
    feature_term: Callable
    prediction_term: Callable


LOSS_FORMS = {"paper": LossForm(squared_distance_term, squared_prediction_term),
              "code": LossForm(mse_term, kl_mean_term)}


def fedgmkd_loss(features: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor, head: torch.nn.Module,
                 knowledge: GlobalKnowledge, *, lam: float, gamma: float, temperature: float,
                 loss_form: str = "paper", kd_on: str = "probs") -> torch.Tensor:
    """Eq. (13): CE + λ · feature term + γ · prediction term, in ``loss_form``'s form."""
    form = LOSS_FORMS[loss_form]
    return (F.cross_entropy(logits.float(), labels) + lam * form.feature_term(features, labels, knowledge)
            + gamma * form.prediction_term(head, knowledge, temperature, kd_on))


# --- the algorithm ------------------------------------------------------------------------------

class FedGMKD(FromGlobal):
    """FromGlobal with personal copies (local accuracy = each client's trained copy, as the code
    measures it); the knowledge travels beside the model under the keys ``ckf/...``."""

    Config = FedGMKDConfig
    personalised = True

    def __init__(self, config: FedGMKDConfig, ctx):
        # FromGlobal.__init__ checks an ``aggregation`` field; FedGMKD's is ``model_weights``.
        Algorithm.__init__(self, config, ctx)
        self.model = ctx.new_model()
        self.worker = ctx.new_model()
        self.personal: dict[int, torch.nn.Module] = {}
        self.knowledge: GlobalKnowledge | None = None  # G of the last round (the server's)
        self.knowledge_weights: torch.Tensor | None = None  # (C, K) of the last round, for round_metrics
        self.last_counts: torch.Tensor | None = None

    def download(self, client: int) -> Message:
        """W^{r-1}, and G^{r-1} from round 2 on (Algorithm 1)."""
        message = parameters_message(self.model)
        if self.knowledge is not None and bool(self.knowledge.has.any()):
            message.update(self.knowledge.to_message())
        return message

    def training_loss(self, knowledge: GlobalKnowledge | None):
        """CE alone without knowledge (round 1), else Eq. (13) with the downloaded G."""
        if knowledge is None:
            return cross_entropy_loss
        c = self.config

        def loss_fn(model, batch):
            features = model.features(batch.x)
            return fedgmkd_loss(features, model.head(features), batch.y, model.head, knowledge, lam=c.lam,
                                gamma=c.gamma, temperature=c.temperature, loss_form=c.loss_form, kd_on=c.kd_on)

        return loss_fn

    def client_update(self, client: int, message: Message) -> Message:
        knowledge = GlobalKnowledge.from_message(message, self.ctx.device)
        self.worker.load_state_dict(model_part(message))
        clip = self.config.max_grad_norm if knowledge is not None and self.config.max_grad_norm > 0 else None
        train(self.worker, self.ctx.data.dataset, self.ctx.data.client_train[client], self.ctx.train,
              generator=self.generator(client), loss_fn=self.training_loss(knowledge), max_grad_norm=clip)
        self.personal[client] = frozen_copy(self.worker)
        return {**parameters_message(self.worker), **self.cluster_knowledge(client)}

    def cluster_knowledge(self, client: int) -> Message:
        """CKF of the trained model on the client's training data (Eqs. 3-7), as sent: prototypes and
        soft predictions of the J_i classes it holds, and its class counts."""
        data, c = self.ctx.data, self.config
        indices = data.client_train[client]
        features, logits = predict_features(self.worker, data.dataset, indices)
        labels = data.dataset.y_train[torch.as_tensor(np.asarray(indices))]
        knowledge = class_prototypes(features, labels, data.num_classes, logits, temperature=c.temperature,
                                     prototype=c.prototype, min_components=c.min_components,
                                     max_components=c.max_components,
                                     random_state=int(self.rng(client).integers(2**31 - 1)),
                                     mixture_backend=c.mixture_backend)
        held = knowledge.counts > 0
        return {"ckf/prototypes": knowledge.prototypes[held], "ckf/soft": knowledge.soft_predictions[held],
                "ckf/counts": knowledge.counts}

    def server_update(self, uploads: dict[int, Message]) -> None:
        clients = sorted(uploads)
        counts = torch.stack([uploads[k]["ckf/counts"].cpu() for k in clients])
        prototypes, soft = unpack_class_rows([uploads[k] for k in clients], counts)
        self.knowledge, self.knowledge_weights = aggregate_knowledge(counts, prototypes, soft, self.knowledge,
                                                                     self.config)
        self.last_counts = counts
        weights = MODEL_WEIGHTS[self.config.model_weights](counts)
        self.model.load_state_dict(weighted_average([model_part(uploads[k]) for k in clients], weights.tolist()))

    def round_metrics(self) -> dict:
        """How far DAT moved the knowledge weights from the class shares (see :func:`dat_shift`)."""
        if self.knowledge_weights is None:
            return {}
        return {"dat_shift": dat_shift(self.knowledge_weights, self.last_counts)}


def model_part(message: Message) -> Message:
    """The model's state in a message that also carries knowledge (keys ``ckf/...``)."""
    return {name: t for name, t in message.items() if not name.startswith("ckf/")}


def dat_shift(weights: torch.Tensor, counts: torch.Tensor) -> float:
    """½ Σ_i |w_i^j − N_i^j / Σ_i N_i^j|, the total variation between the knowledge weights (C, K) and
    the class shares of ``counts`` (K, C) (for the code's sub-normalised weights, half the L1
    distance), averaged over the classes held: near 0, DAT changed little."""
    held = counts.sum(0) > 0
    shares = (counts.double() / counts.sum(0).clamp_min(1)).T
    return float(0.5 * (weights - shares).abs().sum(1)[held].mean())


def unpack_class_rows(uploads: list[Message], counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(K, C, d) prototypes and (K, C, C) soft predictions, zero rows where a client lacks a class,
    from the uploads' rows of held classes."""
    clients, num_classes = counts.shape
    dim = uploads[0]["ckf/prototypes"].shape[1]
    prototypes = torch.zeros(clients, num_classes, dim)
    soft = torch.zeros(clients, num_classes, num_classes)
    for i, upload in enumerate(uploads):
        held = counts[i] > 0
        prototypes[i, held] = upload["ckf/prototypes"].float().cpu()
        soft[i, held] = upload["ckf/soft"].float().cpu()
    return prototypes, soft


__all__ = ["FedGMKD", "FedGMKDConfig", "class_prototypes", "discrepancy_aware_weights", "aggregate_knowledge",
           "fedgmkd_loss", "code_model_weights"]
