"""FedAvg (McMahan et al., 2017): local SGD from the global model, sample-size weighted mean."""

from __future__ import annotations

from dataclasses import dataclass

from ..aggregate import weighted_average
from ..training import train
from .base import Algorithm, Message, parameters_message


@dataclass(frozen=True)
class FedAvgConfig:
    pass


class FedAvg(Algorithm):
    """The personal model of every client is the global model."""

    Config = FedAvgConfig

    def __init__(self, config: FedAvgConfig, ctx):
        super().__init__(config, ctx)
        self.model = ctx.new_model()
        self.worker = ctx.new_model()

    def download(self, client: int) -> Message:
        return parameters_message(self.model)

    def client_update(self, client: int, message: Message) -> Message:
        self.worker.load_state_dict(message)
        train(self.worker, self.ctx.data.dataset, self.ctx.data.client_train[client],
              self.ctx.train, generator=self.generator(client))
        return parameters_message(self.worker)

    def server_update(self, uploads: dict[int, Message]) -> None:
        clients = sorted(uploads)
        weights = [self.ctx.client_size(k) for k in clients]
        self.model.load_state_dict(weighted_average([uploads[k] for k in clients], weights))

    def personal_model(self, client: int):
        return self.model

    def global_model(self):
        return self.model
