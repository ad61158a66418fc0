"""FedPer (Arivazhagan et al., 2019): shared body, personal classifier head.

The body ``model.features`` is averaged by the server; the head ``model.head`` (the last linear
layer) stays on the client, as in PFLlib's ``clientper`` (copies only ``model.base``) and
pFedSD's ``is_part_update`` with the classifier as the personal part.
"""

from __future__ import annotations

from .shapes.partial import PartialSharing


class FedPer(PartialSharing):
    shared_prefix = "features."
