"""Local as KnFu's chapter defines it: "both updating and fine-tuning phases occur solely on the
local dataset", i.e. each round E epochs of cross-entropy on D_n, then ``finetune_epochs`` more
on D_n (a fresh optimiser for each phase, as in the sharing methods). Nothing is communicated.

The plain ``local`` algorithm trains once per round; this variant gives Local the same number of
gradient steps per round as KnFu, FedMD and Selective-FD, which is how the paper compares them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..training import train
from .base import Algorithm, Message, PersonalModels


@dataclass(frozen=True)
class KnFuLocalConfig:
    finetune_epochs: int = 1

    def __post_init__(self) -> None:
        if self.finetune_epochs < 0:
            raise ValueError(f"finetune_epochs must be >= 0 (got {self.finetune_epochs})")


class KnFuLocal(Algorithm):
    Config = KnFuLocalConfig
    CLIENT_STATE = ("models",)

    def __init__(self, config: KnFuLocalConfig, ctx):
        super().__init__(config, ctx)
        self.models = PersonalModels(ctx)

    def client_update(self, client: int, message: Message) -> Message:
        data, model, generator = self.ctx.data, self.models[client], self.generator(client)
        train(model, data.dataset, data.client_train[client], self.ctx.train, generator=generator)
        train(model, data.dataset, data.client_train[client], self.ctx.train, generator=generator,
              epochs=self.config.finetune_epochs)
        return {}

    def personal_model(self, client: int):
        return self.models[client]
