"""FedAvg's aggregation and message byte counting on hand-made tensors."""

import pytest
import torch

from fedkd_core import aggregate
from fedkd_core.aggregate import weighted_average
from fedkd_core.algorithms.shapes.base import message_bytes


def test_weighted_average_equals_the_sample_size_weighted_mean():
    states = [{"w": torch.tensor([1.0, 2.0]), "b": torch.tensor(0.0)},
              {"w": torch.tensor([3.0, 6.0]), "b": torch.tensor(4.0)}]
    averaged = weighted_average(states, [100, 300])
    assert torch.allclose(averaged["w"], torch.tensor([2.5, 5.0]))
    assert torch.allclose(averaged["b"], torch.tensor(3.0))


def test_integer_buffers_are_not_averaged():
    states = [{"n": torch.tensor(5)}, {"n": torch.tensor(9)}]
    assert weighted_average(states, [1, 1])["n"].item() == 5


def test_bad_weights_are_rejected():
    with pytest.raises(ValueError, match="weights"):
        weighted_average([{"w": torch.ones(1)}], [1, 2])
    with pytest.raises(ValueError, match="weights"):
        weighted_average([{"w": torch.ones(1)}], [0])


def test_message_bytes_counts_tensor_storage():
    message = {"a": torch.zeros(10, 3), "b": torch.zeros(4, dtype=torch.float64), "c": torch.zeros(8, dtype=torch.uint8)}
    assert message_bytes(message) == 10 * 3 * 4 + 4 * 8 + 8
    assert message_bytes({}) == 0 and message_bytes(None) == 0


def whole_tensor_average(values, weights):
    """The average as computed before slicing: every client's whole tensor stacked at once."""
    w = torch.as_tensor(weights, dtype=torch.float64)
    w = w / w.sum()
    stacked = torch.stack([v.double() for v in values])
    return (w.view(-1, *[1] * values[0].dim()) * stacked).sum(0).to(values[0].dtype)


@pytest.mark.parametrize("clients", [1, 3, 17, 100])
@pytest.mark.parametrize("slice_bytes", [8, 8 * 7 * 100, 8 * 4096 * 100, 64 * 2**20])
def test_averaging_slice_by_slice_gives_the_whole_tensor_average_bit_for_bit(monkeypatch, clients, slice_bytes):
    """The server step averages each tensor in slices (memory bounded by SLICE_BYTES, not by the
    clients x the tensor); the result must be exactly the whole-tensor computation, at slice sizes
    that cut tensors mid-row and leave ragged last slices."""
    monkeypatch.setattr(aggregate, "SLICE_BYTES", slice_bytes)
    generator = torch.Generator().manual_seed(clients)
    shapes = {"conv": (8, 3, 3, 3), "bias": (10,), "scalar": (), "odd": (4097,)}
    states = [{name: torch.randn(shape, generator=generator) * (k + 1) for name, shape in shapes.items()}
              for k in range(clients)]
    weights = torch.randint(1, 500, (clients,), generator=generator).tolist()
    averaged = weighted_average(states, weights)
    for name, shape in shapes.items():
        expected = whole_tensor_average([s[name] for s in states], weights)
        assert averaged[name].shape == torch.Size(shape)
        assert torch.equal(averaged[name], expected), name
