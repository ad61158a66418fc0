"""Local training and evaluation on index sets of a tensor-resident dataset."""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .augment import AUGMENTATIONS, check_augmentation
from .data import ImageDataset
from .precision import check_mixed_precision, precision_name, use_bf16

# foreach: one fused kernel per step over all parameters instead of a Python loop (same arithmetic).
OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": lambda params, c: torch.optim.SGD(params, lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay,
                                             foreach=True),
    "adam": lambda params, c: torch.optim.Adam(params, lr=c.lr, weight_decay=c.weight_decay, foreach=True),
}


@dataclass(frozen=True)
class TrainConfig:
    """How a client trains locally. A fresh optimiser is made for every local update.

    mixed_precision: "auto" (bf16 autocast where the hardware has native bf16, else fp32), or
    True / False to force it (see :mod:`fedkd_core.precision`).
    augment: "none" or "crop_flip" (random 4-pixel-padded crop + horizontal flip of the
    training batches; never applied to test or transfer data).
    drop_last: skip an epoch's last, incomplete batch (PyTorch's DataLoader option). A model
    with batch normalisation cannot train on a batch of one, which a client whose data size is
    one more than a multiple of the batch size would otherwise meet.
    lr_decay_at: the rounds (1-based) from which the local lr is multiplied by ``lr_decay_factor``
    once more, a step schedule over rounds (FedBE's setup, which FedUA inherits: x0.1 at 30% and
    60% of the rounds; :func:`decay_rounds` turns such fractions into rounds). Empty: a constant
    lr. The algorithm applies it at the start of each round (:meth:`for_round`).
    max_grad_norm: clip each step's gradient to this global L2 norm before the optimiser steps (every
    method that trains through :func:`train` alike); None (every paper's setting): no clipping. A
    deviation from the papers, for runs that say so (FedCKD's pathological cell, issue 60).
    """

    epochs: int = 1
    batch_size: int = 32
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0
    optimizer: str = "sgd"
    mixed_precision: bool | str = "auto"
    augment: str = "none"
    drop_last: bool = False
    lr_decay_at: tuple[int, ...] = ()
    lr_decay_factor: float = 0.1
    max_grad_norm: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr_decay_at", tuple(self.lr_decay_at))  # a stored record gives a list
        if any(not isinstance(r, int) or r < 2 for r in self.lr_decay_at) or list(self.lr_decay_at) != sorted(set(self.lr_decay_at)):
            raise ValueError(f"lr_decay_at must be increasing rounds >= 2 (got {self.lr_decay_at!r})")
        if not 0 < self.lr_decay_factor <= 1:
            raise ValueError(f"lr_decay_factor must be in (0, 1] (got {self.lr_decay_factor})")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)} (got {self.optimizer!r})")
        if self.epochs < 0:
            raise ValueError(f"epochs must be >= 0 (got {self.epochs})")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {self.batch_size})")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0 (got {self.lr})")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0 or None (got {self.max_grad_norm})")
        check_mixed_precision(self.mixed_precision)
        check_augmentation(self.augment)

    def for_round(self, round_index: int) -> "TrainConfig":
        """The settings local training uses in round ``round_index``: the lr after the decays
        whose round has come (``lr_decay_at``); the config itself when there are none."""
        decays = sum(round_index >= r for r in self.lr_decay_at)
        return replace(self, lr=self.lr * self.lr_decay_factor ** decays) if decays else self


def decay_rounds(fractions: Sequence[float], rounds: int) -> tuple[int, ...]:
    """The rounds at which a step schedule decays, from fractions of ``rounds``: a decay at
    fraction f comes once at least f x ``rounds`` rounds have trained at the lr before it. FedBE's
    "decay by 0.1 at 30% and 60% of total rounds" over 40 rounds is (0.3, 0.6) -> (13, 25), so
    rounds 1-12 train at the initial lr, 13-24 at a tenth of it and 25-40 at a hundredth (FedBE's
    released code differs: x0.5, 0.2, 0.1 and 0.01 at 0, 30, 60 and 90%; we follow its paper)."""
    if any(not 0 < f < 1 for f in fractions):
        raise ValueError(f"lr decay fractions must be in (0, 1) (got {list(fractions)})")
    at = [math.ceil(f * rounds - 1e-9) + 1 for f in fractions]
    if len(set(at)) < len(at) or min(at, default=2) < 2:
        raise ValueError(f"lr decay fractions {list(fractions)} of {rounds} rounds fall on the same round or on "
                         f"round 1 ({at}): use fewer decays or more rounds")
    return tuple(sorted(at))


@dataclass(frozen=True)
class Batch:
    x: torch.Tensor  # normalised float images (B, C, H, W), channels-last, on the device
    y: torch.Tensor  # int64 labels on the device
    position: torch.Tensor  # positions of these samples within the index array that was iterated


def iterate_batches(
    dataset: ImageDataset,
    indices: np.ndarray,
    batch_size: int,
    *,
    device: torch.device,
    generator: torch.Generator | None = None,
    split: str = "train",
    augment: str = "none",
    drop_last: bool = False,
) -> Iterator[Batch]:
    """Batches over ``indices`` of ``split``; shuffled when a ``generator`` is given; without
    the last, incomplete one when ``drop_last``.

    Everything happens on ``device``: the dataset is resident there (each row normalised once), the
    epoch's order (and augmentation draws) are moved there once, and each batch is a gather.
    """
    resident = dataset.on(device)
    data = resident.split(split)
    index = torch.as_tensor(np.asarray(indices), dtype=torch.long)
    data.fill(index)
    order = torch.randperm(len(index), generator=generator) if generator is not None else torch.arange(len(index))
    transform = AUGMENTATIONS[augment]
    draws = transform.draw(len(index), generator).to(device) if transform is not None else None
    rows_of_epoch = index[order].to(device, non_blocking=True)
    order = order.to(device, non_blocking=True)
    end = len(index) - len(index) % batch_size if drop_last else len(index)
    for start in range(0, end, batch_size):
        rows = rows_of_epoch[start:start + batch_size]
        images = data.images[rows]
        if transform is not None:
            images = transform.apply(images, draws[start:start + batch_size], resident.fill)
        yield Batch(images.permute(0, 3, 1, 2), data.labels[rows], order[start:start + batch_size])


def autocast(device: torch.device, enabled: bool):
    return torch.autocast(device.type, dtype=torch.bfloat16) if enabled else nullcontext()


# Inference batch per device type. On a CPU, batches of 128 keep a small CNN's activations in
# cache: 1.3x the samples/s of 512 for KnFu M1 on an AVX2 EPYC (3,198 vs 2,395; 2,121 vs 1,945
# for M2); a GPU wants large batches.
INFERENCE_BATCH = {"cpu": 128, "cuda": 2048}

LossFn = Callable[[nn.Module, Batch], torch.Tensor]


def cross_entropy_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    return F.cross_entropy(model(batch.x), batch.y)


def train(
    model: nn.Module,
    dataset: ImageDataset,
    indices: np.ndarray,
    config: TrainConfig,
    *,
    generator: torch.Generator,
    loss_fn: LossFn = cross_entropy_loss,
    epochs: int | None = None,
    parameters=None,
    augment: bool = True,
    max_grad_norm: float | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> float:
    """Run ``epochs`` (default ``config.epochs``) of minibatch training; return the mean loss.

    ``loss_fn(model, batch)`` gives the loss of one batch, so distillation methods pass a loss
    that reads teacher outputs at ``batch.position`` (and ``augment=False``: teacher outputs
    belong to the unaugmented inputs). ``parameters`` restricts what is trained. ``max_grad_norm``
    clips the gradient's global L2 norm before each step (FedGMKD's released code: 1.1); None
    takes ``config.max_grad_norm`` (None there too: gradients as they are). ``optimizer``: one the caller keeps (a persistent optimiser,
    :class:`OptimizerStates`); None makes a fresh one from ``config`` for this call.

    The loss is summed on the device and checked once per epoch: no host synchronisation per
    step. A non-finite loss raises NonFiniteLoss (a FloatingPointError) at the end of the epoch it appeared in.
    """
    device = next(model.parameters()).device
    bf16 = use_bf16(config.mixed_precision, device)
    trained = list(parameters or model.parameters())
    max_grad_norm = config.max_grad_norm if max_grad_norm is None else max_grad_norm
    # Plain SGD (no momentum, no weight decay) of our own making steps without torch's optimiser
    # object: its step is one foreach add, w -= lr * g, the very kernel torch.optim.SGD(foreach=True)
    # runs, without the per-step Python around it (hooks, grouping, state lookup): the same weights
    # bit for bit, and ~5% of a batch-10 step (issue 62; tests/test_sgd_step.py checks the bits). A global optimizer hook
    # (benchmarks/trace_divergence.py) does not see these steps.
    plain_sgd = optimizer is None and config.optimizer == "sgd" and config.momentum == 0 and config.weight_decay == 0
    if not plain_sgd:
        optimizer = optimizer or OPTIMIZERS[config.optimizer](trained, config)
    model.train()
    total, steps = torch.zeros((), device=device), 0
    for _ in range(config.epochs if epochs is None else epochs):
        for batch in iterate_batches(dataset, indices, config.batch_size, device=device, generator=generator,
                                     augment=config.augment if augment else "none", drop_last=config.drop_last):
            with autocast(device, bf16):
                loss = loss_fn(model, batch)
            if plain_sgd:
                for p in trained:
                    p.grad = None
            else:
                optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(trained, max_grad_norm)
            if plain_sgd:
                _sgd_step(trained, config.lr)
            else:
                optimizer.step()
            total += loss.detach().float()
            steps += 1
        check_finite(total, config, bf16)
    for p in trained:  # a model kept between rounds keeps no gradients (memory)
        p.grad = None
    if not plain_sgd:
        optimizer.zero_grad(set_to_none=True)
    return float(total) / max(steps, 1)


@torch.no_grad()
def _sgd_step(parameters: list[torch.Tensor], lr: float) -> None:
    """torch.optim.SGD's foreach step without momentum or weight decay: w -= lr * g for every
    parameter that has a gradient (one foreach kernel per device and dtype, as torch groups them)."""
    with_grad = [p for p in parameters if p.grad is not None]
    groups: dict[tuple, tuple[list, list]] = {}
    for p in with_grad:
        params, grads = groups.setdefault((p.device, p.dtype), ([], []))
        params.append(p)
        grads.append(p.grad)
    for params, grads in groups.values():
        torch._foreach_add_(params, grads, alpha=-lr)


class OptimizerStates:
    """One optimiser state per client, kept between a client's training phases and rounds (the
    official FedMD keeps each Keras model's Adam across rounds; Selective-FD's demo one optimiser
    throughout), instead of the fresh optimiser :func:`train` makes per call.

    Held as plain tensors (``<parameter index>.<buffer>``, e.g. ``3.exp_avg``), so a client's state
    travels in a message (``Algorithm.client_state``) and a checkpoint like its model's weights.
    """

    def __init__(self) -> None:
        self._states: dict[int, dict[str, torch.Tensor]] = {}

    def optimizer(self, client: int, model: nn.Module, config: TrainConfig, lr: float) -> torch.optim.Optimizer:
        """``client``'s optimiser over ``model``'s parameters at learning rate ``lr``, its moments
        restored from what :meth:`keep` stored last (none at first)."""
        optimizer = OPTIMIZERS[config.optimizer](list(model.parameters()), config)
        state = self._states.get(client)
        if state:
            restored = optimizer.state_dict()
            restored["state"] = unflatten_optimizer_state(state)
            optimizer.load_state_dict(restored)
        for group in optimizer.param_groups:
            group["lr"] = lr
        return optimizer

    def keep(self, client: int, optimizer: torch.optim.Optimizer) -> None:
        self._states[client] = flatten_optimizer_state(optimizer.state_dict()["state"])

    def __getitem__(self, client: int) -> dict[str, torch.Tensor]:
        return self._states[client]

    def __setitem__(self, client: int, state: dict[str, torch.Tensor]) -> None:
        self._states[client] = state

    def __contains__(self, client: int) -> bool:
        return client in self._states

    def __delitem__(self, client: int) -> None:
        del self._states[client]


def flatten_optimizer_state(state: dict) -> dict[str, torch.Tensor]:
    """``optimizer.state_dict()["state"]`` ({index: {buffer: tensor}}) as {"index.buffer": tensor}
    (detached copies; buffers that are not tensors, such as an SGD without momentum's None, are
    dropped: the optimiser recreates them)."""
    return {f"{index}.{name}": value.detach().clone() for index, buffers in state.items()
            for name, value in buffers.items() if isinstance(value, torch.Tensor)}


def unflatten_optimizer_state(flat: dict[str, torch.Tensor]) -> dict:
    state: dict[int, dict] = {}
    for name, value in flat.items():
        index, buffer = name.split(".", 1)
        # torch keeps a non-fused optimiser's step counter on the host (a message may bring it
        # on the device)
        state.setdefault(int(index), {})[buffer] = value.cpu().clone() if buffer == "step" else value.clone()
    return state


class NonFiniteLoss(FloatingPointError):
    """A training loss that became NaN or infinite: the run diverged."""


def check_finite(loss_sum: torch.Tensor, config: TrainConfig, bf16: bool) -> None:
    value = float(loss_sum)
    if not math.isfinite(value):
        raise NonFiniteLoss(
            f"training loss became {value} (lr={config.lr}, optimizer={config.optimizer}, "
            f"precision={precision_name(bf16)}); lower lr" + (" or set mixed_precision false" if bf16 else "")
        )


@torch.no_grad()
def predict(
    model: nn.Module,
    dataset: ImageDataset,
    indices: np.ndarray,
    *,
    split: str = "train",
    batch_size: int | None = None,
    mixed_precision: bool | str = False,
) -> torch.Tensor:
    """Logits (len(indices), classes) in float32, in the order of ``indices``, on the model's device.

    ``batch_size`` defaults to what suits the device (:data:`INFERENCE_BATCH`).
    """
    device = next(model.parameters()).device
    bf16 = use_bf16(mixed_precision, device)
    model.eval()
    outputs = []
    size = batch_size or INFERENCE_BATCH.get(device.type, 512)
    for batch in iterate_batches(dataset, indices, size, device=device, split=split):
        with autocast(device, bf16):
            outputs.append(model(batch.x).float())
    if not outputs:
        return torch.zeros(0, dataset.num_classes, device=device)
    return torch.cat(outputs)


@torch.no_grad()
def predict_features(model: nn.Module, dataset: ImageDataset, indices: np.ndarray, *, split: str = "train",
                     batch_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(features, logits) of a :class:`~fedkd_core.models.SplitModel` on ``indices``, float32, in
    full precision whatever the hardware (densities are fitted on these features), model in eval
    mode, no augmentation."""
    device = next(model.parameters()).device
    model.eval()
    features, logits = [], []
    size = batch_size or INFERENCE_BATCH.get(device.type, 512)
    for batch in iterate_batches(dataset, indices, size, device=device, split=split):
        z = model.features(batch.x).float()
        features.append(z)
        logits.append(model.head(z).float())
    if not features:
        empty = torch.zeros(0, device=device)
        return empty, empty
    return torch.cat(features), torch.cat(logits)


def correct_predictions(model: nn.Module, dataset: ImageDataset, indices: np.ndarray, *, split: str = "test",
                        mixed_precision: bool | str = False) -> np.ndarray:
    """Whether ``model``'s top-1 prediction is right, for each of ``indices`` (bool array)."""
    if len(indices) == 0:
        return np.zeros(0, dtype=bool)
    logits = predict(model, dataset, indices, split=split, mixed_precision=mixed_precision)
    labels = dataset.on(logits.device).split(split).labels[torch.as_tensor(np.asarray(indices)).to(logits.device)]
    return (logits.argmax(1) == labels).cpu().numpy()


def accuracy(model: nn.Module, dataset: ImageDataset, indices: np.ndarray, *, split: str = "test",
             mixed_precision: bool | str = False) -> float:
    """Top-1 accuracy of ``model`` on ``indices`` of ``split`` (nan for an empty set)."""
    correct = correct_predictions(model, dataset, indices, split=split, mixed_precision=mixed_precision)
    return float(correct.mean()) if len(correct) else float("nan")
