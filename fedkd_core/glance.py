"""The landing page's results at a glance, computed from the committed records.

    python -m fedkd_core.glance book/_generated/glance.md

For each chapter's headline claim "method A beats method B": in how many of the paper's own
table cells it holds, in how many of our cells (mean final metric over seeds) it holds, the
verdict word, and the profile, seeds and precision behind ours. Only records of the committed
profile a headline names count (paper; reduced for FedUA); a chapter without them says so
instead of showing a quick-profile verdict.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from .report import record_precision, verdict_word
from .results import load_record, outcome_fields
from .sweep import load_grid

PARAMS = Path(__file__).resolve().parents[1] / "notebooks" / "params"


@dataclass(frozen=True)
class Headline:
    chapter: str
    title: str
    better: str
    worse: str
    paper_counts: Callable[[], tuple[int, int]]  # (cells where it holds, cells) in the paper's tables
    profile: str = "paper"  # the committed profile whose records are ours
    metric: str = "alma"  # the final-round metric the paper's tables report
    include: Callable[[object], bool] = lambda record: True  # which records belong to the claim's tables


def _count_wins(paper: pd.DataFrame, cell: list[str], better: str, worse: str) -> tuple[int, int]:
    """(cells where ``better`` > ``worse``, cells) of a paper table with one row per cell and method."""
    wide = paper.pivot_table(index=cell, columns="algorithm", values="mean")
    return int((wide[better] > wide[worse]).sum()), len(wide)


def _knfu_paper_counts(better: str, worse: str) -> tuple[int, int]:
    from .chapters import knfu

    return _count_wins(pd.concat([knfu.paper_table1(), knfu.paper_table2()]), ["dataset", "alpha", "size"],
                       better, worse)


def _fedckd_paper_counts(better: str, worse: str) -> tuple[int, int]:
    from .chapters import fedckd

    paper = pd.concat([fedckd.paper_accuracy_table(s).assign(setting=s) for s in fedckd.SETTINGS])
    return _count_wins(paper, ["setting", "dataset", "clients"], better, worse)


def _fedua_paper_counts(better: str, worse: str) -> tuple[int, int]:
    from .chapters import fedua

    table3 = fedua.paper_table3()
    cells = pd.concat([fedua.paper_table2().assign(participation=1.0),
                       table3[table3.participation < 1].assign(partition="step")])
    return _count_wins(cells, ["partition", "participation"], better, worse)


def _plain_distillation(record) -> bool:
    """Tables 2-3 of FedUA: FedDF on all of the server set (not Table 1's selection runs)."""
    return record.config["algorithm"] != "feddf" or record.config["algorithm_params"].get("sample_ratio", 1.0) >= 1.0


HEADLINES = [
    Headline("knfu", "KnFu", "knfu", "fedmd", lambda: _knfu_paper_counts("knfu", "fedmd")),
    Headline("knfu", "KnFu", "knfu", "selective_fd", lambda: _knfu_paper_counts("knfu", "selective_fd")),
    Headline("fedckd", "FedCKD", "fedckd", "pfedsd", lambda: _fedckd_paper_counts("fedckd", "pfedsd")),
    Headline("fedua", "FedUA", "fedua", "feddf", lambda: _fedua_paper_counts("fedua", "feddf"),
             profile="reduced", metric="global_acc", include=_plain_distillation),
    Headline("fedua", "FedUA", "feddf", "fedavg", lambda: _fedua_paper_counts("feddf", "fedavg"),
             profile="reduced", metric="global_acc", include=_plain_distillation),
]
NAMES = {"knfu": "KnFu", "fedmd": "FedMD", "selective_fd": "Selective-FD", "fedckd": "FedCKD", "pfedsd": "pFedSD",
         "fedua": "FedUA", "feddf": "FedDF", "fedavg": "FedAvg"}


def committed_records(chapter: str, profile: str = "paper") -> list:
    """The committed records of a chapter's grid in ``profile`` (paper or reduced)."""
    _, configs = load_grid(chapter, PARAMS / profile / f"{chapter}.yaml")
    found = (load_record(config) for config in configs)
    return [record for record in found if record is not None and record.profile == profile]


def cell_of(record) -> str:
    """Everything that defines a run except the method and the seed: runs of one cell compare."""
    config = outcome_fields(record.config)  # bf16 and fp32 runs of a cell are one cell
    for name in ("algorithm", "algorithm_params", "seed"):
        config.pop(name)
    return json.dumps(config, sort_keys=True)


def our_counts(records: list, better: str, worse: str, metric: str = "alma") -> dict:
    rows = [{"cell": cell_of(r), "algorithm": r.config["algorithm"], "value": r.final[metric],
             "seed": r.config["seed"], "precision": record_precision(r)} for r in records]
    frame = pd.DataFrame(rows, columns=["cell", "algorithm", "value", "seed", "precision"])
    frame = frame[frame.algorithm.isin([better, worse])]
    wide = frame.pivot_table(index="cell", columns="algorithm", values="value").dropna()
    frame = frame[frame.cell.isin(wide.index)]  # only cells where both methods ran
    if wide.empty or better not in wide or worse not in wide:
        return {"holds": 0, "cells": 0, "seeds": "0", "precision": ""}
    seeds = frame.groupby(["cell", "algorithm"])["seed"].nunique()
    spread = f"{seeds.min()}" if seeds.min() == seeds.max() else f"{seeds.min()}-{seeds.max()}"
    return {"holds": int((wide[better] > wide[worse]).sum()), "cells": len(wide), "seeds": spread,
            "precision": "+".join(sorted(set(frame.precision)))}


def glance_table() -> pd.DataFrame:
    rows, cache = [], {}
    for headline in HEADLINES:
        records = cache.setdefault((headline.chapter, headline.profile),
                                   committed_records(headline.chapter, headline.profile))
        paper_holds, paper_cells = headline.paper_counts()
        ours = our_counts([r for r in records if headline.include(r)], headline.better, headline.worse,
                          headline.metric)
        rows.append({
            "chapter": f"{{doc}}`{headline.title} <chapters/{headline.chapter}>`",
            "claim": f"{NAMES[headline.better]} > {NAMES[headline.worse]}",
            "paper's tables (all cells)": f"{paper_holds} of {paper_cells} cells",
            "ours": (f"**{verdict_word(ours['holds'], ours['cells'])}**: {ours['holds']} of {ours['cells']} cells"
                     if ours["cells"] else f"no {headline.profile}-profile records committed yet"),
            "behind ours": (f"{headline.profile} profile, {ours['seeds']} seed(s) per cell, {ours['precision']}"
                            if ours["cells"] else "the chapter shows a one-seed quick run"),
        })
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> str:
    header = "| " + " | ".join(table.columns) + " |\n|" + "---|" * len(table.columns) + "\n"
    return header + "".join("| " + " | ".join(str(v) for v in row) + " |\n" for row in table.itertuples(index=False))


def main(argv: list[str] | None = None) -> None:
    target = Path((argv or sys.argv[1:])[0])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(markdown(glance_table()))
    print(f"{target} written")


if __name__ == "__main__":
    main()
