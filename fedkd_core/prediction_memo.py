"""Evaluation without re-running unchanged models.

With partial participation most personal models do not change between two evaluations: at
r = 0.1 ninety of a hundred clients sit a round out, and a method that keeps each client's model
(pFedSD, FedCKD, FedFomo, ...) would score those ninety models on the same test samples again.
On a CPU that repeated inference was most of a personalised run's evaluation, and evaluation a
third of the run (FedCKD, Fashion-MNIST, n = 100, paper scale: 900 of 2,600 s).

:class:`PredictionMemo` keeps, for each model it scored, the per-sample outcome, keyed by a
digest of the model's whole state (parameters and buffers, byte for byte) and of the samples.
A model whose state is byte-identical (and whose modules have the same classes and plain
settings, such as FjORD's width of a view) gives the same predictions on the same samples, so a
run's record is the same with or without the memo; a model that changed in any way (trained, or joined
to a new shared part as LG-FedAvg's and FedPer's are) is scored again. The digest reads the
state's bytes, so it does not rely on how an algorithm changes its weights.

It is used where the models live in host memory. On an accelerator the digest would first copy
every model's state to the host at every evaluation (a cost not measured there), so there every
model is scored (the memo passes each call through).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import torch


# Attributes of a module that can change what it computes without being in its state_dict: plain
# settings such as FjORD's AtWidth.width. ``training`` is left out: scoring puts the model in eval mode.
SETTING_TYPES = (bool, int, float, str, type(None))


def state_digest(model: torch.nn.Module, state: dict | None = None) -> bytes:
    """A digest of what decides ``model``'s predictions: each submodule's class and plain settings
    (:data:`SETTING_TYPES` attributes, so two views of one network at different widths differ),
    and every tensor of its state (names, dtypes, shapes and bytes). ``state``: its state_dict,
    when the caller has it."""
    digest = hashlib.blake2b(digest_size=32)
    for name, module in model.named_modules():
        settings = sorted((key, repr(value)) for key, value in vars(module).items()
                          if isinstance(value, SETTING_TYPES) and key != "training")
        digest.update(f"{name}:{type(module).__module__}.{type(module).__qualname__}:{settings};".encode())
    for name, tensor in (model.state_dict() if state is None else state).items():
        value = tensor.detach()
        digest.update(f"{name}:{value.dtype}:{tuple(value.shape)};".encode())
        digest.update(value.reshape(-1).contiguous().view(torch.uint8).numpy())
    return digest.digest()


def samples_digest(indices: np.ndarray, split: str, setting: str) -> bytes:
    """A digest of which samples are scored, from which split, under which precision setting."""
    digest = hashlib.blake2b(f"{split}:{setting};".encode(), digest_size=32)
    digest.update(np.ascontiguousarray(indices, dtype=np.int64).tobytes())
    return digest.digest()


def on_host(state: dict) -> bool:
    """Whether every tensor of a model's ``state`` is in host memory."""
    return all(tensor.device.type == "cpu" for tensor in state.values())


class PredictionMemo:
    """Per-sample outcomes of the models scored in the last evaluation (:meth:`outcome`); the
    ones not asked for again in an evaluation are dropped when the next one starts
    (:meth:`start_evaluation`), so it holds the outcomes of at most two evaluations (the last
    one's and the current one's)."""

    def __init__(self) -> None:
        self._kept: dict[bytes, np.ndarray] = {}
        self._used: dict[bytes, np.ndarray] = {}
        self.hits = 0
        self.misses = 0

    def start_evaluation(self) -> None:
        """Forget the outcomes the previous evaluation did not ask for."""
        self._kept, self._used = self._used, {}

    def outcome(self, model: torch.nn.Module, indices: np.ndarray, split: str, setting: str,
                score: Callable[[], np.ndarray]) -> np.ndarray:
        """``score()`` (the model's per-sample outcome on ``indices``), or the outcome kept from
        a byte-identical model on the same samples. The model is left in eval mode either way,
        as scoring leaves it."""
        state = model.state_dict()
        if not on_host(state):
            return score()
        key = state_digest(model, state) + samples_digest(indices, split, setting)
        found = self._used.get(key, self._kept.get(key))
        if found is not None:
            self.hits += 1
            model.eval()
        else:
            self.misses += 1
            found = score()
        self._used[key] = found
        return found.copy()
