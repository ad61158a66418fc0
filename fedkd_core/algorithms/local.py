"""Local: every client trains its own model on its own data; nothing is communicated."""

from __future__ import annotations

from dataclasses import dataclass

from ..training import train
from .shapes.base import Algorithm, Message, PersonalModels


@dataclass(frozen=True)
class LocalConfig:
    pass


class Local(Algorithm):
    Config = LocalConfig
    CLIENT_STATE = ("models",)

    def __init__(self, config: LocalConfig, ctx):
        super().__init__(config, ctx)
        self.models = PersonalModels(ctx)

    def client_update(self, client: int, message: Message) -> Message:
        train(self.models[client], self.ctx.data.dataset, self.ctx.data.client_train[client],
              self.ctx.train, generator=self.generator(client))
        return {}

    def personal_model(self, client: int):
        return self.models[client]
