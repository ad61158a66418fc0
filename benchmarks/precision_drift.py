"""How far stored runs move when they are rerun on this machine, in fp32 and in bf16.

    python benchmarks/precision_drift.py results/paper/knfu/*.json --limit 4

A record's key leaves its precision out (results/README.md), so a chapter may show a bf16 record
beside fp32 ones. This reruns each given record's configuration here once per precision, into a
temporary results folder (the stored record is not touched), and prints per record the stored
final ALMA and global accuracy beside each rerun's, with the difference in points.

The rerun in the record's own precision is the noise floor: it differs from the stored run only
by the machine (other CPUs' kernels round differently, and the difference compounds over
training). bf16's difference says something about precision only where it exceeds that floor.
Runs go in-process on this machine's default device, whatever engine made the record (a Flower
record reruns in-process: the adapter gives the same numbers). Not a test: what it prints depends
on the machine, which it names, and writes with it to benchmarks/results/precision_drift-<machine>.json
for the book's Performance page (``--no-save`` only prints).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

import pandas as pd
import torch

from fedkd_core import performance
from fedkd_core.experiment import config_from_dict, default_device
from fedkd_core.precision import bf16_is_native
from fedkd_core.results import device_name, read_record, record_precision, run_experiment

PRECISIONS = {"fp32": False, "bf16": True}
METRICS = ("alma", "global_acc")


def in_precision(config, precision: str):
    """``config`` with its precision forced to ``precision`` ("fp32" or "bf16")."""
    return dataclasses.replace(config, train=dataclasses.replace(config.train, mixed_precision=PRECISIONS[precision]))


def final_points(history: list, metric: str) -> float | None:
    value = history[-1].get(metric)
    return None if value is None else 100.0 * value


def drift_rows(path: Path, precisions: list[str], root: Path) -> list[dict]:
    """One row per rerun of the record at ``path``: its cell, the stored and rerun final metrics."""
    record = read_record(path)
    config = config_from_dict(record.config)
    cell = {"record": path.stem, "algorithm": config.algorithm, "dataset": config.data.dataset,
            "model": config.model, "rounds": config.rounds,
            "alpha": config.data.alpha, "seed": config.seed, "stored in": record_precision(record),
            "stored on": record.environment.get("device_name", "?")}
    rows = []
    for precision in precisions:
        rerun = run_experiment(in_precision(config, precision), root=root, use_cache=False,
                               profile="drift", progress=False)
        row = {**cell, "rerun in": precision, "seconds": round(rerun.timings["total_seconds"], 1)}
        for metric in METRICS:
            stored, ours = final_points(record.history, metric), final_points(rerun.history, metric)
            if stored is not None and ours is not None:
                row[f"{metric} stored"], row[f"{metric} rerun"] = round(stored, 2), round(ours, 2)
                row[f"{metric} Δ"] = round(ours - stored, 2)
        rows.append(row)
    return rows


def run_label(row: dict) -> str:
    """"fedavg, cifar10 (cnn5, 40 rounds), α = 0.5, seed 0": enough to tell two chapters' runs apart."""
    return (f"{row['algorithm']}, {row['dataset']} ({row['model']}, {row['rounds']} rounds), α = {row['alpha']}, "
            f"seed {row['seed']}")


def machine_pairs(rows: list[dict], here: str) -> list[dict]:
    """The reruns as data (``fedkd_core.numerics`` reads them): the machine and precision a record
    was stored on and in, this machine and the rerun's precision, and the difference of each metric
    (points)."""
    return [{"record": row["record"], "stored_on": row["stored on"], "stored_in": row["stored in"], "rerun_on": here,
             "rerun_in": row["rerun in"], **{f"{metric}_delta": row.get(f"{metric} Δ") for metric in METRICS}}
            for row in rows]


def merged_pairs(earlier: list[dict], new: list[dict]) -> list[dict]:
    """The pairs a machine's result file keeps: ``new`` and every earlier rerun of a record and
    precision not rerun now. The file is rewritten on each run, and ``fedkd_core.numerics`` decides
    from these pairs which machines compute alike: a later run measuring something else must not
    drop them."""
    redone = {(pair.get("record"), pair["rerun_in"]) for pair in new}
    return [pair for pair in earlier if (pair.get("record"), pair["rerun_in"]) not in redone] + new


def saved_pairs() -> list[dict]:
    """The pairs this machine's result file holds now (none before its first run)."""
    import json

    path = performance.result_path("precision_drift")
    return json.loads(path.read_text()).get("pairs", []) if path.exists() else []


def drift_summary(table: pd.DataFrame, here: str) -> list[str]:
    """One sentence per precision and origin: how far final ALMA moved when runs stored on another
    machine (the drift between machines) or on this one (the same kernels: a check of determinism)
    were rerun here. The two are never averaged together."""
    summary = []
    for precision in dict.fromkeys(table["rerun in"]):
        for origin, stored_here in (("another machine", False), ("this machine", True)):
            rows = table[(table["rerun in"] == precision) & ((table["stored on"] == here) == stored_here)]
            deltas = rows["alma Δ"].abs()
            if len(deltas):
                summary.append(f"runs stored on {origin}, rerun in {precision}: final ALMA moved by "
                               f"{deltas.mean():.2f} points on average, {deltas.max():.2f} at most, over "
                               f"{len(deltas)} run(s)")
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+", type=Path, help="stored run records (JSON)")
    parser.add_argument("--limit", type=int, default=None, help="rerun only the first N records (sorted by name)")
    parser.add_argument("--precisions", default="fp32,bf16", help="comma-separated, of fp32 and bf16")
    parser.add_argument("--beside", default="", help="what else ran on the machine, in words (for the result file)")
    parser.add_argument("--no-save", action="store_true", help="print only; write no result file")
    args = parser.parse_args(argv)
    started = performance.beside_now()
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    unknown = [p for p in precisions if p not in PRECISIONS]
    if unknown or not precisions:
        parser.error(f"--precisions takes fp32 and/or bf16 (got {args.precisions!r})")
    paths = sorted(args.records)[: args.limit]
    if not paths:
        parser.error("no records to rerun")
    device = default_device()
    print(f"rerunning {len(paths)} record(s) on {device_name(device)}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)", flush=True)
    if "bf16" in precisions and not bf16_is_native(device):
        print("note: this device has no native bf16, so the bf16 reruns are 5-11x slower than fp32", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="fedkd-drift-") as root:
        for path in paths:
            rows += drift_rows(path, precisions, Path(root))
            print(pd.DataFrame(rows[-len(precisions):]).drop(columns=["stored on"]).to_string(index=False), flush=True)
    table = pd.DataFrame(rows)
    print("\n" + table.to_markdown(index=False))
    summary = drift_summary(table, device_name(device))
    print("\n".join(summary))
    if not args.no_save:
        from fedkd_core.cpuinfo import machine_text
        from fedkd_core.verdicts import MACHINE_DRIFT

        shown = [{"run": run_label(row),
                  "stored": f"{row['stored in']} on {machine_text(row['stored on'])}", "rerun in": row["rerun in"],
                  "rerun (s)": row["seconds"], "ALMA stored (%)": row.get("alma stored"),
                  "ALMA rerun (%)": row.get("alma rerun"), "Δ ALMA (points)": row.get("alma Δ"),
                  "Δ global accuracy (points)": row.get("global_acc Δ")} for row in rows]
        performance.save_result(
            "precision_drift", "Stored runs rerun here, in fp32 and in bf16", shown,
            started=started, beside_note=args.beside,
            note="Each stored record's configuration rerun on this machine once per precision (into a temporary "
                 "folder); the stored and rerun final ALMA and global accuracy in percent, and the difference in "
                 "points. The rerun in the stored precision is the noise floor (another machine's kernels round "
                 "differently); bf16 says something about precision only beyond it. The verdicts allow "
                 f"{MACHINE_DRIFT:.2f} points per run between machines, measured on 36 runs (`results/README.md`).",
            extra={"order": 3, "summary": summary, "records": [str(path) for path in paths],
                   "pairs": merged_pairs(saved_pairs(), machine_pairs(rows, device_name(device))),
                   "digits": {"rerun (s)": 0, "ALMA stored (%)": 2, "ALMA rerun (%)": 2, "Δ ALMA (points)": 2,
                              "Δ global accuracy (points)": 2}})


if __name__ == "__main__":
    main()
