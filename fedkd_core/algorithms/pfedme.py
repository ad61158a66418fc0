"""pFedMe (T. Dinh et al., NeurIPS 2020): personalisation with Moreau envelopes.

Client k keeps a local copy w of the global model and, for every minibatch, approximately
solves the inner problem θ = argmin_θ f(θ; batch) + (λ/2)||θ − w||² with K gradient steps
θ ← θ − η_p (∇f(θ) + λ(θ − w) + μ_p θ), then moves w ← w − λ η (w − θ)
(CharlieDinh/pFedMe ``userpFedMe.py`` and ``pFedMeOptimizer``). After E epochs it uploads w;
the server sets w_g ← (1 − β) w_g + β · mean(w). The personalised model evaluated is θ.

Defaults follow the official code's command for a CNN (CharlieDinh/pFedMe README, CIFAR-10): K = 5,
λ = 15, η_p = 0.01 (personal learning rate), β = 1, and pFedMeOptimizer's μ_p = 0.001; η is the
chapter's learning rate. η_p = 0.01 is also PFLlib's default. The README's η_p = 0.09 is for its MNIST
MLP: on the FedCKD chapter's Fashion-MNIST CNN it diverged (NaN weights for 2 of 20 clients in round 1,
every client from round 2; measured in the reduced profile). As in PFLlib, E counts epochs over the
client's batches (the official code's ``local_epochs`` counts single batches).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from ..aggregate import weighted_average
from ..precision import use_bf16
from ..training import autocast, iterate_batches
from .shapes.base import Algorithm, Message, PersonalModels, parameters_message


@dataclass(frozen=True)
class PFedMeConfig:
    inner_steps: int = 5  # K
    lam: float = 15.0  # λ of the Moreau envelope
    personal_lr: float = 0.01  # η_p (0.09 is the README's value for an MLP; it diverges on the CNNs)
    inner_weight_decay: float = 0.001  # μ_p of pFedMeOptimizer
    beta: float = 1.0

    def __post_init__(self) -> None:
        if self.inner_steps < 1:
            raise ValueError(f"inner_steps must be >= 1 (got {self.inner_steps})")
        if self.lam <= 0 or self.personal_lr <= 0:
            raise ValueError(f"lam and personal_lr must be > 0 (got {self.lam}, {self.personal_lr})")
        if not 0 < self.beta <= 2:
            raise ValueError(f"beta must be in (0, 2] (got {self.beta})")


@torch.no_grad()
def moreau_inner_step(theta: list[torch.Tensor], local: list[torch.Tensor], lam: float, lr: float,
                      weight_decay: float) -> None:
    """θ ← θ − η_p (∇f(θ) + λ(θ − w) + μ_p θ), in place; θ's .grad holds ∇f(θ).

    One fused kernel per operation over all parameters (``torch._foreach_*``), in the order of the
    per-tensor expression ``p - lr * (grad + lam * (p - w) + weight_decay * p)``: the same numbers.
    """
    step = torch._foreach_sub(theta, local)
    torch._foreach_mul_(step, lam)
    step = torch._foreach_add([p.grad if p.grad is not None else torch.zeros_like(p) for p in theta], step)
    torch._foreach_add_(step, torch._foreach_mul(theta, weight_decay))
    torch._foreach_mul_(step, lr)
    torch._foreach_sub_(theta, step)


@torch.no_grad()
def moreau_outer_step(local: list[torch.Tensor], theta: list[torch.Tensor], lam: float, lr: float) -> None:
    """w ← w − λ η (w − θ), in place (fused over all parameters, as :func:`moreau_inner_step`)."""
    step = torch._foreach_sub(local, theta)
    torch._foreach_mul_(step, lam * lr)
    torch._foreach_sub_(local, step)


class PFedMe(Algorithm):
    Config = PFedMeConfig
    CLIENT_STATE = ("personal",)

    def __init__(self, config: PFedMeConfig, ctx):
        super().__init__(config, ctx)
        self.model = ctx.new_model()
        self.local = ctx.new_model()  # w, the client's copy of the global model
        self.personal = PersonalModels(ctx)  # θ per client

    def download(self, client: int) -> Message:
        return parameters_message(self.model)

    def client_update(self, client: int, message: Message) -> Message:
        c, train_config = self.config, self.ctx.train
        self.local.load_state_dict(message)
        theta_model = self.personal[client]
        theta_model.load_state_dict(message)
        theta = list(theta_model.parameters())
        local = list(self.local.parameters())
        theta_model.train()
        device = theta[0].device
        bf16 = use_bf16(train_config.mixed_precision, device)
        generator = self.generator(client)
        for _ in range(train_config.epochs):
            for batch in iterate_batches(self.ctx.data.dataset, self.ctx.data.client_train[client],
                                         train_config.batch_size, device=device, generator=generator,
                                         augment=train_config.augment, drop_last=train_config.drop_last):
                for _ in range(c.inner_steps):
                    theta_model.zero_grad(set_to_none=False)
                    with autocast(device, bf16):
                        loss = F.cross_entropy(theta_model(batch.x), batch.y)
                    loss.backward()
                    if train_config.max_grad_norm is not None:  # TrainConfig's clipping, on θ's gradient
                        torch.nn.utils.clip_grad_norm_(theta, train_config.max_grad_norm)
                    moreau_inner_step(theta, local, c.lam, c.personal_lr, c.inner_weight_decay)
                moreau_outer_step(local, theta, c.lam, train_config.lr)
        theta_model.zero_grad(set_to_none=True)  # θ stays resident between rounds; its gradients need not
        # buffers (BatchNorm statistics) travel with w as they were updated while training θ
        for name, buffer in theta_model.named_buffers():
            self.local.get_buffer(name).copy_(buffer)
        return parameters_message(self.local)

    def server_update(self, uploads: dict[int, Message]) -> None:
        clients = sorted(uploads)
        mean = weighted_average([uploads[k] for k in clients], [self.ctx.client_size(k) for k in clients])
        beta = self.config.beta
        state = self.model.state_dict()
        self.model.load_state_dict({k: (1 - beta) * state[k] + beta * v if v.is_floating_point() else v
                                    for k, v in mean.items()})

    def personal_model(self, client: int):
        return self.personal[client] if client in self.personal else self.model

    def global_model(self):
        return self.model
