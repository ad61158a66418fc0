"""The baselines' equations, checked where they can be worked by hand: FedProx's local objective
(μ = 0 is FedAvg; the proximal term (μ/2)·||w − w_g||² and its gradient μ(w − w_g)) and pFedMe's
inner problem (K steps of its update reach argmin_θ f(θ) + (λ/2)||θ − w||² + (μ_p/2)||θ||²)."""

import pytest
import torch
from torch.nn import functional as F

from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
from fedkd_core.algorithms.pfedme import moreau_inner_step, moreau_outer_step
from fedkd_core.conformance import TINY_DATA, TINY_TRAIN
from fedkd_core.experiment import _run_round
from fedkd_core.federation import build_federated_data
from fedkd_core.training import Batch


@pytest.fixture(scope="module")
def data():
    return build_federated_data(TINY_DATA, 0)


def make(name: str, data, **params):
    ctx = Context(data=data, model_name="knfu_m1", train=TINY_TRAIN, device=torch.device("cpu"), seed=0)
    return algorithm_class(name)(algorithm_config(name, params), ctx)


def test_fedprox_with_mu_zero_is_fedavg(data):
    """Two rounds, same clients and seed: the same global model bit for bit, and the same scores."""
    fedprox, fedavg = make("fedprox", data, mu=0.0), make("fedavg", data)
    for round_index, selected in enumerate([[0, 1, 2], [0, 2]], start=1):
        assert _run_round(fedprox, round_index, selected) == _run_round(fedavg, round_index, selected)
    a, b = fedprox.global_model().state_dict(), fedavg.global_model().state_dict()
    assert all(torch.equal(a[name], b[name]) for name in a)
    # and μ > 0 is not FedAvg: the term is there
    other = make("fedprox", data, mu=1.0)
    _run_round(other, 1, [0, 1, 2])
    moved = make("fedavg", data)
    _run_round(moved, 1, [0, 1, 2])
    assert not all(torch.equal(other.global_model().state_dict()[n], moved.global_model().state_dict()[n]) for n in a)


def test_fedprox_loss_is_cross_entropy_plus_the_proximal_term_by_hand(data):
    """w = w_g + δ with a known δ on every parameter: the loss exceeds the cross-entropy by
    (μ/2)·Σ δ² exactly, and the term's gradient is μ·δ."""
    mu = 0.3
    fedprox = make("fedprox", data, mu=mu)
    global_model = fedprox.ctx.new_model().double()
    loss_fn = fedprox.local_loss(0, global_model)
    model = fedprox.ctx.new_model().double().eval()  # float64: the cross-entropy's gradients cancel exactly
    deltas = []
    with torch.no_grad():
        for index, parameter in enumerate(model.parameters()):
            delta = torch.full_like(parameter, 0.01 * (index + 1))  # 0.01, 0.02, ... per tensor
            parameter.add_(delta)
            deltas.append(delta)
    x = torch.randn(4, 1, 28, 28, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    batch = Batch(x=x, y=torch.tensor([0, 1, 2, 3]), position=torch.arange(4))
    loss = loss_fn(model, batch)
    ce = F.cross_entropy(model(x), batch.y)
    by_hand = mu / 2 * sum(float((0.01 * (i + 1)) ** 2) * d.numel() for i, d in enumerate(deltas))
    assert float((loss - ce).detach()) == pytest.approx(by_hand, rel=1e-4)
    term_grads = torch.autograd.grad(loss - ce, list(model.parameters()))
    for gradient, delta in zip(term_grads, deltas):
        torch.testing.assert_close(gradient, mu * delta, rtol=1e-5, atol=1e-8)


def test_pfedme_inner_steps_solve_its_inner_problem_on_a_quadratic():
    """f(θ) = ½||θ − a||²: the minimiser of f(θ) + (λ/2)||θ − w||² + (μ_p/2)||θ||² is
    (a + λw) / (1 + λ + μ_p); the update θ ← θ − η_p(∇f(θ) + λ(θ − w) + μ_p θ) must reach it."""
    a, w = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([0.0, 1.0, 3.0])
    lam, lr, decay = 15.0, 0.01, 0.001
    theta = torch.zeros(3, requires_grad=True)
    for _ in range(400):
        theta.grad = (theta - a).detach()  # ∇f(θ)
        moreau_inner_step([theta], [w], lam, lr, decay)
    torch.testing.assert_close(theta.detach(), (a + lam * w) / (1 + lam + decay), rtol=1e-5, atol=1e-6)


def test_pfedme_steps_by_hand_one_at_a_time():
    """One inner step and one outer step on numbers worked out by hand."""
    theta, w = torch.tensor([2.0], requires_grad=True), torch.tensor([1.0])
    theta.grad = torch.tensor([0.5])
    moreau_inner_step([theta], [w], lam=3.0, lr=0.1, weight_decay=0.2)
    # 2 − 0.1 · (0.5 + 3 · (2 − 1) + 0.2 · 2) = 2 − 0.39 = 1.61
    assert float(theta.detach()) == pytest.approx(1.61)
    local = torch.tensor([1.0])
    moreau_outer_step([local], [theta.detach()], lam=3.0, lr=0.1)
    # 1 − 3 · 0.1 · (1 − 1.61) = 1.183
    assert float(local) == pytest.approx(1.183)
