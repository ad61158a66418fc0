"""FedMD with model averaging, the "FedMD" baseline of the FedGMKD chapter.

FedGMKD [P §4.4] runs FedMD (Li & Wang, 2019) as FedAvg plus a distillation term on a public set:
"FedMD used a regularization hyper-parameter λ_md of 0.05, and the public dataset size matched the
clients' local training dataset size". Each round a selected client starts from the global model
and trains, pairing every private batch with a batch of the shared transfer set D^t,

    L = CE(f(x), y) + λ · KL(Q̄(x^t) ‖ softmax(f(x^t)/T)),

where Q̄ is the *consensus*: the mean over last round's clients of their soft predictions
softmax(f_k(x^t)/T) on D^t, each made with the client's trained local model. Round 1 (no consensus
yet) is CE alone. After training, the client uploads its model and its soft predictions on D^t; the
server averages the models by data size and the soft predictions uniformly (FedMD's consensus is
a plain mean), and sends model and consensus in the next round. The trained copy is the client's
personal model (local accuracy).

Transfer set: ``DataConfig.transfer_size`` labelled *training* samples set aside before the split
(:func:`fedkd_core.federation.build_federated_data`), disjoint from every client's data. FedGMKD's
released code (``ServerFedMD.py:19``) draws its 1000 public samples from the *test* set (with
replacement), so its FedMD has seen the global test set; not reproduced. Its labels are not used.

Settings and their sources:

* ``lam`` = 0.05: λ_md [P §4.4]; FedGMKD's released code passes 0.1 (``ServerFedMD.py:52``).
* ``temperature`` = 0.6: the released code's ``soft_predict(Z, args.temp)``, ``--temp 0.6``
  (``option.py``), used for the uploaded soft predictions and the student alike.
* ``scale_t2`` = False: the released code has no T² factor (Hinton et al. multiply by T²).
* ``aggregation`` = "size": FedAvg's |D_k| (the released code: uniform ``average_weights``).
* Transfer batches: one of the training batch size per private batch, in a shuffled order
  reshuffled after every pass over D^t (with |D^t| ≈ |D_k|, one pass per local epoch). The released
  code uses the first ⌊1000/B⌋ public batches, in a fixed order, in every epoch.

Not reproduced from the released code: ``loss2 -= KLDivLoss()(Q_pub, target)`` passes
probabilities where log-probabilities belong and *subtracts* the result, so its term is
λ·mean(Q̄ ⊙ q) + const: minimising it pushes the student's probability mass *away* from the
consensus (towards the class the consensus deems least likely). Original FedMD [MD] differs
further (no model averaging, logit consensus, a separate digest phase); see the KnFu chapter's
``fedmd``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from ..distill import kd_kl, tempered_softmax
from ..training import Batch, cross_entropy_loss, iterate_batches, predict, train
from .shapes.base import Message, parameters_message
from .shapes.from_global import AGGREGATION_WEIGHTS, UNTRAINED_CLIENT_MODEL, FromGlobal, check_choice, frozen_copy

# Message keys beside the model: upload "md/soft" (|D^t|, C) float32; download "md/consensus" (same shape).
MD = "md/"


@dataclass(frozen=True)
class FedMDAvgConfig:
    lam: float = 0.05  # λ_md [P §4.4] (released code: 0.1)
    temperature: float = 0.6  # T of soft_predict, released code --temp 0.6
    scale_t2: bool = False  # multiply the KL by T² (released code: no)
    aggregation: str = "size"
    untrained_client: str = "global"

    def __post_init__(self) -> None:
        if not self.lam >= 0:
            raise ValueError(f"lam must be >= 0 (got {self.lam})")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (got {self.temperature})")
        check_choice(self.aggregation, AGGREGATION_WEIGHTS, "aggregation")
        check_choice(self.untrained_client, UNTRAINED_CLIENT_MODEL, "untrained_client")


def consensus(soft_predictions: list[torch.Tensor]) -> torch.Tensor:
    """FedMD's consensus: the plain mean of the clients' (|D^t|, C) soft predictions."""
    if not soft_predictions:
        raise ValueError("soft_predictions must hold at least one client's predictions")
    return torch.stack([s.float() for s in soft_predictions]).mean(0)


def fedmd_loss(logits: torch.Tensor, labels: torch.Tensor, transfer_logits: torch.Tensor, targets: torch.Tensor,
               lam: float, temperature: float, scale_t2: bool) -> torch.Tensor:
    """CE(f(x), y) + λ · KL(Q̄ ‖ softmax(f(x^t)/T)), the KL averaged over the transfer batch."""
    return (F.cross_entropy(logits.float(), labels)
            + lam * kd_kl(transfer_logits, targets, temperature=temperature, scale_by_t2=scale_t2))


class TransferBatches:
    """An endless stream of shuffled batches of the transfer set: a fresh permutation per pass."""

    def __init__(self, ctx, batch_size: int, generator: torch.Generator):
        self.ctx, self.batch_size, self.generator = ctx, batch_size, generator
        self.batches = iter(())

    def __next__(self) -> Batch:
        batch = next(self.batches, None)
        if batch is None:
            transfer = self.ctx.data.transfer
            drop_last = self.ctx.train.drop_last and len(transfer) >= self.batch_size
            self.batches = iterate_batches(self.ctx.data.dataset, transfer, self.batch_size, device=self.ctx.device,
                                           generator=self.generator, split="train", drop_last=drop_last)
            batch = next(self.batches)
        return batch


class FedMDAvg(FromGlobal):
    Config = FedMDAvgConfig
    NEEDS = frozenset({"transfer_set"})  # the public set the clients' logits are exchanged on
    personalised = True

    def __init__(self, config: FedMDAvgConfig, ctx):
        if len(ctx.data.transfer) == 0:
            raise ValueError("transfer_size must be > 0 for fedmd_avg: it distils on the transfer set "
                             "(DataConfig.transfer_size; FedGMKD: the clients' training size, e.g. 500)")
        super().__init__(config, ctx)
        self.consensus: torch.Tensor | None = None  # Q̄ of the last round (the server's)

    def download(self, client: int) -> Message:
        message = parameters_message(self.model)
        if self.consensus is not None:
            message[MD + "consensus"] = self.consensus
        return message

    def client_update(self, client: int, message: Message) -> Message:
        targets = message.get(MD + "consensus")
        self.worker.load_state_dict({n: t for n, t in message.items() if not n.startswith(MD)})
        loss_fn = cross_entropy_loss if targets is None else self.distillation_loss(client, targets)
        train(self.worker, self.ctx.data.dataset, self.ctx.data.client_train[client], self.ctx.train,
              generator=self.generator(client), loss_fn=loss_fn)
        self.personal[client] = frozen_copy(self.worker)
        return {**parameters_message(self.worker), MD + "soft": self.soft_predictions()}

    def distillation_loss(self, client: int, targets: torch.Tensor):
        """CE on the private batch + λ·KL on the next transfer batch (order from the client's
        numpy stream of the round, so it is independent of the private batches' order)."""
        order = torch.Generator().manual_seed(int(self.rng(client).integers(2**62)))
        transfer = TransferBatches(self.ctx, self.ctx.train.batch_size, order)
        targets = targets.to(self.ctx.device).float()
        c = self.config

        def loss_fn(model, batch: Batch):
            public = next(transfer)
            return fedmd_loss(model(batch.x), batch.y, model(public.x), targets[public.position], c.lam,
                              c.temperature, c.scale_t2)

        return loss_fn

    def soft_predictions(self) -> torch.Tensor:
        """softmax(f(x^t)/T) of the trained model on the transfer set, (|D^t|, C) float32."""
        logits = predict(self.worker, self.ctx.data.dataset, np.asarray(self.ctx.data.transfer), split="train",
                         mixed_precision=self.ctx.train.mixed_precision)
        return tempered_softmax(logits, self.config.temperature)

    def server_update(self, uploads: dict[int, Message]) -> None:
        clients = sorted(uploads)
        super().server_update({k: {n: t for n, t in uploads[k].items() if not n.startswith(MD)} for k in clients})
        self.consensus = consensus([uploads[k][MD + "soft"] for k in clients])
