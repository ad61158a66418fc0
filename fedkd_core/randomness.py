"""Randomness per (seed, round, party, phase).

Every party of a round draws from its own streams: client k's shuffles and augmentation in
round r come from (seed, r, k, "update"), whatever ran before it, in this process or in another.
So clients can run in any order, in parallel, or on other machines (fedkd_core.flower) and a run
still gives the same numbers. The server is the party ``SERVER``.

Two kinds of stream per (seed, round, party, phase): an explicit ``torch.Generator`` (data order,
augmentation, random sample selection) and torch's global generators, reseeded for the duration
of the step by ``party_randomness`` (dropout masks and any other implicit draws).
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
