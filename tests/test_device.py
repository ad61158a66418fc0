"""The device check: every algorithm and chapter helper runs on a stand-in device as a GPU would
run it (fedkd_core.devicecheck), in-process and with host messages (Flower's case), without an
operation CUDA refuses and without host syncs per optimiser step."""

import numpy as np
import pytest
import torch

from fedkd_core.devicecheck import STAND_IN, DeviceCheck, DeviceFault

# --- the tracker catches what CUDA refuses ---------------------------------------------------------


def test_device_tensors_compute_real_values_and_report_the_stand_in_device():
    with DeviceCheck():
        x = torch.arange(6.0).to(STAND_IN)
        y = (x * 2 + torch.ones(6, device=STAND_IN)).sum()
        assert y.device == STAND_IN and x.device == STAND_IN
        assert float(y) == 36.0
        assert torch.equal(x.cpu(), torch.arange(6.0)) and x.cpu().device.type == "cpu"


@pytest.mark.parametrize("broken, fault", [
    (lambda x: x + torch.ones(3), "mixes device and host"),
    (lambda x: torch.stack([x, torch.zeros(3)]), "mixes device and host"),
    (lambda x: torch.zeros(3).index_select(0, x.long()), "mixes device and host"),
    (lambda x: x.numpy(), r"\.numpy\(\) of a device tensor"),
    (lambda x: np.asarray(x), "numpy conversion of a device tensor"),
    (lambda x: torch.randperm(3, generator=torch.Generator(), device=STAND_IN), "generator on cpu"),
    (lambda x: torch.randperm(3, generator=torch.Generator(device=STAND_IN)), "generator on meta"),
    (lambda x: torch.normal(x, 1.0, generator=torch.Generator()), "generator on cpu"),
])
def test_the_check_refuses_what_cuda_refuses_and_names_the_line(broken, fault):
    with DeviceCheck(), pytest.raises(DeviceFault, match=fault) as refused:
        broken(torch.arange(3.0).to(STAND_IN))
    assert "tests/test_device.py:" in str(refused.value)


def test_what_cuda_accepts_passes():
    with DeviceCheck() as check:
        x = torch.arange(3.0).to(STAND_IN)
        x + torch.tensor(2.0)  # a 0-dim host scalar
        x[torch.tensor([0, 2])]  # host indices of a device tensor
        x.copy_(torch.ones(3))  # a copy between host and device
        torch.randperm(3, generator=torch.Generator(device=STAND_IN), device=STAND_IN)
        torch.randperm(3, generator=torch.Generator())
    assert check.sync_count() == 0


@pytest.mark.parametrize("sync", [
    lambda x: bool(x.any()), lambda x: float(x.sum()), lambda x: x.max().item(), lambda x: x.tolist(),
    lambda x: x.cpu(), lambda x: x[x > 1], lambda x: x.nonzero(), lambda x: torch.zeros(3).copy_(x),
])
def test_each_host_sync_is_counted_at_its_line(sync):
    with DeviceCheck() as check:
        x = torch.arange(3.0).to(STAND_IN)
        sync(x)
    assert check.sync_count() == 1
    assert all(site.startswith("tests/test_device.py:") for site in check.syncs)


def test_optimiser_steps_and_live_device_bytes_are_counted():
    with DeviceCheck() as check:
        model = torch.nn.Linear(100, 10).to(STAND_IN)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, foreach=True)
        for _ in range(3):
            optimizer.zero_grad(set_to_none=True)
            model(torch.ones(4, 100, device=STAND_IN)).sum().backward()
            optimizer.step()
        parameters_bytes = (100 * 10 + 10) * 4
        assert check.live_bytes >= parameters_bytes
        assert check.peak_bytes >= 2 * parameters_bytes  # the gradients too
        del model, optimizer
    assert check.steps == 3 and check.live_bytes < parameters_bytes
