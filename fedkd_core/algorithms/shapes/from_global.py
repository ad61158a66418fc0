"""Shared shape of FedProx, pFedSD and FedCKD: start from the global model, train with a loss.

Each round a selected client replaces its working model by the global model it downloaded,
trains it with a method-specific loss (:meth:`FromGlobal.local_loss`), keeps the result as its
personal model (when the method is personalised) and uploads the whole model; the server
averages the uploads (FedCKD's Algorithm 1, line 13). Subclasses only say which loss.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ...aggregate import weighted_average
from ...training import LossFn, cross_entropy_loss, predict, train
from .base import Algorithm, Message, parameters_message

# How the server weighs the uploads: by sample count (the papers' |D_k|/|D|, normalised over
# the selected clients) or uniformly (pFedSD's code: ``avg_param += client_param / len(ids)``).
AGGREGATION_WEIGHTS = {
    "size": lambda sizes: sizes,
    "uniform": lambda sizes: [1.0] * len(sizes),
}

# What a non-personalised method (FedAvg, FedProx) scores a client with: the global model, or the
# client's copy right after its local training (FedGMKD's released code scores every method so).
PERSONAL_MODEL = ("global", "trained")

# What a client that has never trained is evaluated with: the current global model (what it
# would start from when first selected) or the untrained initial model.
UNTRAINED_CLIENT_MODEL = ("global", "initial")


def check_choice(value: str, choices, name: str) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)} (got {value!r})")


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A teacher: a detached copy in eval mode (no dropout), gradients off."""
    teacher = copy.deepcopy(model).eval()
    for parameter in teacher.parameters():
        parameter.requires_grad_(False)
    return teacher


class FromGlobal(Algorithm):
    """Global model on the server; each selected client trains a copy of it with ``local_loss``.

    ``personalised = True`` keeps each client's trained model as its personal model (pFedSD,
    FedCKD); otherwise the personal model is the global model (FedProx). The config must have
    ``aggregation`` (a key of :data:`AGGREGATION_WEIGHTS`) and may have ``untrained_client`` (one
    of :data:`UNTRAINED_CLIENT_MODEL`; without it, "global").
    """

    personalised = True
    CLIENT_STATE = ("personal",)

    def __init__(self, config, ctx):
        super().__init__(config, ctx)
        check_choice(config.aggregation, AGGREGATION_WEIGHTS, "aggregation")
        self.model = ctx.new_model()
        self.worker = ctx.new_model()
        self.personal: dict[int, torch.nn.Module] = {}

    # --- the hook -------------------------------------------------------------------------
    def local_loss(self, client: int, global_model: torch.nn.Module) -> LossFn:
        """The loss client ``client`` trains with; ``global_model`` is a frozen copy of w_g^{t-1}."""
        return cross_entropy_loss

    # --- the steps ------------------------------------------------------------------------
    def download(self, client: int) -> Message:
        return parameters_message(self.model)

    def client_update(self, client: int, message: Message) -> Message:
        self.worker.load_state_dict(message)
        loss_fn = self.local_loss(client, frozen_copy(self.worker))
        train(self.worker, self.ctx.data.dataset, self.ctx.data.client_train[client], self.ctx.train,
              generator=self.generator(client), loss_fn=loss_fn)
        if self.personalised:
            self.personal[client] = frozen_copy(self.worker)
        return parameters_message(self.worker)

    def server_update(self, uploads: dict[int, Message]) -> None:
        clients = sorted(uploads)
        weights = AGGREGATION_WEIGHTS[self.config.aggregation]([self.ctx.client_size(k) for k in clients])
        self.model.load_state_dict(weighted_average([uploads[k] for k in clients], weights))

    def personal_model(self, client: int):
        if not self.personalised:
            return self.model
        if client in self.personal:
            return self.personal[client]
        if getattr(self.config, "untrained_client", "global") == "initial":
            return self.ctx.initial_model
        return self.model

    def global_model(self):
        return self.model

    # --- helpers for distillation losses ----------------------------------------------------
    def teacher_logits(self, teacher: torch.nn.Module, client: int) -> torch.Tensor:
        """A frozen teacher's logits on the client's training samples, in index order.

        Teachers are frozen and there is no augmentation, so one pass before training gives
        the same targets as a pass per batch; ``batch.position`` indexes into the result.
        """
        indices = np.asarray(self.ctx.data.client_train[client])
        return predict(teacher, self.ctx.data.dataset, indices, split="train",
                       mixed_precision=self.ctx.train.mixed_precision)
