"""What each profile's grid has cost so far, measured: the book's cluster page shows it, and each
profile yaml's header carries the same figures (``tools/cost_headers.py``). Nothing is typed:

    python -m fedkd_core.costs book/_generated/costs.md

For every profile yaml of the measured profiles (paper, reduced, tuning, robustness, and their
redesigns), the runs finished (committed records, and diverged runs) out of the runs its grid plans,
and the hours they took on each machine (the sum of each run's wall time, ``timings.total_seconds``: one thread
per run on a CPU, including whatever shared the cores; on a GPU, the runs that shared the device).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from .chapters.card import PARAMS, REDESIGN, grid_cost
from .results import RecordError

MEASURED_PROFILES = ("paper", "reduced", "tuning", "robustness")


def profile_yamls(params_root: Path = PARAMS) -> list[Path]:
    """The measured profiles' yamls, each profile's own before its redesigns."""
    return [path for profile in MEASURED_PROFILES for pattern in ("*.yaml", f"{REDESIGN}/*.yaml")
            for path in sorted((params_root / profile).glob(pattern))]


def cost_table(paths: list[Path], results=None, params_root: Path = PARAMS) -> pd.DataFrame:
    """One row per yaml whose grid plans runs: the runs finished of those planned, and the hours
    per machine (:class:`~fedkd_core.chapters.card.GridCost`). A yaml that is no sweep grid
    (``seeds: 0``, add_your_method's template) is left out; an unreadable record is an error."""
    rows = []
    for path in paths:
        try:
            cost = grid_cost(path, results)
        except RecordError:
            raise
        except (ValueError, SystemExit):
            continue
        if cost.planned:
            rows.append({"profile yaml": str(path.relative_to(params_root)), "runs finished": cost.finished_text(),
                         "measured": cost.machines_text()})
    return pd.DataFrame(rows, columns=["profile yaml", "runs finished", "measured"])


def markdown(table: pd.DataFrame) -> str:
    """The table as the cluster page shows it (hours stay per machine: a GPU's hour is not a core's)."""
    lines = ["| profile yaml | runs finished | measured: runs, hours, machine |", "|---|---|---|"]
    lines += [f"| `{yaml}` | {finished} | {measured or 'none yet'} |" for yaml, finished, measured in table.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m fedkd_core.costs OUTPUT.md")
    target = Path(args[0])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(markdown(cost_table(profile_yamls())))
    print(f"{target} written")


if __name__ == "__main__":
    main()
