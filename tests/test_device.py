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


def _assign_through_a_device_mask(x):
    full = torch.zeros(3)
    full[x > 1] = torch.ones(1)  # Selective-FD's server step did this with a client's acceptance mask


def _assign_device_values_into_a_host_tensor(x):
    full = torch.zeros(3)
    full[torch.tensor([0, 2])] = x[:2]


def _assign_host_values_into_a_device_tensor(x):
    x[torch.tensor([0, 2])] = torch.ones(2)


@pytest.mark.parametrize("broken, fault", [
    (lambda x: x + torch.ones(3), "mixes device and host"),
    (lambda x: torch.zeros(3)[x > 1], "host tensor indexed through device indices or a device mask"),
    (lambda x: torch.zeros(3)[x.long()], "host tensor indexed through device indices"),
    (_assign_through_a_device_mask, "host tensor indexed through device indices or a device mask"),
    (lambda x: torch.zeros(3).index_put_((x.long(),), torch.ones(3)), "host tensor indexed through device"),
    (_assign_device_values_into_a_host_tensor, "device values assigned into a host tensor"),
    (_assign_host_values_into_a_device_tensor, "host values assigned into a device tensor"),
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
        x[torch.tensor([0, 2])] = torch.tensor(1.0)  # assigned a 0-dim host scalar through them
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


def test_structured_outputs_keep_their_type_and_stay_on_the_device():
    from collections import defaultdict, namedtuple

    from fedkd_core.devicecheck import map_leaves

    with DeviceCheck():
        x = torch.tensor([[1.0, 5.0], [7.0, 2.0]]).to(STAND_IN)
        best = x.max(dim=1)  # a structseq (torch.return_types.max), built by torch from the plain tuple dispatch returns
        assert type(best).__name__ == "max" and best.values.device == STAND_IN
        assert best.indices.device == STAND_IN and torch.equal(best.indices.cpu(), torch.tensor([1, 0]))
        assert x.shape == torch.Size([2, 2])
    Pair = namedtuple("Pair", "a b")
    rebuilt = map_leaves(lambda v: v * 10, {"p": Pair(1, [2, (3,)]), "s": torch.Size([4])})
    assert rebuilt == {"p": Pair(10, [20, (30,)]), "s": torch.Size([40])} and type(rebuilt["p"]) is Pair
    assert type(rebuilt["s"]) is torch.Size
    counts = map_leaves(lambda v: v + 1, defaultdict(int, {"a": 1}))
    assert type(counts) is defaultdict and counts == {"a": 2} and counts["b"] == 0


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


# --- every algorithm on the stand-in device ---------------------------------------------------------

from contextlib import contextmanager  # noqa: E402

from fedkd_core.algorithms import ALGORITHMS, Context, algorithm_class, algorithm_config  # noqa: E402
from fedkd_core.conformance import tiny_params  # noqa: E402
from fedkd_core.experiment import ExperimentConfig, client_step, on_device, simulate  # noqa: E402
from fedkd_core.federation import DataConfig, build_federated_data  # noqa: E402
from fedkd_core.training import TrainConfig  # noqa: E402

DATA = DataConfig("mnist", num_clients=3, samples_per_client=24, transfer_size=16, local_test_size=10)


def tiny(algorithm: str, batch_size: int = 8) -> ExperimentConfig:
    """Two rounds on :data:`DATA`; the methods whose defaults repeat a loop many times run each loop
    twice (conformance.TINY_PARAMS: an operation a GPU refuses shows in the first pass)."""
    return ExperimentConfig(algorithm=algorithm, algorithm_params=tiny_params(algorithm), data=DATA,
                            model="knfu_m1", rounds=2, global_test_size=20,
                            train=TrainConfig(batch_size=batch_size, mixed_precision=False))


def host(message: dict) -> dict:
    return {name: t.detach().cpu() for name, t in (message or {}).items()}


class HostMessages:
    """Flower's engine in one process (fedkd_core.flower): each client step runs on a replica of
    the algorithm from the client's state kept on the host, and every message and state crosses as
    host tensors; the server loads the states it evaluates onto its device, as FlowerClients does."""

    def __init__(self, config: ExperimentConfig, device: torch.device):
        ctx = Context(data=build_federated_data(config.data, config.seed), model_name=config.model,
                      train=config.train, device=device, seed=config.seed)
        self.replica = algorithm_class(config.algorithm)(algorithm_config(config.algorithm, config.algorithm_params), ctx)
        self.states: dict[int, dict] = {}

    def _step(self, round_index: int, client: int, phase: str, message: dict) -> dict:
        output, state = client_step(self.replica, round_index, client, phase, host(message), self.states.get(client, {}))
        self.states[client] = host(state)
        return host(output)

    def update(self, algorithm, downloads: dict) -> dict:
        return {k: self._step(algorithm.round, k, "update", m) for k, m in downloads.items()}

    def finish(self, algorithm, replies: dict) -> None:
        for k, m in replies.items():
            self._step(algorithm.round, k, "finish", m)

    @contextmanager
    def states_for_evaluation(self, algorithm, clients: list[int]):
        for k in clients:
            algorithm.load_client_state(k, on_device(self.states.get(k, {}), algorithm.ctx.device))
        try:
            yield
        finally:
            for k in clients:
                algorithm.drop_client_state(k)


def checked_run(config: ExperimentConfig, clients=None) -> tuple[list, DeviceCheck]:
    """``config`` run on the stand-in device under the check; its history without timings."""
    with DeviceCheck() as check:
        engine = clients(config, STAND_IN) if clients else None
        history = simulate(config, device=STAND_IN, progress=False, clients=engine)["history"]
    return [{k: v for k, v in row.items() if k != "seconds"} for row in history], check


# A client's whole training set in one batch: a third of the optimiser steps of batches of 8. The run
# that counts the syncs again with another number of steps takes fewer steps rather than more
# (batches of 4 before, twice the steps): a count that grows with the steps differs either way, and
# the run takes about half the time of the one with batches of 4.
ONE_BATCH = DATA.samples_per_client


def per_step_syncs(fewer_steps: DeviceCheck, more_steps: DeviceCheck) -> dict:
    """The lines of fedkd_core whose host syncs grow with the optimiser steps (budget: none)."""
    return {site: (fewer_steps.syncs[site], count) for site, count in more_steps.syncs.items()
            if site.startswith("fedkd_core/") and count > fewer_steps.syncs[site]}


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_algorithm_runs_device_clean_on_the_stand_in_device(algorithm):
    """On the stand-in device: the CPU's numbers, nothing CUDA refuses, with host messages (Flower's
    case) the same numbers, and no host sync whose count grows with the optimiser steps."""
    config = tiny(algorithm)
    on_cpu = simulate(config, device=torch.device("cpu"), progress=False)["history"]
    history, check = checked_run(config)
    assert history == [{k: v for k, v in row.items() if k != "seconds"} for row in on_cpu]
    host_history, _ = checked_run(config, HostMessages)
    assert host_history == history
    _, fewer_steps = checked_run(tiny(algorithm, batch_size=ONE_BATCH))
    assert per_step_syncs(fewer_steps, check) == {}


def test_a_transfer_sample_mask_is_applied_without_a_host_sync():
    """KnFu's and FedMD's replies keep every sample: no mask at all, the same loss as an all-True
    mask, bit for bit; Selective-FD's mask on a device: a masked sum, equal to gathering the kept rows."""
    from fedkd_core.algorithms.shapes.transfer_kd import distillation_loss

    generator = torch.Generator().manual_seed(0)
    logits, labels = torch.randn(6, 4, generator=generator), torch.tensor([0, 1, 2, 3, 0, 1])
    targets = torch.softmax(torch.randn(6, 4, generator=generator), dim=1)
    every = torch.ones(6, dtype=torch.bool)
    assert torch.equal(distillation_loss(logits, labels, targets, None, 1.5),
                       distillation_loss(logits, labels, targets, every, 1.5))
    kept = torch.tensor([True, False, True, True, False, False])
    on_host = distillation_loss(logits, labels, targets, kept, 1.5)
    with DeviceCheck() as check:
        on_device = distillation_loss(*(t.to(STAND_IN) for t in (logits, labels, targets, kept)), 1.5)
        torch.testing.assert_close(on_device.cpu(), on_host)
    assert check.sync_count() == 1  # the .cpu() above, none in the loss


def modules_of(algorithm) -> list[torch.nn.Module]:
    """Every model an algorithm holds: attributes, and the values of its dicts and PersonalModels."""
    from fedkd_core.algorithms.shapes.base import PersonalModels

    found = []
    for value in vars(algorithm).values():
        values = value._models.values() if isinstance(value, PersonalModels) else (
            value.values() if isinstance(value, dict) else [value])
        found += [v for v in values if isinstance(v, torch.nn.Module)]
    return found


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_no_model_keeps_gradients_between_rounds(algorithm):
    from fedkd_core.experiment import _run_round

    config = tiny(algorithm)
    ctx = Context(data=build_federated_data(config.data, config.seed), model_name=config.model, train=config.train,
                  device=torch.device("cpu"), seed=config.seed)
    instance = algorithm_class(algorithm)(algorithm_config(algorithm, config.algorithm_params), ctx)
    for round_index in (1, 2):
        _run_round(instance, round_index, [0, 1, 2])
    kept = [name for model in modules_of(instance) for name, p in model.named_parameters() if p.grad is not None]
    assert kept == []


def test_chapter_helpers_run_on_the_stand_in_device(monkeypatch):
    """The chapters' own loops (KnFu's fusion example, FedCKD's forgetting trace) on the device."""
    from fedkd_core.chapters import fedckd, knfu
    from fedkd_core.chapters.fedckd import analysis as fedckd_analysis
    from fedkd_core.chapters.knfu import analysis as knfu_analysis

    for module in (knfu_analysis, fedckd_analysis):  # where each loop looks its device up
        monkeypatch.setattr(module, "default_device", lambda: STAND_IN)
    with DeviceCheck():
        example = knfu.fusion_example(knfu.Params(num_clients=3, example_size=20,
                                                  local_test_size=10, mixed_precision=False))
        trace = fedckd.forgetting_trace(tiny("fedckd"), rounds=1)
    assert example.weights.shape == (3, 3) and np.isfinite(example.weights).all()
    assert len(trace) == 3 and trace["after"].between(0, 1).all()


# --- GPU settings, testable without a GPU ------------------------------------------------------------

@pytest.mark.parametrize("capability, native", [((7, 5), False), ((7, 0), False), ((8, 0), True), ((9, 0), True)])
def test_auto_precision_picks_bf16_only_from_compute_capability_8(monkeypatch, capability, native):
    from fedkd_core.precision import use_bf16

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert use_bf16("auto", torch.device("cuda")) is native and use_bf16(False, torch.device("cuda")) is False


def test_a_cuda_run_is_deterministic_without_tf32_and_a_cpu_run_is_left_alone():
    from fedkd_core.precision import execution_settings, reproducible

    cudnn = torch.backends.cudnn
    before = (torch.are_deterministic_algorithms_enabled(), cudnn.allow_tf32, cudnn.benchmark)
    with reproducible(torch.device("cpu")):
        assert (torch.are_deterministic_algorithms_enabled(), cudnn.allow_tf32, cudnn.benchmark) == before
    with reproducible(torch.device("cuda")):
        assert torch.are_deterministic_algorithms_enabled() and cudnn.deterministic
        assert not cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32 and not cudnn.benchmark
    assert (torch.are_deterministic_algorithms_enabled(), cudnn.allow_tf32, cudnn.benchmark) == before
    assert execution_settings(torch.device("cuda")) == {"deterministic_algorithms": True, "tf32": False}
    assert execution_settings(torch.device("cpu"))["deterministic_algorithms"] is False


def test_cuda_and_cuda_0_are_one_resident_dataset(monkeypatch):
    from fedkd_core.data import physical_device

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert physical_device("cuda") == physical_device(torch.device("cuda:1")) == torch.device("cuda", 1)
    assert physical_device("cuda:0") == torch.device("cuda", 0) and physical_device("cpu") == torch.device("cpu")


def test_sweep_workers_spread_over_the_visible_gpus_with_a_cap(monkeypatch):
    from fedkd_core import sweep

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert sweep.visible_gpus() == ["3", "5"]
    assert sweep.worker_gpus(3, sweep.visible_gpus(), per_gpu=2) == ["3", "5", "3"]
    assert sweep.worker_gpus(2, [], per_gpu=1) == [None, None]
    with pytest.raises(ValueError, match="--per-gpu 2"):
        sweep.worker_gpus(5, ["3", "5"], per_gpu=2)
    with sweep.seeing_only("5"):
        import os

        assert os.environ["CUDA_VISIBLE_DEVICES"] == "5"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3,5"
