"""train()'s plain-SGD step (issue 62) gives the weights torch.optim.SGD(foreach=True) gives, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from fedkd_core.federation import DataConfig, build_federated_data
from fedkd_core.models import InputShape, make_model
from fedkd_core.training import TrainConfig, iterate_batches, train


@pytest.fixture(scope="module")
def data():
    return build_federated_data(DataConfig("mnist", num_clients=2, samples_per_client=45, local_test_size=5), seed=0)


def reference(model, dataset, indices, config, seed, *, parameters=None):
    """What train() did before the fast path: torch's foreach SGD, zero_grad(set_to_none) per step."""
    trained = list(parameters or model.parameters())
    optimizer = torch.optim.SGD(trained, lr=config.lr, foreach=True)
    model.train()
    total, steps = torch.zeros(()), 0
    generator = torch.Generator().manual_seed(seed)
    for _ in range(config.epochs):
        for batch in iterate_batches(dataset, indices, config.batch_size, device=torch.device("cpu"),
                                     generator=generator):
            loss = F.cross_entropy(model(batch.x), batch.y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(trained, config.max_grad_norm)
            optimizer.step()
            total += loss.detach()
            steps += 1
    return float(total) / steps


def model():
    return make_model("fedavg_cnn", InputShape(1, 28, 10), seed=0).to(memory_format=torch.channels_last)


@pytest.mark.parametrize("max_grad_norm", [None, 0.5])
def test_plain_sgd_trains_to_the_same_bits_as_torch_sgd(data, max_grad_norm):
    config = TrainConfig(epochs=2, batch_size=10, lr=0.05, mixed_precision=False, max_grad_norm=max_grad_norm)
    indices = data.client_train[0]
    ours, theirs = model(), model()
    loss = train(ours, data.dataset, indices, config, generator=torch.Generator().manual_seed(3))
    expected = reference(theirs, data.dataset, indices, config, 3)
    assert loss == expected
    for name, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[name], value), name
    assert all(p.grad is None for p in ours.parameters())


def test_plain_sgd_over_a_subset_of_parameters_leaves_the_rest_untouched(data):
    config = TrainConfig(epochs=1, batch_size=10, lr=0.05, mixed_precision=False)
    ours, theirs = model(), model()
    before = {name: value.clone() for name, value in ours.state_dict().items()}
    train(ours, data.dataset, data.client_train[1], config, generator=torch.Generator().manual_seed(1),
          parameters=list(ours.head.parameters()))
    reference(theirs, data.dataset, data.client_train[1], config, 1, parameters=list(theirs.head.parameters()))
    for name, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[name], value), name
        assert name.startswith("head") or torch.equal(value, before[name]), name
    assert all(p.grad is None for p in ours.head.parameters())


def test_momentum_and_a_given_optimiser_still_step_through_torch(data):
    config = TrainConfig(epochs=1, batch_size=10, lr=0.05, momentum=0.9, mixed_precision=False)
    a, b = model(), model()
    train(a, data.dataset, data.client_train[0], config, generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.SGD(b.parameters(), lr=0.05, momentum=0.9, foreach=True)
    train(b, data.dataset, data.client_train[0], config, generator=torch.Generator().manual_seed(0), optimizer=optimizer)
    assert optimizer.state  # the momentum buffers lived in the caller's optimiser
    for name, value in a.state_dict().items():
        assert torch.equal(b.state_dict()[name], value), name
    assert not np.isnan(float(next(a.parameters()).sum()))
