"""What /proc/cpuinfo says about this machine's CPU: the first processor's fields and flags.

Read in one place for the things that need it: the CPU's description in run records
(:func:`cpu_description`, via :func:`fedkd_core.results.device_name`), the plain machine name a
reader sees in the book (:func:`machine_text`), and, on torch builds without their own probes,
whether the CPU has native bf16 (:mod:`fedkd_core.precision`).
"""

from __future__ import annotations

import re
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


# Server CPU generations by (vendor word in the model name, family, model), for machine_text: the
# generation is what a reader can look up, where "family 25 model 17" is not.
GENERATIONS = {("AMD", 23, 1): "Zen", ("AMD", 23, 49): "Zen 2", ("AMD", 25, 1): "Zen 3",
               ("AMD", 25, 17): "Zen 4", ("AMD", 26, 2): "Zen 5",
               ("Intel", 6, 85): "Skylake/Cascade Lake", ("Intel", 6, 106): "Ice Lake",
               ("Intel", 6, 143): "Sapphire Rapids", ("Intel", 6, 207): "Emerald Rapids"}

# The names virtual machines report for CPUs generations apart (a full model name says its generation).
BARE_CPU_NAME = re.compile(r"AMD EPYC( Processor)?|Intel\(R\) Xeon\(R\)( Processor)?|Intel Xeon( Processor)?")

DESCRIPTION = re.compile(r"^(?P<name>.*?)\s*\((?:family (?P<family>\d+) model (?P<model>\d+))?[^()]*\)\s*$")


def machine_text(description: str | None, cores: int | None = None) -> str:
    """A machine as a reader needs it, from a record's ``device_name`` (:func:`cpu_description`):
    "AMD EPYC (family 25 model 17, AVX512-BF16)" -> "AMD EPYC Zen 4", with ", 2 cores" when
    ``cores`` is given; a bare CPU name (an early record) says its generation was not recorded,
    since VMs report "AMD EPYC" for CPUs generations apart; a GPU's name as it is. The family,
    model and vector extension stay in the records (and in the Performance page's result files)
    for whoever needs them."""
    text = (description or "").strip()
    match = DESCRIPTION.match(text)
    if BARE_CPU_NAME.fullmatch(text):  # a record from before the details were kept
        text = f"{text} (generation not recorded)"
    if match:
        text = match["name"]
        if match["family"]:
            vendor = next((word for word in ("AMD", "Intel") if word in text), "")
            generation = GENERATIONS.get((vendor, int(match["family"]), int(match["model"])))
            if generation and generation not in text:
                text = f"{text} {generation}"
    text = text or "unknown machine"
    return f"{text}, {cores} cores" if cores else text
