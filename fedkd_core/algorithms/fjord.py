"""FjORD (Horváth, Laskaridis, Almeida, Leontiadis, Venieris, Lane; NeurIPS 2021): ordered dropout
with self-distillation, as a baseline of the FedGMKD chapter.

Sources: the paper (§3.1 ordered dropout, Eq. 1 the distillation loss, §4 Alg. 1 and Eq. 2 the
aggregation, §5.1 the device tiers) and the official Flower baseline ``adap/flower``
``baselines/fjord`` ([FJ]: ``fjord/models.py``, ``fjord/od/layers/*.py``, ``fjord/strategy.py``,
``fjord/main.py``, ``fjord/conf/common.yaml``).

**Ordered dropout.** The width-p submodel of a network keeps, in every convolution and linear
layer, the first ⌈p·K⌉ of its K output channels (§3.1; [FJ] ``od_conv_forward``:
``weight[:out_dim, :in_dim]`` with ``in_dim = x.size(1)``). The input channels of a layer are
whatever the previous layer produced, so the first layer sees the whole image and a linear layer
after a flatten sees the first ⌈p·K⌉ channels times the spatial positions; the classifier keeps
all its outputs ([FJ] ``create_linear_layer(od, False, ...)``). Here this is done by *slicing*
the weights at run time (so a narrow submodel also costs fewer FLOPs, the point of FjORD): each
``Conv2d``/``Linear``/``BatchNorm2d`` of a :class:`~fedkd_core.models.SplitModel` is turned in
place into an ordered-dropout subclass (:func:`make_ordered`) that reads the current width from
an attribute set by :func:`at_width`. Parameter names are unchanged, so the width-1 model *is*
the plain model. BatchNorm keeps separate running statistics per width (the per-width
``ODBatchNorm2d`` of [FJ] ``od/layers/batch_norm.py``, whose affine weights are shared and sliced):
extra buffers ``od_mean_<c>``/``od_var_<c>`` for every narrower channel count c; the full width
uses the module's own ``running_mean``/``running_var``.

**A round** (Alg. 1). Client k has a device tier p_max(k) ∈ P (:func:`allocate_tiers`); it
downloads only the width-p_max slice of the global model, trains, and uploads that slice
(communication ∝ p_max², §4 "Communication Savings"; [FJ] itself sends whole models and masks at
the server). Per batch ([FJ] ``models.train`` with ``know_distill``): the p_max submodel is
trained with CE, and a width p drawn uniformly from {p ∈ P : p ≤ p_max} ([FJ] ``ODSampler``) is
trained to match the p_max submodel's softmax (Eq. 1, :func:`fjord_distillation_loss`). The
server averages every parameter element over the clients whose slice holds it, weighted by their
sample counts (Eq. 2; [FJ] ``fjord_average``: nested blocks, weights ``num_examples``), and keeps
the previous value where no client held it (:func:`ordered_average`). The global model is
evaluated at p = 1; a client's personal model is its trained width-p_max copy (FedGMKD's local
accuracy, spec fact 9).

**Settings** (config fields): P = {0.2, 0.4, 0.6, 0.8, 1.0} ([FJ] ``p_s``, the paper's uniform-5);
tiers in equal shares ([FJ] ``client_tier_allocation: uniform``, ``cid // 20 * 0.2 + 0.2`` for
100 clients); KD temperature 0.7 (FedGMKD §4.4 "T_fjord = 0.7"; FjORD's best and [FJ]'s value is
T = 1 with α = 1, §3.2).

**FedGMKD's "unique dropout rate δ = 0.5"** has no parameter of that name in FjORD. The only 0.5 in
FjORD's setup is the *drop scale* ds ∈ {0.5, 1.0} of §5.1, which skews the tier sizes: with
uniform-5 and ds the four lower tiers hold ds/5 of the clients each and the top tier the rest
(ds = 1: 20% each; ds = 0.5: 10/10/10/10/60%). We read δ as that drop scale: ``drop_scale=0.5``
gives it; the default 1.0 is [FJ]'s uniform allocation (the spec's default). Another reading,
every client at width 0.5, would leave the outer half of the global model untrained and is not
offered.
"""

from __future__ import annotations

import copy
import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..distill import kd_kl, tempered_softmax
from ..randomness import SERVER
from ..training import train
from .shapes.base import Message
from .shapes.from_global import AGGREGATION_WEIGHTS, UNTRAINED_CLIENT_MODEL, FromGlobal, check_choice, frozen_copy

UNIFORM_5 = (0.2, 0.4, 0.6, 0.8, 1.0)


@dataclass(frozen=True)
class FjORDConfig:
    widths: tuple[float, ...] = UNIFORM_5  # P, the candidate widths ([FJ] common.yaml p_s)
    drop_scale: float = 1.0  # tier skew of FjORD §5.1; 0.5 = our reading of FedGMKD's δ = 0.5
    distill: bool = True  # self-distillation ([FJ] train_mode fjord_kd); False: CE at the sampled width
    temperature: float = 0.7  # FedGMKD §4.4 T_fjord (FjORD / [FJ]: 1)
    alpha: float = 1.0  # Eq. 1 weight of the KL term; FjORD §3.2 best α = 1 ([FJ] uses 1)
    scale_t2: bool = False  # multiply the KL by T² (Hinton); Eq. 1 and [FJ] do not
    aggregation: str = "size"  # Eq. 2 "weights proportional to the amount of data"
    untrained_client: str = "global"  # a never-trained client is scored with the global model at its p_max

    def __post_init__(self) -> None:
        widths = tuple(float(p) for p in self.widths)
        object.__setattr__(self, "widths", widths)
        if not widths or any(not 0 < p <= 1 for p in widths) or list(widths) != sorted(set(widths)):
            raise ValueError(f"widths must be strictly increasing values in (0, 1] (got {self.widths})")
        if widths[-1] != 1.0:
            raise ValueError(f"widths must end with 1.0, the global model's width (got {self.widths})")
        if not 0 <= self.drop_scale <= 1:
            raise ValueError(f"drop_scale must be in [0, 1] (got {self.drop_scale})")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (got {self.temperature})")
        if not 0 <= self.alpha <= 1:
            raise ValueError(f"alpha must be in [0, 1] (got {self.alpha})")
        check_choice(self.aggregation, AGGREGATION_WEIGHTS, "aggregation")
        check_choice(self.untrained_client, UNTRAINED_CLIENT_MODEL, "untrained_client")


# --- ordered dropout layers ---------------------------------------------------------------


def channels_at(width: float, full: int) -> int:
    """⌈p·K⌉, the channels a width-p submodel keeps of a layer with K (FjORD §3.1; [FJ]
    ``int(np.ceil(width * p))``). Rounded first so that float noise (0.7·10 = 7.000000000000001)
    does not add a channel."""
    return max(1, math.ceil(round(width * full, 9)))


class _Ordered:
    """Mixin of the ordered-dropout layers: the width they run at (set by :func:`at_width`)."""

    od_width: float = 1.0
    od_full_out: bool = False  # the classifier keeps all its outputs

    def od_out(self, full: int) -> int:
        return full if self.od_full_out else channels_at(self.od_width, full)


class ODConv2d(_Ordered, nn.Conv2d):
    """Conv2d on its first ⌈p·out⌉ filters and on the input channels it is given ([FJ] ``ODConv2d``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, cin = self.od_out(self.out_channels), x.shape[1]
        if out == self.out_channels and cin == self.in_channels:
            return super().forward(x)
        bias = None if self.bias is None else self.bias[:out]
        return self._conv_forward(x, self.weight[:out, :cin], bias)


class ODLinear(_Ordered, nn.Linear):
    """Linear on its first ⌈p·out⌉ units and on the inputs it is given ([FJ] ``ODLinear``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, cin = self.od_out(self.out_features), x.shape[-1]
        if out == self.out_features and cin == self.in_features:
            return super().forward(x)
        bias = None if self.bias is None else self.bias[:out]
        return F.linear(x, self.weight[:out, :cin], bias)


class ODBatchNorm2d(_Ordered, nn.BatchNorm2d):
    """BatchNorm2d with running statistics per width ([FJ] ``ODBatchNorm2d``: one BatchNorm per
    channel count, shared affine weights sliced). The full width uses the module's own buffers."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.shape[1]
        if c == self.num_features:
            return super().forward(x)
        mean, var = getattr(self, f"od_mean_{c}", None), getattr(self, f"od_var_{c}", None)
        if mean is None:
            raise ValueError(f"no running statistics for {c} of {self.num_features} channels: "
                             f"the width is not one of the model's widths")
        weight = None if self.weight is None else self.weight[:c]
        bias = None if self.bias is None else self.bias[:c]
        return F.batch_norm(x, mean, var, weight, bias, self.training, self.momentum, self.eps)


ORDERED_LAYERS: dict[type, type] = {nn.Conv2d: ODConv2d, nn.Linear: ODLinear, nn.BatchNorm2d: ODBatchNorm2d}
# Modules without parameters or buffers of their own (activations, pooling, containers) need nothing.


def classifier_layer(model: nn.Module) -> nn.Linear:
    """The layer whose outputs are the classes: the last Linear of ``model.head``."""
    linears = [m for m in model.head.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError("model.head must contain a Linear classifier")
    return linears[-1]


def make_ordered(model: nn.Module, widths: Sequence[float]) -> nn.Module:
    """Turn ``model`` (a SplitModel) into an ordered-dropout model, in place, and return it.

    Conv2d/Linear/BatchNorm2d become their OD subclasses (same parameters, same names); every
    BatchNorm2d gets running statistics for each narrower channel count of ``widths``. Any other
    layer with parameters or buffers is refused (its slicing rule is not defined here).
    """
    classifier = classifier_layer(model)
    for name, module in model.named_modules():
        kind = type(module)
        if kind in ORDERED_LAYERS:
            module.__class__ = ORDERED_LAYERS[kind]
        elif not isinstance(module, _Ordered) and has_own_state(module):
            raise ValueError(f"ordered dropout does not support layer {name!r} of type {kind.__name__}")
        if isinstance(module, nn.Conv2d) and module.groups != 1:
            raise ValueError(f"ordered dropout needs groups=1 convolutions ({name!r} has groups={module.groups})")
        if isinstance(module, nn.BatchNorm2d):
            add_width_statistics(module, widths)
    classifier.od_full_out = True
    return model


def has_own_state(module: nn.Module) -> bool:
    """Whether ``module`` holds parameters or buffers itself (not only through children)."""
    return any(True for _ in module.parameters(recurse=False)) or any(True for _ in module.buffers(recurse=False))


def add_width_statistics(bn: nn.BatchNorm2d, widths: Sequence[float]) -> None:
    if bn.momentum is None or not bn.track_running_stats:
        raise ValueError("ordered dropout needs BatchNorm layers with running statistics and a momentum")
    full = bn.num_features
    for c in sorted({channels_at(p, full) for p in widths} - {full}):
        if not hasattr(bn, f"od_mean_{c}"):
            bn.register_buffer(f"od_mean_{c}", torch.zeros(c, device=bn.running_mean.device))
            bn.register_buffer(f"od_var_{c}", torch.ones(c, device=bn.running_var.device))


def ordered_layers(model: nn.Module) -> list[_Ordered]:
    return [m for m in model.modules() if isinstance(m, _Ordered)]


@contextmanager
def at_width(model: nn.Module, width: float) -> Iterator[nn.Module]:
    """Run ``model`` as its width-``width`` submodel inside the block (restored afterwards)."""
    layers = ordered_layers(model)
    before = [m.od_width for m in layers]
    for m in layers:
        m.od_width = width
    try:
        yield model
    finally:
        for m, w in zip(layers, before):
            m.od_width = w


class AtWidth(nn.Module):
    """A model evaluated as one fixed-width submodel (a client's personal model at its p_max)."""

    def __init__(self, model: nn.Module, width: float):
        super().__init__()
        self.model = model
        self.width = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with at_width(self.model, self.width):
            return self.model(x)


# --- slices: what a width-p client holds ----------------------------------------------------


@torch.no_grad()
def slice_shapes(model: nn.Module, width: float,
                 input_shape: tuple[int, ...]) -> dict[str, tuple[int, ...] | None]:
    """For every state-dict entry, the shape of its leading corner that the width-``width``
    submodel uses (None: it uses none of it). Found by running the submodel once on a zero input
    of ``input_shape`` (C, H, W) and recording each layer's input and output channels, as [FJ]
    ``get_agg_config`` does; so a linear layer after a flatten gets the right input size."""
    used: dict[str, tuple[int, int]] = {}
    hooks = [module.register_forward_hook(_recorder(used, name)) for name, module in model.named_modules()
             if isinstance(module, _Ordered)]
    training = model.training
    try:
        model.eval()
        parameter = next(model.parameters())
        with at_width(model, width):
            model(torch.zeros(1, *input_shape, device=parameter.device, dtype=parameter.dtype))
    finally:
        model.train(training)
        for hook in hooks:
            hook.remove()
    shapes: dict[str, tuple[int, ...] | None] = {}
    for name, module in model.named_modules():
        if isinstance(module, _Ordered):
            prefix = f"{name}." if name else ""
            for key, tensor in module.state_dict().items():
                shapes[prefix + key] = _used_shape(module, key, tensor, used.get(name))
    return shapes


def _recorder(used: dict, name: str):
    def hook(module, inputs, output):
        channels_in = inputs[0].shape[-1] if isinstance(module, nn.Linear) else inputs[0].shape[1]
        used[name] = (output.shape[1], channels_in)
    return hook


def _used_shape(module: nn.Module, key: str, tensor: torch.Tensor, io: tuple[int, int] | None):
    """The used corner of ``module``'s entry ``key`` given its (out, in) channels in the forward."""
    if io is None:  # the layer did not run at this width
        return None
    out, cin = io
    if isinstance(module, nn.BatchNorm2d):
        full = module.num_features
        if key in ("weight", "bias"):
            return (out,)
        if key.startswith("od_"):  # statistics of c channels: used by every width that reaches c
            return tuple(tensor.shape) if int(key.rsplit("_", 1)[1]) <= out else None
        return tuple(tensor.shape) if out == full else None  # running_mean/var, num_batches_tracked
    if key == "weight":
        return (out, cin, *tensor.shape[2:])
    return (out,)  # bias


def corner(tensor: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The leading block of ``tensor`` with ``shape`` (a view)."""
    return tensor[tuple(slice(0, s) for s in shape)]


def slice_message(model: nn.Module, shapes: dict[str, tuple[int, ...] | None], prefix: str = "") -> Message:
    """The used corners of ``model``'s state as a message (detached copies)."""
    state = model.state_dict()
    return {prefix + key: corner(state[key], shape).detach().clone() for key, shape in shapes.items()
            if shape is not None}


@torch.no_grad()
def load_slices(model: nn.Module, message: Message) -> None:
    """Zero ``model``'s state, then write each message tensor into the leading corner of its
    entry: the client holds its slice and nothing else."""
    state = model.state_dict()
    for tensor in state.values():
        tensor.zero_()
    for key, tensor in message.items():
        corner(state[key], tuple(tensor.shape)).copy_(tensor)


def ordered_average(current: dict[str, torch.Tensor], uploads: Sequence[Message],
                    weights: Sequence[float]) -> dict[str, torch.Tensor]:
    """FjORD's aggregation (Eq. 2): every element is the weighted mean over the uploads that hold
    it; elements no upload holds keep their ``current`` value. Uploads hold leading corners, so
    this equals [FJ] ``fjord_average``'s nested per-width blocks. Integer buffers are taken from
    the first upload holding them."""
    averaged = {}
    for key, base in current.items():
        parts = [(float(w), m[key]) for m, w in zip(uploads, weights) if key in m]
        if not parts:
            averaged[key] = base.clone()
        elif not base.is_floating_point():
            averaged[key] = base.clone()
            corner(averaged[key], tuple(parts[0][1].shape)).copy_(parts[0][1])
        else:
            total = torch.zeros(base.shape, dtype=torch.float64, device=base.device)
            cover = torch.zeros_like(total)
            for w, tensor in parts:
                corner(total, tuple(tensor.shape)).add_(tensor.double(), alpha=w)
                corner(cover, tuple(tensor.shape)).add_(w)
            mean = total / cover.clamp_min(torch.finfo(torch.float64).tiny)
            averaged[key] = torch.where(cover > 0, mean, base.double()).to(base.dtype)
    return averaged


# --- tiers and the local loss ------------------------------------------------------------------


def tier_shares(num_tiers: int, drop_scale: float) -> np.ndarray:
    """Share of clients per tier (FjORD §5.1 "drop scale"): ds/n for each lower tier, the rest
    for the top one. ds = 1 is uniform ([FJ] ``uniform``)."""
    shares = np.full(num_tiers, drop_scale / num_tiers)
    shares[-1] = 1.0 - drop_scale * (num_tiers - 1) / num_tiers
    return shares


def tier_counts(num_clients: int, shares: np.ndarray) -> np.ndarray:
    """Clients per tier by largest remainder; ties go to the higher tier, so the full width
    always has a client (3 clients over uniform-5 get tiers 0.6, 0.8, 1.0)."""
    quotas = shares * num_clients
    counts = np.floor(quotas + 1e-9).astype(int)
    remainders = quotas - counts
    order = sorted(range(len(shares)), key=lambda i: (-round(remainders[i], 9), -i))
    for i in order[: num_clients - counts.sum()]:
        counts[i] += 1
    return counts


def allocate_tiers(num_clients: int, widths: Sequence[float], drop_scale: float,
                   rng: np.random.Generator) -> list[float]:
    """p_max of each client: tier sizes from :func:`tier_counts`, clients shuffled by ``rng``
    ([FJ] assigns contiguous client ids, ``cid // 20``; client ids carry no meaning there)."""
    counts = tier_counts(num_clients, tier_shares(len(widths), drop_scale))
    tiers = np.repeat(np.asarray(widths, dtype=float), counts)
    return [float(p) for p in rng.permutation(tiers)]


def fjord_distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, labels: torch.Tensor,
                            temperature: float, alpha: float = 1.0, scale_t2: bool = False) -> torch.Tensor:
    """FjORD Eq. 1: (1 − α)·CE(student, y) + α·KL(softmax(teacher/T) ‖ softmax(student/T)), the
    teacher detached. With α = T = 1 this is [FJ]'s ``criterion(net(images, sampler), target)``
    with ``target = full_output.detach().softmax(1)`` up to the teacher's (constant) entropy."""
    teacher = tempered_softmax(teacher_logits.detach(), temperature)
    loss = alpha * kd_kl(student_logits, teacher, temperature, scale_by_t2=scale_t2)
    if alpha < 1:
        loss = loss + (1 - alpha) * F.cross_entropy(student_logits.float(), labels)
    return loss


def smaller_widths(widths: Sequence[float], p_max: float) -> list[float]:
    """{p ∈ P : p ≤ p_max}, what a client of tier p_max samples from (Alg. 1 line 6)."""
    return [p for p in widths if p <= p_max + 1e-12]


class FjORD(FromGlobal):
    """Ordered-dropout FedAvg with self-distillation. Keeps the FromGlobal shape (global model on
    the server, personal = the client's trained copy) with slices instead of whole models."""

    Config = FjORDConfig

    def __init__(self, config: FjORDConfig, ctx):
        super().__init__(config, ctx)
        make_ordered(self.model, config.widths)
        make_ordered(self.worker, config.widths)
        self.tiers = allocate_tiers(ctx.data.num_clients, config.widths, config.drop_scale,
                                    self.rng(SERVER, "server"))  # round 0: before any round
        dataset = ctx.data.dataset
        input_shape = (dataset.in_channels, dataset.image_size, dataset.image_size)
        self.shapes = {p: slice_shapes(self.model, p, input_shape) for p in config.widths}
        self.untrained_views: dict[float, AtWidth] = {}

    def width_of(self, client: int) -> float:
        return self.tiers[client]

    # --- the steps ------------------------------------------------------------------------
    def download(self, client: int) -> Message:
        return slice_message(self.model, self.shapes[self.width_of(client)])

    def client_update(self, client: int, message: Message) -> Message:
        load_slices(self.worker, message)
        p_max = self.width_of(client)
        train(self.worker, self.ctx.data.dataset, self.ctx.data.client_train[client], self.ctx.train,
              generator=self.generator(client), loss_fn=self.local_loss_at(client, p_max))
        self.personal[client] = AtWidth(frozen_copy(self.worker), p_max)
        return slice_message(self.worker, self.shapes[p_max])

    def local_loss_at(self, client: int, p_max: float):
        """Per batch: CE of the p_max submodel, plus the submodel of a width drawn uniformly from
        {p ≤ p_max} distilled from it (or, without ``distill``, CE at the drawn width only)."""
        rng, candidates, c = self.rng(client), smaller_widths(self.config.widths, p_max), self.config

        def distilled(model, batch):
            with at_width(model, p_max):
                teacher = model(batch.x)
            with at_width(model, float(rng.choice(candidates))):
                student = model(batch.x)
            return F.cross_entropy(teacher.float(), batch.y) + fjord_distillation_loss(
                student, teacher, batch.y, c.temperature, c.alpha, c.scale_t2)

        def plain(model, batch):
            with at_width(model, float(rng.choice(candidates))):
                return F.cross_entropy(model(batch.x).float(), batch.y)

        return distilled if c.distill else plain

    def server_update(self, uploads: dict[int, Message]) -> None:
        clients = sorted(uploads)
        weights = AGGREGATION_WEIGHTS[self.config.aggregation]([self.ctx.client_size(k) for k in clients])
        averaged = ordered_average(self.model.state_dict(), [uploads[k] for k in clients], weights)
        self.model.load_state_dict(averaged)

    def personal_model(self, client: int):
        if client in self.personal:
            return self.personal[client]
        width = self.width_of(client)
        if width not in self.untrained_views:  # one view per width, so evaluation runs it once
            model = self.model
            if self.config.untrained_client == "initial":
                model = make_ordered(self.ctx.new_model(), self.config.widths)
            self.untrained_views[width] = AtWidth(model, width)
        return self.untrained_views[width]

    # --- client state: the client keeps its trained slice ----------------------------------
    def client_state(self, client: int) -> Message:
        if client not in self.personal:
            return {}
        return slice_message(self.personal[client].model, self.shapes[self.width_of(client)], prefix="personal/")

    def load_client_state(self, client: int, state: Message) -> None:
        prefix = "personal/"
        weights = {name[len(prefix):]: t for name, t in state.items() if name.startswith(prefix)}
        if not weights:
            return
        model = copy.deepcopy(self.worker)
        load_slices(model, weights)
        self.personal[client] = AtWidth(frozen_copy(model), self.width_of(client))
