"""FedProx (Li et al., MLSys 2020): FedAvg with a proximal term to the global model.

Local objective: CE(w; D_k) + (μ/2) · ||w − w_g||² (pFedSD's ``cal_prox_loss``, PFLlib's
``PerturbedGradientDescent``). The personal model of every client is the global model. FedCKD
does not state μ; pFedSD's README runs use 0 (which is FedAvg). The default μ = 0.01 is a common
value in the FedProx literature (a chapter parameter).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from .shapes.from_global import PERSONAL_MODEL, FromGlobal, check_choice


@dataclass(frozen=True)
class FedProxConfig:
    """``personal``: the model a client is scored with, as in :class:`~.fedavg.FedAvgConfig`."""

    mu: float = 0.01
    aggregation: str = "size"
    personal: str = "global"

    def __post_init__(self) -> None:
        check_choice(self.personal, PERSONAL_MODEL, "personal")
        if self.mu < 0:
            raise ValueError(f"mu must be >= 0 (got {self.mu})")


def proximal_term(model: torch.nn.Module, anchor: list[torch.Tensor], mu: float) -> torch.Tensor:
    """(μ/2) Σ ||w − w_g||² over the trainable parameters."""
    return 0.5 * mu * sum(((p.float() - a.float()) ** 2).sum() for p, a in zip(model.parameters(), anchor))


class FedProx(FromGlobal):
    Config = FedProxConfig

    @property
    def personalised(self) -> bool:
        return self.config.personal == "trained"

    def local_loss(self, client, global_model):
        anchor = [p.detach() for p in global_model.parameters()]
        mu = self.config.mu

        def loss_fn(model, batch):
            return F.cross_entropy(model(batch.x), batch.y) + proximal_term(model, anchor, mu)

        return loss_fn
