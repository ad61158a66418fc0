"""Randomness per (seed, round, party, phase).

Every party of a round draws from its own streams: client k's shuffles and augmentation in
round r come from (seed, r, k, "update"), whatever ran before it, in this process or in another.
So clients can run in any order, in parallel, or on other machines (fedkd_core.flower) and a run
still gives the same numbers. The server is the party ``SERVER``.

Two kinds of stream per (seed, round, party, phase): an explicit ``torch.Generator`` (data order,
augmentation, random sample selection) and torch's global generators, reseeded for the duration
of the step by ``party_randomness`` (dropout masks and any other implicit draws).

Dropout masks are drawn from the *CPU* global generator on every device and moved to the device
(:func:`host_bernoulli_mask`, used by ``fedkd_core.models.HostDropout``/``HostDropout2d``), so a GPU
run draws the masks a CPU run of the same seed draws, and the two records differ only by rounding.
A record says so in ``environment["mask_generator"]`` (:data:`MASK_GENERATOR`); a record without it
predates this and, if it ran on a GPU, drew its masks from the GPU's own generator
(:func:`mask_generator_of`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

SERVER = -1
PHASES = {"update": 0, "finish": 1, "server": 2}
_STREAM = 6  # other streams of a seed: 1 data split, 2 client sampling, 4 global test subset, 5 run start


def _entropy(seed: int, round_index: int, party: int, phase: str, kind: int) -> list[int]:
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {sorted(PHASES)} (got {phase!r})")
    if party < SERVER or round_index < 0:
        raise ValueError(f"party must be a client index or SERVER and round >= 0 (got {party}, {round_index})")
    return [seed, _STREAM, round_index, party + 1, PHASES[phase], kind]


def party_seed(seed: int, round_index: int, party: int, phase: str = "update", kind: int = 0) -> int:
    """A 63-bit seed for the stream of one party in one phase of one round."""
    state = np.random.SeedSequence(_entropy(seed, round_index, party, phase, kind)).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(1))


def party_generator(seed: int, round_index: int, party: int, phase: str = "update") -> torch.Generator:
    """A CPU torch generator of its own for (seed, round, party, phase)."""
    return torch.Generator().manual_seed(party_seed(seed, round_index, party, phase, kind=0))


def party_rng(seed: int, round_index: int, party: int, phase: str = "update") -> np.random.Generator:
    """A numpy generator of its own for (seed, round, party, phase)."""
    return np.random.default_rng(party_seed(seed, round_index, party, phase, kind=1))


@contextmanager
def party_randomness(seed: int, round_index: int, party: int, phase: str) -> Iterator[None]:
    """Reseed torch's global generators (CPU and CUDA) for one step of one party, and restore
    them afterwards, so implicit draws (dropout) do not depend on the parties before it."""
    devices = list(range(torch.cuda.device_count()))
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(party_seed(seed, round_index, party, phase, kind=2))
        yield


# What a record's environment says about its dropout masks (``environment["mask_generator"]``).
MASK_GENERATOR = "cpu"  # drawn from torch's global CPU generator on every device, then moved there
PREDATES = "device (predates mask_generator)"  # a record without the field: the device's own generator


def host_bernoulli_mask(shape, p: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A dropout mask of ``shape`` (1 / (1 - p) where kept, 0 where dropped) drawn on the host from
    torch's global CPU generator and moved to ``device``. The draws are ATen's CPU dropout's own
    (``empty(shape).bernoulli_(1 - p)``, then ``div_(1 - p)``): on a CPU, the same mask bit for bit."""
    mask = torch.empty(tuple(shape), dtype=dtype).bernoulli_(1 - p)
    mask.div_(1 - p)
    # non_blocking: a copy from pageable host memory is staged before it returns (safe to free), and
    # the host does not wait for the device's queue (no sync per training step)
    return mask if torch.device(device).type == "cpu" else mask.to(device, non_blocking=True)


def mask_generator_of(environment: dict) -> str:
    """Which generator drew a record's dropout masks: :data:`MASK_GENERATOR` ("cpu") for records
    that say so; for older records :data:`PREDATES`, except on a CPU, where the device's own
    generator is the CPU's and the masks are the same ("cpu")."""
    if "mask_generator" in environment:
        return environment["mask_generator"]
    return MASK_GENERATOR if str(environment.get("device", "cpu")).startswith("cpu") else PREDATES
