"""What /proc/cpuinfo says about this machine's CPU: the first processor's fields and flags.

Read in one place for the two things that need it: the CPU's description in run records
(:func:`fedkd_core.results.device_name`) and, on torch builds without their own probes, whether the
CPU has native bf16 (:mod:`fedkd_core.precision`).
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


def flags(fields: dict[str, str]) -> set[str]:
    """The CPU's feature flags ("flags" on x86, "Features" on ARM)."""
    return set(fields.get("flags", fields.get("Features", "")).split())


def read_first_processor(path: Path = CPUINFO) -> dict[str, str]:
    """:func:`first_processor` of the file at ``path``; an OSError where it cannot be read."""
    return first_processor(path.read_text())
