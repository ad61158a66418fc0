"""FedCKD (Wang, Liu, Guo, Li, Ge): personalised FL via comprehensive knowledge distillation.

Each selected client replaces its local model by the global model w_g^{t-1} and trains it for E
epochs with Eq. (4),

    L_k = CE(p_k, y) + λ_t · KL(p_k^τ, p_g^τ) + λ_t · KL(p_k^τ, p_h^τ),

where p^τ = softmax(z / τ), the *global teacher* p_g is w_g^{t-1} and the *historical teacher*
p_h is the client's own model after its previous local training, w_h^{t-1}. The trained model is
stored as the new historical model, is the client's personalised model, and is uploaded; the
server averages uploads by data size (Algorithm 1). λ is annealed per round: λ_t = λ · γ^(t-1).

Where the paper is silent (each choice is a config field):

* ``kl_direction``: the paper writes KL(p_k^τ, p_g^τ) without a direction. Default
  "teacher_student" is Hinton's KL(p_teacher ‖ p_student), as in pFedSD's ``_divergence`` which
  FedCKD follows; "student_teacher" is the literal reading KL(p_k ‖ p_teacher).
* ``scale_t2``: multiply each KL by τ² (pFedSD's code does; Hinton et al. recommend it).
* ``first_round``: a client with no historical model yet (its first participation) trains with
  CE + λ·KL(global) ("global_only", default), CE alone ("ce_only", pFedSD's rule), or uses the
  global model as both teachers ("global_twice").
* ``untrained_client``: a client never selected so far is evaluated with the global model.
  A client not sampled in a round keeps its last historical model, so its accuracy is that of
  its stored model (pFedSD's master keeps the last accuracy of unsampled clients).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from ..distill import kd_kl, tempered_softmax
from .shapes.from_global import UNTRAINED_CLIENT_MODEL, FromGlobal, check_choice


def reverse_kl(student_logits: torch.Tensor, teacher_probs: torch.Tensor, temperature: float = 1.0,
               scale_by_t2: bool = True) -> torch.Tensor:
    """KL(student ‖ teacher) at ``temperature``, averaged over the batch."""
    log_student = F.log_softmax(student_logits.float() / temperature, dim=1)
    log_teacher = torch.log(teacher_probs.float().clamp_min(1e-12))
    loss = (log_student.exp() * (log_student - log_teacher)).sum(1).mean()
    return loss * temperature**2 if scale_by_t2 else loss


KL_DIRECTIONS = {"teacher_student": kd_kl, "student_teacher": reverse_kl}
FIRST_ROUND_RULES = ("global_only", "ce_only", "global_twice")


@dataclass(frozen=True)
class SelfDistillationConfig:
    """What pFedSD and FedCKD share: the weight and temperature of each KL term and the choices
    around them (the fields are documented in the module docstring)."""

    lam: float = 0.5  # λ, the weight of each distillation term (paper: 0.50)
    temperature: float = 3.0  # τ (paper: 3)
    kl_direction: str = "teacher_student"
    scale_t2: bool = True
    untrained_client: str = "global"
    aggregation: str = "size"

    def __post_init__(self) -> None:
        if self.lam < 0:
            raise ValueError(f"lam must be >= 0 (got {self.lam})")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (got {self.temperature})")
        check_choice(self.kl_direction, KL_DIRECTIONS, "kl_direction")
        check_choice(self.untrained_client, UNTRAINED_CLIENT_MODEL, "untrained_client")


@dataclass(frozen=True)
class FedCKDConfig(SelfDistillationConfig):
    gamma: float = 0.99  # annealing decay per round (paper: 0.99); 1.0 switches annealing off
    first_round: str = "global_only"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1] (got {self.gamma})")
        check_choice(self.first_round, FIRST_ROUND_RULES, "first_round")


def annealed_lambda(lam: float, gamma: float, round_index: int) -> float:
    """λ_t = λ · γ^(t-1): round 1 uses λ itself, each later round multiplies by γ."""
    if round_index < 1:
        raise ValueError(f"round_index must be >= 1 (got {round_index})")
    return lam * gamma ** (round_index - 1)


def fedckd_loss(student_logits: torch.Tensor, labels: torch.Tensor, teacher_logits: list[torch.Tensor],
                lam: float, temperature: float, kl_direction: str = "teacher_student",
                scale_t2: bool = True) -> torch.Tensor:
    """Eq. (4): CE(p_k, y) + Σ_teachers λ · KL at temperature τ (one term per teacher logits)."""
    kl = KL_DIRECTIONS[kl_direction]
    loss = F.cross_entropy(student_logits.float(), labels)
    for logits in teacher_logits:
        loss = loss + lam * kl(student_logits, tempered_softmax(logits, temperature), temperature, scale_t2)
    return loss


class FedCKD(FromGlobal):
    Config = FedCKDConfig

    def lambda_now(self) -> float:
        return annealed_lambda(self.config.lam, self.config.gamma, self.round)

    def teachers(self, client: int, global_model) -> list:
        """[global, historical] teachers; the first-participation rule when there is no history."""
        if client in self.personal:
            return [global_model, self.personal[client]]
        return {"global_only": [global_model], "ce_only": [], "global_twice": [global_model, global_model]}[
            self.config.first_round]

    def local_loss(self, client, global_model):
        targets = [self.teacher_logits(t, client) for t in self.teachers(client, global_model)]
        lam, c = self.lambda_now(), self.config

        def loss_fn(model, batch):
            return fedckd_loss(model(batch.x), batch.y, [t[batch.position] for t in targets],
                               lam, c.temperature, c.kl_direction, c.scale_t2)

        return loss_fn
