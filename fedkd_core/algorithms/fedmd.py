"""FedMD as the KnFu paper describes it (Li and Wang, 2019; KnFu Sec. II, Eq. 2).

Same round as KnFu, but the fusion centre sends every client the plain average of all
clients' soft labels (the "collaborative knowledge"). The original FedMD averages logits and
digests with an L1 loss before revisiting private data: :class:`FedMDOriginal` (``fedmd_original``)
runs that form; ``fedmd`` follows KnFu's description, which is what KnFu's tables compare against.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .shapes.transfer_kd import Fusion, TransferDistillation, TransferKDConfig


def average_knowledge(soft_labels: torch.Tensor) -> torch.Tensor:
    """(N, K_t, C) soft labels -> their mean over clients, (K_t, C)."""
    if soft_labels.dim() != 3:
        raise ValueError(f"soft_labels must have shape (clients, samples, classes) (got {tuple(soft_labels.shape)})")
    return soft_labels.mean(dim=0)


class FedMD(TransferDistillation):
    Config = TransferKDConfig

    def fuse(self, soft_labels, masks):
        clients = sorted(soft_labels)
        average = average_knowledge(torch.stack([soft_labels[k] for k in clients]))
        return {k: Fusion(average) for k in clients}


@dataclass(frozen=True)
class FedMDOriginalConfig(TransferKDConfig):
    """FedMD as its authors run it (official code ``diogenes0319/FedMD_clean``, ``FedMD.py`` and
    ``conf/*.json``): each client keeps its optimisers across rounds (a compiled Keras model keeps
    its Adam), the digest matches the averaged logits with an L1 loss and no labels, and a revisit
    of ``revisit_epochs`` on the client's own data follows (``N_private_training_round``: 4 in
    the released CIFAR and EMNIST configurations); clients are scored after it. ``lam`` is unused.
    Differences kept from the chapter's round, stated: the chapter's local update (E epochs)
    still precedes each upload, one optimiser serves all of a client's phases (the code has one
    per compiled model), and batches are the chapter's (the code digests in batches of 256)."""

    optimizer_state: str = "kept"
    revisit_epochs: int = 4


def l1_to_logits(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference between a batch's logits and the consensus logits (Keras's
    ``mean_absolute_error``: the mean over classes and samples)."""
    return (logits.float() - targets.float()).abs().mean()


class FedMDOriginal(FedMD):
    """The consensus is the average of the clients' *logits* on the transfer set (the "class
    scores" of FedMD's Algorithm 1), digested with L1 and no cross-entropy, then revisited."""

    Config = FedMDOriginalConfig

    def knowledge(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.float()  # uploaded under the round's "soft_labels" key: here they are logits

    def digest_loss(self, logits, labels, targets, kept):
        return l1_to_logits(logits, targets)
