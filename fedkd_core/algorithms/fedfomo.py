"""FedFomo (Zhang et al., ICLR 2021): personalised first-order model optimisation.

The server keeps the models uploaded in the last round and an affinity matrix P (initially the
identity). A selected client k downloads the M of those models with the largest affinity P[k, ·]
(its own first, through the identity, when it was selected last round; none in the first
round, as in PFLlib's ``serverfomo``) and weighs each by its first-order gain on a held-out
validation split of its own data,

    w_n = (L_k(θ_k^old) − L_k(θ_n)) / ||θ_n − θ_k^old||,

keeps the positive weights, normalises them to sum 1 and sets θ_k = Σ_n w_n θ_n (PFLlib's
``clientfomo``; the official NVlabs code adds θ_old + Σ w_n(θ_n − θ_old), the same when the
weights sum to 1). If no weight is positive it keeps θ_k^old. It then trains θ_k with CE on the
rest of its data and uploads θ_k and its raw weights; the server adds them to P[k, ·].

Defaults: M = 5 and a 20% validation split (PFLlib: ``-M 5``, ``val_ratio = 0.2``, the last 20%
of the client's training data); the official code's ε-greedy exploration is not used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from ..training import predict, train
from .shapes.base import Algorithm, Message, PersonalModels, parameters_message


@dataclass(frozen=True)
class FedFomoConfig:
    num_models: int = 5  # M
    val_fraction: float = 0.2

    def __post_init__(self) -> None:
        if self.num_models < 1:
            raise ValueError(f"num_models must be >= 1 (got {self.num_models})")
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction must be in (0, 1) (got {self.val_fraction})")


def fomo_weights(old_loss: float, losses: list[float], distances: list[float]) -> torch.Tensor:
    """Raw first-order weights (L_old − L_n) / (||θ_n − θ_old|| + 1e-5)."""
    return torch.tensor([(old_loss - loss) / (distance + 1e-5) for loss, distance in zip(losses, distances)])


def normalised_positive(weights: torch.Tensor) -> torch.Tensor | None:
    """max(w, 0) / Σ max(w, 0); None when no weight is positive."""
    positive = weights.clamp_min(0)
    return positive / positive.sum() if positive.sum() > 0 else None


def parameter_distance(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], names: list[str]) -> float:
    return float(torch.sqrt(sum(((a[n].float() - b[n].float()) ** 2).sum() for n in names)))


class FedFomo(Algorithm):
    Config = FedFomoConfig
    CLIENT_STATE = ("models",)

    def __init__(self, config: FedFomoConfig, ctx):
        super().__init__(config, ctx)
        self.models = PersonalModels(ctx)
        self.uploaded: dict[int, Message] = {}  # the models uploaded in the last round, by client
        self.affinity = torch.eye(ctx.data.num_clients)
        self.parameter_names = [n for n, _ in ctx.initial_model.named_parameters()]

    def split(self, client: int) -> tuple[np.ndarray, np.ndarray]:
        """(train, validation): the validation split is the last ``val_fraction`` of the data."""
        indices = np.asarray(self.ctx.data.client_train[client])
        size = int(self.config.val_fraction * len(indices)) if len(indices) > 1 else 0
        return (indices[: len(indices) - size], indices[len(indices) - size:]) if size else (indices, indices)

    def download(self, client: int) -> Message:
        pool = torch.tensor(sorted(self.uploaded), dtype=torch.long)
        count = min(self.config.num_models, len(pool))
        chosen = pool[torch.topk(self.affinity[client, pool], count).indices] if count else pool
        message = {"ids": chosen.clone()}
        for slot, source in enumerate(chosen.tolist()):
            message.update({f"m{slot}.{name}": t for name, t in self.uploaded[source].items()})
        return message

    def val_loss(self, state: dict[str, torch.Tensor], validation: np.ndarray, probe) -> float:
        probe.load_state_dict(state)
        logits = predict(probe, self.ctx.data.dataset, validation, split="train")
        labels = self.ctx.data.dataset.y_train[torch.as_tensor(validation)].to(logits.device)
        return float(F.cross_entropy(logits, labels))

    def client_update(self, client: int, message: Message) -> Message:
        ids = message["ids"].tolist()
        model = self.models[client]
        device = next(model.parameters()).device  # a message may arrive as host tensors (Flower)
        received = [{name[len(f"m{slot}."):]: t.to(device) for name, t in message.items() if name.startswith(f"m{slot}.")}
                    for slot in range(len(ids))]
        old = parameters_message(model)
        train_idx, val_idx = self.split(client)
        probe = self.ctx.new_model()
        old_loss = self.val_loss(old, val_idx, probe)
        raw = fomo_weights(old_loss, [self.val_loss(s, val_idx, probe) for s in received],
                           [parameter_distance(s, old, self.parameter_names) for s in received])
        weights = normalised_positive(raw)
        if weights is not None:
            mixed = {name: sum(w * s[name].float() for w, s in zip(weights.tolist(), received)).to(t.dtype)
                     if t.is_floating_point() else t for name, t in old.items()}
            model.load_state_dict(mixed)
        train(model, self.ctx.data.dataset, train_idx, self.ctx.train, generator=self.generator(client))
        return {**parameters_message(model), "fomo.ids": torch.tensor(ids, dtype=torch.long),
                "fomo.weights": raw.float()}

    def server_update(self, uploads: dict[int, Message]) -> None:
        for client, upload in uploads.items():
            self.affinity[client, upload["fomo.ids"].cpu()] += upload["fomo.weights"].cpu()  # the server's table, on the host
        self.uploaded = {client: {n: t for n, t in upload.items() if not n.startswith("fomo.")}
                         for client, upload in uploads.items()}

    def personal_model(self, client: int):
        return self.models[client]
