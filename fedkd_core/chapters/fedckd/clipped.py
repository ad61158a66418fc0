"""A labelled deviation: the paper column's pathological cell with every local gradient clipped
(issue 60, item 5).

Three runs of the pathological cell of the paper-scale Fashion-MNIST column diverged at the paper's
setting (SGD lr 0.01, momentum 0.9, no clipping). The step traces (``divergence``) show the same
blow-up each time: a two-class client's logits grow while its loss falls, one misclassified batch
then gives a gradient hundreds of times the median, and momentum carries it until the loss
overflows. :data:`CLIPPED` reruns that cell with ``max_grad_norm`` 10 (fixed before any clipped run
from the traces: above 94-98% of the traced steps' gradient norms, far below the blow-ups' 200+),
everything else the paper column's. Its records are a deviation beside the paper-setting ones, never
instead of them: the chapter's verdicts read the paper setting only.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...results import stored_divergences, stored_records
from ...tables import signed
from ...verdict_cells import t_interval
from ..datafiles import profile
from .grid import METHOD_NAMES, Params, grids
from .profiles import PAPER_FMNIST100

CLIPPED = profile(Params, "paper/fedckd_fmnist100_clip10.yaml")


def _outcomes(params: Params, root=None) -> dict[tuple[str, int], float | str]:
    """(algorithm, seed) -> final mean local accuracy (points) or "diverged in round r", for the
    pathological cell of ``params``'s main grid."""
    configs = [c for c in grids(params)["main"] if c.data.partition == "pathological"]
    out: dict[tuple[str, int], float | str] = {}
    for record in stored_records(configs, root):
        out[(record.config["algorithm"], record.config["seed"])] = 100 * record.final["alma"]
    for divergence in stored_divergences(configs, root):
        out[(divergence.algorithm, divergence.config["seed"])] = f"diverged in round {divergence.round}"
    return out


def clipped_cell(root=None) -> pd.DataFrame:
    """One row per method and seed the clipped cell ran: the final mean local accuracy at the
    paper's setting and clipped (points, or "diverged in round r"), and the change where both finished."""
    paper, clipped = _outcomes(PAPER_FMNIST100, root), _outcomes(CLIPPED, root)
    rows = []
    for algorithm, seed in sorted(clipped, key=lambda k: (list(METHOD_NAMES).index(k[0]), k[1])):
        before, after = paper.get((algorithm, seed), "not run"), clipped[(algorithm, seed)]
        both = isinstance(before, float) and isinstance(after, float)
        rows.append({"method": METHOD_NAMES[algorithm], "algorithm": algorithm, "seed": seed,
                     "paper setting": before, "clipped at 10": after,
                     "change": after - before if both else math.nan})
    return pd.DataFrame(rows)


def clipped_table(cell: pd.DataFrame) -> pd.DataFrame:
    """Per method: each seed's final accuracy at the paper's setting and clipped ("diverged (r)"
    where it did), as a reader compares them."""
    def shown(value) -> str:
        return f"{value:.2f}" if isinstance(value, float) else value

    rows = []
    for method, group in cell.groupby("method", sort=False):
        rows.append({"method": method,
                     "paper setting, per seed (%)": ", ".join(shown(v) for v in group["paper setting"]),
                     "clipped at 10, per seed (%)": ", ".join(shown(v) for v in group["clipped at 10"]),
                     "change where both finished": ", ".join(signed(v, 2) for v in group["change"].dropna()) or "—"})
    return pd.DataFrame(rows)


def _diverged(values) -> int:
    return sum(isinstance(v, str) and v.startswith("diverged") for v in values)


def clipped_difference(cell: pd.DataFrame, better: str = "fedckd", worse: str = "pfedsd"):
    """``better`` − ``worse`` under clipping, paired by seed: (per-seed differences, t interval)."""
    clipped = cell.pivot(index="seed", columns="algorithm", values="clipped at 10")
    pairs = clipped[[better, worse]].map(lambda v: v if isinstance(v, float) else np.nan).dropna()
    differences = (pairs[better] - pairs[worse]).tolist()
    return differences, t_interval(differences)


def clipped_text(cell: pd.DataFrame) -> str:
    """What the deviation shows, from its records."""
    if cell.empty:
        return ("The clipped rerun of the pathological cell (notebooks/params/paper/fedckd_fmnist100_clip10.yaml) "
                "has no records yet.")
    runs, paper_div, clipped_div = len(cell), _diverged(cell["paper setting"]), _diverged(cell["clipped at 10"])
    change = cell["change"].dropna()
    differences, interval = clipped_difference(cell)
    methods = ", ".join(dict.fromkeys(cell["method"]))
    return (f"With every client's local gradient clipped to norm 10 ({methods}; {runs} runs), "
            f"{clipped_div} of the {runs} diverged; at the paper's setting {paper_div} of the same {runs} did. "
            f"Where a run finished both ways ({len(change)} runs), clipping moved its final accuracy by "
            f"{signed(change.min(), 2)} to {signed(change.max(), 2)} points (mean {signed(change.mean(), 2)}). "
            "Under clipping FedCKD − pFedSD on this cell is "
            f"{', '.join(signed(d, 2) for d in differences)} per seed, {interval.text(2)} (95% t, "
            f"{len(differences) - 1} df). This is a deviation from the paper, shown beside its setting: the "
            "verdicts above read the paper's setting only, where this cell decides nothing.")


def clipped_caveat(short: bool = True, root=None) -> str:
    """FedCKD's caveat beside its verdicts: how many paper-setting runs of the column diverged
    (they count as failures) and what the clipped deviation found ("" before either has records).
    ``short``: one line, for a verdict row."""
    from .records import paper_column

    records, diverged = paper_column(root)
    cell = clipped_cell(root)
    if not diverged:
        return ""
    runs = len(records) + len(diverged)
    text = f"{len(diverged)} of the column's {runs} runs diverged at the paper's setting and count as failures"
    if cell.empty:
        return text
    clipped_div = _diverged(cell["clipped at 10"])
    if short:
        return f"{text}; clipped at norm 10 (a deviation), {clipped_div} of {len(cell)} pathological reruns do"
    differences, interval = clipped_difference(cell)
    return (f"{text}. With every local gradient clipped to norm 10, a deviation from the paper shown beside it, "
            f"{clipped_div} of {len(cell)} reruns of the pathological cell diverge, and FedCKD − pFedSD there is "
            f"{interval.text(2)}.")
