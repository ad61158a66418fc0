"""LG-FedAvg (Liang et al., 2020): personal (local) representation, shared (global) head.

Follows the paper and PFLlib's ``clientlg``: the classifier ``model.head`` is averaged by the
server, the body ``model.features`` stays on the client. (The official script's
``num_layers_keep`` on ``CNNCifar`` makes the convolutions global instead, which contradicts
the paper; pliang279/LG-FedAvg issue #8.) The official warm start from a long FedAvg run is
not used, as FedCKD's comparison gives every method the same rounds.
"""

from __future__ import annotations

from .shapes.partial import PartialSharing


class LGFedAvg(PartialSharing):
    shared_prefix = "head."
