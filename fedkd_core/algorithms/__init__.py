"""Algorithms by name: a plain dict from a method's name to its class (each carries its ``Config``).

Two kinds of module live here: the *methods* (one module each beside this file, e.g. ``fedavg``,
``knfu``), which :data:`ALGORITHMS` names and a run's ``algorithm`` picks, and the *round shapes*
they build on (``shapes/``: :data:`SHAPES`, the base :class:`Algorithm`, ``FromGlobal``,
``PartialSharing``, ``TransferDistillation``), which are templates and never run by name.

A method from outside the package joins with :func:`register`; the contract it must meet is
:class:`fedkd_core.contracts.AlgorithmProtocol` and ``fedkd_core.conformance.check`` tests it.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import warnings

from .shapes import SHAPES, Algorithm, Context, shape_of
from .fedavg import FedAvg
from .local import Local
from .fedckd import FedCKD
from .fedfomo import FedFomo
from .fedper import FedPer
from .fedprox import FedProx
from .lg_fedavg import LGFedAvg
from .pfedme import PFedMe
from .pfedsd import PFedSD
from .fedmd import FedMD, FedMDOriginal
from .feddf import FedDF
from .fedua import FedUA
from .knfu import KnFu
from .knfu_local import KnFuLocal
from .selective_fd import SelectiveFD
from .fedgen import FedGen
from .fjord import FjORD
from .fedgmkd import FedGMKD
from .moon import Moon
from .fedproto import FedProto
from .fpl import FPL
from .fedmd_avg import FedMDAvg

# The methods by name (the name is a run's ``algorithm`` and its records' folder).
ALGORITHMS: dict[str, type[Algorithm]] = {
    "local": Local,
    "fedavg": FedAvg,
    "fedprox": FedProx,
    "fedper": FedPer,
    "lg_fedavg": LGFedAvg,
    "pfedme": PFedMe,
    "fedfomo": FedFomo,
    "pfedsd": PFedSD,
    "fedckd": FedCKD,
    "knfu": KnFu,
    "fedmd": FedMD,
    "fedmd_original": FedMDOriginal,
    "selective_fd": SelectiveFD,
    "knfu_local": KnFuLocal,
    "feddf": FedDF,
    "fedua": FedUA,
    "fedgen": FedGen,
    "fjord": FjORD,
    "fedgmkd": FedGMKD,
    "moon": Moon,
    "fedproto": FedProto,
    "fpl": FPL,
    "fedmd_avg": FedMDAvg,
}


def algorithm_class(name: str) -> type[Algorithm]:
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)} (got {name!r})")
    return ALGORITHMS[name]


def algorithm_config(name: str, params: dict):
    """The algorithm's frozen config from a dict of overrides; unknown keys are a ValueError."""
    config_class = algorithm_class(name).Config
    try:
        return config_class(**params)
    except TypeError as error:
        known = sorted(getattr(config_class, "__dataclass_fields__", {}))
        raise ValueError(f"algorithm_params for {name!r} must be among {known} (got {sorted(params)})") from error


# Where :func:`register` leaves "name=module:Class" entries for the processes this one starts (a
# sweep's workers, Flower's Ray workers): they import this package, and it registers them again.
REGISTERED_ENV = "FEDKD_ALGORITHMS"


def register(name: str, cls: type) -> type:
    """Add ``cls`` as algorithm ``name`` (then ``ExperimentConfig(algorithm=name)``, the records
    under ``results/<profile>/<name>/`` and ``python -m fedkd_core.compare`` know it); returns
    ``cls``. Registering the same class under the same name again does nothing. A ValueError
    names what is wrong: the name taken by another class, a class that is not an
    :class:`Algorithm`, or one without a frozen-dataclass ``Config``.

    A class importable by its module (not defined in ``__main__``, a notebook) is also announced
    to the processes this one starts (:data:`REGISTERED_ENV`), so it runs on a sweep's workers and
    on Flower's clients too."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"an algorithm's name must be an identifier such as 'fedavg_m' (got {name!r}): "
                         "it names the records' folder and the config's 'algorithm'")
    if ALGORITHMS.get(name) is cls:
        return cls
    if name in ALGORITHMS:
        raise ValueError(f"algorithm name {name!r} is taken by {ALGORITHMS[name].__module__}."
                         f"{ALGORITHMS[name].__qualname__}; register {cls.__qualname__} under another name")
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise ValueError(f"{cls!r} is not a subclass of fedkd_core.algorithms.Algorithm: subclass it and "
                         "override its steps (fedkd_core.contracts.AlgorithmProtocol lists them)")
    config = getattr(cls, "Config", type(None))
    if not (dataclasses.is_dataclass(config) and config.__dataclass_params__.frozen):
        raise ValueError(f"{cls.__qualname__}.Config must be a frozen dataclass of the method's settings "
                         f"(@dataclass(frozen=True), every field with a default; got {config!r}): its fields "
                         "are the algorithm_params that key the records")
    try:
        config()
    except TypeError as error:
        raise ValueError(f"{cls.__qualname__}.Config() must build with no arguments (every field needs a "
                         f"default): {error}") from error
    from ..contracts import check_needs

    check_needs(cls.__qualname__, getattr(cls, "NEEDS", frozenset()), [])  # unknown names only
    ALGORITHMS[name] = cls
    _announce(name, cls)
    return cls


def _announce(name: str, cls: type) -> None:
    """Note ``name=module:Class`` in :data:`REGISTERED_ENV` for child processes (not for a class
    they could not import: one defined in ``__main__`` or inside a function)."""
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        return
    entry = f"{name}={cls.__module__}:{cls.__qualname__}"
    entries = [e for e in os.environ.get(REGISTERED_ENV, "").split(",") if e]
    if entry not in entries:
        os.environ[REGISTERED_ENV] = ",".join([*entries, entry])


def import_class(path: str) -> type:
    """The class ``"package.module:Class"`` names; a ValueError saying what is wrong otherwise."""
    module_name, _, qualname = path.partition(":")
    if not module_name or not qualname:
        raise ValueError(f"a method is named as MODULE:CLASS, e.g. my_methods:FedAvgM (got {path!r})")
    try:
        found = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import module {module_name!r} ({error}); is its folder on PYTHONPATH?") from error
    for part in qualname.split("."):
        if not hasattr(found, part):
            raise ValueError(f"module {module_name!r} has no {qualname!r}")
        found = getattr(found, part)
    return found


def register_announced(environ=os.environ) -> None:
    """Register the algorithms a parent process announced (:data:`REGISTERED_ENV`). One this
    process cannot import is a warning, not an error: importing the package must not fail for the
    processes that never run it (a notebook kernel started beside a sweep)."""
    for entry in filter(None, environ.get(REGISTERED_ENV, "").split(",")):
        name, _, path = entry.partition("=")
        try:
            register(name, import_class(path))
        except ValueError as error:
            warnings.warn(f"{REGISTERED_ENV}: algorithm {name!r} is not available in this process: {error}",
                          stacklevel=2)


__all__ = ["ALGORITHMS", "SHAPES", "Algorithm", "Context", "algorithm_class", "algorithm_config", "import_class",
           "register", "shape_of"]

register_announced()

