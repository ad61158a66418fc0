"""Image datasets as whole uint8 tensors, read from an offline cache or torchvision.

The data directory is ``$FEDKD_DATA`` (default ``~/.cache/fedkd``). ``load_dataset`` reads
``<dir>/<name>.npz`` (arrays ``x_train, y_train, x_test, y_test``) when it exists and otherwise
asks torchvision to download the dataset into the same directory. Training code batches by index
and normalises per batch (:meth:`ImageDataset.to_float`), so there is no per-sample PIL work.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch


@dataclass(frozen=True)
class DatasetInfo:
    """What the code needs to know of a dataset before reading it."""

    torchvision_class: str
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]


DATASETS: dict[str, DatasetInfo] = {
    "mnist": DatasetInfo("MNIST", 10, (0.1307,), (0.3081,)),
    "fashion_mnist": DatasetInfo("FashionMNIST", 10, (0.2860,), (0.3530,)),
    "cifar10": DatasetInfo("CIFAR10", 10, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": DatasetInfo("CIFAR100", 100, (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
}


@dataclass(frozen=True)
class ImageDataset:
    """A whole dataset held as tensors: uint8 images (N, H, W[, C]) and int64 labels."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    _resident: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    @property
    def in_channels(self) -> int:
        return 1 if self.x_train.dim() == 3 else self.x_train.shape[-1]

    @property
    def image_size(self) -> int:
        return self.x_train.shape[1]

    def to_float(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 (B, H, W[, C]) -> normalised float32 (B, C, H, W)."""
        x = images.float().div_(255.0)
        x = x.unsqueeze(1) if x.dim() == 3 else x.permute(0, 3, 1, 2)
        mean = torch.tensor(self.mean, device=x.device).view(1, -1, 1, 1)
        std = torch.tensor(self.std, device=x.device).view(1, -1, 1, 1)
        return (x - mean) / std

    def on(self, device: torch.device | str) -> "ResidentDataset":
        """The dataset normalised once and kept on ``device``, so training gathers batches there.

        Made on first use per device and cached (CIFAR-10 in float32: 740 MB).
        """
        device = physical_device(device)
        if device not in self._resident:
            self._resident[device] = ResidentDataset(
                train=ResidentSplit.of(self, self.x_train, self.y_train, device),
                test=ResidentSplit.of(self, self.x_test, self.y_test, device),
                fill=self.to_float(torch.zeros(1, 1, 1, self.in_channels, dtype=torch.uint8)).view(-1).to(device),
            )
        return self._resident[device]


def physical_device(device: torch.device | str) -> torch.device:
    """``device`` with its index: ``cuda`` is the current CUDA device, so ``cuda`` and ``cuda:0`` share
    one resident copy of a dataset instead of holding two."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


@dataclass(frozen=True)
class ResidentSplit:
    """One split on a device: normalised float32 images stored (N, H, W, C) and int64 labels.

    Rows gathered from the NHWC store are channels-last batches without a copy of their own.
    """

    images: torch.Tensor
    labels: torch.Tensor

    @staticmethod
    def of(dataset: "ImageDataset", images: torch.Tensor, labels: torch.Tensor, device: torch.device) -> "ResidentSplit":
        chunks = [dataset.to_float(images[i:i + 4096]).permute(0, 2, 3, 1).contiguous()
                  for i in range(0, len(images), 4096)]
        store = torch.cat(chunks) if chunks else torch.zeros(0, *images.shape[1:3], dataset.in_channels)
        return ResidentSplit(store.to(device), labels.to(device))

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class ResidentDataset:
    train: ResidentSplit
    test: ResidentSplit
    fill: torch.Tensor  # a black pixel, normalised: what zero padding of the raw image becomes

    def split(self, name: str) -> ResidentSplit:
        if name not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test' (got {name!r})")
        return self.train if name == "train" else self.test


def data_dir(root: str | os.PathLike | None = None) -> Path:
    """The data directory: ``root`` if given, else ``$FEDKD_DATA``, else ``~/.cache/fedkd``."""
    if root is not None:
        return Path(root).expanduser()
    return Path(os.environ.get("FEDKD_DATA", "~/.cache/fedkd")).expanduser()


def check_dataset_name(name: str) -> DatasetInfo:
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)} (got {name!r})")
    return DATASETS[name]


def load_dataset(name: str, root: str | os.PathLike | None = None) -> ImageDataset:
    """Load ``name`` (one of :data:`DATASETS`) from ``<root>/<name>.npz`` or torchvision.

    Loaded datasets are cached per process, so calling this repeatedly is cheap.
    """
    check_dataset_name(name)
    return _load_cached(name, str(data_dir(root)))


@lru_cache(maxsize=4)
def _load_cached(name: str, directory: str) -> ImageDataset:
    info = DATASETS[name]
    arrays = _read_npz(Path(directory) / f"{name}.npz") or _download(name, Path(directory))
    return ImageDataset(
        name=name,
        x_train=torch.from_numpy(np.ascontiguousarray(arrays["x_train"], dtype=np.uint8)),
        y_train=torch.from_numpy(np.asarray(arrays["y_train"], dtype=np.int64)),
        x_test=torch.from_numpy(np.ascontiguousarray(arrays["x_test"], dtype=np.uint8)),
        y_test=torch.from_numpy(np.asarray(arrays["y_test"], dtype=np.int64)),
        num_classes=info.num_classes,
        mean=info.mean,
        std=info.std,
    )


def _read_npz(path: Path) -> dict[str, np.ndarray] | None:
    if not path.exists():
        return None
    with np.load(path) as npz:
        return {key: npz[key] for key in ("x_train", "y_train", "x_test", "y_test")}


def _download(name: str, directory: Path) -> dict[str, np.ndarray]:
    """Fetch with torchvision into ``directory``; explain what to do when that fails."""
    import torchvision

    dataset_class = getattr(torchvision.datasets, DATASETS[name].torchvision_class)
    try:
        train = dataset_class(str(directory), train=True, download=True)
        test = dataset_class(str(directory), train=False, download=True)
    except Exception as error:  # no internet, blocked host, corrupt archive...
        raise FileNotFoundError(
            f"dataset {name!r}: {directory / (name + '.npz')} is missing and torchvision could "
            f"not download it ({type(error).__name__}: {error}). Provide the file offline with "
            f"`python ../shared/data/install.py {directory}` (or any .npz holding uint8 "
            "x_train, y_train, x_test, y_test), or set FEDKD_DATA to the folder that holds it."
        ) from error
    return {
        "x_train": np.asarray(train.data),
        "y_train": np.asarray(train.targets),
        "x_test": np.asarray(test.data),
        "y_test": np.asarray(test.targets),
    }
