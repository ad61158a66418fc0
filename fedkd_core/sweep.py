"""Run a chapter's whole grid, resumably and on several processes: finished runs are skipped.

    python -m fedkd_core.sweep CHAPTER --params notebooks/params/paper/CHAPTER.yaml [--workers N]
    python -m fedkd_core.sweep setting knfu --params "notebooks/params/quick/{chapter}.yaml"   # one process
    python -m fedkd_core.sweep CHAPTER --params ... --dry-run      # done / claimed / left, hours left
    python -m fedkd_core.sweep knfu --params notebooks/params/robustness/knfu.yaml --robustness
    python -m fedkd_core.sweep knfu --params ... --robustness --variant "R = 30 rounds"   # one variant
    python -m fedkd_core.sweep fedua --params notebooks/params/paper/fedua.yaml --ray auto --run-gpus 0.25

Records go to ``<results>/<profile>/<algorithm>/<key>.json`` (see fedkd_core.results); a run
whose training diverges (non-finite loss or weights) is a result, not a failure: it is stored as
``<key>.diverged.json``, reported, and the sweep goes on (another error stops it). Stop it
at any time and run the same command again to continue where it stopped. ``--workers N`` starts
N processes (one torch thread each unless OMP_NUM_THREADS says otherwise) that claim runs with
claim files, leases on runs (fedkd_core.leases): no run is done twice, also across several sweep commands or
machines sharing the results folder, and the claim of a killed worker is taken over. On a machine
with GPUs the workers are spread over the visible GPUs, at most ``--per-gpu`` (default 4) on one
(each holds its own CUDA context and resident dataset), and each finished run says the peak
device memory of its worker. Claims carry a heartbeat, so a dead host's runs are taken over
within minutes by workers of other hosts sharing the folder.

``--ray ADDRESS`` runs the pending runs as Ray tasks instead (``local``: a cluster on this machine
with ``--cpus``; ``auto`` or ``host:port``: a running cluster), each with ``--run-cpus`` CPUs and
``--run-gpus`` of a GPU; their records come back and are written here as a local sweep writes
them (fedkd_core.ray_sweep; book/cluster.md).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import time
import traceback
from contextlib import contextmanager
from statistics import fmean
from queue import Empty
from pathlib import Path

import torch
import yaml
from tqdm import tqdm

from . import leases
from .chapters import chapter_module, chapter_params, experiments_to_run
from .chapters.datafiles import is_reference_profile
from .chapters.robustness import sweep_order as robustness_grid
from .algorithms import register_announced
from .experiment import RunDiverged, default_device
from .results import (RecordError, ResultsNotWritable, check_writable, config_hash, device_name, is_finished, on_gpu,
                      load_divergence, load_record, results_dir, run_experiment)


def describe(config) -> str:
    """One line naming what distinguishes a run within a sweep."""
    data = config.data
    size = f" n={data.samples_per_client}" if data.samples_per_client else ""
    return (f"{config.algorithm:14s} {data.dataset} {data.partition}(alpha={data.alpha}) "
            f"{data.num_clients} clients{size} seed={config.seed}")


def round_progress(config, report, clock=time.monotonic):
    """An ``on_round`` callback for ``run_experiment`` that reports ("round", text) how far
    ``config``'s run has come and, at this session's pace (from the callback's making, so a
    resumed run is paced by the rounds it runs now), how long it has left."""
    began, first = clock(), None

    def on_round(round_index: int, rounds: int) -> None:
        nonlocal first
        first = round_index if first is None else first
        pace = (clock() - began) / (round_index - first + 1)
        left = f", {duration_text(pace * (rounds - round_index))} left" if round_index < rounds else ""
        report("round", f"{config.algorithm} s{config.seed} round {round_index}/{rounds}{left}")

    return on_round


def load_grid(chapter: str, params_file: Path, robustness: bool = False, variants: tuple[str, ...] = ()):
    """The profile's params and its runs: the chapter's grid, or with ``robustness`` the grid of
    every variant of ``ROBUSTNESS`` around those params (fedkd_core.chapters.robustness), or of
    the ``variants`` named."""
    module = chapter_module(chapter)
    try:
        params = chapter_params(module.Params, yaml.safe_load(Path(params_file).read_text()) or {})
    except ValueError as error:  # a wrong, misspelt or meaningless parameter (or YAML that is no mapping)
        raise SystemExit(f"{params_file}: {error}") from None
    if robustness:
        if not hasattr(module, "ROBUSTNESS"):
            raise SystemExit(f"chapter {chapter!r} has no robustness variants (ROBUSTNESS)")
        try:
            return params, robustness_grid(module, params, variants)
        except ValueError as error:
            raise SystemExit(str(error)) from None
    if variants:
        raise SystemExit("--variant names a robustness variant: it needs --robustness")
    if is_reference_profile(params_file):  # a committed reference profile: its whole grid, under its label
        return params, module.experiments(params)
    return params, experiments_to_run(module, params)


def status(configs) -> dict[str, list]:
    """The grid split into done (with "done_records", their records), diverged (a stored
    divergence: run, with no record), claimed by a live worker (of this or another profile that
    shares the run: ``leases.live_claims_of``), left (stale claims count as left)
    and "unreadable": the error of every stored record or divergence that cannot be read or is
    incomplete (``results.RecordError``, naming its file), all of them, not only the first."""
    root = results_dir()
    split = {"done": [], "diverged": [], "claimed": [], "left": [], "done_records": [], "unreadable": []}
    for config in configs:
        key = config_hash(config)
        try:
            record = load_record(config)
            diverged = record is None and load_divergence(config) is not None
        except RecordError as error:
            split["unreadable"].append(str(error))
            continue
        if record is not None:
            split["done"].append(config)
            split["done_records"].append(record)
        elif diverged:
            split["diverged"].append(config)
        elif leases.live_claims_of(root, key):  # under any profile: two profiles may share a run
            split["claimed"].append(config)
        else:
            split["left"].append(config)
    return split


def unreadable_exit(errors: list[str]) -> SystemExit:
    """The sweep's stop when stored records cannot be read: every one, each with its file."""
    lines = "\n".join(f"  {error}" for error in errors)
    return SystemExit(f"{len(errors)} stored record(s) cannot be read or are incomplete:\n{lines}\n"
                      "Restore or delete each, then run the sweep again (nothing was run).")


def run_kind(config: dict) -> tuple:
    """What a run's duration mostly depends on: its algorithm, dataset, client count and model
    (of a resolved config, as a record stores it)."""
    return config["algorithm"], config["data"]["dataset"], config["data"]["num_clients"], config["model"]


def run_work(config: dict) -> float:
    """How much training a run does, relative to runs of its :func:`run_kind`: rounds x local
    epochs x the clients' training samples (``samples_per_client`` x clients, else ``pool_size``;
    a field the config lacks counts as 1). KnFu's CIFAR-10 runs at |D_n| = 1000 take twice as long
    as at 500, which the kind alone does not tell."""
    data = config["data"]
    samples = (data.get("samples_per_client") or 0) * data["num_clients"] or data.get("pool_size") or 1
    return float(config.get("rounds", 1) * config.get("train", {}).get("epochs", 1) * samples)


def pace(record) -> float:
    """A record's seconds per unit of :func:`run_work`."""
    return record.timings["total_seconds"] / run_work(record.config)


def algorithm_paces(records) -> dict[str, float]:
    """Per algorithm, the mean :func:`pace` of its ``records``."""
    paces: dict[str, list[float]] = {}
    for record in records:
        paces.setdefault(record.config["algorithm"], []).append(pace(record))
    return {algorithm: fmean(values) for algorithm, values in paces.items()}


def calibrated_paces(done: list, reference: list) -> dict[str, float]:
    """Per algorithm of the ``reference`` records (another profile's runs of the same methods), its
    pace there times how much slower the ``done`` runs are than the reference on the algorithms
    both have (mean ratio): pFedMe's pace in a grid that has run only FedAvg so far, from their
    ratio at a smaller scale. Empty where the two share no algorithm."""
    ours, theirs = algorithm_paces(done), algorithm_paces(reference)
    shared = [algorithm for algorithm in ours if algorithm in theirs]
    if not shared:
        return {}
    scale = fmean(ours[algorithm] / theirs[algorithm] for algorithm in shared)
    return {algorithm: value * scale for algorithm, value in theirs.items()}


def estimated_seconds(left: list[dict], done: list, here: str | None = None, reference: list = ()) -> float | None:
    """One worker's seconds for the ``left`` resolved configs at the pace of the ``done`` records:
    per run, its :func:`run_work` times the mean pace (``total_seconds`` per unit of work) of the
    done runs of its :func:`run_kind` made on ``here`` (this machine's ``device_name``; CPUs that
    share a name can be several times apart), else of its kind on any machine, else its
    algorithm's pace in the ``reference`` records scaled to the done runs
    (:func:`calibrated_paces`), else of all done runs. None without done records (nothing to go by)."""
    if not done:
        return None
    calibrated = calibrated_paces(done, reference) if reference else {}
    local: dict[tuple, list[float]] = {}
    anywhere: dict[tuple, list[float]] = {}
    overall: list[float] = []
    for record in done:
        overall.append(pace(record))
        anywhere.setdefault(run_kind(record.config), []).append(pace(record))
        if here is not None and record.environment.get("device_name") == here:
            local.setdefault(run_kind(record.config), []).append(pace(record))

    def pace_of(config: dict) -> float:
        like = local.get(run_kind(config)) or anywhere.get(run_kind(config))
        return fmean(like) if like else calibrated.get(config["algorithm"], fmean(overall))

    return sum(run_work(config) * pace_of(config) for config in left)


def this_machine() -> str:
    """The ``device_name`` this machine's runs record (the GPU's where there is one)."""
    return device_name(default_device())


def duration_text(seconds: float) -> str:
    """Hours to a tenth from one hour on, whole minutes below (never "0.0 h")."""
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{max(1, round(seconds / 60))} min"


def pace_reference(chapter: str, params, root=None, robustness: bool = False) -> list:
    """The committed records that pace the methods a chapter's rerun with ``params`` (a robustness
    grid's where ``robustness``) has not run yet: its ``pace_reference`` profile's (``ledger.Rerun``
    in the chapter's ``RERUNS``), else none."""
    from .chapters import chapter_module
    from .results import stored_records

    module = chapter_module(chapter)
    reruns = [rerun for rerun in getattr(module, "RERUNS", ())
              if rerun.params == params and rerun.robustness == robustness and rerun.pace_reference is not None]
    return stored_records(reruns[0].configs(module, reruns[0].pace_reference), root) if reruns else []


def like_this_machine(records) -> list:
    """The ``records`` made on this machine's kind of device (CPU or GPU), or all of them where none
    was: a GPU run's pace, several runs sharing the device, says little about a core's, and back."""
    gpu = default_device().type == "cuda"
    same = [record for record in records if on_gpu(record) == gpu]
    return same or list(records)


def pace_line(split: dict, reference: list = ()) -> str:
    """The dry run's estimate of what is left, naming the machine the done records ran on (those
    on this machine's kind of device, :func:`like_this_machine`); methods not run yet go by their
    pace in the ``reference`` records (:func:`calibrated_paces`)."""
    done = like_this_machine(split["done_records"])
    here = this_machine()
    seconds = estimated_seconds([config.resolved() for config in split["left"]], done, here, reference)
    if seconds is None or not split["left"]:
        return ""
    machines = sorted({f"{r.environment.get('device_name', '?')} {r.environment.get('precision', '')}".strip()
                       for r in done})
    mine = sum(r.environment.get("device_name") == here for r in done)
    where = f"{mine} of them on this machine's {here}, counted first" if mine else f"none on this machine's {here}"
    return (f"left: about {duration_text(seconds)} of one worker's compute at the pace of the "
            f"{len(done)} run{'s' if len(done) != 1 else ''} done "
            f"(on {', '.join(machines)}; {where}; divide by the workers that share the machine's cores)")


def run_order(configs: list) -> list:
    """The grid seed by seed (grid order within a seed): a sweep stopped early leaves every cell
    with a first seed before any cell gets its second."""
    return sorted(configs, key=lambda config: config.seed)


def sweep_order(configs: list, robustness: bool) -> list:
    """The order a sweep takes its runs in, whatever runs them (worker processes or Ray): a
    robustness grid as ``robustness.sweep_order`` made it (variant by variant, nearest completion
    first), any other grid seed by seed (:func:`run_order`)."""
    return list(configs) if robustness else run_order(configs)


def work(chapter: str, params_file: Path, limit: int | None, report, parent: int | None = None,
         robustness: bool = False, variants: tuple[str, ...] = ()) -> None:
    """Claim and run what is left of the grid, seed by seed (``run_order``), until nothing is left;
    a robustness grid variant by variant, nearest completion first (``robustness.sweep_order``).

    ``report(kind, text)`` is told of every run it starts ("start"), round it finishes ("round":
    ``round_progress``), finished run ("done"), diverged run ("diverged") and failure ("error"). A worker
    started by a sweep (``parent``: its process id) stops before its next run once that sweep has
    gone, however it was stopped (even by SIGKILL), instead of running on unseen.
    """
    params, configs = load_grid(chapter, params_file, robustness, variants)
    root, ran = results_dir(), 0
    with leases.Heartbeat() as heartbeat:  # workers on other hosts see the claim's run is alive
        for config in sweep_order(configs, robustness):
            if limit is not None and ran >= limit:
                return
            if not sweep_alive(parent):
                return
            if is_finished(config):
                continue
            claim = leases.claim_path(root, params.profile, config_hash(config))
            if not leases.try_claim(claim):
                continue
            heartbeat.add(claim)
            try:
                if is_finished(config):  # finished by another worker just before our claim
                    continue
                if leases.yields_to_another(root, params.profile, config_hash(config)):
                    continue  # a sweep of another profile that shares this run holds it
                leases.adopt_state(root, params.profile, config_hash(config))
                report("start", describe(config))
                record = run_experiment(config, profile=params.profile, progress=False,
                                        on_round=round_progress(config, report))
                ran += 1
                report("done", f"{describe(config)}: ALMA {record.final['alma']:.4f} "
                               f"({record.timings['total_seconds']:.0f} s{device_memory_text()})")
            except RunDiverged as diverged:  # stored by run_experiment: a result; go on with the grid
                ran += 1
                report("diverged", f"{describe(config)}: diverged in round {diverged.round_index}: {diverged}")
            except Exception as error:
                report("error", f"{describe(config)}: {type(error).__name__}: {error}\n{traceback.format_exc()}")
                raise
            finally:
                heartbeat.discard(claim)
                leases.release(claim)


def sweep_alive(parent: int | None) -> bool:
    """Whether the sweep (process ``parent``) that started this worker still runs; True for a
    worker no sweep started. A started worker's parent process is the sweep when spawned, the fork
    server when forked from one: multiprocessing's handle on the starting process (a pipe that
    closes when it ends, however it ends) says either way."""
    if parent is None:
        return True
    starter = multiprocessing.parent_process()
    if starter is not None and starter.pid == parent:
        return starter.is_alive()
    return os.getppid() == parent


def omp_threads() -> int | None:
    """The one thread count OMP_NUM_THREADS gives (None: unset, or not a single count such as
    "4,2"; a worker then takes its share of the cores). Each worker sets it in torch itself: one
    forked from the fork server would otherwise keep the count OpenMP read when the server started."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isascii() and value.isdigit() and int(value) > 0 else None


def _worker(chapter: str, params_file: Path, limit: int | None, threads: int, queue, parent: int,
            robustness: bool = False, variants: tuple[str, ...] = (), environment: dict | None = None) -> None:
    if environment is not None:  # forked: the sweep's environment now, not the fork server's at its start
        os.environ.clear()
        os.environ.update(environment)
        register_announced()  # the sweep's own methods (the package was imported under the server's)
    torch.set_num_threads(omp_threads() or threads)
    work(chapter, params_file, limit, lambda kind, text: queue.put((os.getpid(), kind, text)), parent, robustness,
         variants)


def visible_gpus() -> list[str]:
    """The ids (as CUDA_VISIBLE_DEVICES names them) of the GPUs this process sees."""
    count = torch.cuda.device_count()
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [i.strip() for i in listed.split(",") if i.strip()] if listed is not None else [str(i) for i in range(count)]
    return ids[:count]


def worker_gpus(workers: int, gpus: list[str], per_gpu: int) -> list[str | None]:
    """The GPU of each of ``workers`` processes, in turn over ``gpus``, at most ``per_gpu`` on one
    (each holds its own CUDA context and resident dataset); None for all without a GPU."""
    if not gpus:
        return [None] * workers
    if workers > per_gpu * len(gpus):
        raise ValueError(f"--workers {workers} would put more than --per-gpu {per_gpu} worker(s) on each of the "
                         f"{len(gpus)} GPU(s); each holds its own CUDA context and dataset: use at most "
                         f"{per_gpu * len(gpus)} workers or raise --per-gpu")
    return [gpus[i % len(gpus)] for i in range(workers)]


@contextmanager
def seeing_only(gpu: str | None):
    """The environment a worker process starts with: only ``gpu`` visible (its ``cuda`` device)."""
    if gpu is None:
        yield
        return
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    try:
        yield
    finally:
        if saved is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved


def device_memory_text() -> str:
    """", peak N GiB on <GPU>" of this worker's device memory so far ("" on a CPU)."""
    if not torch.cuda.is_available():
        return ""
    peak = torch.cuda.max_memory_reserved() / 2**30
    return f", peak {peak:.1f} GiB on {torch.cuda.get_device_name()}"


# What the fork server imports for the workers it forks (fedkd_core.sweep's third-party imports).
PRELOADED = ("torch", "numpy", "pandas", "yaml", "tqdm")


def worker_context(on_gpus: bool):
    """How worker processes start. Without GPUs: forked from a fork server that has imported the
    libraries every worker needs (:data:`PRELOADED`, most of a worker's start: about 2.5 s of a core
    for torch alone), instead of each worker importing them again. The server is a fresh
    interpreter that imports no fedkd_core: each worker imports the package from the sweep's
    ``sys.path``, is handed the sweep's environment and registers the methods the sweep announced.
    With GPUs: spawned, each with only its GPU visible from its start (:func:`seeing_only`), as
    run on the lent GPUs."""
    if on_gpus or "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOADED))
    return context


def run_workers(chapter: str, params_file: Path, workers: int, limit: int | None, total: int,
                robustness: bool = False, variants: tuple[str, ...] = (), per_gpu: int = 4) -> int:
    """Start ``workers`` processes on the grid, spread over the visible GPUs (at most ``per_gpu``
    on one); show their progress; the number of failures."""
    gpus = worker_gpus(workers, visible_gpus(), per_gpu)
    on_gpus = any(gpu is not None for gpu in gpus)
    context = worker_context(on_gpus)
    queue = context.Queue()
    # torch threads per worker: the cores shared out, or FEDKD_SWEEP_THREADS where several sweeps share them
    threads = int(os.environ.get("FEDKD_SWEEP_THREADS") or max(1, (os.cpu_count() or 1) // workers))
    # a forked worker starts with the fork server's environment: it is handed the sweep's
    environment = dict(os.environ) if context.get_start_method() == "forkserver" else None
    processes = [context.Process(target=_worker, args=(chapter, params_file, limit, threads, queue, os.getpid(), robustness,
                                                             variants, environment),
                                 daemon=True)
                 for _ in range(workers)]
    for process, gpu in zip(processes, gpus):
        with seeing_only(gpu):  # a spawned process takes the environment at its start
            process.start()
    try:
        return _follow(processes, queue, chapter, workers, total)
    finally:  # also on Ctrl-C or SIGTERM (see main): a stopped sweep leaves no worker behind
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join()


# How often the sweep looks whether its workers have stopped while none reports: it waits up to two
# of these after the last one exits (a second of 1.0 s polls was ~2 s of every sweep's end).
FOLLOW_POLL_SECONDS = 0.2


def _follow(processes, queue, chapter: str, workers: int, total: int) -> int:
    """Show the workers' reports (``(pid, kind, text)`` on ``queue``) until all have stopped: each
    finished run as a line, the rounds of those running after the bar. The number of failures, a
    worker that stopped without reporting one (killed) included, named with the run it held."""
    failures, running, failed, rounds = 0, {}, set(), {}
    with tqdm(total=total, desc=f"sweep {chapter} ({workers} workers)") as bar:
        while True:
            alive = any(p.is_alive() for p in processes)  # read before draining: no message is missed
            try:
                pid, kind, text = queue.get(timeout=FOLLOW_POLL_SECONDS)
            except Empty:
                if alive:
                    continue
                break
            if kind == "start":
                running[pid] = text
                continue
            if kind == "round":
                rounds[pid] = text
                bar.set_postfix_str(" | ".join(rounds.values()))
                continue
            running.pop(pid, None)
            if rounds.pop(pid, None) is not None:
                bar.set_postfix_str(" | ".join(rounds.values()))  # a finished run's rounds leave the bar
            if kind in ("done", "diverged"):
                bar.update(1)
                tqdm.write(text if kind == "done" else f"DIVERGED {text}")
            else:
                failures += 1
                failed.add(pid)
                tqdm.write(f"FAILED {text}")
    for process in processes:
        process.join()
    crashed = [p for p in processes if p.exitcode != 0 and p.pid not in failed]  # killed, out of memory
    for process in crashed:
        tqdm.write(stopped_line(process.pid, process.exitcode, running.get(process.pid)))
    return failures + len(crashed)


def stopped_line(pid: int, exitcode: int, run: str | None) -> str:
    """What the sweep says of worker ``pid`` that stopped with ``exitcode`` without reporting a
    failure, ``run`` the run it had started (None: it held none)."""
    how = f"killed by {signal.Signals(-exitcode).name}" if exitcode < 0 else f"exit code {exitcode}"
    if exitcode == -signal.SIGKILL:
        how += ": the out-of-memory killer, unless you or a job limit sent it"
    held = f"while running {' '.join(run.split())}" if run else "holding no run it had reported"
    return f"FAILED worker {pid} stopped ({how}) {held}: run the sweep again to rerun it (its claim is taken over)"


def variant_lines(chapter: str, params, variants: tuple[str, ...], done: list) -> list[str]:
    """For a robustness dry run: per variant, its runs, how many are done and one worker's time
    for the rest at the pace of the ``done`` records (a run two variants share counts in both)."""
    from .chapters.robustness import selected_variants, variant_grid

    module = chapter_module(chapter)
    lines, here, done = [], this_machine(), like_this_machine(done)
    for variant in selected_variants(module, variants):
        configs = variant_grid(module, params, variant)
        left = [config.resolved() for config in configs if not is_finished(config)]
        seconds = estimated_seconds(left, done, here) if left else 0.0
        time_left = "" if seconds is None else f", about {duration_text(seconds)} left" if left else ""
        diverged = sum(load_divergence(config) is not None for config in configs)
        lines.append(f"  {variant.name}: {len(configs)} runs, {len(configs) - len(left)} done"
                     f"{f' ({diverged} diverged)' if diverged else ''}{time_left}")
    return lines


def resume_line(configs) -> str:
    """"3 of them resume from a checkpoint: ..." for the runs not done that have a saved state
    (``fedkd_core.checkpoint``: they restart from their last saved round, not round 1), else "".
    A state saved under another profile counts: the worker adopts it (``leases.adopt_state``)."""
    root = results_dir()
    saved = [config for config in configs if leases.saved_states_of(root, config_hash(config))]
    if not saved:
        return ""
    return (f"{len(saved)} of them resume from a checkpoint (their last saved round): "
            + "; ".join(describe(config) for config in saved))


def run_on_cluster(chapter: str, left: list, profile: str, options, limit: int | None, robustness: bool) -> int:
    """Run the ``left`` runs as Ray tasks (fedkd_core.ray_sweep), in the order a local sweep
    takes them; the number of failures. Ctrl-C, once the tasks are cancelled, is exit status 130."""
    from .ray_sweep import run_on_ray

    try:
        return run_on_ray(sweep_order(left, robustness), profile, options, limit=limit, label=f"sweep {chapter}",
                          describe=describe)
    except KeyboardInterrupt:  # the tasks are cancelled and the stop said so: no traceback
        raise SystemExit(130) from None


def parse_ray_options(parser: argparse.ArgumentParser, args):
    """The :class:`~fedkd_core.ray_sweep.RayOptions` of ``--ray`` and its options (None without
    ``--ray``); a usage error for an option that contradicts them."""
    from .ray_sweep import RayOptions

    if args.ray is None:
        given = [flag for flag, value, default in (("--cpus", args.cpus, None), ("--run-cpus", args.run_cpus, 1.0),
                                                   ("--run-gpus", args.run_gpus, None),
                                                   ("--max-retries", args.max_retries, 3)) if value != default]
        if given:
            parser.error(f"{', '.join(given)} only apply with --ray")
        return None
    if args.workers is not None:
        parser.error("--workers starts local processes; with --ray each run is a Ray task: size the cluster "
                     "(--cpus with --ray local) and each run (--run-cpus, --run-gpus) instead")
    try:
        return RayOptions(args.ray, cpus=args.cpus, run_cpus=args.run_cpus, run_gpus=args.run_gpus,
                          per_gpu=args.per_gpu, max_retries=args.max_retries)
    except ValueError as error:
        parser.error(str(error))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapter", nargs="+", help="a chapter, or several (then --params names each one's yaml with {chapter})")
    parser.add_argument("--params", type=Path, required=True,
                        help="papermill YAML of the profile; with several chapters, a path with {chapter} in it")
    parser.add_argument("--workers", type=int, default=None, help="processes claiming runs (default 1)")
    parser.add_argument("--per-gpu", type=int, default=4,
                        help="most workers on one GPU (default 4); workers are spread over the visible GPUs")
    parser.add_argument("--dry-run", action="store_true", help="count done / claimed / left, run nothing")
    parser.add_argument("--limit", type=int, default=None,
                        help="each worker (with --ray: the sweep) runs at most this many new runs")
    parser.add_argument("--robustness", action="store_true",
                        help="run the chapter's robustness variants around the profile (ROBUSTNESS)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME",
                        help="with --robustness: only this variant (repeatable; its name as the chapter lists it)")
    cluster = parser.add_argument_group("on a Ray cluster (fedkd_core.ray_sweep; book/cluster.md)")
    cluster.add_argument("--ray", metavar="ADDRESS", default=None,
                         help="run each pending run as a Ray task: 'local' starts a cluster on this machine, "
                              "'auto' or HOST:PORT joins a running one; records come back and are written here")
    cluster.add_argument("--cpus", type=int, default=None, help="with --ray local: the cluster's CPUs (default all)")
    cluster.add_argument("--run-cpus", type=float, default=1.0, help="CPUs each run asks Ray for (default 1)")
    cluster.add_argument("--run-gpus", type=float, default=None,
                         help="share of a GPU each run asks Ray for, e.g. 0.25: four runs on one GPU "
                              "(default 1/--per-gpu on a cluster with GPUs, else 0)")
    cluster.add_argument("--max-retries", type=int, default=3,
                         help="times Ray reruns a run whose node or worker died (default 3; runs are deterministic)")
    args = parser.parse_args(argv)
    variants = tuple(args.variant)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # `kill` runs the clean-up
    ray_options = parse_ray_options(parser, args)
    args.workers = 1 if args.workers is None else args.workers
    if args.workers < 1:
        parser.error(f"--workers must be >= 1 (got {args.workers})")
    chapters = args.chapter
    if len(chapters) > 1 and "{chapter}" not in str(args.params):
        parser.error("with several chapters, --params must name each one's yaml with {chapter} "
                     "(notebooks/params/quick/{chapter}.yaml)")
    for chapter in chapters:  # one process for all: each chapter's grid in turn, the imports paid once
        try:
            sweep_chapter(parser, args, chapter, Path(str(args.params).replace("{chapter}", chapter)), variants,
                          ray_options)
        except SystemExit as stop:
            if len(chapters) > 1 and stop.code not in (0, None):  # say which chapter stopped the sweep
                raise SystemExit(f"{stop.code if isinstance(stop.code, str) else ''}\n"
                                 f"error: the grid of chapter {chapter} failed").lstrip() from None
            raise


def sweep_chapter(parser, args, chapter: str, params_file: Path, variants: tuple[str, ...], ray_options) -> None:
    """One chapter's sweep (what :func:`main` does for each chapter it is given)."""
    params, configs = load_grid(chapter, params_file, args.robustness, variants)
    split = status(configs)
    diverged = f"{len(split['diverged'])} diverged (stored), " if split["diverged"] else ""
    unreadable = f", {len(split['unreadable'])} unreadable" if split["unreadable"] else ""
    print(f"{chapter} ({params.profile}): {len(configs)} runs: {len(split['done'])} done, {diverged}"
          f"{len(split['claimed'])} claimed by running workers, {len(split['left'])} left{unreadable}")
    if split["unreadable"]:
        raise unreadable_exit(split["unreadable"])
    if args.dry_run:
        if line := pace_line(split, pace_reference(chapter, params, robustness=args.robustness)):
            print(line)
        if line := resume_line(split["left"] + split["claimed"]):
            print(line)
        if args.robustness:
            print("\n".join(variant_lines(chapter, params, variants, split["done_records"])))
        for config in split["claimed"]:
            print(f"  claimed: {describe(config)}")
        return
    if not split["left"]:
        return
    try:
        check_writable(results_dir())
    except ResultsNotWritable as error:
        raise SystemExit(str(error)) from None
    start = time.perf_counter()
    if ray_options is not None:
        failures = run_on_cluster(chapter, split["left"], params.profile, ray_options, args.limit,
                                  args.robustness)
    else:
        try:
            failures = run_workers(chapter, params_file, args.workers, args.limit, len(split["left"]),
                                   args.robustness, variants, per_gpu=args.per_gpu)
        except ValueError as error:  # more workers than the GPUs take
            parser.error(str(error))
    print(f"finished in {time.perf_counter() - start:.0f} s" + (f", {failures} failure(s)" if failures else ""))
    held = status(configs)["claimed"]
    if held:
        print(f"{len(held)} run(s) are held by workers of another sweep and were not run here:")
        for config in held:
            print(f"  {describe(config)}")
    if failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
