"""The model zoo. Every model is a :class:`SplitModel`: ``features`` then ``head``.

``model.features(x)`` returns a flat feature vector per sample and ``model.head`` is the final
classifier, so methods that share or personalise one part (FedPer, LG-FedAvg), or that work in
feature space (FedUA, FedGMKD, FedProto), reach both directly.

Dropout draws its masks on the host, from torch's global CPU generator (which
:func:`fedkd_core.randomness.party_randomness` reseeds per seed, round and party), and moves them
to the model's device (:class:`HostDropout`, :class:`HostDropout2d`; :func:`make_model` puts them in
place of every ``nn.Dropout`` / ``nn.Dropout2d``): a GPU run draws the masks a CPU run draws, where
``nn.Dropout`` on a GPU would draw them from the GPU's own generator, another stream. On a CPU they
are bit for bit what ``F.dropout`` / ``F.dropout2d`` compute (tests/test_random_masks.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from .randomness import host_bernoulli_mask


class SplitModel(nn.Module):
    """A classifier written as ``head(features(x))``."""

    def __init__(self, features: nn.Module, head: nn.Module):
        super().__init__()
        self.features = features
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class HostDropout(nn.Dropout):
    """``nn.Dropout`` whose mask is drawn on the host from the global CPU generator and moved to
    the input's device. ATen's CPU dropout is ``noise = empty_like(x).bernoulli_(1 - p)``,
    ``noise.div_(1 - p)``, ``x * noise``: the same operations, so on a CPU the same numbers."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0 or x.numel() == 0:
            return x
        if self.p == 1:
            return x.mul_(0) if self.inplace else x * torch.zeros((), dtype=x.dtype, device=x.device)
        return _apply_mask(x, host_bernoulli_mask(x.shape, self.p, x.dtype, x.device), self.inplace)


class HostDropout2d(nn.Dropout2d):
    """``nn.Dropout2d`` (whole channels of an (N, C, H, W) input) with its (N, C, 1, 1) mask drawn on
    the host from the global CPU generator, as ATen's CPU ``feature_dropout`` draws it, and moved to
    the input's device."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:
            raise ValueError(f"HostDropout2d takes (N, C, H, W) inputs (got {tuple(x.shape)})")
        if not self.training or self.p == 0 or x.numel() == 0:
            return x
        if self.p == 1:
            return x.mul_(0) if self.inplace else x * torch.zeros((), dtype=x.dtype, device=x.device)
        shape = (x.shape[0], x.shape[1], 1, 1)
        return _apply_mask(x, host_bernoulli_mask(shape, self.p, x.dtype, x.device), self.inplace)


def _apply_mask(x: torch.Tensor, mask: torch.Tensor, inplace: bool) -> torch.Tensor:
    return x.mul_(mask) if inplace else x * mask


HOST_DROPOUT = {nn.Dropout: HostDropout, nn.Dropout2d: HostDropout2d}


def host_drawn(model: nn.Module) -> nn.Module:
    """``model`` with every ``nn.Dropout`` / ``nn.Dropout2d`` (exactly those classes) replaced, in
    place, by the host-drawn module of the same ``p`` and ``inplace`` (no parameters change)."""
    for module in list(model.modules()):
        for name, child in module.named_children():
            host = HOST_DROPOUT.get(type(child))
            if host is not None:
                setattr(module, name, host(child.p, child.inplace))
    return model


@dataclass(frozen=True)
class InputShape:
    channels: int
    size: int
    num_classes: int


def _flat_dim(body: nn.Module, shape: InputShape) -> int:
    with torch.no_grad():
        return body(torch.zeros(1, shape.channels, shape.size, shape.size)).flatten(1).shape[1]


def conv_unit(cin: int, cout: int) -> nn.Sequential:
    """KnFu's CU(t): 3x3 convolution (padding 1), ReLU, 2x2 max-pooling."""
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))


def knfu_m1(shape: InputShape) -> SplitModel:
    """KnFu M1 = [CU(32); CU(64); FC(64); FC(32); F(10)] (MNIST)."""
    body = nn.Sequential(conv_unit(shape.channels, 32), conv_unit(32, 64), nn.Flatten())
    dim = _flat_dim(body, shape)
    features = nn.Sequential(body, nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
    return SplitModel(features, nn.Linear(32, shape.num_classes))


def knfu_m2(shape: InputShape) -> SplitModel:
    """KnFu M2 = [CU(16); CU(16); CU(32); CU(32); FC(128); FC(10)] (CIFAR-10).

    The paper names only the layers; here each CU is 3x3 conv + ReLU and a 2x2 max-pool follows
    every second CU (VGG style), so the 32x32 input reaches FC(128) as 32 x 8 x 8.
    """
    def conv_relu(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]

    body = nn.Sequential(
        *conv_relu(shape.channels, 16), *conv_relu(16, 16), nn.MaxPool2d(2),
        *conv_relu(16, 32), *conv_relu(32, 32), nn.MaxPool2d(2), nn.Flatten(),
    )
    dim = _flat_dim(body, shape)
    return SplitModel(nn.Sequential(body, nn.Linear(dim, 128), nn.ReLU()), nn.Linear(128, shape.num_classes))


def cnn5(shape: InputShape) -> SplitModel:
    """The 5-layer CNN of pFedSD / MOON: conv(6,5)-pool-conv(16,5)-pool-fc120-fc84-fc(C)."""
    body = nn.Sequential(
        nn.Conv2d(shape.channels, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    )
    dim = _flat_dim(body, shape)
    features = nn.Sequential(body, nn.Linear(dim, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU())
    return SplitModel(features, nn.Linear(84, shape.num_classes))


def fedavg_cnn(shape: InputShape) -> SplitModel:
    """FedAvgCNN (McMahan et al., as in PFLlib): conv(32,5)-pool-conv(64,5)-pool-fc512-fc(C)."""
    body = nn.Sequential(
        nn.Conv2d(shape.channels, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    )
    dim = _flat_dim(body, shape)
    return SplitModel(nn.Sequential(body, nn.Linear(dim, 512), nn.ReLU()), nn.Linear(512, shape.num_classes))


class BasicBlock(nn.Module):
    """The CIFAR ResNet block of He et al. (2016), with a 1x1 projection shortcut."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


def cifar_resnet(depth: int) -> Callable[[InputShape], SplitModel]:
    """ResNet-(6n+2) for 32x32 inputs: stages of 16, 32, 64 channels, n blocks each."""
    if (depth - 2) % 6:
        raise ValueError(f"depth must be 6n+2 (got {depth})")
    blocks = (depth - 2) // 6

    def build(shape: InputShape) -> SplitModel:
        layers: list[nn.Module] = [nn.Conv2d(shape.channels, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
        cin = 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for b in range(blocks):
                layers.append(BasicBlock(cin, cout, stride if b == 0 else 1))
                cin = cout
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        return SplitModel(nn.Sequential(*layers), nn.Linear(64, shape.num_classes))

    return build


def resnet18(shape: InputShape) -> SplitModel:
    """torchvision ResNet-18 (random init), first convolution adapted to the input channels."""
    import torchvision

    net = torchvision.models.resnet18(num_classes=shape.num_classes)
    if shape.channels != 3:
        net.conv1 = nn.Conv2d(shape.channels, 64, 7, 2, 3, bias=False)
    head, net.fc = net.fc, nn.Identity()
    return SplitModel(net, head)


def resnet18_code32(shape: InputShape) -> SplitModel:
    """FedGMKD's released model (SereinZY/FedGMKD models.py): torchvision ResNet-18 unchanged
    (ImageNet stem, random init) with ``num_classes=32``, so its ``fc`` (512 -> 32, no activation)
    is the 32-d feature, and a linear classifier on it."""
    import torchvision

    net = torchvision.models.resnet18(num_classes=32)
    if shape.channels != 3:
        net.conv1 = nn.Conv2d(shape.channels, 64, 7, 2, 3, bias=False)
    return SplitModel(net, nn.Linear(32, shape.num_classes))


def cnn5_code32(shape: InputShape) -> SplitModel:
    """``cnn5`` with FedGMKD's 32-d feature: its 84-d layer, then Linear(84, 32) without an
    activation as the feature, and a linear classifier (a CPU-sized stand-in for resnet18_code32)."""
    base = cnn5(shape)
    return SplitModel(nn.Sequential(base.features, nn.Linear(84, 32)), nn.Linear(32, shape.num_classes))


def mobilenet_v2(shape: InputShape) -> SplitModel:
    """torchvision MobileNetV2 (random init), first convolution adapted to the input channels."""
    import torchvision

    net = torchvision.models.mobilenet_v2(num_classes=shape.num_classes)
    if shape.channels != 3:
        net.features[0][0] = nn.Conv2d(shape.channels, 32, 3, 2, 1, bias=False)
    head = net.classifier
    net.classifier = nn.Identity()
    return SplitModel(net, head)


def pfedsd_cnn_mnist(shape: InputShape) -> SplitModel:
    """pFedSD's ``CNNMnist`` (FedCKD's FMNIST "simple CNN"): conv(64,5)-pool-ReLU,
    conv(64,5)-Dropout2d(0.5)-pool-ReLU, fc128-fc64-fc(C) (CGCL-codes/pFedSD simple_cnns.py)."""
    body = nn.Sequential(
        nn.Conv2d(shape.channels, 64, 5), nn.MaxPool2d(2), nn.ReLU(),
        nn.Conv2d(64, 64, 5), nn.Dropout2d(0.5), nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(),
    )
    dim = _flat_dim(body, shape)
    features = nn.Sequential(body, nn.Linear(dim, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())
    return SplitModel(features, nn.Linear(64, shape.num_classes))


def pfedsd_cnn_cifar100(shape: InputShape) -> SplitModel:
    """pFedSD's ``CNNCifar100``: conv(64,5)-pool-conv(128,5)-pool-fc256-fc128-Dropout(0.6)-fc(C)."""
    body = nn.Sequential(
        nn.Conv2d(shape.channels, 64, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    )
    dim = _flat_dim(body, shape)
    features = nn.Sequential(body, nn.Linear(dim, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Dropout(0.6))
    return SplitModel(features, nn.Linear(128, shape.num_classes))


MODELS: dict[str, Callable[[InputShape], SplitModel]] = {
    "knfu_m1": knfu_m1,
    "knfu_m2": knfu_m2,
    "cnn5": cnn5,
    "fedavg_cnn": fedavg_cnn,
    "resnet8": cifar_resnet(8),
    "resnet32": cifar_resnet(32),
    "resnet18": resnet18,
    "resnet18_code32": resnet18_code32,
    "cnn5_code32": cnn5_code32,
    "mobilenet_v2": mobilenet_v2,
    "pfedsd_cnn_mnist": pfedsd_cnn_mnist,
    "pfedsd_cnn_cifar100": pfedsd_cnn_cifar100,
}


def check_model_name(name: str) -> None:
    if name not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)} (got {name!r})")


def make_model(name: str, shape: InputShape, seed: int) -> SplitModel:
    """Build ``name`` with weights drawn from ``seed`` (the global RNGs are left untouched), its
    dropout drawn on the host (:func:`host_drawn`)."""
    check_model_name(name)
    with torch.random.fork_rng(devices=list(range(torch.cuda.device_count()))):
        torch.manual_seed(seed)
        return host_drawn(MODELS[name](shape))
