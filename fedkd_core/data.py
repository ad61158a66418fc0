"""Image datasets as whole uint8 tensors, read from an offline cache or torchvision.

The data directory is ``$FEDKD_DATA`` (default ``~/.cache/fedkd``). ``load_dataset`` reads
``<dir>/<name>.npz`` (arrays ``x_train, y_train, x_test, y_test``) when it exists and otherwise
asks torchvision to download the dataset into the same directory. Training code batches by index
and normalises per batch (:meth:`ImageDataset.to_float`), so there is no per-sample PIL work.
"""

from __future__ import annotations

import os
import shutil
import warnings
import zipfile
import zlib
from collections.abc import Callable
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
        """uint8 (B, H, W[, C]) -> normalised float32 (B, C, H, W): :meth:`normalised_rows` in the
        layout a model takes."""
        return self.normalised_rows(images).permute(0, 3, 1, 2).contiguous()

    def normalised_rows(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 (B, H, W[, C]) -> normalised float32 (B, H, W, C), the layout the resident store
        keeps: (x / 255 - mean) / std per channel, the one formula of every normalised image."""
        x = images.float()
        x = x.unsqueeze(-1) if x.dim() == 3 else x
        return x.div_(255.0).sub_(torch.tensor(self.mean, device=x.device)).div_(torch.tensor(self.std, device=x.device))

    def on(self, device: torch.device | str) -> "ResidentDataset":
        """The dataset normalised and kept on ``device``, so training gathers batches there.

        Made on first use per device and cached (CIFAR-10 in float32: 740 MB); each row is
        normalised the first time a batch asks for it (:meth:`ResidentSplit.fill`).
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
    A row of the store is normalised when a batch first asks for it (:meth:`fill`, called once per
    pass over a set of indices), not all at once: a run on a few hundred images of CIFAR-10 then
    normalises those, not all 60,000 (2.5 s of every process that trains, on one core of a Xeon:
    each test run, sweep worker, Ray worker and Flower ClientApp paid it). A row's numbers are the
    same bits either way (:meth:`ImageDataset.normalised_rows`).
    """

    images: torch.Tensor  # (N, H, W, C) float32 on the device; a row holds its numbers once filled
    labels: torch.Tensor
    raw: torch.Tensor = field(repr=False)  # the uint8 images, on the host
    normalise: Callable[[torch.Tensor], torch.Tensor] = field(repr=False)
    filled: torch.Tensor = field(repr=False)  # bool per row, on the host

    @staticmethod
    def of(dataset: "ImageDataset", images: torch.Tensor, labels: torch.Tensor, device: torch.device) -> "ResidentSplit":
        store = torch.empty((len(images), *images.shape[1:3], dataset.in_channels), dtype=torch.float32, device=device)
        return ResidentSplit(store, labels.to(device), images, dataset.normalised_rows,
                             torch.zeros(len(images), dtype=torch.bool))

    def fill(self, rows: torch.Tensor) -> None:
        """Normalise into the store those of ``rows`` (host int64 indices) it does not hold yet."""
        missing = rows[~self.filled[rows]]
        if len(missing):
            missing = torch.unique(missing)
            device = self.images.device
            self.images[missing.to(device)] = self.normalise(self.raw[missing]).to(device)
            self.filled[missing] = True

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
    path = Path(directory) / f"{name}.npz"
    arrays = checked_arrays(path, _read_npz(path) if path.exists() else _download(name, Path(directory)), info)
    return ImageDataset(
        name=name,
        x_train=torch.from_numpy(np.ascontiguousarray(arrays["x_train"])),
        y_train=torch.from_numpy(np.ascontiguousarray(arrays["y_train"])),
        x_test=torch.from_numpy(np.ascontiguousarray(arrays["x_test"])),
        y_test=torch.from_numpy(np.ascontiguousarray(arrays["y_test"])),
        num_classes=info.num_classes,
        mean=info.mean,
        std=info.std,
    )


ARRAYS = ("x_train", "y_train", "x_test", "y_test")


class DatasetFileError(ValueError):
    """A dataset file that cannot be used as it is (:func:`bad_file` words its message)."""


def bad_file(path: Path, problem: str) -> DatasetFileError:
    """The error for the dataset file at ``path``: the file, what is wrong (``problem``) and the fix."""
    return DatasetFileError(
        f"dataset file {path.resolve()}: {problem}. Fix: replace it with a good copy "
        f"({install_hint(path.parent)}), or write an .npz holding uint8 images x_train, x_test "
        "(N x H x W, colour N x H x W x 3, values 0..255) and integer labels y_train, y_test (0..classes-1)."
    )


def install_hint(directory: Path) -> str:
    """How to put the offline copies into ``directory``, with absolute paths (the command may run anywhere)."""
    script = Path(__file__).resolve().parents[2] / "shared" / "data" / "install.py"
    command = f"python {script}" if script.exists() else "python <the offline copies>/install.py"
    return f"`{command} {directory.resolve()}`"


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """The four arrays of ``path``; a DatasetFileError for a corrupt archive or a missing array."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            names = sorted(npz.files)
            arrays = {key: npz[key] for key in ARRAYS if key in names}
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as error:
        raise bad_file(path, f"it is not a readable .npz archive: truncated, damaged or not an .npz "
                                     f"({type(error).__name__}: {error})") from error
    missing = [key for key in ARRAYS if key not in arrays]
    if missing:
        raise bad_file(path, f"it has no array(s) {', '.join(missing)} (it holds {', '.join(names) or 'none'})")
    return arrays


def checked_arrays(path: Path, arrays: dict[str, np.ndarray], info: DatasetInfo) -> dict[str, np.ndarray]:
    """``arrays`` as the code expects them (uint8 images, int64 labels 0..classes-1), checked:
    a DatasetFileError naming ``path`` when a shape, dtype, value or label is wrong. Integer
    images, and float images holding whole numbers 0..255, are converted losslessly; float images
    in [0, 1] are scaled by 255 (rounded) with a warning saying so, never cast to zeros."""
    channels = len(info.mean)
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        _check_image_shape(path, f"x_{split}", x, channels)
        if y.ndim != 1 or len(y) != len(x):
            raise bad_file(path, f"y_{split} has shape {y.shape}; it must be one label per image of "
                                         f"x_{split}, shape ({len(x)},)")
    if arrays["x_train"].shape[1:] != arrays["x_test"].shape[1:]:
        raise bad_file(path, f"x_train images are {arrays['x_train'].shape[1:]} but x_test images are "
                                     f"{arrays['x_test'].shape[1:]}; both splits must hold images of one size")
    return {**{f"x_{s}": _as_uint8_images(path, f"x_{s}", arrays[f"x_{s}"]) for s in ("train", "test")},
            **{f"y_{s}": _as_labels(path, f"y_{s}", arrays[f"y_{s}"], info.num_classes) for s in ("train", "test")}}


def _check_image_shape(path: Path, name: str, x: np.ndarray, channels: int) -> None:
    expected = "N x H x W" if channels == 1 else f"N x H x W x {channels}"
    right = x.ndim == 3 if channels == 1 else (x.ndim == 4 and x.shape[-1] == channels)
    if not right or len(x) == 0:
        raise bad_file(path, f"{name} has shape {x.shape}; this dataset needs {expected} "
                                     f"({channels} channel{'s' if channels > 1 else ''}), at least one image")


def _as_uint8_images(path: Path, name: str, x: np.ndarray) -> np.ndarray:
    if x.dtype == np.uint8:
        return x
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise bad_file(path, f"{name} has dtype {x.dtype}; images must be numbers (uint8 0..255)")
    low, high = x.min(), x.max()
    if not (np.isfinite(low) and np.isfinite(high)) or low < 0 or high > 255:
        raise bad_file(path, f"{name} holds values from {low} to {high}; images must be 0..255 (or floats "
                                     "in [0, 1]); normalised images cannot be used, save the raw pixels")
    if np.issubdtype(x.dtype, np.integer) or (high > 1 and np.array_equal(x, np.round(x))):
        return x.astype(np.uint8)  # whole numbers 0..255: lossless
    if high <= 1.0:
        warnings.warn(f"dataset file {path.resolve()}: {name} holds floats in [0, 1]; scaled by 255 and rounded "
                      "to uint8 (save uint8 images to skip this step)", stacklevel=4)
        return np.round(x * 255.0).astype(np.uint8)
    raise bad_file(path, f"{name} holds fractional values up to {high}; images must be whole numbers "
                                 "0..255 (uint8) or floats in [0, 1]")


def _as_labels(path: Path, name: str, y: np.ndarray, num_classes: int) -> np.ndarray:
    integral = np.issubdtype(y.dtype, np.integer) or (np.issubdtype(y.dtype, np.floating)
                                                      and np.isfinite(y).all() and np.array_equal(y, np.round(y)))
    if not integral:
        raise bad_file(path, f"{name} has dtype {y.dtype} with non-integer values; labels must be "
                                     f"integers 0..{num_classes - 1}")
    low, high = int(y.min()), int(y.max())
    if low < 0 or high >= num_classes:
        shift = " (they seem to count from 1: subtract 1)" if (low, high) == (1, num_classes) else ""
        raise bad_file(path, f"{name} holds labels {low}..{high}; this dataset's labels are "
                                     f"0..{num_classes - 1}{shift}")
    return y.astype(np.int64)


def _download(name: str, directory: Path) -> dict[str, np.ndarray]:
    """Fetch with torchvision into ``directory``; explain what to do when that fails (and leave
    no empty folder of the failed download behind)."""
    import torchvision

    dataset_class = getattr(torchvision.datasets, DATASETS[name].torchvision_class)
    created = [folder for folder in (directory, directory / DATASETS[name].torchvision_class) if not folder.exists()]
    try:
        train = dataset_class(str(directory), train=True, download=True)
        test = dataset_class(str(directory), train=False, download=True)
    except Exception as error:  # no internet, blocked host, corrupt archive...
        for folder in reversed(created):
            shutil.rmtree(folder, ignore_errors=True)
        raise FileNotFoundError(
            f"dataset {name!r}: {(directory / (name + '.npz')).resolve()} is missing and torchvision could "
            f"not download it ({type(error).__name__}: {error}). Provide the file offline with "
            f"{install_hint(directory)} (or any .npz holding uint8 "
            "x_train, y_train, x_test, y_test), or set FEDKD_DATA to the folder that holds it."
        ) from error
    return {
        "x_train": np.asarray(train.data),
        "y_train": np.asarray(train.targets),
        "x_test": np.asarray(test.data),
        "y_test": np.asarray(test.targets),
    }
