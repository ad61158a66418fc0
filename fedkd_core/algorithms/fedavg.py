"""FedAvg (McMahan et al., 2017): local SGD from the global model, sample-size weighted mean."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..aggregate import weighted_average
from ..training import train
from .shapes.base import Algorithm, Message, parameters_message
from .shapes.from_global import PERSONAL_MODEL, check_choice, frozen_copy


@dataclass(frozen=True)
class FedAvgConfig:
    """``personal``: the model a client is scored with (local accuracy). "global": the global
    model, FedAvg's own reading; "trained": the client's copy right after its local training,
    as FedGMKD's released code scores every method (a client not yet trained: the global model).
    """

    personal: str = "global"

    def __post_init__(self) -> None:
        check_choice(self.personal, PERSONAL_MODEL, "personal")


class FedAvg(Algorithm):
    """The personal model of every client is the global model (or its trained copy, ``personal``)."""

    Config = FedAvgConfig
    CLIENT_STATE = ("trained",)

    def __init__(self, config: FedAvgConfig, ctx):
        super().__init__(config, ctx)
        self.model = ctx.new_model()
        self.worker = ctx.new_model()
        self.trained: dict[int, torch.nn.Module] = {}

    def download(self, client: int) -> Message:
        return parameters_message(self.model)

    def client_update(self, client: int, message: Message) -> Message:
        self.worker.load_state_dict(message)
        train(self.worker, self.ctx.data.dataset, self.ctx.data.client_train[client],
              self.ctx.train, generator=self.generator(client))
        if getattr(self.config, "personal", "global") == "trained":  # subclasses (FedDF, FedUA) have no such field
            self.trained[client] = frozen_copy(self.worker)
        return parameters_message(self.worker)

    def server_update(self, uploads: dict[int, Message]) -> None:
        clients = sorted(uploads)
        weights = [self.ctx.client_size(k) for k in clients]
        self.model.load_state_dict(weighted_average([uploads[k] for k in clients], weights))

    def personal_model(self, client: int):
        return self.trained.get(client, self.model)

    def global_model(self):
        return self.model
