"""Dropout masks come from the CPU generator on every device (issue 60, item 4): on a CPU they are
bit for bit what ``F.dropout`` / ``F.dropout2d`` draw, so the committed CPU records stay valid; on a
device they are drawn on the host and moved, so the device's own generator decides nothing."""

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from fedkd_core import models
from fedkd_core.devicecheck import STAND_IN, DeviceCheck, is_device
from fedkd_core.experiment import ExperimentConfig, simulate
from fedkd_core.federation import DataConfig
from fedkd_core.models import HostDropout, HostDropout2d, InputShape, host_drawn, make_model
from fedkd_core.randomness import MASK_GENERATOR, PREDATES, mask_generator_of, party_randomness
from fedkd_core.results import environment
from fedkd_core.training import TrainConfig


def drawn(fn, x, seed=7):
    torch.manual_seed(seed)
    return fn(x)


@pytest.mark.parametrize("p", [0.5, 0.2, 0.6])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_host_dropout2d_is_cpu_dropout2d_bit_for_bit(p, channels_last, dtype):
    x = torch.randn(13, 64, 8, 8, generator=torch.Generator().manual_seed(0)).to(dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    ours = drawn(HostDropout2d(p).train(), x)
    torch_s = drawn(lambda t: F.dropout2d(t, p, training=True), x)
    assert torch.equal(ours, torch_s) and ours.dtype == torch_s.dtype
    assert torch.equal(drawn(HostDropout2d(p).eval(), x), x)


@pytest.mark.parametrize("p", [0.5, 0.6, 0.2])
def test_host_dropout_is_cpu_dropout_bit_for_bit(p):
    x = torch.randn(37, 128, generator=torch.Generator().manual_seed(1))
    assert torch.equal(drawn(HostDropout(p).train(), x), drawn(lambda t: F.dropout(t, p, training=True), x))
    inplace = x.clone()
    expected = drawn(lambda t: F.dropout(t, p, training=True), x)
    drawn(HostDropout(p, inplace=True).train(), inplace)
    assert torch.equal(inplace, expected)


def test_gradients_through_the_mask_are_the_cpu_ones():
    x = torch.randn(4, 8, 5, 5, generator=torch.Generator().manual_seed(2), requires_grad=True)
    drawn(HostDropout2d(0.5).train(), x).square().sum().backward()
    ours = x.grad.clone()
    x.grad = None
    drawn(lambda t: F.dropout2d(t, 0.5, training=True), x).square().sum().backward()
    assert torch.equal(ours, x.grad)


def test_every_model_gets_host_drawn_dropout_and_keeps_its_state_dict():
    shape = InputShape(1, 28, 10)
    model = make_model("pfedsd_cnn_mnist", shape, seed=0)
    assert [type(m) for m in model.modules() if isinstance(m, nn.Dropout2d)] == [HostDropout2d]
    assert not any(type(m) in (nn.Dropout, nn.Dropout2d) for m in model.modules())
    plain = models.pfedsd_cnn_mnist  # the recipe itself, before host_drawn
    with torch.random.fork_rng():
        torch.manual_seed(0)
        reference = plain(shape)
    assert list(model.state_dict()) == list(reference.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), reference.state_dict().values()))
    cifar = make_model("pfedsd_cnn_cifar100", InputShape(3, 32, 100), seed=0)
    assert [type(m) for m in cifar.modules() if isinstance(m, nn.Dropout)] == [HostDropout]
    assert host_drawn(nn.Sequential(nn.Dropout(0.3, inplace=True)))[0].inplace


TINY = ExperimentConfig(
    algorithm="lg_fedavg", model="pfedsd_cnn_mnist", rounds=2, global_test_size=20, seed=3,
    data=DataConfig("fashion_mnist", num_clients=3, samples_per_client=24, local_test_size=10),
    train=TrainConfig(batch_size=8, lr=0.01, momentum=0.9, mixed_precision=False))


def history(config, device, **kwargs):
    return [{k: v for k, v in row.items() if k != "seconds"}
            for row in simulate(config, device=device, progress=False, **kwargs)["history"]]


def test_a_run_with_host_masks_gives_the_numbers_of_torchs_own_cpu_dropout(monkeypatch):
    """The committed CPU records (made with ``nn.Dropout2d``) are what the host masks give."""
    ours = history(TINY, torch.device("cpu"))
    monkeypatch.setattr(models, "host_drawn", lambda model: model)
    assert any(type(m) is nn.Dropout2d for m in make_model(TINY.model, InputShape(1, 28, 10), 0).modules())
    assert history(TINY, torch.device("cpu")) == ours


RANDOM_OPS = {"bernoulli", "bernoulli_", "uniform_", "normal_", "native_dropout", "rand", "randn", "randint",
              "randperm", "random_", "exponential_", "multinomial", "rand_like", "randn_like", "geometric_"}


class RandomDrawCheck(DeviceCheck):
    """The device check, and a list of random draws made on the device (with its own generator)."""

    def __init__(self):
        super().__init__()
        self.device_draws: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.__name__.split(".")[0]
        if name in RANDOM_OPS and (any(is_device(a) for a in args if not isinstance(a, (list, tuple)))
                                   or kwargs.get("device") == STAND_IN):
            self.device_draws.append(name)
        return super().__torch_dispatch__(func, types, args, kwargs)


def test_on_the_stand_in_device_no_mask_is_drawn_by_the_device_and_the_numbers_are_the_cpus():
    on_cpu = history(TINY, torch.device("cpu"))
    with RandomDrawCheck() as check:
        on_device = history(TINY, STAND_IN)
    assert check.device_draws == []
    assert on_device == on_cpu


def test_the_check_sees_a_mask_the_device_draws():
    """The check can fail: ``nn.Dropout2d`` on a device draws its mask there (CUDA: its generator)."""
    with RandomDrawCheck() as check, party_randomness(0, 1, 0, "update"):
        nn.Dropout2d(0.5).train()(torch.ones(2, 3, 4, 4).to(STAND_IN))
    assert "bernoulli_" in check.device_draws


def test_a_record_says_which_generator_drew_its_masks_and_old_ones_say_they_predate_it():
    env = environment(torch.device("cpu"), bf16=False)
    assert env["mask_generator"] == MASK_GENERATOR == mask_generator_of(env)
    assert mask_generator_of({"device": "cuda", "device_name": "NVIDIA H200"}) == PREDATES
    assert mask_generator_of({"device": "cpu"}) == MASK_GENERATOR  # a CPU's own generator is the CPU's
    assert mask_generator_of({}) == MASK_GENERATOR
