"""FPL, Federated Prototypes Learning (Huang et al., "Rethinking federated learning with domain
shift: a prototype view", CVPR 2023), from its official code [FPL] (WenkeHuang/RethinkFL
``models/fpl.py``, ``utils/finch.py``, ``main.py``).

Round: every selected client starts from the global model and trains with

    L = CE(C(F(x)), y) + w · (1/B) Σ_{i: y_i has prototypes} [ L_InfoNCE(f_i) + MSE(f_i, mean_c P_{y_i}) ],

    L_InfoNCE(f) = −log( Σ_{p ∈ P_y} exp(cos(f, p)/τ) / Σ_{p ∈ P} exp(cos(f, p)/τ) ),

where P_y are the *cluster prototypes* of class y, P all classes' cluster prototypes, mean_c P_y
the plain mean of y's cluster prototypes and MSE the mean over feature dimensions
(``hierarchical_info_loss``, ``calculate_infonce``; the per-sample sum is divided by the batch
size, samples whose class has no prototype add 0). Round 1 (no prototypes) is CE alone. The trained
copy is the client's personal model. The client uploads its model and class-mean features (as
FedProto); the server clusters, per class, the clients' prototypes with FINCH (cosine distance,
``ensure_early_exit=False``) and keeps the mean of each cluster of the *last* partition
(``c[:, -1]``); a class held by one client keeps that client's prototype. Models are averaged by
data size (``federated_model.aggregate_nets``, ``--averaing weight``).

FINCH: the ``finch-clust`` package (the FINCH authors' PyPI release). On 400 random prototype
sets (2-59 points, 32-d) its last partition equals RethinkFL's copy of FINCH with the same
arguments; the two differ only in their early-exit test (``exit_clust <= 1`` vs ``< 1``), which
cannot decide anything without ``min_sim`` because every first-neighbour component holds at least
two clusters.

Settings and their sources:

* ``weight`` = 0.1: FedGMKD's λ_FPL [P §4.4]; the official loss adds the term with weight 1.
* ``temperature`` = 0.02: ``--infoNCET`` in [FPL] ``main.py`` at ``edac25f`` and at HEAD (0.1 in
  the first commit ``a52a765``).
* ``aggregation`` = "size": ``--averaing weight`` (data-size weights).
* FedGMKD's "number of prototypes per class fixed at 10" [P §4.4] has no counterpart: FINCH is
  parameter-free and picks the number of clusters; with n clients a class has at most n cluster
  prototypes (``round_metrics`` reports how many there were).

Deviations: the local prototypes are eval-mode class means after training (see
:mod:`fedproto`; [FPL] averages the train-mode features of the last local epoch), and the
similarities are computed in float32 even under bf16 autocast (cos/τ with τ = 0.02 spans ±50).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from .shapes.base import Message
from .fedproto import FedProto
from .shapes.from_global import AGGREGATION_WEIGHTS, UNTRAINED_CLIENT_MODEL, check_choice

# finch is imported where FPL's server clusters, not with the package: it imports scikit-learn,
# a third of `import fedkd_core.algorithms` (2.5 s of ~8 on a 2-core Xeon), which every process
# pays (each chapter's kernel, sweep worker, Flower and Ray worker), most of which never run FPL.


@dataclass(frozen=True)
class FPLConfig:
    weight: float = 0.1  # λ_FPL [P §4.4]; [FPL] adds the term with weight 1
    temperature: float = 0.02  # τ, [FPL] main.py --infoNCET
    aggregation: str = "size"  # [FPL] --averaing weight
    untrained_client: str = "global"

    def __post_init__(self) -> None:
        if not self.weight >= 0:
            raise ValueError(f"weight must be >= 0 (got {self.weight})")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (got {self.temperature})")
        check_choice(self.aggregation, AGGREGATION_WEIGHTS, "aggregation")
        check_choice(self.untrained_client, UNTRAINED_CLIENT_MODEL, "untrained_client")


# --- server: FINCH cluster prototypes ----------------------------------------------------------------

def finch_last_partition(points: np.ndarray) -> np.ndarray:
    """FINCH cluster labels of ``points`` (n, d) at the last (coarsest kept) partition, cosine
    distance, as [FPL] ``proto_aggregation`` calls it."""
    with warnings.catch_warnings():  # finch warns at import when the optional pynndescent is missing
        warnings.simplefilter("ignore")
        from finch import FINCH

    partitions, _, _ = FINCH(np.asarray(points, dtype=np.float32), distance="cosine", ensure_early_exit=False,
                             verbose=False)
    return partitions[:, -1]


def cluster_prototypes(prototypes: torch.Tensor) -> torch.Tensor:
    """One class's client prototypes (n, d) -> its cluster prototypes (m, d): the mean of each
    FINCH cluster; a single prototype is kept as it is."""
    if len(prototypes) == 1:
        return prototypes.clone()
    labels = torch.as_tensor(finch_last_partition(prototypes.numpy()), dtype=torch.long)
    return torch.stack([prototypes[labels == cluster].mean(0) for cluster in torch.unique(labels)])


def fpl_server_prototypes(prototypes: torch.Tensor, held: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(K, C, d) client prototypes and (K, C) who holds what -> all classes' cluster prototypes
    (P, d) and the class of each (P,) int64, classes in order."""
    rows, classes = [], []
    for c in range(held.shape[1]):
        if bool(held[:, c].any()):
            clusters = cluster_prototypes(prototypes[held[:, c], c])
            rows.append(clusters)
            classes.append(torch.full((len(clusters),), c, dtype=torch.long))
    if not rows:
        return torch.zeros(0, prototypes.shape[2]), torch.zeros(0, dtype=torch.long)
    return torch.cat(rows), torch.cat(classes)


# --- client: the loss ---------------------------------------------------------------------------------

def class_mean_prototypes(prototypes: torch.Tensor, classes: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Per class the plain mean of its cluster prototypes (C, d) ([FPL] ``mean_f``); zero rows
    for classes without prototypes."""
    counts = torch.bincount(classes, minlength=num_classes).clamp_min(1).unsqueeze(1).to(prototypes.dtype)
    sums = torch.zeros(num_classes, prototypes.shape[1], dtype=prototypes.dtype, device=prototypes.device)
    return sums.index_add_(0, classes, prototypes) / counts


def fpl_alignment(features: torch.Tensor, labels: torch.Tensor, prototypes: torch.Tensor, classes: torch.Tensor,
                  class_means: torch.Tensor, temperature: float) -> torch.Tensor:
    """(1/B) Σ over samples whose class has prototypes of InfoNCE(f, P_y vs P) + MSE(f, mean P_y),
    in float32 ([FPL] ``hierarchical_info_loss`` summed over the batch, divided by its size).
    ``class_means`` (C, d) is :func:`class_mean_prototypes` of ``prototypes``. No host sync: a
    sample without prototypes gets its whole row as "positives" (InfoNCE 0) and is masked out."""
    with torch.autocast(features.device.type, enabled=False):
        f = features.float()
        positive = labels.unsqueeze(1) == classes.unsqueeze(0)  # (B, P)
        kept = positive.any(1)
        positive = positive | ~kept.unsqueeze(1)
        logits = F.normalize(f, dim=1) @ F.normalize(prototypes.float(), dim=1).T / temperature
        info_nce = logits.logsumexp(1) - logits.masked_fill(~positive, float("-inf")).logsumexp(1)
        mse = ((f - class_means.float()[labels]) ** 2).mean(1)
        return ((info_nce + mse) * kept.float()).sum() / len(labels)


class FPL(FedProto):
    """FedProto's round with FINCH cluster prototypes on the server and FPL's loss on the client."""

    Config = FPLConfig

    def aggregate_prototypes(self, prototypes: torch.Tensor, held: torch.Tensor) -> Message:
        cluster_rows, classes = fpl_server_prototypes(prototypes, held)
        return {"clusters": cluster_rows, "classes": classes} if len(classes) else {}

    def knowledge_loss(self, knowledge: Message):
        prototypes, classes = knowledge["clusters"], knowledge["classes"]
        means = class_mean_prototypes(prototypes, classes, self.ctx.data.num_classes)
        weight, temperature = self.config.weight, self.config.temperature

        def loss_fn(model, batch):
            features = model.features(batch.x)
            return (F.cross_entropy(model.head(features).float(), batch.y)
                    + weight * fpl_alignment(features, batch.y, prototypes, classes, means, temperature))

        return loss_fn

    def round_metrics(self) -> dict:
        """How many cluster prototypes the server made (FedGMKD's FPL: "10 per class")."""
        if not self.knowledge:
            return {}
        return {"fpl_prototypes": int(len(self.knowledge["classes"]))}
