"""The round shared by KnFu, FedMD (as KnFu describes it) and Selective-FD.

Every client keeps its own model (no parameter averaging). One round, as in KnFu's Algorithm 1:

1. local update: ``E`` epochs of cross-entropy on the client's data D_n (Eq. 3);
2. knowledge extraction: softmax outputs F_n on every sample of the shared, labelled transfer
   set D^t (Eq. 4), uploaded as a (K_t, C) float32 tensor;
3. fusion at the server: a method-specific :meth:`TransferDistillation.fuse` turns the uploaded
   soft labels into one target per client (and optionally a mask of the transfer samples whose
   target is kept);
4. fine-tuning: client n minimises, over the transfer set,
   ``CE(f(x), y) + lambda^2 KL(F_n^agg || f(x))`` (Eq. 10), the KL term restricted to kept samples.

The methods differ only in step 3 (and Selective-FD in what the client uploads), so subclasses
override :meth:`fuse` and, if needed, :meth:`upload_mask`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from ...distill import kd_kl
from ...training import Batch, OptimizerStates, predict
from .base import Algorithm, Message, PersonalModels
from .schedule import ClientPhases, PhaseSchedule


@dataclass(frozen=True)
class Fusion:
    """What the server sends client n: its soft-label targets and, optionally, which are kept."""

    targets: torch.Tensor  # (K_t, C) probabilities (rows of dropped samples are ignored)
    kept: torch.Tensor | None = None  # (K_t,) bool; None keeps every transfer sample


@dataclass(frozen=True)
class TransferKDConfig(PhaseSchedule):
    """Hyperparameters shared by the transfer-set distillation methods (and the phases'
    schedule, :class:`~fedkd_core.algorithms.shapes.schedule.PhaseSchedule`).

    lam: lambda of Eq. 10, read as a *balance weight*: the loss is CE + lam^2 * KL at
        temperature 1 (KnFu's soft labels F_n are plain softmax outputs, so there is nothing to
        soften). The paper gives no value; 1.0 weighs both terms equally.
    finetune_epochs: epochs over D^t in the fine-tuning step (the paper does not say; 1, like E).
    """

    lam: float = 1.0
    finetune_epochs: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lam < 0:
            raise ValueError(f"lam must be >= 0 (got {self.lam})")
        if self.finetune_epochs < 0:
            raise ValueError(f"finetune_epochs must be >= 0 (got {self.finetune_epochs})")


def distillation_loss(logits: torch.Tensor, labels: torch.Tensor, targets: torch.Tensor,
                      kept: torch.Tensor | None, lam: float) -> torch.Tensor:
    """Eq. 10 on one batch: CE(f(x), y) + lam^2 * KL(target || f(x)).

    The KL term is summed over kept samples and divided by the batch size, so with every
    sample kept (``kept`` None: KnFu, FedMD) it is the usual batch-mean KL. No host sync on an
    accelerator (see :func:`kept_kl`).
    """
    ce = F.cross_entropy(logits, labels)
    if kept is None:
        return ce + lam**2 * (kd_kl(logits, targets, temperature=1.0) * len(logits) / len(logits))
    if kept.device.type != "cpu":
        return ce + lam**2 * kept_kl(logits, targets, kept)
    # On the CPU reading the mask costs nothing: the kept rows are gathered, the arithmetic of the
    # committed records (the masked sum of kept_kl may differ from it in the last bit).
    if not bool(kept.any()):
        return ce
    return ce + lam**2 * (kd_kl(logits[kept], targets[kept], temperature=1.0) * kept.sum() / len(kept))


def kept_kl(logits: torch.Tensor, targets: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """Σ over kept samples of KL(target || softmax(logits)), divided by the batch size: masked, so
    the batch's shape does not depend on the mask and the host never waits for the device."""
    per_sample = F.kl_div(F.log_softmax(logits.float(), dim=1), targets.float(), reduction="none").sum(1)
    return (per_sample * kept).sum() / len(kept)


class TransferDistillation(Algorithm):
    """Personal models; the local update, upload, reply and fine-tune of KnFu's Algorithm 1."""

    Config = TransferKDConfig
    CLIENT_STATE = ("models", "optimizers")
    NEEDS = frozenset({"transfer_set"})  # the shared labelled set D^t the soft labels are computed on

    def __init__(self, config, ctx):
        super().__init__(config, ctx)
        self.models = PersonalModels(ctx)
        self.optimizers = OptimizerStates()  # kept optimisers (schedule "kept"); empty otherwise
        self.phases = ClientPhases(config, ctx, self.optimizers)
        self.fusions: dict[int, Fusion] = {}

    # -- the hooks a method overrides ------------------------------------------------------
    def fuse(self, soft_labels: dict[int, torch.Tensor], masks: dict[int, torch.Tensor]) -> dict[int, Fusion]:
        """Targets for every client from the uploaded soft labels (``masks``: client-side selection)."""
        raise NotImplementedError

    def upload_mask(self, client: int) -> torch.Tensor | None:
        """Transfer samples whose soft labels client ``client`` uploads (None: all of them)."""
        return None

    def knowledge(self, logits: torch.Tensor) -> torch.Tensor:
        """What a client uploads per transfer sample: its softmax output F_n (Eq. 4)."""
        return F.softmax(logits.float(), dim=1)

    def digest_loss(self, logits: torch.Tensor, labels: torch.Tensor, targets: torch.Tensor,
                    kept: torch.Tensor | None) -> torch.Tensor:
        """The fine-tuning loss of one batch: Eq. 10."""
        return distillation_loss(logits, labels, targets, kept, self.config.lam)

    # -- the round -------------------------------------------------------------------------
    def client_update(self, client: int, message: Message) -> Message:
        data = self.ctx.data
        model = self.models[client]
        self.phases.update(client, model, self.generator(client))
        logits = predict(model, data.dataset, data.transfer, mixed_precision=self.ctx.train.mixed_precision)
        soft_labels = self.knowledge(logits)
        mask = self.upload_mask(client)
        if mask is None:
            return {"soft_labels": soft_labels}
        return {"soft_labels": soft_labels[mask], "accepted": mask}

    def server_update(self, uploads: dict[int, Message]) -> None:
        # The fusion runs on the host (its arithmetic is that of the committed records). An upload
        # arrives on the run's device (experiment.on_device), so a client's acceptance mask comes to
        # the host before it indexes the host tensor: CUDA refuses device indices into a host tensor.
        num_transfer, num_classes = len(self.ctx.data.transfer), self.ctx.data.num_classes
        soft_labels, masks = {}, {}
        for client, message in uploads.items():
            accepted = message.get("accepted")
            mask = torch.ones(num_transfer, dtype=torch.bool) if accepted is None else accepted.cpu()
            full = torch.zeros(num_transfer, num_classes)
            full[mask] = message["soft_labels"].float().cpu()
            soft_labels[client], masks[client] = full, mask
        self.fusions = self.fuse(soft_labels, masks)

    def reply(self, client: int) -> Message | None:
        fusion = self.fusions.get(client)
        if fusion is None:
            return None
        if fusion.kept is None:
            return {"soft_labels": fusion.targets.float()}
        return {"soft_labels": fusion.targets[fusion.kept].float(), "kept": fusion.kept}

    def client_finish(self, client: int, message: Message) -> None:
        data = self.ctx.data
        kept = message.get("kept")  # None: every transfer sample is kept
        targets = torch.zeros(len(data.transfer), data.num_classes)
        targets[kept.cpu() if kept is not None else slice(None)] = message["soft_labels"].float().cpu()
        device = self.ctx.device
        targets, kept = targets.to(device), kept.to(device) if kept is not None else None

        def loss_fn(model, batch: Batch) -> torch.Tensor:
            return self.digest_loss(model(batch.x), batch.y, targets[batch.position],
                                    kept[batch.position] if kept is not None else None)

        model, generator = self.models[client], self.generator(client, "finish")
        self.phases.digest(client, model, data.transfer, generator=generator, epochs=self.config.finetune_epochs,
                           loss_fn=loss_fn, augment=False)
        self.phases.revisit(client, model, generator)

    def personal_model(self, client: int):
        return self.models[client]
