"""pFedSD (Jin et al., TPDS 2023): personalised FL via self-knowledge distillation.

A selected client starts from the global model and trains with
CE(p_k, y) + λ · τ² · KL(p_h^τ ‖ p_k^τ), the teacher p_h being its own personalised model from
its previous participation; at its first participation it trains with CE only
(CGCL-codes/pFedSD ``worker_pFedSD.py``, ``is_active_before``). The trained model is the
client's personalised model and is uploaded; the server averages.

Defaults: λ = 0.5 and τ = 3, the values FedCKD states it takes "in line with [pFedSD]" so that
the two methods differ only in the global teacher and annealing; the official parser defaults
are λ = 1, τ = 1. The official code averages uniformly (``aggregation="uniform"``); the default
here is by data size, as for every other method of the chapter. pFedSD's hidden
``--label_smoothing 0.1`` is never read by its workers, so there is no label smoothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from .fedckd import SelfDistillationConfig, fedckd_loss
from .shapes.from_global import FromGlobal


@dataclass(frozen=True)
class PFedSDConfig(SelfDistillationConfig):
    """λ, τ and the KL choices, shared with FedCKD; no global teacher, no annealing."""


class PFedSD(FromGlobal):
    Config = PFedSDConfig

    def local_loss(self, client, global_model):
        history = [self.teacher_logits(self.personal[client], client)] if client in self.personal else []
        c = self.config

        def loss_fn(model, batch):
            return fedckd_loss(model(batch.x), batch.y, [t[batch.position] for t in history],
                               c.lam, c.temperature, c.kl_direction, c.scale_t2)

        return loss_fn
