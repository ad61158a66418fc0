"""FedAvg's aggregation and message byte counting on hand-made tensors."""

import pytest
import torch

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
