"""Which arithmetic a run uses: bf16 autocast only where the hardware makes it faster.

bf16 autocast is faster for the chapters' small CNNs on a CPU with native bf16 (Intel AMX: 2-3x;
AMD Zen 4's AVX512-BF16: 1.05-1.5x, KnFu M1 4,015 vs 2,832 samples/s, cnn5 8,318 vs 7,885) and on
CUDA devices with bf16, but 5-11x *slower* on CPUs without it (measured on an AVX2-only AMD EPYC:
KnFu M1 1,053 vs 129 samples/s, M2 743 vs 68). ``mixed_precision`` is therefore a setting
with three values: ``"auto"`` (bf16 exactly where it is native), ``True`` and ``False`` (forced).

Precision is an execution detail, like the device and the thread count: it is recorded beside
them in each run record and is not part of the record's key (see results/README.md).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import torch

from . import cpuinfo


def check_mixed_precision(setting) -> None:
    if not (isinstance(setting, bool) or setting == "auto"):
        raise ValueError(f"mixed_precision must be 'auto', true or false (got {setting!r})")


def cpu_has_native_bf16() -> bool:
    """True on CPUs with AMX tiles or AVX512-BF16 (torch's own capability probes)."""
    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    found = [getattr(torch.cpu, name) for name in probes if hasattr(torch.cpu, name)]
    if found:
        return any(probe() for probe in found)
    return _cpuinfo_has_bf16_flags()  # older torch without the probes


def _cpuinfo_has_bf16_flags(path: Path = cpuinfo.CPUINFO) -> bool:
    try:
        flags = cpuinfo.cpu_flags(cpuinfo.read_first_processor(path))
    except OSError:
        return False
    return bool(flags & {"amx_bf16", "avx512_bf16"})


def bf16_is_native(device: torch.device) -> bool:
    if device.type == "cuda":  # compute capability 8.0 (Ampere) on; a T4 or V100 only emulates bf16, slowly
        return torch.cuda.get_device_capability(device) >= (8, 0)
    if device.type == "cpu":
        return cpu_has_native_bf16()
    return False


def use_bf16(setting, device: torch.device) -> bool:
    """Whether a run with ``mixed_precision=setting`` on ``device`` uses bf16 autocast."""
    check_mixed_precision(setting)
    return bf16_is_native(device) if setting == "auto" else bool(setting)


def describe_setting(setting) -> str:
    """What ``mixed_precision=setting`` runs in, for a chapter's table of settings."""
    check_mixed_precision(setting)
    if setting == "auto":
        return "auto: bf16 autocast only where the hardware has native bf16, else fp32"
    return ("true: bf16 autocast on every machine" if setting else
            "false: fp32 on every machine (committed profiles: their records are compared with one another)")


def precision_name(bf16: bool) -> str:
    return "bf16" if bf16 else "fp32"


def execution_settings(device: torch.device) -> dict:
    """How a run on ``device`` executes beyond its precision, as its record's environment states it:
    on a CUDA device deterministic algorithms and TF32 off (see :func:`reproducible`); a CPU run
    is left as it always ran (its kernels are deterministic and have no TF32)."""
    return {"deterministic_algorithms": device.type == "cuda", "tf32": False}


@contextmanager
def reproducible(device: torch.device):
    """On a CUDA device: deterministic algorithms (a warning where an op has none, e.g. ``index_add_``),
    cuBLAS's deterministic workspace, cuDNN without benchmarking, and TF32 off, so that an fp32 record
    is fp32 and a rerun gives its numbers; the previous settings are restored afterwards. Nothing
    changes on other devices."""
    if device.type != "cuda":
        yield
        return
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    saved = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             cudnn.deterministic, cudnn.benchmark, cudnn.allow_tf32, matmul.allow_tf32)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS starts
    torch.use_deterministic_algorithms(True, warn_only=True)
    cudnn.deterministic, cudnn.benchmark, cudnn.allow_tf32, matmul.allow_tf32 = True, False, False, False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        cudnn.deterministic, cudnn.benchmark, cudnn.allow_tf32, matmul.allow_tf32 = saved[2:]
