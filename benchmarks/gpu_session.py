"""What a GPU session measures, in one command (issue 32 item 7; issue 33's GPU hours).

    bash benchmarks/gpu_session.sh                       # on the lent GPU machine (sets up, then this)
    python benchmarks/gpu_session.py --out DIR --budget 540
    python benchmarks/gpu_session.py --out DIR --device cpu --smoke   # the same steps, seconds, on a CPU
    python benchmarks/gpu_session.py --out DIR --steps gpu_peak_memory  # step 2, then step 4 with the rest

A GPU is lent to a session by chance, for about 15 minutes, so everything it should answer runs
here in order, each step inside what is left of ``--budget`` seconds:

1. **Determinism**: a few methods (FedProto and FPL use ``index_add_``, non-deterministic on CUDA
   without the deterministic settings), each run twice on the device with the same config and
   seed: every evaluation of both runs must be equal, bit for bit.
2. **Peak memory**: FedGMKD's paper profile (ResNet-18, CIFAR-10, 500 images per client) at 50
   and 100 clients, two rounds of one local epoch, ``torch.cuda.max_memory_allocated`` against
   what ``benchmarks/device_memory.py`` predicted from a CPU (its result file).
3. **Workers on one GPU**: a small sweep with 1 and with 3 workers, each into its own results
   folder: the wall time of each and whether the records agree.
4. **Paper-profile records** with the time left: ``python -m fedkd_core.sweep CHAPTER --params
   YAML --workers N`` (default FedGMKD's paper profile), stopped cleanly before the budget ends;
   the finished records are packed into ``DIR/records.tar.gz`` (unpack it in the repository root).

Steps 1-3 write Performance-page result files into DIR (copy them to ``benchmarks/results/``); a
summary is printed and written to ``DIR/gpu_session.json``.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARAMS = ROOT / "notebooks" / "params"
sys.path.insert(0, str(ROOT))

DETERMINISM_METHODS = ("fedavg", "fedproto", "fpl", "fedgmkd")
MEMORY_METHODS = ("fedavg", "fedgmkd", "fjord", "fpl")
MEMORY_CLIENTS = (50, 100)


@dataclass(frozen=True)
class Plan:
    """What one session runs: the step sizes of a GPU session, or of a CPU smoke run."""

    determinism_samples: int = 64       # images per client of the determinism runs (4 clients, 2 rounds)
    memory_clients: tuple[int, ...] = MEMORY_CLIENTS
    memory_samples: int | None = None   # None: the paper profile's 500 images per client
    sweep_params: Path = PARAMS / "quick" / "fedgmkd.yaml"
    sweep_limit: int = 3                # runs each small sweep makes
    sweep_workers: tuple[int, ...] = (1, 3)
    records_chapter: str = "fedgmkd"
    records_params: str = "paper/fedgmkd.yaml"
    records_workers: int = 4
    model: str | None = None            # None: the profile's model (ResNet-18); steps 1-2 only


# The CPU smoke run checks the script (its steps, their files), not the numbers: FedGMKD's small CNN
# instead of ResNet-18 made its determinism and memory steps 21 s -> a few on a 2-core Xeon.
SMOKE = Plan(determinism_samples=16, memory_clients=(3,), memory_samples=16, sweep_limit=1, sweep_workers=(1, 2),
             records_workers=1, model="cnn5_code32")


class Clock:
    """Seconds left of the session's budget."""

    def __init__(self, budget: float):
        self.end = time.monotonic() + budget

    def left(self) -> float:
        return self.end - time.monotonic()


def paper_configs(chapter: str, params: str, methods: tuple[str, ...]) -> dict:
    """The first run (seed 0, smallest client count) of each of ``methods`` in a profile's grid."""
    from fedkd_core.sweep import load_grid

    _, configs = load_grid(chapter, PARAMS / params)
    chosen = {}
    for config in sorted(configs, key=lambda c: (c.seed, c.data.num_clients)):
        if config.algorithm in methods:
            chosen.setdefault(config.algorithm, config)
    missing = set(methods) - set(chosen)
    if missing:
        raise SystemExit(f"{params} has no run of {sorted(missing)}")
    return chosen


def images_per_client(config) -> int:
    data = config.data
    return data.samples_per_client or data.pool_size // data.num_clients


def client_images(config, clients: int, samples: int) -> dict:
    """The data fields giving ``clients`` clients ``samples`` images each, as the profile sizes
    them (per client, or a pool split among the clients), the pool capped at the training split
    less the transfer set (100 clients of 500 CIFAR-10 images would need 50,500 of 50,000)."""
    from fedkd_core.data import load_dataset

    data = config.data
    if data.samples_per_client:
        return {"samples_per_client": samples}
    available = len(load_dataset(data.dataset).y_train) - data.transfer_size
    return {"pool_size": min(samples * clients, available)}


def shrunk(config, clients: int, samples: int | None, rounds: int = 2, model: str | None = None):
    """``config`` with ``clients`` clients of ``samples`` images (None: as many as the profile
    gives each client), ``rounds`` rounds of one local epoch, evaluated at the end on a small
    local test set; ``model`` instead of the profile's, if given."""
    size = client_images(config, clients, samples or images_per_client(config))
    data = replace(config.data, num_clients=clients, local_test_size=min(config.data.local_test_size, 50), **size)
    return replace(config, data=data, rounds=rounds, eval_every=rounds, global_test_size=100,
                   train=replace(config.train, epochs=1), model=model or config.model)


def evaluations(outcome: dict) -> list:
    """Every number a run's evaluations produced (what two runs of one config must share)."""
    return [sorted((k, v) for k, v in row.items() if k != "seconds") for row in outcome["history"]]


def determinism(device, plan: Plan) -> list[dict]:
    from fedkd_core.experiment import simulate

    rows = []
    for method, config in paper_configs("fedgmkd", "paper/fedgmkd.yaml", DETERMINISM_METHODS).items():
        small = shrunk(config, clients=4, samples=plan.determinism_samples, model=plan.model)
        first, second = (simulate(small, device=device, progress=False) for _ in range(2))
        same = evaluations(first) == evaluations(second)
        rows.append({"method": method, "model": small.model, "clients": 4, "rounds": small.rounds,
                     "ALMA run 1": round(first["history"][-1]["alma"], 6),
                     "ALMA run 2": round(second["history"][-1]["alma"], 6), "identical": same})
        print(f"  determinism {method:10s} identical={same}", flush=True)
    return rows


def predicted_gib(method: str, clients: int) -> float | None:
    """What ``benchmarks/device_memory.py`` predicted for FedGMKD's ``method`` at ``clients``
    clients: its 50-client need plus its per-client growth for the clients beyond (None if no
    result file has the row)."""
    for path in sorted((ROOT / "benchmarks" / "results").glob("device_memory_fedgmkd-*.json")):
        result = json.loads(path.read_text())
        for row in (dict(zip(result["columns"], values)) for values in result["rows"]):
            if row["method"] == method and row["clients"] == 50:
                return round(row["needs GiB"] + (clients - 50) * row["MiB per client"] / 1024, 2)
    return None


def peak_memory(device, plan: Plan, clock: Clock) -> list[dict]:
    import torch

    from fedkd_core.experiment import simulate

    rows = []
    on_gpu = device.type == "cuda"
    for clients in plan.memory_clients:
        for method, config in paper_configs("fedgmkd", "paper/fedgmkd.yaml", MEMORY_METHODS).items():
            if clock.left() < 240:
                print("  peak memory: stopped, the rest of the budget goes to the later steps", flush=True)
                return rows
            small = shrunk(config, clients=clients, samples=plan.memory_samples, model=plan.model)
            gc.collect()  # the last run's models, before the peak is reset
            if on_gpu:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
            began = time.perf_counter()
            simulate(small, device=device, progress=False)
            peak = torch.cuda.max_memory_allocated(device) / 2**30 if on_gpu else None
            reserved = torch.cuda.max_memory_reserved(device) / 2**30 if on_gpu else None
            rows.append({"method": method, "clients": clients, "images per client": images_per_client(small),
                         "peak GiB": peak and round(peak, 2),
                         "reserved GiB": reserved and round(reserved, 2),
                         "predicted GiB": predicted_gib(method, clients),
                         "seconds": round(time.perf_counter() - began, 1)})
            print(f"  peak memory {method:8s} {clients:3d} clients: {rows[-1]}", flush=True)
    return rows


def sweep_command(chapter: str, params: Path, workers: int, limit: int | None = None) -> list[str]:
    """The sweep of ``workers`` processes, all on the one GPU (``--per-gpu`` as many); a grid under
    ``notebooks/params/robustness/`` is swept with ``--robustness`` (every variant's runs)."""
    command = [sys.executable, "-m", "fedkd_core.sweep", chapter, "--params", str(params), "--workers", str(workers),
               "--per-gpu", str(workers)]
    robustness = ["--robustness"] if "robustness" in Path(params).parts else []
    return command + robustness + (["--limit", str(limit)] if limit else [])


def final_scores(results: Path) -> dict:
    """Each record's final ALMA, by its file name (the run's key)."""
    return {path.name: json.loads(path.read_text())["history"][-1]["alma"]
            for path in sorted(results.rglob("*.json"))}


def workers_on_one_gpu(plan: Plan, clock: Clock) -> list[dict]:
    rows, scores = [], {}
    if clock.left() < 120:
        print(f"  sweep workers: skipped, {clock.left():.0f} s left", flush=True)
        return rows
    work = Path(tempfile.mkdtemp(prefix="gpu_session_"))  # not under --out: only result files go back
    for workers in plan.sweep_workers:
        results = work / f"sweep_{workers}_workers"
        env = {**os.environ, "FEDKD_RESULTS": str(results)}
        began = time.perf_counter()
        # each worker makes --limit runs: the same runs in total whatever the number of workers
        limit = max(1, plan.sweep_limit * max(plan.sweep_workers) // workers)
        done = subprocess.run(sweep_command("fedgmkd", plan.sweep_params, workers, limit), env=env,
                              cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - began
        scores[workers] = final_scores(results)
        rows.append({"workers": workers, "runs": len(scores[workers]), "seconds": round(seconds, 1),
                     "seconds per run": round(seconds / max(1, len(scores[workers])), 1), "exit": done.returncode})
        print(f"  sweep with {workers} worker(s): {rows[-1]}", flush=True)
        if done.returncode:
            print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
    shared = set.intersection(*(set(s) for s in scores.values()))
    agree = all(len({scores[w][key] for w in scores}) == 1 for key in shared)
    for row in rows:
        row["records agree"] = f"{len(shared)} shared, {'equal' if agree else 'DIFFERENT'}"
    return rows


def records_sweeps(plan: Plan) -> list[tuple[str, str, int]]:
    """(chapter, yaml, workers) of each sweep step 4 runs at once: ``plan.records_params`` may name
    several yamls of ``plan.records_chapter`` separated by "+" (each ``YAML`` or ``YAML@WORKERS``;
    without ``@`` a yaml gets ``plan.records_workers``)."""
    sweeps = []
    for part in str(plan.records_params).split("+"):
        params, _, workers = part.strip().partition("@")
        sweeps.append((plan.records_chapter, params, int(workers) if workers else plan.records_workers))
    return sweeps


def paper_records(plan: Plan, clock: Clock, out: Path, margin: float = 45) -> dict:
    """Run the records' sweeps (:func:`records_sweeps`, side by side on the one GPU) until
    ``margin`` seconds before the budget ends; pack the records they finished."""
    from fedkd_core.results import results_dir

    results = results_dir()
    marker = time.time()
    seconds = clock.left() - margin
    if seconds < 60:
        return {"ran": False, "why": f"{clock.left():.0f} s left"}
    processes = [subprocess.Popen(sweep_command(chapter, PARAMS / params, workers), cwd=ROOT, start_new_session=True)
                 for chapter, params, workers in records_sweeps(plan)]
    deadline = time.monotonic() + seconds
    for process in processes:
        try:
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)  # the sweep's clean-up releases its claims
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # the finished records are packed all the same
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    new = [p for p in results.rglob("*.json") if p.stat().st_mtime >= marker and ".claims" not in p.parts]
    if new:
        with tarfile.open(out / "records.tar.gz", "w:gz") as tar:
            for path in new:
                tar.add(path, arcname=str(path.relative_to(ROOT)))
    return {"ran": True, "seconds": round(seconds), "records": len(new),
            "exit": [process.returncode for process in processes]}


def guarded(name: str, step, summary: dict) -> list[dict]:
    """``step()``'s rows; if it fails, its traceback goes into the summary and the session goes on
    (a lent GPU is minutes long: one step's failure must not cost the others)."""
    try:
        return step()
    except Exception:  # noqa: BLE001 - reported, not hidden: the traceback is printed and saved
        summary.setdefault("failed", {})[name] = traceback.format_exc()
        print(f"  {name} FAILED:\n{summary['failed'][name]}", flush=True)
        return []


def chosen_steps(steps: tuple, names: str | None, records_only: bool, error) -> tuple:
    """The steps of ``steps`` (name first in each) that ``--steps`` names, in their order; all by
    default, none with ``--records-only``; ``error`` is called with the unknown names."""
    if records_only:
        if names is not None:
            error("--steps and --records-only: give one (--records-only runs none of steps 1-3)")
        return ()
    if names is None:
        return steps
    wanted = {name.strip() for name in names.split(",") if name.strip()}
    unknown = wanted - {step[0] for step in steps}
    if unknown:
        error(f"--steps: unknown {sorted(unknown)}; the steps are {[step[0] for step in steps]}")
    return tuple(step for step in steps if step[0] in wanted)


def main(argv: list[str] | None = None) -> None:
    import argparse

    import torch

    from fedkd_core import performance
    from fedkd_core.precision import execution_settings, use_bf16

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="where result files and records.tar.gz go")
    parser.add_argument("--budget", type=float, default=540, help="seconds for all steps (default 540)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--smoke", action="store_true", help="the smallest sizes: checks the script itself")
    parser.add_argument("--sweep-params", type=Path, default=None,
                        help="the fedgmkd yaml of step 3 (default notebooks/params/quick/fedgmkd.yaml)")
    parser.add_argument("--records", default=None, metavar="CHAPTER:YAML",
                        help="step 4's sweep, YAML under notebooks/params/ or an absolute path (default fedgmkd:paper/fedgmkd.yaml); "
                             "several yamls of one chapter run side by side: CHAPTER:A.yaml@6+B.yaml@3 (@N: its workers)")
    parser.add_argument("--records-workers", type=int, default=None, metavar="N",
                        help="step 4's sweep workers, all on the one GPU (default 4)")
    parser.add_argument("--no-records", action="store_true", help="skip step 4")
    parser.add_argument("--records-only", action="store_true",
                        help="step 4 alone, the whole budget (steps 1-3 have results: benchmarks/results/gpu_*)")
    parser.add_argument("--steps", default=None, metavar="NAMES",
                        help="which of steps 1-3 run, comma-separated: gpu_determinism, gpu_peak_memory, "
                             "gpu_sweep_workers (default all; e.g. --steps gpu_peak_memory to confirm a memory fix "
                             "and give step 4 the rest)")
    args = parser.parse_args(argv)
    plan = SMOKE if args.smoke else Plan()
    if args.sweep_params:
        plan = replace(plan, sweep_params=args.sweep_params)
    if args.records:
        chapter, _, params = args.records.partition(":")
        plan = replace(plan, records_chapter=chapter, records_params=params)
    if args.records_workers:
        plan = replace(plan, records_workers=args.records_workers)
    clock, device = Clock(args.budget), torch.device(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    summary = {"torch": torch.__version__, "device": str(device), "gpu": gpu,
               "capability": list(torch.cuda.get_device_capability(device)) if gpu else None,
               "settings": execution_settings(device), "auto picks bf16": use_bf16("auto", device)}
    print(json.dumps(summary), flush=True)
    command = f"python benchmarks/gpu_session.py --out DIR --budget {args.budget:.0f}"
    steps = (("gpu_determinism", "The same run twice on one device", lambda: determinism(device, plan),
              "Every evaluation of two runs of one config and seed, compared exactly, under the deterministic "
              "settings that `fedkd_core.precision.reproducible` applies to CUDA runs."),
             ("gpu_peak_memory", "Peak device memory, FedGMKD paper profile (ResNet-18, CIFAR-10)",
              lambda: peak_memory(device, plan, clock),
              "Two rounds of one local epoch, every client selected, `torch.cuda.max_memory_allocated`; "
              "'predicted' is `benchmarks/device_memory.py`'s count of tensors from a CPU (the CUDA context, "
              "allocator slack and one client's activations come on top of it)."),
             ("gpu_sweep_workers", "Sweep workers on one GPU", lambda: workers_on_one_gpu(plan, clock),
              "The same runs of `quick/fedgmkd.yaml` swept with each number of workers, each into its own "
              "results folder; 'records agree' compares their final ALMA."))
    chosen = chosen_steps(steps, args.steps, args.records_only, parser.error)
    for name, title, step, note in chosen:
        started = performance.beside_now()
        rows = guarded(name, step, summary)
        summary[name] = rows
        if rows:
            performance.save_result(name, title, rows, started=started, note=note, command=command, root=args.out,
                                    beside_note="nothing else: the session's own steps, one after another")
    if not args.no_records:
        summary["records"] = guarded("records", lambda: paper_records(plan, clock, args.out), summary)
    (args.out / "gpu_session.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k == "records"}), flush=True)


if __name__ == "__main__":
    main()
