"""Run code as a GPU would see it, on a CPU: a stand-in device and a tracker of what CUDA refuses.

No GPU needs to be at hand to find the faults that only show on one. Tensors moved to
:data:`STAND_IN` (``torch.device("meta")``) become :class:`OnDevice` tensors: their values are real
(kept on the CPU, so training runs and gives the numbers a CPU run gives), but they report the
stand-in device, and every operation on them goes through :class:`DeviceCheck`, a
``TorchDispatchMode`` that, like CUDA:

- refuses an operation that mixes device tensors with host tensors (CPU tensors other than 0-dim
  scalars; host *indices* of a device tensor are allowed, as CUDA allows them);
- refuses a host tensor indexed, or assigned into, through device indices or a device mask
  (``host[device_mask]``, ``host[device_mask] = ...``), device values (not 0-dim) assigned into a
  host tensor, and host values (not 0-dim) assigned into a device tensor. Read on an H200 (torch
  2.11): CUDA refuses the read ("indices should be either on cpu or on the same device as the
  indexed tensor") and both value cases; it accepts the assignment through a device mask by moving
  the mask to the host, a hidden sync whose acceptance no operator documents, so the check refuses
  it too;
- refuses ``.numpy()`` (and ``np.asarray``) of a device tensor;
- refuses a generator that is not on the device of the tensors it draws;

and counts the host synchronisations a GPU would wait for: a value read on the host (``float``,
``bool``, ``.item()``, ``.tolist()``), a copy to the host, and operations whose output size
depends on device values (boolean-mask indexing, ``nonzero``, ``masked_select``, ``unique``...).
Each sync is counted at the line of ``fedkd_core`` that caused it (:attr:`DeviceCheck.syncs`),
with the optimiser steps taken meanwhile (:attr:`DeviceCheck.steps`) and the bytes of device
tensors alive at most (:attr:`DeviceCheck.peak_bytes`).

    with DeviceCheck() as check:
        simulate(config, device=STAND_IN)
    check.syncs   # Counter({"fedkd_core/training.py:230 _local_scalar_dense": 4, ...})

The core never imports this module; the tests do (tests/test_device.py).
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections import Counter
from pathlib import Path

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

STAND_IN = torch.device("meta")
HOST = torch.device("cpu")
HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent  # the checkout: where() names lines relative to it
aten = torch.ops.aten

# Operations that may take tensors on either side: copies between host and device.
COPIES = {aten.copy_.default, aten._to_copy.default, aten.lift_fresh.default, aten.lift_fresh_copy.default}
# Indexing a device tensor with host indices is allowed (CUDA moves the indices).
INDEXING = {aten.index.Tensor, aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default}
# Operations whose output size depends on the values of their input: the host must wait for them.
DATA_DEPENDENT = {aten.nonzero.default, aten.masked_select.default, aten._unique2.default, aten.unique_dim.default,
                  aten.unique_consecutive.default, aten.repeat_interleave.Tensor, aten.equal.default,
                  aten.argwhere.default}
READS = {aten._local_scalar_dense.default, aten.is_nonzero.default}


class DeviceFault(RuntimeError):
    """What CUDA would refuse (named with the line of fedkd_core that did it)."""


class OnDevice(torch.Tensor):
    """A tensor on the stand-in device: its values in ``elem`` (a CPU tensor)."""

    elem: torch.Tensor
    __slots__ = ["elem"]
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, elem: torch.Tensor):
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls, elem.size(), strides=elem.stride(), storage_offset=elem.storage_offset(), dtype=elem.dtype,
            layout=elem.layout, device=STAND_IN, requires_grad=elem.requires_grad)
        wrapper.elem = elem
        return wrapper

    def __repr__(self) -> str:
        return f"OnDevice({self.elem!r})"

    def numpy(self, *args, **kwargs):
        raise DeviceFault(f".numpy() of a device tensor ({where()}); move it to the host first (.cpu())")

    def tolist(self):
        return self.cpu().tolist()  # a copy to the host: counted as a sync

    def __array__(self, *args, **kwargs):
        raise DeviceFault(f"numpy conversion of a device tensor ({where()}); move it to the host first (.cpu())")

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return dispatch(func, args, kwargs or {}, None)  # outside a DeviceCheck: run, but check nothing


class StandInGenerator(torch.Generator):
    """A generator of the stand-in device (a CPU generator that says it is on the device)."""

    @property
    def device(self) -> torch.device:
        return STAND_IN


class _Generator(torch.Generator):
    """``torch.Generator`` while a check runs: ``torch.Generator(device=STAND_IN)`` makes a :class:`StandInGenerator`."""

    def __new__(cls, device="cpu"):
        return StandInGenerator() if torch.device(device) == STAND_IN else REAL_GENERATOR(device)


def _autocast(device_type: str, *args, **kwargs):
    """``torch.autocast`` while a check runs: the stand-in device autocasts as the host does."""
    return REAL_AUTOCAST(HOST.type if device_type == STAND_IN.type else device_type, *args, **kwargs)


REAL_GENERATOR, REAL_AUTOCAST = torch.Generator, torch.autocast


def where() -> str:
    """The innermost line of this project's code (fedkd_core, tests; not this module) on the stack.

    Walks the frames themselves: ``traceback.extract_stack`` read every frame's source line and the
    file of each was resolved on disk anew, a third of a checked run's time where syncs are many."""
    frame = sys._getframe(1)
    while frame is not None:
        path = project_path(frame.f_code.co_filename)
        if path is not None:
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return "outside the project"


@functools.lru_cache(maxsize=None)
def project_path(filename: str) -> str | None:
    """``filename`` relative to the checkout when it is this project's code (not this module, nor
    the virtual environment's), else None; resolved once per file."""
    path = Path(filename).resolve()
    if path.is_relative_to(ROOT) and path != HERE and not path.is_relative_to(ROOT / ".venv"):
        return str(path.relative_to(ROOT))
    return None


def leaves(value) -> list:
    """The leaves of an operator's arguments or outputs: nested tuples, lists and dicts opened (a
    plain walk: torch's general pytree costs more than the operator on the check's small tensors)."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in leaves(item)]
    return [value]


def map_leaves(fn, value):
    """``value`` with ``fn`` applied to each leaf (the leaves :func:`leaves` finds), its tuples,
    lists and dicts rebuilt with their own types: a named tuple from its fields, a structseq such as
    ``torch.return_types.max`` or a ``torch.Size`` from the sequence."""
    if isinstance(value, (tuple, list)):
        mapped = [map_leaves(fn, item) for item in value]
        return type(value)(*mapped) if hasattr(type(value), "_fields") else type(value)(mapped)
    if isinstance(value, dict):
        rebuilt = value.copy()  # dict, OrderedDict, defaultdict (its factory) keep their type; a bare subclass becomes a dict
        rebuilt.update((key, map_leaves(fn, item)) for key, item in value.items())
        return rebuilt
    return fn(value)


def is_device(value) -> bool:
    return isinstance(value, OnDevice)


def is_host(value) -> bool:
    """A host tensor that CUDA would not accept beside device tensors (0-dim CPU scalars it accepts)."""
    return isinstance(value, torch.Tensor) and not isinstance(value, OnDevice) and value.dim() > 0


def unwrap(value):
    return value.elem if isinstance(value, OnDevice) else value


def on_host(value):
    """``value`` with the stand-in device replaced by the host (device and generator arguments)."""
    return HOST if isinstance(value, torch.device) and value == STAND_IN else value


def dispatch(func, args, kwargs, check: "DeviceCheck | None"):
    """Run ``func`` on the values, with the checks and counts of ``check`` (None: none)."""
    flat = leaves((args, kwargs))
    target = kwargs.get("device")
    to_device = (target is not None and torch.device(target) == STAND_IN) or (
        target is None and any(is_device(a) for a in flat if func not in COPIES or a is args[0]))
    if check is not None:
        check.inspect(func, args, kwargs, flat, to_device)
    wrappers = {id(a.elem): a for a in flat if isinstance(a, OnDevice)}
    out = func(*map_leaves(unwrap, args), **{k: on_host(unwrap(v)) for k, v in kwargs.items()})
    if func is aten.copy_.default:  # in place: the destination keeps its place
        return args[0]
    if not to_device:
        return out
    return map_leaves(lambda t: wrap(t, wrappers) if isinstance(t, torch.Tensor) else t, out)


def wrap(t: torch.Tensor, wrappers: dict) -> OnDevice:
    """The device tensor of value ``t``: the input's own wrapper when ``t`` is an input's value (in place)."""
    known = wrappers.get(id(t))
    return known if known is not None else OnDevice(t)


class GeneratorCheck(TorchFunctionMode):
    """Refuses a draw from a generator that is not on the device of what it draws (seen above the
    dispatcher, where a generator is still the Python object that says which device it is on)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        generator = kwargs.get("generator")
        if generator is not None:
            target = kwargs.get("device")
            draws_on_device = (torch.device(target) == STAND_IN if target is not None
                               else any(is_device(a) for a in leaves(args)))
            if (generator.device == STAND_IN) != draws_on_device:
                raise DeviceFault(f"{func.__name__}: a generator on {generator.device} draws "
                                  f"{'device' if draws_on_device else 'host'} tensors ({where()})")
        return func(*args, **kwargs)


class DeviceCheck(TorchDispatchMode):
    """The tracker: raises :class:`DeviceFault` on what CUDA refuses; counts syncs, steps, live bytes.

    ``syncs``: a Counter of "fedkd_core/<file>:<line> <op>" -> host synchronisations caused there.
    ``steps``: optimiser steps taken (torch.optim). ``peak_bytes``: the most bytes held by device
    tensors alive at once (their storages, counted once each); ``live_bytes``: those alive now.
    """

    def __init__(self):
        super().__init__()
        self.syncs: Counter = Counter()
        self.steps = 0
        self.peak_bytes = 0
        self.live_bytes = 0
        self._storages: dict[int, list[int]] = {}  # storage address -> [bytes, device tensors on it]
        self._seen: set[int] = set()  # ids of the device tensors counted
        self._hook = None

    def __enter__(self):
        self._hook = register_optimizer_step_post_hook(self._count_step)
        torch.Generator, torch.autocast = _Generator, _autocast  # what the meta device cannot do itself
        self._generators = GeneratorCheck()
        self._generators.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        self._hook.remove()
        torch.Generator, torch.autocast = REAL_GENERATOR, REAL_AUTOCAST
        done = super().__exit__(*exc)
        self._generators.__exit__(*exc)
        return done

    def _count_step(self, *_):
        self.steps += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = dispatch(func, args, kwargs or {}, self)
        outputs = leaves(out)
        if any(is_device(t) for t in outputs):
            self._track(outputs)
        return out

    def sync_count(self) -> int:
        return sum(self.syncs.values())

    # -- checks ------------------------------------------------------------------------------
    def inspect(self, func, args, kwargs, flat, to_device: bool) -> None:
        if func in COPIES:
            source = args[1] if func is aten.copy_.default else args[0]
            lands_on_host = is_host(args[0]) if func is aten.copy_.default else not to_device
            if is_device(source) and lands_on_host:
                self._sync(func)
            return
        if func in INDEXING:
            self._check_indexing(func, args)
        checked = [args[0]] if func in INDEXING else flat
        if kwargs.get("device") is None and any(is_device(a) for a in checked) and any(is_host(a) for a in checked):
            raise DeviceFault(f"{func} mixes device and host tensors ({where()})")
        device_input = any(is_device(a) for a in flat)
        if device_input and (func in READS or func in DATA_DEPENDENT or self._masks(func, args)):
            self._sync(func)

    @staticmethod
    def _check_indexing(func, args) -> None:
        """Indexing lets host and device meet one way round only: a device tensor may take host
        indices (CUDA moves them), a host tensor may not take device ones, nor device values."""
        target = args[0]
        values = args[2] if func is not aten.index.Tensor and len(args) > 2 else None
        if is_device(target):
            if is_host(values):
                raise DeviceFault(f"{func}: host values assigned into a device tensor ({where()}); "
                                  "move them to the device first")
            return
        indices = args[1] if len(args) > 1 else []
        if any(is_device(i) for i in indices):
            raise DeviceFault(f"{func}: a host tensor indexed through device indices or a device mask ({where()}); "
                              "bring the indices to the host (.cpu()) or the tensor to the device")
        if is_device(values) and values.dim() > 0:
            raise DeviceFault(f"{func}: device values assigned into a host tensor ({where()}); "
                              "bring them to the host (.cpu()) or the tensor to the device")

    @staticmethod
    def _masks(func, args) -> bool:
        """Indexing with a boolean mask: its size is the mask's count of True, read on the host."""
        if func not in INDEXING:
            return False
        indices = args[1] if len(args) > 1 else []
        return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices)

    def _sync(self, func) -> None:
        self.syncs[f"{where()} {func.__name__.split('.')[0]}"] += 1

    # -- memory ------------------------------------------------------------------------------
    def _track(self, outputs: list) -> None:
        """Count the storages of new device tensors among ``outputs`` (an operator's output leaves)
        while any device tensor on them lives."""
        for t in outputs:
            if is_device(t) and id(t) not in self._seen:
                self._seen.add(id(t))
                key = t.elem.untyped_storage().data_ptr()
                if key not in self._storages:
                    self._storages[key] = [t.elem.untyped_storage().nbytes(), 0]
                    self.live_bytes += self._storages[key][0]
                self._storages[key][1] += 1
                weakref.finalize(t, self._release, key, id(t))
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def _release(self, key: int, ident: int) -> None:
        self._seen.discard(ident)
        entry = self._storages[key]
        entry[1] -= 1
        if entry[1] == 0:
            self.live_bytes -= entry[0]
            del self._storages[key]


def to_device(tensor: torch.Tensor) -> OnDevice:
    """``tensor`` on the stand-in device (for tests: the same as ``tensor.to(STAND_IN)`` under a check)."""
    return OnDevice(tensor.detach().clone())
