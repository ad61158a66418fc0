"""Wall time of one grid swept on local worker processes and on a local Ray cluster, side by side.

    python benchmarks/ray_sweep_overhead.py CHAPTER --params YAML [--cpus 2] [--repeats 2]

Runs ``python -m fedkd_core.sweep CHAPTER --params YAML`` with ``--workers N`` and with
``--ray local --cpus N`` (one CPU and one torch thread per run in both), alternately, each time
into a fresh temporary results folder (nothing is reused, nothing lands in results/), and prints
per sweep: the wall time of the command (start-up included), the sum of the runs' own seconds
(their records' ``total_seconds``), and the overhead per run: (wall x N - run seconds) / runs, the
CPU time per run that went to anything but training and evaluation (start-up, imports, data
loading, scheduling, idle cores at the end). The difference of the two is what Ray costs per run.
Not a test: it names the CPU and the load beside it, on which the figures depend.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fedkd_core.results import device_name
from fedkd_core.experiment import default_device


def sweep_once(chapter: str, params: Path, mode: list[str], omp_threads: int | None = None) -> dict:
    """Sweep the grid once with the sweep options ``mode`` (``omp_threads``: OMP_NUM_THREADS for
    the command, else unset); its wall time, runs and run seconds."""
    with tempfile.TemporaryDirectory(prefix="fedkd-overhead-") as folder:
        env = {**os.environ, "FEDKD_RESULTS": folder}
        env.pop("OMP_NUM_THREADS", None)
        if omp_threads is not None:
            env["OMP_NUM_THREADS"] = str(omp_threads)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "fedkd_core.sweep", chapter, "--params", str(params), *mode],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        records = [json.loads(p.read_text()) for p in Path(folder).rglob("*.json") if ".claims" not in p.parts]
    return {"wall": wall, "runs": len(records), "run_seconds": sum(r["timings"]["total_seconds"] for r in records)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapter")
    parser.add_argument("--params", type=Path, required=True)
    parser.add_argument("--cpus", type=int, default=2, help="worker processes / the local cluster's CPUs")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--omp-threads", type=int, default=None,
                        help="OMP_NUM_THREADS for both commands (default unset: a local worker sets torch's "
                             "threads only, Ray sets OMP_NUM_THREADS to each task's CPUs)")
    args = parser.parse_args()
    modes = {f"--workers {args.cpus}": ["--workers", str(args.cpus)],
             f"--ray local --cpus {args.cpus}": ["--ray", "local", "--cpus", str(args.cpus)]}
    print(f"{device_name(default_device())}, {os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.2f}")
    for repeat in range(args.repeats):
        for name, mode in (modes.items() if repeat % 2 == 0 else reversed(modes.items())):
            found = sweep_once(args.chapter, args.params, mode, args.omp_threads)
            overhead = (found["wall"] * args.cpus - found["run_seconds"]) / found["runs"]
            print(f"{name:24s} {found['runs']} runs: wall {found['wall']:.1f} s, "
                  f"runs' own {found['run_seconds']:.1f} s, overhead {overhead:.1f} CPU-s per run (load average now {os.getloadavg()[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
