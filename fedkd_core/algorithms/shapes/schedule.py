"""The schedule of a client's training phases in KnFu's round (issue 33: the baselines' strength).

KnFu's Algorithm 1 says what a round does (local update, distillation on the transfer set) but
not how the optimiser runs through it. The choices below decide a baseline's result as much as
its method does (a digest that flips a third of a client's predictions, scored right after it),
so every method of the KnFu chapter gets them, and the same tuning budget over them:

* ``optimizer_state``: "fresh" makes a new optimiser for every phase (the chapter as first coded);
  "kept" keeps one optimiser per client across its phases and rounds (the official FedMD keeps
  each Keras model's Adam; Selective-FD's demo one optimiser throughout).
* ``digest_lr``: the learning rate of the distillation ("digest") phase; None uses the local
  update's.
* ``revisit_epochs``: epochs of cross-entropy on the client's own data after the digest, at the
  local update's learning rate (FedMD's "revisit"); the client is scored after it.

Defaults reproduce the committed records (``fedkd_core.results.ADDED_FIELDS``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from torch import nn

from ...training import OptimizerStates, cross_entropy_loss, train

OPTIMIZER_STATES = ("fresh", "kept")


@dataclass(frozen=True)
class PhaseSchedule:
    optimizer_state: str = "fresh"
    digest_lr: float | None = None
    revisit_epochs: int = 0

    def __post_init__(self) -> None:
        if self.optimizer_state not in OPTIMIZER_STATES:
            raise ValueError(f"optimizer_state must be one of {OPTIMIZER_STATES} (got {self.optimizer_state!r})")
        if self.digest_lr is not None and not self.digest_lr > 0:
            raise ValueError(f"digest_lr must be None (the local update's lr) or > 0 (got {self.digest_lr})")
        if self.revisit_epochs < 0:
            raise ValueError(f"revisit_epochs must be >= 0 (got {self.revisit_epochs})")


class ClientPhases:
    """Runs a client's phases under a :class:`PhaseSchedule`; ``optimizers`` holds the kept
    optimiser states (empty with "fresh": a fresh schedule sends nothing more between rounds)."""

    def __init__(self, schedule: PhaseSchedule, ctx, optimizers: OptimizerStates):
        self.schedule, self.ctx, self.optimizers = schedule, ctx, optimizers

    def train(self, client: int, model: nn.Module, indices: np.ndarray, *, generator, lr: float | None = None,
              epochs: int | None = None, loss_fn=cross_entropy_loss, augment: bool = True) -> None:
        """``epochs`` (default: the local epochs E) of ``loss_fn`` on ``indices`` at ``lr`` (default:
        the local update's), with a fresh or the client's kept optimiser."""
        config = self.ctx.train
        lr = config.lr if lr is None else lr
        if self.schedule.optimizer_state == "kept":
            optimizer = self.optimizers.optimizer(client, model, config, lr)
            train(model, self.ctx.data.dataset, indices, config, generator=generator, loss_fn=loss_fn,
                  epochs=epochs, augment=augment, optimizer=optimizer)
            self.optimizers.keep(client, optimizer)
            return
        train(model, self.ctx.data.dataset, indices, config if lr == config.lr else replace(config, lr=lr),
              generator=generator, loss_fn=loss_fn, epochs=epochs, augment=augment)

    def update(self, client: int, model: nn.Module, generator) -> None:
        """The local update: E epochs of cross-entropy on the client's data."""
        self.train(client, model, self.ctx.data.client_train[client], generator=generator)

    def digest(self, client: int, model: nn.Module, indices: np.ndarray, *, generator, epochs: int,
               loss_fn=cross_entropy_loss, augment: bool = True) -> None:
        """The distillation phase (or Local's second phase), at ``digest_lr``."""
        self.train(client, model, indices, generator=generator, lr=self.schedule.digest_lr, epochs=epochs,
                   loss_fn=loss_fn, augment=augment)

    def revisit(self, client: int, model: nn.Module, generator) -> None:
        """``revisit_epochs`` of cross-entropy on the client's own data (nothing when 0)."""
        if self.schedule.revisit_epochs:
            self.train(client, model, self.ctx.data.client_train[client], generator=generator,
                       epochs=self.schedule.revisit_epochs)


def parse_schedule(text: str) -> PhaseSchedule:
    """``"OPTIMIZER_STATE/DIGEST_LR/REVISIT_EPOCHS"`` (e.g. ``"kept/0.0001/1"``; ``-`` for the
    local update's lr) as a :class:`PhaseSchedule`."""
    parts = [part.strip() for part in text.split("/")]
    if len(parts) != 3:
        raise ValueError(f"a schedule reads OPTIMIZER_STATE/DIGEST_LR/REVISIT_EPOCHS, e.g. 'kept/0.0001/1' "
                         f"or 'fresh/-/0' (got {text!r})")
    state, lr, revisit = parts
    try:
        return PhaseSchedule(state, None if lr == "-" else float(lr), int(revisit))
    except ValueError as error:
        raise ValueError(f"schedule {text!r}: {error}") from None


def schedule_text(schedule: PhaseSchedule) -> str:
    """The inverse of :func:`parse_schedule`."""
    lr = "-" if schedule.digest_lr is None else f"{schedule.digest_lr:g}"
    return f"{schedule.optimizer_state}/{lr}/{schedule.revisit_epochs}"


def schedule_fields(schedule: PhaseSchedule) -> dict:
    """The schedule as a method Config's keyword arguments."""
    return {"optimizer_state": schedule.optimizer_state, "digest_lr": schedule.digest_lr,
            "revisit_epochs": schedule.revisit_epochs}
