"""MOON, model-contrastive federated learning (Li, He, Song, CVPR 2021), from its official code
[MOON] (QinbinLi/MOON ``main.py`` ``train_net_fedcon``, ``model.py`` ``ModelFedCon``).

Each round a selected client starts from the global model w_g and trains

    L = CE(C(F(x)), y) + μ · ℓ_con,
    ℓ_con = −log( exp(cos(z, z_glob)/τ) / (exp(cos(z, z_glob)/τ) + exp(cos(z, z_prev)/τ)) ),

where z = g(F(x)) is the projection of the local model's feature, z_glob that of the (frozen)
global model and z_prev that of the client's previous local model, the one it trained the last
time it took part (``model_buffer_size`` 1, ``pool_option`` FIFO). The server averages the
models by data size (``fed_avg_freqs``).

The projection head g = Linear(d, d), ReLU, Linear(d, ``projection_dim``) is [MOON]'s ``l1``/``l2``
(d is the model's feature dimension, 32 for ``*_code32``). In [MOON] the classifier ``l3`` reads
the projection; here the classifier is the model's own head on F(x), as for every method of the
FedGMKD chapter, and g only serves ℓ_con (spec "paper profile"). g is part of the federated model:
it is downloaded with the global model under the keys ``projection.*``, trained with it, uploaded
and averaged with the same weights. Bytes per message: the model's plus
4·(d² + d + d·``projection_dim`` + ``projection_dim``) = 38,016 B for d = 32 and 256.

Client state (``CLIENT_STATE``): the trained local model (``personal``, also the personal model
that local accuracy is measured with, spec fact 9) and its projection head
(``previous_projection``); together they are the next round's negative.

Settings and their sources:

* ``mu`` = 1: FedGMKD's µ_moon [P §4.4] (which calls it a "proximal term"); also [MOON]
  ``main.py`` ``--mu`` default. The README's CIFAR-10 command uses ``--mu=5``.
* ``temperature`` = 0.5 ([MOON] ``--temperature``), ``projection_dim`` = 256 (``--out_dim``).
* ``aggregation`` = "size" ([MOON] ``fed_avg_freqs``).
* A client without a previous model (every client in round 1) trains with CE alone: in [MOON] the
  model pool is empty in the first round, so the contrastive logits are the positive column only
  and ℓ_con = 0. (Under partial participation [MOON]'s pool holds every client's net from round 2
  on, and a client never selected before contrasts with its own untrained initial net; here it
  trains with CE alone, as in round 1.)
* The frozen models' projections are computed once per local update when training batches are not
  augmented (the same numbers as per batch: they are frozen, in eval mode); with augmentation, on
  every batch, as [MOON] does. ℓ_con is computed in float32 even under bf16 autocast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..aggregate import weighted_average
from ..randomness import SERVER
from ..training import Batch, cross_entropy_loss, predict, train
from .shapes.base import Message, parameters_message
from .shapes.from_global import AGGREGATION_WEIGHTS, UNTRAINED_CLIENT_MODEL, FromGlobal, check_choice, frozen_copy

PROJECTION = "projection."  # message keys of the projection head


@dataclass(frozen=True)
class MoonConfig:
    mu: float = 1.0  # µ_moon [P §4.4]; [MOON] main.py --mu default 1 (README CIFAR-10 run: 5)
    temperature: float = 0.5  # τ, [MOON] --temperature
    projection_dim: int = 256  # [MOON] --out_dim
    aggregation: str = "size"  # [MOON] fed_avg_freqs (data sizes)
    untrained_client: str = "global"

    def __post_init__(self) -> None:
        if not self.mu >= 0:
            raise ValueError(f"mu must be >= 0 (got {self.mu})")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (got {self.temperature})")
        if not isinstance(self.projection_dim, int) or self.projection_dim < 1:
            raise ValueError(f"projection_dim must be an integer >= 1 (got {self.projection_dim!r})")
        check_choice(self.aggregation, AGGREGATION_WEIGHTS, "aggregation")
        check_choice(self.untrained_client, UNTRAINED_CLIENT_MODEL, "untrained_client")


def projection_head(feature_dim: int, out_dim: int) -> nn.Sequential:
    """[MOON] ``ModelFedCon``'s ``l1`` (d -> d), ReLU, ``l2`` (d -> out_dim)."""
    return nn.Sequential(nn.Linear(feature_dim, feature_dim), nn.ReLU(), nn.Linear(feature_dim, out_dim))


def model_contrastive_loss(z: torch.Tensor, z_glob: torch.Tensor, z_prev: torch.Tensor,
                           temperature: float) -> torch.Tensor:
    """ℓ_con averaged over the batch: CE of the logits [cos(z, z_glob), cos(z, z_prev)] / τ with
    the global model as the positive (index 0), as [MOON] ``train_net_fedcon``; float32."""
    with torch.autocast(z.device.type, enabled=False):
        z = z.float()
        logits = torch.stack([F.cosine_similarity(z, z_glob.float(), dim=-1),
                              F.cosine_similarity(z, z_prev.float(), dim=-1)], dim=1) / temperature
        return F.cross_entropy(logits, torch.zeros(len(z), dtype=torch.long, device=z.device))


class Projected(nn.Module):
    """z = g(F(x)) of a (model, projection) pair, for :func:`~fedkd_core.training.predict`."""

    def __init__(self, model: nn.Module, projection: nn.Module):
        super().__init__()
        self.model, self.projection = model, projection

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(self.model.features(x))


def feature_dim(model: nn.Module, channels: int, size: int) -> int:
    """The dimension of ``model.features`` on one input (an eval-mode copy; no BN update)."""
    probe = frozen_copy(model)
    with torch.no_grad():
        device = next(probe.parameters()).device
        return int(probe.features(torch.zeros(1, channels, size, size, device=device)).flatten(1).shape[1])


def split_message(message: Message) -> tuple[Message, Message]:
    """(the model's state, the projection's state with the prefix removed)."""
    model = {name: t for name, t in message.items() if not name.startswith(PROJECTION)}
    projection = {name[len(PROJECTION):]: t for name, t in message.items() if name.startswith(PROJECTION)}
    return model, projection


def projection_message(projection: nn.Module) -> Message:
    return {PROJECTION + name: t for name, t in parameters_message(projection).items()}


class Moon(FromGlobal):
    Config = MoonConfig
    personalised = True
    CLIENT_STATE = ("personal", "previous_projection")

    def __init__(self, config: MoonConfig, ctx):
        super().__init__(config, ctx)
        dataset = ctx.data.dataset
        self.feature_dim = feature_dim(ctx.initial_model, dataset.in_channels, dataset.image_size)
        self.projection = self.new_projection()  # the global projection head (the server's)
        self.worker_projection = self.new_projection()
        self.previous_projection: dict[int, nn.Module] = {}

    def new_projection(self) -> nn.Module:
        """g with initial weights from the server's stream (at construction: round 0, the same on
        every copy; a head made later is overwritten by loaded weights)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.rng(SERVER, "server").integers(2**62)))
            head = projection_head(self.feature_dim, self.config.projection_dim)
        return head.to(self.ctx.device)

    # --- the steps -----------------------------------------------------------------------------------
    def download(self, client: int) -> Message:
        return {**parameters_message(self.model), **projection_message(self.projection)}

    def client_update(self, client: int, message: Message) -> Message:
        model_state, projection_state = split_message(message)
        self.worker.load_state_dict(model_state)
        self.worker_projection.load_state_dict(projection_state)
        loss_fn = self.contrastive_loss(client)
        train(self.worker, self.ctx.data.dataset, self.ctx.data.client_train[client], self.ctx.train,
              generator=self.generator(client), loss_fn=loss_fn,
              parameters=[*self.worker.parameters(), *self.worker_projection.parameters()])
        self.personal[client] = frozen_copy(self.worker)
        self.previous_projection[client] = frozen_copy(self.worker_projection)
        return {**parameters_message(self.worker), **projection_message(self.worker_projection)}

    def contrastive_loss(self, client: int):
        """CE + μ·ℓ_con against the global model (the worker as downloaded) and the client's
        previous model; CE alone for a client without a previous model."""
        if client not in self.personal:
            return cross_entropy_loss
        anchors = (Projected(frozen_copy(self.worker), frozen_copy(self.worker_projection)),
                   Projected(self.personal[client], self.previous_projection[client]))
        targets = self.anchor_projections(client, anchors)
        projection, mu, tau = self.worker_projection, self.config.mu, self.config.temperature

        def loss_fn(model, batch: Batch):
            features = model.features(batch.x)
            z_glob, z_prev = targets(batch)
            return (F.cross_entropy(model.head(features).float(), batch.y)
                    + mu * model_contrastive_loss(projection(features), z_glob, z_prev, tau))

        return loss_fn

    def anchor_projections(self, client: int, anchors):
        """batch -> (z_glob, z_prev): precomputed over the client's data when batches are not
        augmented, else computed on each batch."""
        if self.ctx.train.augment == "none":
            indices = np.asarray(self.ctx.data.client_train[client])
            precomputed = [predict(a, self.ctx.data.dataset, indices, split="train",
                                   mixed_precision=self.ctx.train.mixed_precision) for a in anchors]
            return lambda batch: tuple(z[batch.position] for z in precomputed)

        def on_batch(batch: Batch):
            with torch.no_grad():
                return tuple(a(batch.x) for a in anchors)

        return on_batch

    def server_update(self, uploads: dict[int, Message]) -> None:
        clients = sorted(uploads)
        weights = AGGREGATION_WEIGHTS[self.config.aggregation]([self.ctx.client_size(k) for k in clients])
        model_state, projection_state = split_message(weighted_average([uploads[k] for k in clients], weights))
        self.model.load_state_dict(model_state)
        self.projection.load_state_dict(projection_state)

    # --- client state: the previous projection head is not a model of ctx.new_model()'s shape ----------
    def load_client_state(self, client: int, state: Message) -> None:
        prefix = "previous_projection/"
        projection_state = {n[len(prefix):]: t for n, t in state.items() if n.startswith(prefix)}
        super().load_client_state(client, {n: t for n, t in state.items() if not n.startswith(prefix)})
        if projection_state:
            head = self.new_projection()
            head.load_state_dict(projection_state)
            self.previous_projection[client] = frozen_copy(head)
