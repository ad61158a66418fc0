"""A method from outside the package, as a user writes it (tests of register, conformance, compare):
FedAvg with server momentum (Hsu et al., 2019, "FedAvgM"), the book's "Add your method" example;
and the ``registry`` fixture those tests share (import it by name)."""

import os
from dataclasses import dataclass

import pytest
import torch

from fedkd_core.aggregate import weighted_average
from fedkd_core.algorithms import ALGORITHMS, REGISTERED_ENV
from fedkd_core.algorithms.fedavg import FedAvg


@pytest.fixture
def registry(monkeypatch):
    """Registrations made by a test are undone after it (the registry and what children inherit)."""
    saved = dict(ALGORITHMS)
    monkeypatch.setenv(REGISTERED_ENV, os.environ.get(REGISTERED_ENV, ""))
    yield
    ALGORITHMS.clear()
    ALGORITHMS.update(saved)


@dataclass(frozen=True)
class FedAvgMConfig:
    beta: float = 0.9  # server momentum
    server_lr: float = 1.0


class FedAvgM(FedAvg):
    """The server treats the mean update as a gradient: v <- beta v + (mean - w), w <- w + lr v."""

    Config = FedAvgMConfig

    def __init__(self, config, ctx):
        super().__init__(config, ctx)
        self.velocity = {name: torch.zeros_like(t) for name, t in self.model.state_dict().items() if t.is_floating_point()}

    def server_update(self, uploads):
        clients = sorted(uploads)
        mean = weighted_average([uploads[k] for k in clients], [self.ctx.client_size(k) for k in clients])
        state = self.model.state_dict()
        for name, velocity in self.velocity.items():
            velocity.mul_(self.config.beta).add_(mean[name] - state[name])
            mean[name] = state[name] + self.config.server_lr * velocity
        self.model.load_state_dict(mean)


class NeedsTransfer(FedAvgM):
    """FedAvgM that says it distils over a transfer set (it does not; the declaration is what is tested)."""

    NEEDS = frozenset({"transfer_set"})
