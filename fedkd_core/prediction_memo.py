"""Evaluation without re-running unchanged models.

With partial participation most personal models do not change between two evaluations: at
r = 0.1 ninety of a hundred clients sit a round out, and a method that keeps each client's model
(pFedSD, FedCKD, FedFomo, ...) would score those ninety models on the same test samples again.
On a CPU that repeated inference was most of a personalised run's evaluation, and evaluation a
third of the run (FedCKD, Fashion-MNIST, n = 100, paper scale: 900 of 2,600 s).

:class:`PredictionMemo` keeps, for each model it scored, the per-sample outcome, keyed by a
digest of the model's whole state (parameters and buffers, byte for byte) and of the samples.
A model whose state is byte-identical gives the same predictions on the same samples, so a run's
record is the same with or without the memo; a model that changed in any way (trained, or joined
to a new shared part as LG-FedAvg's and FedPer's are) is scored again. The digest reads the
state's bytes, so it does not rely on how an algorithm changes its weights.

It is used where the models live in host memory. On an accelerator the digest would first copy
every model's state to the host, about what scoring it costs there, so every model is scored
(the memo then passes each call through).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import torch


def state_digest(model: torch.nn.Module) -> bytes:
    """A digest of every tensor in ``model``'s state (names, dtypes, shapes and bytes)."""
    digest = hashlib.blake2b(digest_size=32)
    for name, tensor in model.state_dict().items():
        value = tensor.detach()
        digest.update(f"{name}:{value.dtype}:{tuple(value.shape)};".encode())
        digest.update(value.reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
    return digest.digest()


def samples_digest(indices: np.ndarray, split: str, setting: str) -> bytes:
    """A digest of which samples are scored, from which split, under which precision setting."""
    digest = hashlib.blake2b(f"{split}:{setting};".encode(), digest_size=32)
    digest.update(np.ascontiguousarray(indices, dtype=np.int64).tobytes())
    return digest.digest()


def on_host(model: torch.nn.Module) -> bool:
    return all(tensor.device.type == "cpu" for tensor in model.state_dict().values())


class PredictionMemo:
    """Per-sample outcomes of the models scored in the last evaluation (:meth:`outcome`); the
    ones not asked for again in an evaluation are dropped when the next one starts
    (:meth:`start_evaluation`), so it holds at most one evaluation's outcomes."""

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
        if not on_host(model):
            return score()
        key = state_digest(model) + samples_digest(indices, split, setting)
        found = self._used.get(key, self._kept.get(key))
        if found is not None:
            self.hits += 1
            model.eval()
        else:
            self.misses += 1
            found = score()
        self._used[key] = found
        return found.copy()
