"""Parameter averaging, the server step of FedAvg and its relatives."""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

StateDict = Mapping[str, torch.Tensor]


def weighted_average(states: Sequence[StateDict], weights: Sequence[float]) -> dict[str, torch.Tensor]:
    """sum_k w_k * state_k / sum_k w_k, key by key.

    Floating tensors are averaged; integer buffers (BatchNorm's ``num_batches_tracked``) are
    taken from the first state, since an average of counters has no meaning.
    """
    if not states:
        raise ValueError("states must hold at least one state dict")
    if len(states) != len(weights):
        raise ValueError(f"weights must have one entry per state ({len(weights)} for {len(states)})")
    w = torch.as_tensor(weights, dtype=torch.float64)
    if (w < 0).any() or w.sum() <= 0:
        raise ValueError("weights must be >= 0 with a positive sum")
    w = w / w.sum()
    averaged = {}
    for key, first in states[0].items():
        if first.is_floating_point():
            stacked = torch.stack([s[key].double() for s in states])
            averaged[key] = (w.to(stacked.device).view(-1, *[1] * first.dim()) * stacked).sum(0).to(first.dtype)
        else:
            averaged[key] = first.clone()
    return averaged
