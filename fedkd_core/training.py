"""Local training and evaluation on index sets of a tensor-resident dataset."""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .data import ImageDataset

OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": lambda params, c: torch.optim.SGD(params, lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay),
    "adam": lambda params, c: torch.optim.Adam(params, lr=c.lr, weight_decay=c.weight_decay),
}


@dataclass(frozen=True)
class TrainConfig:
    """How a client trains locally. A fresh optimiser is made for every local update."""

    epochs: int = 1
    batch_size: int = 32
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0
    optimizer: str = "sgd"
    mixed_precision: bool = False  # bf16 autocast (2-3x faster small CNNs on AMX CPUs)

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)} (got {self.optimizer!r})")
        if self.epochs < 0:
            raise ValueError(f"epochs must be >= 0 (got {self.epochs})")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {self.batch_size})")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0 (got {self.lr})")


@dataclass(frozen=True)
class Batch:
    x: torch.Tensor  # normalised float images (B, C, H, W) on the device
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
) -> Iterator[Batch]:
    """Batches over ``indices`` of ``split``; shuffled when a ``generator`` is given."""
    images = dataset.x_train if split == "train" else dataset.x_test
    labels = dataset.y_train if split == "train" else dataset.y_test
    index = torch.as_tensor(np.asarray(indices), dtype=torch.long)
    order = torch.randperm(len(index), generator=generator) if generator is not None else torch.arange(len(index))
    for start in range(0, len(index), batch_size):
        position = order[start:start + batch_size]
        rows = index[position]
        x = dataset.to_float(images[rows]).to(device, non_blocking=True)
        yield Batch(x.contiguous(memory_format=torch.channels_last), labels[rows].to(device), position.to(device))


def autocast(device: torch.device, enabled: bool):
    return torch.autocast(device.type, dtype=torch.bfloat16) if enabled else nullcontext()


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
) -> float:
    """Run ``epochs`` (default ``config.epochs``) of minibatch training; return the mean loss.

    ``loss_fn(model, batch)`` gives the loss of one batch, so distillation methods pass a loss
    that reads teacher outputs at ``batch.position``. ``parameters`` restricts what is trained.
    """
    device = next(model.parameters()).device
    optimizer = OPTIMIZERS[config.optimizer](list(parameters or model.parameters()), config)
    model.train()
    total, steps = 0.0, 0
    for _ in range(config.epochs if epochs is None else epochs):
        for batch in iterate_batches(dataset, indices, config.batch_size, device=device, generator=generator):
            with autocast(device, config.mixed_precision):
                loss = loss_fn(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            value = float(loss.detach())
            if not math.isfinite(value):
                raise FloatingPointError(
                    f"training loss became {value} (lr={config.lr}, optimizer={config.optimizer}, "
                    f"mixed_precision={config.mixed_precision}); lower lr or turn mixed_precision off"
                )
            total, steps = total + value, steps + 1
    return total / max(steps, 1)


@torch.no_grad()
def predict(
    model: nn.Module,
    dataset: ImageDataset,
    indices: np.ndarray,
    *,
    split: str = "train",
    batch_size: int = 512,
    mixed_precision: bool = False,
) -> torch.Tensor:
    """Logits (len(indices), classes) in float32, in the order of ``indices``."""
    device = next(model.parameters()).device
    model.eval()
    outputs = []
    for batch in iterate_batches(dataset, indices, batch_size, device=device, split=split):
        with autocast(device, mixed_precision):
            outputs.append(model(batch.x).float())
    if not outputs:
        return torch.zeros(0, dataset.num_classes, device=device)
    return torch.cat(outputs)


def accuracy(model: nn.Module, dataset: ImageDataset, indices: np.ndarray, *, split: str = "test",
             mixed_precision: bool = False) -> float:
    """Top-1 accuracy of ``model`` on ``indices`` of ``split`` (nan for an empty set)."""
    if len(indices) == 0:
        return float("nan")
    logits = predict(model, dataset, indices, split=split, mixed_precision=mixed_precision)
    labels = (dataset.y_test if split == "test" else dataset.y_train)[torch.as_tensor(indices)]
    return float((logits.argmax(1).cpu() == labels).float().mean())
