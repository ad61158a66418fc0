"""FedMD as the KnFu paper describes it (Li and Wang, 2019; KnFu Sec. II, Eq. 2).

Same round as KnFu, but the fusion centre sends every client the plain average of all
clients' soft labels (the "collaborative knowledge"). The original FedMD averages logits and
digests with an L1 loss before revisiting private data; this chapter follows KnFu's description,
which is what KnFu's tables compare against.
"""

from __future__ import annotations

import torch

from .transfer_kd import Fusion, TransferDistillation, TransferKDConfig


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
