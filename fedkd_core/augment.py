"""Training-time data augmentation, applied to a whole batch on its device.

``crop_flip`` is the CIFAR recipe of FedBE, FedDF and FedGMKD's code (torchvision's
``RandomCrop(32, padding=4)`` then ``RandomHorizontalFlip()``): pad the image with 4 black pixels
on every side, cut a random window of the original size, mirror it with probability 1/2. Here it
is one gather over the batch instead of per-sample PIL work. The random draws for a whole epoch
are made at once from the run's generator, so a run stays a function of its seed; test and
transfer data are never augmented.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CropFlip:
    """Random crop after zero padding of ``padding`` pixels, then a random horizontal flip."""

    padding: int = 4

    def draw(self, count: int, generator: torch.Generator | None) -> torch.Tensor:
        """(count, 3) int64 on the CPU: row offset, column offset (0..2*padding), flip (0/1)."""
        offsets = torch.randint(0, 2 * self.padding + 1, (count, 2), generator=generator)
        flips = torch.randint(0, 2, (count, 1), generator=generator)
        return torch.cat([offsets, flips], dim=1)

    def apply(self, images: torch.Tensor, draws: torch.Tensor, fill: torch.Tensor) -> torch.Tensor:
        """``images`` (B, H, W, C) normalised; ``draws`` (B, 3) from :meth:`draw`; ``fill`` (C,) is
        the normalised value of a black pixel (the padding). Returns (B, H, W, C)."""
        count, height, width, channels = images.shape
        pad = self.padding
        padded = fill.view(1, 1, 1, channels).expand(count, height + 2 * pad, width + 2 * pad, channels).clone()
        padded[:, pad:pad + height, pad:pad + width] = images
        rows = draws[:, :1] + torch.arange(height, device=images.device)  # (B, H)
        steps = torch.arange(width, device=images.device)
        flipped = draws[:, 2:3].bool()
        cols = draws[:, 1:2] + torch.where(flipped, width - 1 - steps, steps)  # (B, W)
        batch = torch.arange(count, device=images.device)
        return padded[batch[:, None, None], rows[:, :, None], cols[:, None, :]]


AUGMENTATIONS: dict[str, CropFlip | None] = {"none": None, "crop_flip": CropFlip(padding=4)}


def check_augmentation(name: str) -> None:
    if name not in AUGMENTATIONS:
        raise ValueError(f"augment must be one of {sorted(AUGMENTATIONS)} (got {name!r})")
