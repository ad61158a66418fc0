"""Knowledge-distillation pieces shared by the methods: tempered KL, soft cross-entropy."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def kd_kl(student_logits: torch.Tensor, teacher_probs: torch.Tensor, temperature: float = 1.0,
          scale_by_t2: bool = True) -> torch.Tensor:
    """KL(teacher || student) at ``temperature``, averaged over the batch (Hinton et al.).

    ``teacher_probs`` are already tempered probabilities. With ``scale_by_t2`` the result is
    multiplied by T^2 so that gradient magnitudes do not shrink as T grows.
    """
    log_student = F.log_softmax(student_logits.float() / temperature, dim=1)
    loss = F.kl_div(log_student, teacher_probs.float(), reduction="batchmean")
    return loss * temperature**2 if scale_by_t2 else loss


def soft_cross_entropy(student_logits: torch.Tensor, teacher_probs: torch.Tensor) -> torch.Tensor:
    """-sum_c p_c log q_c averaged over the batch (Selective-FD's distillation loss)."""
    return -(teacher_probs.float() * F.log_softmax(student_logits.float(), dim=1)).sum(1).mean()


def tempered_softmax(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    return F.softmax(logits.float() / temperature, dim=-1)
