"""The reduced profile's 50-round redesign: what its committed runs say about stopping at round 15,
and whether counting its cells still rising at round 50 decides anything.

The reduced profile stops at round 15, where the convergence gate finds FedAvg and most methods
still rising, so its claims are "untested at this scale". :data:`~.profiles.REDESIGN_PROFILE`
runs the same grid for the paper's 50 rounds, and the chapter's verdicts move onto it once every
run is finished (:func:`~.claims.verdict_basis`). Each of its runs also passes through round 15, so
one run gives both readings: the chapter's (mean of the last ``last_rounds`` evaluations up to
round 15) and the paper budget's (up to round 50), and the gate's word on each.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...tables import signed
from ...verdicts import POINTS, trajectory
from .grid import METHODS, experiments
from .profiles import REDESIGN_PROFILE, REDUCED_PROFILE
from .records import cell_of


def redesign_records(root=None) -> list:
    """The committed records of :data:`~.profiles.REDESIGN_PROFILE` (nothing is run)."""
    from ...results import stored_records

    return stored_records(experiments(REDESIGN_PROFILE), root)


def window_mean(history, metric: str, end: int, last: int) -> float:
    """Mean of ``metric`` over the last ``last`` evaluations at or before round ``end``."""
    values = [row[metric] for row in history if row["round"] <= end][-last:]
    return float(np.mean(values)) if values else float("nan")


def late_reading(history, metric: str, rounds: int) -> dict:
    """What the convergence gate reads of a run stopped at round ``rounds``: its late gain in points
    and its evaluations (:func:`fedkd_core.verdicts.trajectory` on the history up to that round)."""
    reading = trajectory([row for row in history if row["round"] <= rounds], metric, rounds)
    return {"late_gain": reading["late_gain"], "evaluations": reading["evaluations"]}


def gate_text(late_gains: pd.Series, evaluations: pd.Series) -> str:
    """The gate's word on one method's runs in a cell, as :func:`fedkd_core.verdicts.gate` decides
    it: "rising (+3.20)" where the mean late gain over seeds is not below
    :data:`~fedkd_core.verdicts.MAX_LATE_GAIN` (a run with no late evaluation counts as rising),
    "too few evaluations (5)" below :data:`~fedkd_core.verdicts.MIN_EVALUATIONS`, else "flat (+0.40)"."""
    from ...verdicts import MAX_LATE_GAIN, MIN_EVALUATIONS

    gain = late_gains.mean(skipna=False)
    if evaluations.min() < MIN_EVALUATIONS:
        return f"too few evaluations ({int(evaluations.min())})"
    if not np.isfinite(gain):
        return "rising (not evaluated late)"
    return f"{'flat' if gain < MAX_LATE_GAIN else 'rising'} ({signed(gain, 2)})"


def round_budget_table(records, early: int = REDUCED_PROFILE.rounds, last: int = REDUCED_PROFILE.last_rounds,
                       metric: str = "global_acc") -> pd.DataFrame:
    """Per method and client count (Table 1's cells run so far; mean over the seeds committed):
    ``metric`` (%) read at round ``early`` and at the run's last round (each the mean of the last
    ``last`` evaluations, the chapter's reading), the gain between them (points), and the
    convergence gate's word on the method in that cell at each (:func:`gate_text`: its mean late
    gain over seeds, as the gate judges a cell)."""
    rows = []
    for record in records:
        method, clients, alpha, lam, gamma = cell_of(record)
        if alpha != REDESIGN_PROFILE.alpha:  # Table 3's ablation cells: another table
            continue
        history, rounds = record.history, record.config["rounds"]
        at_early, at_end = late_reading(history, metric, early), late_reading(history, metric, rounds)
        rows.append({"method": METHODS[method].label, "clients": clients, "seed": record.config["seed"],
                     "early": POINTS * window_mean(history, metric, early, last),
                     "final": POINTS * window_mean(history, metric, rounds, last),
                     "gain early": at_early["late_gain"], "evaluations early": at_early["evaluations"],
                     "gain end": at_end["late_gain"], "evaluations end": at_end["evaluations"]})
    columns = ["method", "clients", "seeds", f"round {early}", "final", "gain (points)",
               f"gate at round {early}", "gate at the end"]
    if not rows:
        return pd.DataFrame(columns=columns)
    table = []
    for (method, clients), runs in pd.DataFrame(rows).groupby(["method", "clients"], sort=False):
        table.append({"method": method, "clients": clients, "seeds": runs.seed.nunique(),
                      f"round {early}": runs.early.mean(), "final": runs.final.mean(),
                      "gain (points)": runs.final.mean() - runs.early.mean(),
                      f"gate at round {early}": gate_text(runs["gain early"], runs["evaluations early"]),
                      "gate at the end": gate_text(runs["gain end"], runs["evaluations end"])})
    return pd.DataFrame(table, columns=columns)


def gate_sensitivity(records) -> pd.DataFrame:
    """Per claim judged on ``records`` (the rerun): the verdict with every cell counted, as the
    verdicts judge runs at the paper's own round budget, beside the verdict with the cells whose
    methods are still rising left out (the convergence gate), each as word and effect [95%
    interval]; the cells each counts, and ⚑ where the two words differ."""
    import sys

    from ..ledger import judge_chapter

    module = sys.modules[__package__]
    counted, gated = judge_chapter(module, records, enforce_gate=False), judge_chapter(module, records, enforce_gate=True)
    rows = []
    for claim, verdicts in counted.items():
        every, flat = verdicts["final"], gated[claim]["final"]
        rows.append({"claim": claim, "every cell counted": f"{every.word} {every.effect_text}".strip(),
                     "cells": every.cells, "rising cells left out": f"{flat.word} {flat.effect_text}".strip(),
                     "cells left": flat.cells, "differ": "⚑" if every.word != flat.word else ""})
    return pd.DataFrame(rows, columns=["claim", "every cell counted", "cells", "rising cells left out", "cells left",
                                       "differ"])
