"""FedProto (Tan et al., AAAI 2022) as the FedGMKD chapter runs it: prototypes plus FedAvg.

Each round a selected client starts from the global model, trains it with

    L = CE(C(F(x)), y) + λ · MSE(F(x), P_y),

where P_y is the global prototype of class y ([FP] ``lib/update.py`` ``update_weights_het``:
``loss1 + loss2 * args.ld`` with ``nn.MSELoss()``, the mean over batch × feature dimensions; a
sample whose class has no global prototype has its own detached feature as target, so it adds 0 but
counts in the mean). Round 1, before any prototype exists, is CE alone (``loss2 = 0*loss1``).
The trained copy is the client's personal model (local accuracy, spec fact 9). The client then
uploads the model, the mean feature of every class it holds, and its class counts; the server sets
each class's global prototype to the plain mean over the clients holding it ([FP]
``lib/utils.py`` ``proto_aggregation``) and averages the models by data size.

Settings and their sources:

* ``lam`` = 0.05: FedGMKD's λ_proto [P §4.4]. The official runs use ``--ld 1`` (MNIST, FEMNIST) and
  0.1 (CIFAR-10) ([FP] README); FedGMKD's released FedProto passes ``args.gamma`` = 0.06.
* ``aggregation`` = "size": FedAvg's |D_k| weights (FedGMKD Eq. 2).

Deviations from the official method (on purpose):

* **Model averaging.** Official FedProto never averages models (``exps/federated_main.py`` keeps
  one model per client and exchanges prototypes only). FedGMKD's Table 1 reports a *global*
  accuracy for FedProto, so the models are averaged here as in FedGMKD's released
  ``ServerFedProto.py`` (there: uniformly; here: by data size, like every method of the chapter).
* **Local prototypes** are the class means of the trained model's features in eval mode, one pass
  over the client's data after training (as FedGMKD's released ``ClientFedProto.generate_knowledge``).
  Official FedProto averages the features seen during the *last local epoch*, in train mode, while
  the weights still change.
* Not reproduced from FedGMKD's released FedProto (its bugs): the global prototype of a class being
  the last client's (``dict.update``), the unpacking that crashes for batches other than 2, and its
  gradient clipping at 1.1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from ..training import cross_entropy_loss, predict_features, train
from .shapes.base import Message, parameters_message
from .shapes.from_global import AGGREGATION_WEIGHTS, UNTRAINED_CLIENT_MODEL, FromGlobal, check_choice, frozen_copy

# Messages carry the model's state and, under this prefix, the prototype entries:
# upload "proto/features" (J_k, d) float32 (held classes, in class order) and "proto/counts" (C,) int64;
# download (FedProto) "proto/global" (J, d) float32 and "proto/has" (C,) bool.
PROTO = "proto/"


@dataclass(frozen=True)
class FedProtoConfig:
    lam: float = 0.05  # λ_proto [P §4.4]; [FP] README --ld 1 (0.1 on CIFAR-10)
    aggregation: str = "size"  # model weights (FedGMKD Eq. 2); "uniform" as FedGMKD's released code
    untrained_client: str = "global"  # a never-trained client is evaluated with the global model

    def __post_init__(self) -> None:
        if not self.lam >= 0:
            raise ValueError(f"lam must be >= 0 (got {self.lam})")
        check_choice(self.aggregation, AGGREGATION_WEIGHTS, "aggregation")
        check_choice(self.untrained_client, UNTRAINED_CLIENT_MODEL, "untrained_client")


# --- the pieces, on plain tensors -----------------------------------------------------------------

def split_message(message: Message, prefix: str = PROTO) -> tuple[Message, Message]:
    """(the model's state, the entries under ``prefix`` with the prefix removed)."""
    model = {name: t for name, t in message.items() if not name.startswith(prefix)}
    extra = {name[len(prefix):]: t for name, t in message.items() if name.startswith(prefix)}
    return model, extra


def class_means(features: torch.Tensor, labels: torch.Tensor, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per class the mean feature (C, d) (zero rows for absent classes) and the counts (C,) int64."""
    features = features.float()
    counts = torch.bincount(labels, minlength=num_classes)
    sums = torch.zeros(num_classes, features.shape[1], device=features.device).index_add_(0, labels, features)
    return sums / counts.clamp_min(1).unsqueeze(1).to(features.dtype), counts


def unpack_rows(rows: torch.Tensor, held: torch.Tensor) -> torch.Tensor:
    """(J, d) rows of the classes where ``held`` (C,) is True -> (C, d), zero rows elsewhere."""
    table = torch.zeros(len(held), rows.shape[1], dtype=rows.dtype, device=rows.device)
    table[held.to(rows.device)] = rows
    return table


def mean_over_holders(prototypes: torch.Tensor, held: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """FedProto's server step ([FP] ``proto_aggregation``): per class the plain mean of the
    prototypes (K, C, d) of the clients holding it (``held`` (K, C) bool). Returns the global
    prototypes (C, d) (zero rows for classes nobody holds) and which classes have one (C,)."""
    holders = held.sum(0)
    total = (prototypes * held.unsqueeze(2).to(prototypes.dtype)).sum(0)
    return total / holders.clamp_min(1).unsqueeze(1).to(prototypes.dtype), holders > 0


def prototype_alignment(features: torch.Tensor, labels: torch.Tensor, prototypes: torch.Tensor,
                        has: torch.Tensor) -> torch.Tensor:
    """MSE(F(x), P_y), mean over batch × dimensions; a sample whose class has no prototype is
    compared with its own detached feature (adds 0, counts in the mean), as [FP] ``update.py``."""
    features = features.float()
    target = torch.where(has[labels].unsqueeze(1), prototypes[labels], features.detach())
    return F.mse_loss(features, target)


def fedproto_loss(features: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor, prototypes: torch.Tensor,
                  has: torch.Tensor, lam: float) -> torch.Tensor:
    """CE(C(F(x)), y) + λ · MSE(F(x), P_y)."""
    return F.cross_entropy(logits.float(), labels) + lam * prototype_alignment(features, labels, prototypes, has)


# --- the algorithm -----------------------------------------------------------------------------------

class FedProto(FromGlobal):
    """FromGlobal with personal copies; prototypes travel beside the model under ``proto/``.

    Subclasses (FPL) change what the server makes of the clients' prototypes
    (:meth:`aggregate_prototypes`, whose message is downloaded) and the loss that uses it
    (:meth:`knowledge_loss`)."""

    Config = FedProtoConfig
    personalised = True

    def __init__(self, config, ctx):
        super().__init__(config, ctx)
        self.knowledge: Message = {}  # the server's aggregated prototypes, downloaded from round 2

    # --- hooks ---------------------------------------------------------------------------------------
    def aggregate_prototypes(self, prototypes: torch.Tensor, held: torch.Tensor) -> Message:
        """(K, C, d) client prototypes, (K, C) who holds what -> the knowledge message (no prefix)."""
        global_prototypes, has = mean_over_holders(prototypes, held)
        return {"global": global_prototypes[has], "has": has}

    def knowledge_loss(self, knowledge: Message):
        """The batch loss given the downloaded knowledge (prefix removed, on the device)."""
        prototypes, has, lam = unpack_rows(knowledge["global"], knowledge["has"]), knowledge["has"], self.config.lam

        def loss_fn(model, batch):
            features = model.features(batch.x)
            return fedproto_loss(features, model.head(features), batch.y, prototypes, has, lam)

        return loss_fn

    # --- the steps -----------------------------------------------------------------------------------
    def download(self, client: int) -> Message:
        return {**parameters_message(self.model), **{PROTO + name: t for name, t in self.knowledge.items()}}

    def client_update(self, client: int, message: Message) -> Message:
        model_state, knowledge = split_message(message)
        self.worker.load_state_dict(model_state)
        loss_fn = self.knowledge_loss({n: t.to(self.ctx.device) for n, t in knowledge.items()}) if knowledge \
            else cross_entropy_loss  # round 1: no prototypes yet, CE alone
        train(self.worker, self.ctx.data.dataset, self.ctx.data.client_train[client], self.ctx.train,
              generator=self.generator(client), loss_fn=loss_fn)
        self.personal[client] = frozen_copy(self.worker)
        return {**parameters_message(self.worker), **self.local_prototypes(client)}

    def local_prototypes(self, client: int) -> Message:
        """The trained model's class-mean features on the client's data (held classes only) and
        the class counts."""
        data = self.ctx.data
        indices = data.client_train[client]
        features, _ = predict_features(self.worker, data.dataset, indices)
        labels = data.dataset.y_train[torch.as_tensor(np.asarray(indices))].to(features.device)
        means, counts = class_means(features, labels, data.num_classes)
        return {PROTO + "features": means[counts > 0], PROTO + "counts": counts}

    def server_update(self, uploads: dict[int, Message]) -> None:
        clients = sorted(uploads)
        parts = [split_message(uploads[k]) for k in clients]
        super().server_update({k: model_state for k, (model_state, _) in zip(clients, parts)})
        held = torch.stack([extra["counts"].cpu() > 0 for _, extra in parts])
        prototypes = torch.stack([unpack_rows(extra["features"].cpu().float(), has)
                                  for (_, extra), has in zip(parts, held)])
        self.knowledge = {n: t.to(self.ctx.device) for n, t in self.aggregate_prototypes(prototypes, held).items()}
