"""Which machines compute the same numbers, and whether a set of records pairs runs from machines
that do not.

Two CPUs may round differently (other kernels, other vector widths), and over training the
difference compounds: the same fp32 run moved by 0.46 points on average between an AVX2-only EPYC
and a Zen 4 (:data:`fedkd_core.verdicts.MACHINE_DRIFT`). Other CPUs give the same digits: a Zen 4
run rerun in fp32 on a Zen 5 ends at the same ALMA (to the 0.01 points the reruns record). Whether two machines agree is measured, never
assumed from their names: ``benchmarks/precision_drift.py`` reruns stored records and writes, per
rerun, the machine the record was stored on, the machine that reran it and the difference
(``pairs`` in ``benchmarks/results/precision_drift-*.json``). Machines agree where at least
:data:`MIN_AGREEING_RUNS` fp32 records stored on one were rerun in fp32 on the other and every
metric came out identical; agreement is transitive (:func:`numerics_classes`).

A claim's effect pairs runs of one cell and seed (two methods on the same partition). Where every
such pair ran on machines that agree, the machines add nothing to the effect beyond the seeds'
spread; where a pair mixes machines that do not agree, the effect also holds their drift, and
the verdicts widen their intervals by it (:func:`mixes_numerics`, :func:`fedkd_core.verdicts.effect_drift`):
every claim judged on the records, conservatively, not only those whose effects read the mixed pair.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from .results import outcome_fields, record_precision
from .verdicts import effect_drift

BENCHMARK_RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
MIN_AGREEING_RUNS = 3  # records rerun identically in fp32 before two machines count as computing alike


def rerun_pairs(folder: Path = BENCHMARK_RESULTS) -> list[dict]:
    """Every rerun of a stored record that ``benchmarks/precision_drift.py`` saved with its machines
    (result files written before it saved them have none)."""
    pairs = []
    for path in sorted(folder.glob("precision_drift-*.json")):
        pairs += json.loads(path.read_text()).get("pairs", [])
    return pairs


def agreeing_machines(pairs: list[dict], least: int = MIN_AGREEING_RUNS) -> list[tuple[str, str]]:
    """The pairs of different machines that computed identical fp32 numbers: at least ``least``
    records rerun in fp32 between them, every metric's difference zero (to the 0.01 points the reruns
    record; a single differing rerun rules the pair out). A rerun that compared no metric says
    nothing either way."""
    runs: dict[tuple, dict] = defaultdict(dict)  # machines -> record (or the rerun's place) -> identical
    for index, pair in enumerate(pairs):
        if pair["stored_in"] != "fp32" or pair["rerun_in"] != "fp32" or pair["stored_on"] == pair["rerun_on"]:
            continue
        deltas = [value for key, value in pair.items() if key.endswith("_delta") and value is not None]
        if deltas:
            machines = tuple(sorted((pair["stored_on"], pair["rerun_on"])))
            record = pair.get("record", index)  # one record rerun twice counts once
            runs[machines][record] = runs[machines].get(record, True) and all(d == 0 for d in deltas)
    return sorted(machines for machines, identical in runs.items()
                  if len(identical) >= least and all(identical.values()))


def numerics_classes(machines, agreeing: list[tuple[str, str]]) -> dict[str, str]:
    """Machine -> the name of its class: machines joined by agreement (transitively) share one,
    the alphabetically first of them; a machine with no measured agreement is its own class."""
    parent = {machine: machine for machine in machines}
    for one, other in agreeing:
        parent.setdefault(one, one)
        parent.setdefault(other, other)

    def root(machine: str) -> str:
        while parent[machine] != machine:
            machine = parent[machine]
        return machine

    for one, other in agreeing:
        first, second = sorted((root(one), root(other)))
        parent[second] = first
    return {machine: root(machine) for machine in parent}


def pairing_key(record) -> str:
    """What the runs an effect pairs share: the data (partition, clients, sizes), the seed and the
    rounds; the method, its parameters, model and schedule may differ. A field added later, at the
    value that reproduces older runs, drops out (``results.outcome_fields``)."""
    config = outcome_fields(record.config)
    return json.dumps({"data": config.get("data"), "seed": config.get("seed"), "rounds": config.get("rounds")},
                      sort_keys=True)


def machine_of(record) -> str:
    return record.environment.get("device_name", "unknown")


def mixed_pairings(records, classes: dict[str, str] | None = None) -> int:
    """How many groups of paired runs (:func:`pairing_key`) in ``records`` span machines of more
    than one numerics class (``classes``: default, the measured ones). Rows that are not run
    records (a chapter's hand-made observations in a test) name no machine and mix nothing."""
    records = [record for record in records if hasattr(record, "config") and hasattr(record, "environment")]
    if classes is None:
        classes = numerics_classes({machine_of(r) for r in records}, agreeing_machines(rerun_pairs()))
    groups: dict[str, set] = defaultdict(set)
    for record in records:  # agreement was measured in fp32: another precision is another class
        machine = machine_of(record)
        groups[pairing_key(record)].add((classes.get(machine, machine), record_precision(record)))
    return sum(len(found) > 1 for found in groups.values())


def mixes_numerics(records, classes: dict[str, str] | None = None) -> bool:
    """Whether some effect of ``records`` pairs runs made on machines not shown to compute alike."""
    return mixed_pairings(records, classes) > 0


def drift_allowance(records) -> float:
    """Points a verdict on ``records`` widens its interval by on each side: the drift between
    machines (:func:`fedkd_core.verdicts.effect_drift`) where :func:`mixes_numerics`, else 0. The
    chapters' verdicts, the robustness variants and ``compare`` all take it from here."""
    return effect_drift() if mixes_numerics(records) else 0.0
