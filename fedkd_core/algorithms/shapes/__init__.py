"""The round shapes: templates a method builds on, not methods (none is run by name).

- :class:`Algorithm` (``base``): what every method is, the steps a round calls and the messages
  between them; a method with a round of its own subclasses it directly (Local, FedAvg, pFedMe,
  FedFomo).
- :class:`FromGlobal` (``from_global``): start from the global model, train with the method's loss,
  average the uploads (FedProx, pFedSD, FedCKD, MOON, FedProto, FedGen, FjORD, FedGMKD, ...).
- :class:`PartialSharing` (``partial``): share a part of the model, keep the rest (FedPer,
  LG-FedAvg).
- :class:`TransferDistillation` (``transfer_kd``, with its phases' ``schedule``): keep every
  client's model, exchange soft labels over a shared transfer set (KnFu, FedMD, Selective-FD).

The methods, by name, are ``fedkd_core.algorithms.ALGORITHMS``; :func:`shape_of` says which shape
a method's round is.
"""

from __future__ import annotations

from .base import Algorithm, Context
from .from_global import FromGlobal
from .partial import PartialSharing
from .transfer_kd import TransferDistillation

SHAPES: dict[str, type[Algorithm]] = {
    "algorithm": Algorithm,
    "from_global": FromGlobal,
    "partial_sharing": PartialSharing,
    "transfer_distillation": TransferDistillation,
}


def shape_of(method: type) -> str:
    """The name in :data:`SHAPES` of the most specific shape ``method`` builds on."""
    for cls in method.__mro__:
        for name, shape in SHAPES.items():
            if cls is shape:
                return name
    raise ValueError(f"{method.__qualname__} builds on no round shape: subclass fedkd_core.algorithms.Algorithm")


__all__ = ["SHAPES", "Algorithm", "Context", "FromGlobal", "PartialSharing", "TransferDistillation", "shape_of"]
