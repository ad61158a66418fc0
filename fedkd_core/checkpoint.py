"""Checkpoints of a run in progress, so that a long run that is stopped resumes where it was.

Every ``every_seconds`` (after a whole round, its evaluation included) a run saves its
:class:`RunState`: the algorithm object whole (its global, personal and history models,
optimiser states, server and algorithm state), the history and totals so far, the client
sampler's state, torch's global generators and the wall time so far. The algorithm's
:class:`~fedkd_core.algorithms.Context` (the data and the model recipe) is not saved: a resumed
run rebuilds it from its config, and every reference to it, to its data or its dataset's tensors
is pickled as a name (:func:`shared_objects`) and bound to the rebuilt ones on loading.

Randomness is per (seed, round, party) (fedkd_core.randomness), so a resumed run gives the
numbers of an uninterrupted one, bit for bit (tests/test_reliability.py). The checkpoint sits
beside the run's claim (``<results>/.claims/<profile>/<key>.state``), is written atomically, and
is deleted once the run's record is written. A checkpoint that cannot be read (written by other
code) is set aside with a line saying so, and the run starts from round 1.
"""

from __future__ import annotations

import io
import os
import pickle
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

DEFAULT_EVERY_SECONDS = 300.0  # a run stopped mid-way loses at most about this much work

# Modules that have moved since checkpoints were first written (the round shapes went to
# ``algorithms/shapes/``): a state saved by the older code still loads.
MOVED_MODULES = {f"fedkd_core.algorithms.{name}": f"fedkd_core.algorithms.shapes.{name}"
                 for name in ("base", "from_global", "partial", "transfer_kd", "schedule")}


@dataclass
class RunState:
    """A run after round ``round``: what its next round starts from."""

    key: str
    round: int
    algorithm: object
    history: list
    totals: dict
    sampler: dict  # the client sampler's bit-generator state
    torch_rng: torch.Tensor
    cuda_rng: list
    seconds: float  # the run's wall time up to this state, over every session it ran in


def shared_objects(ctx) -> dict:
    """The objects a checkpoint refers to by name instead of saving: the Context, its data, the
    dataset and its tensors, and the dataset made resident on a device (``ImageDataset.on``)."""
    dataset = ctx.data.dataset
    named = {"context": ctx, "data": ctx.data, "dataset": dataset, "x_train": dataset.x_train,
             "y_train": dataset.y_train, "x_test": dataset.x_test, "y_test": dataset.y_test}
    for device, resident in dataset._resident.items():
        named.update({f"resident@{device}": resident, f"resident.train@{device}": resident.train,
                      f"resident.test@{device}": resident.test})
    return named


def resolve_shared(ctx, name: str):
    """The object of the rebuilt ``ctx`` that :func:`shared_objects` called ``name``."""
    if "@" in name:
        part, device = name.split("@")
        resident = ctx.data.dataset.on(device)
        return {"resident": resident, "resident.train": resident.train, "resident.test": resident.test}[part]
    return shared_objects(ctx)[name]


class _StatePickler(pickle.Pickler):
    def __init__(self, file, ctx):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.names = {id(value): name for name, value in shared_objects(ctx).items()}

    def persistent_id(self, obj):
        return self.names.get(id(obj))


class _StateUnpickler(pickle.Unpickler):
    def __init__(self, file, ctx):
        super().__init__(file)
        self.ctx = ctx

    def persistent_load(self, name):
        return resolve_shared(self.ctx, name)

    def find_class(self, module, name):
        return super().find_class(MOVED_MODULES.get(module, module), name)


@dataclass
class Checkpoints:
    """Where a run keeps its state, how often it saves it, and when it last did."""

    path: Path
    key: str
    every_seconds: float = DEFAULT_EVERY_SECONDS
    last_save: float = field(default_factory=time.monotonic)

    def load(self, ctx) -> RunState | None:
        """The saved state of this run, bound to ``ctx`` (the run's rebuilt Context), or None."""
        if not self.path.exists():
            return None
        try:
            with open(self.path, "rb") as handle:
                state = _StateUnpickler(handle, ctx).load()
        except Exception as error:  # noqa: BLE001 - any unreadable checkpoint: start afresh, say so
            aside = self.path.with_name(self.path.name + ".unreadable")
            os.replace(self.path, aside)
            print(f"checkpoint {self.path} cannot be read ({type(error).__name__}: {error}); moved to {aside}, "
                  "the run starts from round 1", file=sys.stderr)
            return None
        return state if state.key == self.key else None

    def due(self) -> bool:
        return time.monotonic() - self.last_save >= self.every_seconds

    def save(self, state: RunState) -> None:
        """Write ``state`` atomically (a temporary file, then a rename)."""
        buffer = io.BytesIO()
        _StatePickler(buffer, state.algorithm.ctx).dump(state)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=self.path.parent, suffix=".tmp", delete=False) as handle:
            handle.write(buffer.getbuffer())
        os.replace(handle.name, self.path)
        self.last_save = time.monotonic()

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
