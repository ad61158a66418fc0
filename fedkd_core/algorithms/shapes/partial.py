"""Partial parameter sharing, the shape of FedPer and LG-FedAvg.

Every client keeps a resident model. The server holds only the *shared* part (the state-dict
entries whose names start with ``shared_prefix``): it sends it, the client loads it into its
model, trains the whole model on its data, and uploads the shared part again; the server
averages the uploads by data size. The rest of each client's model never leaves the client.

FedPer shares ``features.`` (the body) and keeps ``head.``; LG-FedAvg shares ``head.`` and keeps
the body (see the two modules for the sources of each split).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...aggregate import weighted_average
from ...training import train
from .base import Algorithm, Message, PersonalModels, parameters_message


@dataclass(frozen=True)
class PartialSharingConfig:
    """evaluate_with_latest_shared: evaluate a client's personal part joined to the latest
    shared part (True) or to the shared part it last trained with (False)."""

    evaluate_with_latest_shared: bool = True


class PartialSharing(Algorithm):
    """Subclasses set ``shared_prefix``."""

    Config = PartialSharingConfig
    CLIENT_STATE = ("models",)

    shared_prefix = ""

    def __init__(self, config, ctx):
        super().__init__(config, ctx)
        self.models = PersonalModels(ctx)
        self.shared = parameters_message(ctx.initial_model, self.shared_prefix)
        if not self.shared:
            raise ValueError(f"model has no parameters named {self.shared_prefix!r}*")

    def download(self, client: int) -> Message:
        return {name: t.clone() for name, t in self.shared.items()}

    def client_update(self, client: int, message: Message) -> Message:
        model = self.models[client]
        model.load_state_dict(message, strict=False)
        train(model, self.ctx.data.dataset, self.ctx.data.client_train[client], self.ctx.train,
              generator=self.generator(client))
        return parameters_message(model, self.shared_prefix)

    def server_update(self, uploads: dict[int, Message]) -> None:
        clients = sorted(uploads)
        self.shared = weighted_average([uploads[k] for k in clients], [self.ctx.client_size(k) for k in clients])

    def personal_model(self, client: int):
        """The client's personal part; with ``evaluate_with_latest_shared`` joined to the latest
        shared part (what PFLlib evaluates: it sends the shared part to every client first)."""
        model = self.models[client]
        if self.config.evaluate_with_latest_shared:
            model.load_state_dict(self.shared, strict=False)
        return model
