"""Algorithms by name: a plain dict from name to class (each class carries its ``Config``)."""

from __future__ import annotations

from .base import Algorithm, Context
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


__all__ = ["ALGORITHMS", "Algorithm", "Context", "algorithm_class", "algorithm_config"]
