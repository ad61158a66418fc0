"""The reduced profile's 50-round redesign while its sweep is under way: what its committed runs
say about the 15-round reduced profile the chapter's verdicts still read.

The reduced profile stops at round 15, where the convergence gate finds FedAvg and most methods
still rising, so its claims are "untested at this scale". :data:`~.profiles.REDESIGN_PROFILE`
runs the same grid for the paper's 50 rounds. Each of its runs also passes through round 15, so
one run gives both readings: the chapter's (mean of the last ``last_rounds`` evaluations up to
round 15) and the paper budget's (up to round 50), and the gate's word on each.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

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


def still_rising(history, metric: str, rounds: int) -> bool:
    """Whether the convergence gate reads a run stopped at round ``rounds`` as still rising
    (:func:`fedkd_core.verdicts.trajectory`; the gate itself judges a cell's mean over seeds)."""
    from ...verdicts import MAX_LATE_GAIN

    return trajectory([row for row in history if row["round"] <= rounds], metric, rounds)["late_gain"] >= MAX_LATE_GAIN


def round_budget_table(records, early: int = REDUCED_PROFILE.rounds, last: int = REDUCED_PROFILE.last_rounds,
                       metric: str = "global_acc") -> pd.DataFrame:
    """Per method and client count (Table 1's cells run so far; mean over the seeds committed):
    ``metric`` (%) read at round ``early`` and at the run's last round (each the mean of the last
    ``last`` evaluations, the chapter's reading), the gain between them (points), and how many of
    the seeds the gate would read as still rising at each."""
    rows = []
    for record in records:
        method, clients, alpha, lam, gamma = cell_of(record)
        if alpha != REDESIGN_PROFILE.alpha:  # Table 3's ablation cells: another table
            continue
        history, rounds = record.history, record.config["rounds"]
        rows.append({"method": METHODS[method].label,
                     "clients": clients, "seed": record.config["seed"],
                     "early": POINTS * window_mean(history, metric, early, last),
                     "final": POINTS * window_mean(history, metric, rounds, last),
                     "rising early": still_rising(history, metric, early),
                     "rising at the end": still_rising(history, metric, rounds)})
    columns = ["method", "clients", "seeds", f"round {early}", "final", "gain (points)",
               f"rising at {early}", "rising at the end"]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows)
    table = frame.groupby(["method", "clients"], sort=False).agg(
        seeds=("seed", "nunique"), early=("early", "mean"), final=("final", "mean"),
        rising_early=("rising early", "sum"), rising_end=("rising at the end", "sum")).reset_index()
    table["gain (points)"] = table["final"] - table["early"]
    table[f"rising at {early}"] = [f"{int(r)} of {s}" for r, s in zip(table.rising_early, table.seeds)]
    table["rising at the end"] = [f"{int(r)} of {s}" for r, s in zip(table.rising_end, table.seeds)]
    return table.rename(columns={"early": f"round {early}"})[columns]
