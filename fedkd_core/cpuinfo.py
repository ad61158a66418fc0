"""What /proc/cpuinfo says about this machine's CPU: the first processor's fields and flags.

Read in one place for the two things that need it: the CPU's description in run records
(:func:`cpu_description`, via :func:`fedkd_core.results.device_name`) and, on torch builds without
their own probes, whether the CPU has native bf16 (:mod:`fedkd_core.precision`).
"""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def first_processor(cpuinfo: str) -> dict[str, str]:
    """The fields of the first processor block of a /proc/cpuinfo text (first value of each name)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.split("\n\n")[0].splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    return fields


def cpu_flags(fields: dict[str, str]) -> set[str]:
    """The CPU's feature flags ("flags" on x86, "Features" on ARM)."""
    return set(fields.get("flags", fields.get("Features", "")).split())


def read_first_processor(path: Path = CPUINFO) -> dict[str, str]:
    """:func:`first_processor` of the file at ``path``; an OSError where it cannot be read."""
    return first_processor(path.read_text())


# The widest vector extension a CPU has, best first: what decides how fast (and in which precision,
# see fedkd_core.precision) the chapters' models train on it.
VECTOR_EXTENSIONS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"), ("avx512f", "AVX-512"),
                     ("avx2", "AVX2"), ("asimd", "NEON"))


def cpu_description(text: str) -> str:
    """The first processor's model name with its family, model and widest vector extension:
    "AMD EPYC (family 25 model 17, AVX512-BF16)". Virtual machines often report a bare
    "AMD EPYC" for CPUs generations apart (5-9x apart in bf16 speed), so the name alone does not
    say which machine produced a timing. A ValueError when the text names no model."""
    fields = first_processor(text)
    model_name = fields.get("model name")
    if not model_name:
        raise ValueError("cpuinfo names no CPU model")
    flags = cpu_flags(fields)
    details = [f"family {fields['cpu family']} model {fields['model']}"] if "cpu family" in fields and "model" in fields else []
    details += [label for flag, label in VECTOR_EXTENSIONS if flag in flags][:1]
    return f"{model_name} ({', '.join(details)})" if details else model_name
