"""Local as KnFu's chapter defines it: "both updating and fine-tuning phases occur solely on the
local dataset", i.e. each round E epochs of cross-entropy on D_n, then ``finetune_epochs`` more
on D_n (a fresh optimiser for each phase, as in the sharing methods). Nothing is communicated.

The plain ``local`` algorithm trains once per round; this variant gives Local the same number of
gradient steps per round as KnFu, FedMD and Selective-FD, which is how the paper compares them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..training import OptimizerStates
from .shapes.base import Algorithm, Message, PersonalModels
from .shapes.schedule import ClientPhases, PhaseSchedule


@dataclass(frozen=True)
class KnFuLocalConfig(PhaseSchedule):
    """finetune_epochs: the second phase's epochs on D_n (the sharing methods' fine-tuning), run at
    the schedule's ``digest_lr``; ``revisit_epochs`` more follow at the local update's lr."""

    finetune_epochs: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.finetune_epochs < 0:
            raise ValueError(f"finetune_epochs must be >= 0 (got {self.finetune_epochs})")


class KnFuLocal(Algorithm):
    Config = KnFuLocalConfig
    CLIENT_STATE = ("models", "optimizers")

    def __init__(self, config: KnFuLocalConfig, ctx):
        super().__init__(config, ctx)
        self.models = PersonalModels(ctx)
        self.optimizers = OptimizerStates()  # kept optimisers (schedule "kept"); empty otherwise
        self.phases = ClientPhases(config, ctx, self.optimizers)

    def client_update(self, client: int, message: Message) -> Message:
        model, generator = self.models[client], self.generator(client)
        self.phases.update(client, model, generator)
        self.phases.digest(client, model, self.ctx.data.client_train[client], generator=generator,
                           epochs=self.config.finetune_epochs)
        self.phases.revisit(client, model, generator)
        return {}

    def personal_model(self, client: int):
        return self.models[client]
