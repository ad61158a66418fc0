"""KnFu chapter: every method's phase schedule, chosen with the same budget on a validation split.

Issue 33 found that the round's *schedule* (a fresh optimiser per phase, the digest's learning
rate, a revisit of the client's data after the digest) decides the baselines' results as much as
their methods do. So each of the paper's four methods runs the same eight schedules
(:data:`CANDIDATES`, :mod:`fedkd_core.algorithms.schedule`) in the tuning cells (MNIST,
|D_n| = 100, Dir(0.1 / 0.5 / 1), seed 0), trained on 80% of every client's data and scored on the
20% held out (never on the test data); each method keeps the schedule with the highest mean
validation ALMA at the last round. :data:`TUNING_PROFILE` is that grid
(``notebooks/params/tuning/knfu.yaml`` holds the same values; a test checks it), and
:data:`TUNED_PROFILE` the paper profile's MNIST cells rerun under the chosen schedules
(``notebooks/params/paper/knfu_tuned.yaml``; a test checks that its schedules are the ones
:func:`chosen_schedules` computes from the committed tuning records).
"""

from __future__ import annotations

from dataclasses import fields, replace

import pandas as pd

from ..algorithms.schedule import PhaseSchedule, schedule_text
from ..results import stored_records
from .knfu import METHODS, PAPER_PROFILE, TUNED, Params, experiments

# Two choices for each of the three: optimiser state, digest learning rate, revisit epochs.
CANDIDATES = ("fresh/-/0", "fresh/0.0001/0", "fresh/-/1", "fresh/0.0001/1",
              "kept/-/0", "kept/0.0001/0", "kept/-/1", "kept/0.0001/1")
DEFAULT = "fresh/-/0"  # the round as first coded: what the committed paper-profile records ran

TUNING_PROFILE = replace(
    PAPER_PROFILE, profile="tuning", datasets="mnist", mnist_alphas="0.1,0.5,1", mnist_sizes="100",
    algorithms=",".join(TUNED), seeds=1, tuning_schedules=", ".join(CANDIDATES), validation_fraction=0.2,
)


def schedule_of(record) -> str:
    """A record's schedule as text (the method's Config defaults fill what the record lacks)."""
    params = record.config["algorithm_params"]
    return schedule_text(PhaseSchedule(**{f.name: params[f.name] for f in fields(PhaseSchedule) if f.name in params}))


def tuning_records(root=None) -> list:
    """The committed records of :data:`TUNING_PROFILE` (nothing is run)."""
    return stored_records(experiments(TUNING_PROFILE), root)


def tuning_table(records) -> pd.DataFrame:
    """One row per method and schedule: validation ALMA (%) at the last round per tuning cell, its mean
    over the cells every schedule of the method has run (``cells``), and the gain over the default
    schedule (points)."""
    rows = [{"method": METHODS[r.config["algorithm"]], "algorithm": r.config["algorithm"],
             "schedule": schedule_of(r), "alpha": float(r.config["data"]["alpha"]),
             "alma": 100 * r.final["alma"]} for r in records]
    if not rows:
        return pd.DataFrame(columns=["method", "algorithm", "schedule", "cells", "validation ALMA (%)",
                                     "vs default (points)"])
    frame = pd.DataFrame(rows)
    wide = frame.pivot_table(index=["method", "algorithm", "schedule"], columns="alpha", values="alma")
    # the mean is over the cells where every schedule of the method has run, so schedules are compared
    # on the same cells while a sweep is under way (a cell's own column shows what has run)
    complete = wide.notna().groupby(level="algorithm").transform("all")
    wide.columns = [f"α = {alpha:g}" for alpha in wide.columns]
    shared = wide.where(complete.to_numpy())
    table = wide.assign(cells=shared.notna().sum(axis=1), **{"validation ALMA (%)": shared.mean(axis=1)}).reset_index()
    default = table[table.schedule == DEFAULT].set_index("algorithm")["validation ALMA (%)"]
    table["vs default (points)"] = table["validation ALMA (%)"] - table.algorithm.map(default)
    return table.sort_values(["method", "validation ALMA (%)"], ascending=[True, False], ignore_index=True)


def chosen_schedules(records, cells: int = 3) -> dict[str, str]:
    """Each tuned method's schedule with the highest mean validation ALMA, among schedules run in
    all ``cells`` tuning cells; a method whose candidates are not all complete has no choice yet."""
    table = tuning_table(records)
    chosen = {}
    for algorithm, group in table.groupby("algorithm"):
        complete = group[group.cells == cells]
        if len(complete) == len(CANDIDATES):
            chosen[algorithm] = complete.loc[complete["validation ALMA (%)"].idxmax(), "schedule"]
    return chosen


def tuned_params(chosen: dict[str, str], base: Params = PAPER_PROFILE) -> Params:
    """The paper profile's MNIST cells with ``chosen`` schedules (a method at the default schedule
    keeps the committed records' keys)."""
    text = ", ".join(f"{method}={chosen[method]}" for method in TUNED if method in chosen)
    return replace(base, datasets="mnist", schedules=text)

