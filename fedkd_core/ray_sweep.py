"""A sweep's pending runs as Ray tasks: the paper profiles on a cluster's CPUs and GPUs.

    python -m fedkd_core.sweep CHAPTER --params YAML --ray local [--cpus N]      # a cluster on this machine
    python -m fedkd_core.sweep CHAPTER --params YAML --ray auto --run-gpus 0.25  # join the cluster started here
    python -m fedkd_core.sweep CHAPTER --params YAML --ray HOST:PORT             # join the head at HOST:PORT

Each run is one Ray task (``--run-cpus``, ``--run-gpus``: fractions let several runs share one
GPU) that trains in-process on its node exactly as a local sweep worker does
(``experiment.simulate``) and sends its record, or its divergence, back to this process (the
*driver*), which writes it into its own results folder as a local sweep writes it: no shared file
system is needed, and the results folder to commit is the driver's. The record's ``environment``
names the node (``host``, ``ray_node_id``) besides the device and CPU/GPU model it always names.

Faults. A task whose node or worker process dies is retried by Ray (``--max-retries``; runs are
deterministic, so a retry gives the same record). A run that raises is reported with its config
and traceback and the sweep goes on with the rest (exit status 1 at the end, as a local sweep's).
Ctrl-C (or SIGTERM) cancels every task, writes nothing for them (records are written only whole,
by the driver) and releases the runs; the same command later resumes with what is left. A run
interrupted mid-way resumes from its checkpoint when its next task lands where the checkpoint was
saved (the driver's results folder where the node can write it, as on a cluster of this machine
or a shared disk; else the node's own, ``results.results_dir``).

The driver claims the runs it sends (leases: ``fedkd_core.leases``, with their heartbeat), so a local
sweep or another driver on the same results folder leaves them alone and ``--dry-run`` counts them
as claimed; it leaves a run that a live sweep of another profile claimed first and adopts the
checkpoint a stopped one left, as a local sweep does. Ray is imported only here, and only when ``--ray`` is given.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from tqdm import tqdm

from . import leases
from .checkpoint import DEFAULT_EVERY_SECONDS, Checkpoints
from .experiment import ExperimentConfig, RunDiverged, default_device, simulate
from .results import (config_hash, divergence_of, file_record, is_finished, outcome_record, results_dir,
                      save_divergence)

LOCAL = "local"  # --ray local: start a cluster on this machine


@dataclass(frozen=True)
class RayOptions:
    """Where the runs go and what each asks for.

    ``address``: ``"local"`` (start a cluster here with ``cpus`` CPUs, default all, and this
    machine's GPUs), ``"auto"`` (the cluster started on this machine, or ``RAY_ADDRESS``) or
    ``"host:port"`` of a running head. ``run_cpus`` / ``run_gpus`` are each run's Ray resources
    (``run_gpus`` None: ``1 / per_gpu`` of a GPU where the cluster has GPUs, as a local sweep puts
    at most ``--per-gpu`` workers on one GPU; 0 without). ``max_retries``: how often Ray reruns
    a task whose node or worker died."""

    address: str
    cpus: int | None = None
    run_cpus: float = 1.0
    run_gpus: float | None = None
    per_gpu: int = 4
    max_retries: int = 3

    def __post_init__(self):
        if self.run_cpus <= 0:
            raise ValueError(f"--run-cpus must be > 0 (got {self.run_cpus})")
        if self.run_gpus is not None and not 0 <= self.run_gpus <= 1:
            raise ValueError(f"--run-gpus must be between 0 and 1 (got {self.run_gpus}): a run trains on one "
                             "device; 0.25 puts four runs on one GPU")
        if self.max_retries < 0:
            raise ValueError(f"--max-retries must be >= 0 (got {self.max_retries})")
        if self.cpus is not None and self.address != LOCAL:
            raise ValueError(f"--cpus sizes the cluster --ray local starts; the cluster at {self.address!r} "
                             "has the CPUs its nodes were started with")
        if self.cpus is not None and self.cpus < 1:
            raise ValueError(f"--cpus must be >= 1 (got {self.cpus})")


@dataclass(frozen=True)
class Outcome:
    """What a task sends back: ``kind`` "done" (with its ``record``), "diverged" (its
    ``results.Divergence``) or "error" (``text``: the traceback on the node)."""

    kind: str
    record: object = None
    text: str = ""


# --- on the node ---------------------------------------------------------------------------------

def node_environment() -> dict:
    """Which node a task ran on: its host name and Ray node id."""
    import ray

    return {"host": socket.gethostname(), "ray_node_id": ray.get_runtime_context().get_node_id()}


def checkpoint_folder(driver_root: str) -> Path:
    """Where a task keeps its run's checkpoint: the driver's results folder where this node can
    write it (a cluster on the driver's machine, a shared disk: an interrupted run resumes there),
    else this node's own results folder."""
    for root in (Path(driver_root), results_dir()):
        try:
            (root / ".claims").mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(root / ".claims", os.W_OK):
            return root
    return results_dir()


def task_device() -> torch.device:
    """The device of a run: the GPU (share) Ray gave its task, else the CPU, also where the node
    has GPUs that Ray left visible to a task that asked for none (Ray hides them today and warns
    that it will stop doing so)."""
    import ray

    return default_device() if ray.get_gpu_ids() else torch.device("cpu")


def run_one(config: ExperimentConfig, profile: str, driver_root: str, threads: int,
            checkpoint_every: float = DEFAULT_EVERY_SECONDS) -> Outcome:
    """Run ``config`` in this (Ray worker) process as ``results.run_experiment`` does, but return
    its record or divergence instead of writing it: the driver writes it. An error comes back as
    its traceback (the sweep goes on), never as a retry: a run that raises raises again."""
    torch.set_num_threads(threads)  # Ray's worker processes are reused: set it for every run
    key = config_hash(config)
    checkpoints = Checkpoints(leases.state_path(checkpoint_folder(driver_root), profile, key), key, checkpoint_every)
    device = task_device()
    start = time.perf_counter()
    try:
        outcome = simulate(config, device=device, progress=False, checkpoints=checkpoints)
    except RunDiverged as error:
        divergence = divergence_of(config, error, time.perf_counter() - start, device, profile)
        checkpoints.delete()
        return Outcome("diverged", replace(divergence, environment={**divergence.environment, **node_environment()}))
    except Exception:  # noqa: BLE001 - any error of the run goes back with its traceback
        return Outcome("error", text=traceback.format_exc())
    record = outcome_record(config, outcome, time.perf_counter() - start, device, profile)
    checkpoints.delete()
    return Outcome("done", replace(record, environment={**record.environment, **node_environment()}))


# --- on the driver -------------------------------------------------------------------------------

def import_ray():
    """The ray module, or a SystemExit saying how to install it."""
    try:
        import ray
    except ImportError as error:
        raise SystemExit(f"--ray needs Ray, which is not importable here ({error}): pip install -e '.[flower]' "
                         "(or pip install 'ray[default]'), or run the sweep on local processes (--workers N)") from None
    return ray


def connect(options: RayOptions) -> bool:
    """Start or join the cluster ``options.address`` names; True when this call connected (the
    caller disconnects, which also stops a cluster it started), False when this process was
    already connected (a notebook, a test) and that connection is used as it is. A Ray that
    cannot start or be reached is a SystemExit saying why and what to do."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    on_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        if options.address == LOCAL:
            # Ray runs its workers at nice 15 unless told otherwise: beside any busy process they
            # starve (see fedkd_core.flower.start_ray). Runs here are the experiment, not background work.
            os.environ.setdefault("RAY_worker_niceness", "0")
            # Ray's workers inherit the environment, not this process's sys.path.
            pythonpath = os.pathsep.join([*sys.path, *filter(None, [os.environ.get("PYTHONPATH")])])
            ray.init(num_cpus=options.cpus or os.cpu_count() or 1, num_gpus=torch.cuda.device_count(),
                     include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": pythonpath}})
        else:
            check_reachable(options.address)
            ray.init(address=options.address, log_to_driver=False)
    except Exception as error:  # noqa: BLE001 - whatever Ray raises, the same advice
        raise SystemExit(cannot_start_text(options.address, error)) from None
    finally:
        # Ray's core worker replaces the SIGTERM handler with one that aborts the process; the
        # sweep's own (sweep.main: cancel the tasks, release the runs, exit) must stay.
        signal.signal(signal.SIGTERM, on_sigterm)
    return True


def check_reachable(address: str, timeout: float = 10.0) -> None:
    """A ConnectionError when nothing answers at ``address`` ("host:port"): Ray itself would
    retry a head that is not there for many minutes before it gives up. Other forms ("auto",
    "ray://...") are left to Ray."""
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        raise ConnectionError(f"nothing answers at {host}:{port} ({error})") from error


def cannot_start_text(address: str, error: BaseException) -> str:
    """Why Ray at ``address`` could not start or be joined, and the usual fixes."""
    first = f"{type(error).__name__}: {' '.join(str(error).split())}"[:600]
    if address == LOCAL:
        free = shutil.disk_usage("/dev/shm").free / 2**20 if Path("/dev/shm").exists() else float("nan")
        return (f"Ray could not start a cluster on this machine ({first}). /dev/shm has {free:.0f} MiB free. "
                "Usual fixes: stop a stale Ray ('ray stop'), give /dev/shm more space (docker run --shm-size=2g), "
                "or run the sweep on local processes instead (--workers N), which writes the same records. "
                "Nothing was run.")
    return (f"could not join the Ray cluster at {address!r} ({first}). Start its head first "
            "('ray start --head' on the head node; on Slurm or Kubernetes see book/cluster.md), check the "
            "address (host:port of the head's GCS, 6379 by default, or 'auto' on a node of the cluster), "
            "and that this machine runs the same Ray and Python versions as the cluster; or use --ray local. "
            "Nothing was run.")


def run_gpus(options: RayOptions, cluster_gpus: float) -> float:
    """Each run's share of a GPU: ``--run-gpus`` when given, else ``1 / per_gpu`` on a cluster
    with GPUs (at most ``--per-gpu`` runs on one GPU, as a local sweep), else 0."""
    if options.run_gpus is not None:
        return options.run_gpus
    return 1.0 / options.per_gpu if cluster_gpus else 0.0


def check_feasible(nodes: list[dict], cpus: float, gpus: float) -> None:
    """A SystemExit when no live node of ``nodes`` (``ray.nodes()``) has ``cpus`` CPUs and
    ``gpus`` GPUs: Ray would keep such tasks pending for ever."""
    alive = [node.get("Resources", {}) for node in nodes if node.get("Alive")]
    if any(r.get("CPU", 0) >= cpus and r.get("GPU", 0) >= gpus for r in alive):
        return
    have = "; ".join(f"{r.get('CPU', 0):g} CPUs, {r.get('GPU', 0):g} GPUs" for r in alive) or "no live node"
    raise SystemExit(f"no node of the Ray cluster has the {cpus:g} CPU(s) and {gpus:g} GPU(s) each run asks for "
                     f"(nodes: {have}): lower --run-cpus / --run-gpus, or add such a node. Nothing was run.")


def finished_line(config_text: str, outcome: Outcome) -> str:
    """The console line of a run that came back."""
    env = outcome.record.environment
    where = env.get("host", "?") + (f", {env['device_name']}" if str(env.get("device", "")).startswith("cuda") else "")
    if outcome.kind == "diverged":
        return f"DIVERGED {config_text}: diverged in round {outcome.record.round}: {outcome.record.error} (on {where})"
    return (f"{config_text}: ALMA {outcome.record.history[-1]['alma']:.4f} "
            f"({outcome.record.timings['total_seconds']:.0f} s on {where})")


def failed_line(config: ExperimentConfig, config_text: str, why: str) -> str:
    """The console lines of a run that failed: what it is, its whole config and why."""
    return (f"FAILED {config_text} (key {config_hash(config)}; the sweep goes on)\n"
            f"  config: {json.dumps(config.resolved(), sort_keys=True)}\n{why.rstrip()}")


def run_on_ray(configs: list, profile: str, options: RayOptions, *, limit: int | None = None,
               label: str = "sweep", describe=str, task=run_one) -> int:
    """Run the ``configs`` (in order) that are neither finished nor claimed, as Ray tasks on the
    cluster ``options`` names, at most ``limit``; write each record as it comes back; the number
    of failures. ``task`` is what each Ray task runs (:func:`run_one`; tests wrap it)."""
    started = connect(options)
    ray = import_ray()
    try:
        gpus = run_gpus(options, ray.cluster_resources().get("GPU", 0))
        check_feasible(ray.nodes(), options.run_cpus, gpus)
        remote = ray.remote(task).options(num_cpus=options.run_cpus, num_gpus=gpus, max_retries=options.max_retries,
                                          retry_exceptions=False)
        label = bar_label(label, ray.cluster_resources().get("CPU", 0), options.run_cpus, gpus)
        with leases.Heartbeat() as heartbeat:
            return _drive(ray, remote, configs, profile, options, limit, heartbeat, label, describe)
    finally:
        if started:
            ray.shutdown()


def bar_label(label: str, cluster_cpus: float, cpus: float, gpus: float) -> str:
    """The progress bar's label: the cluster's CPUs and what each run asks for."""
    per_run = f"{cpus:g} CPU{'s' if cpus != 1 else ''}" + (f" + {gpus:g} GPU" if gpus else "")
    return f"{label} (ray, {cluster_cpus:g} CPUs, {per_run} per run)"


def _claim_pending(configs, profile: str, limit: int | None, heartbeat: leases.Heartbeat) -> list[tuple]:
    """(config, claim) of each run to send: not finished, and claimed here (not by a live
    worker of another sweep, nor by one of another profile that shares the run: the claim started
    first keeps it, as in a local sweep), at most ``limit``. A checkpoint that a stopped sweep of
    another profile left for the run is adopted, so the task resumes from it where its node can
    write the driver's results folder (``checkpoint_folder``; elsewhere it starts from round 1)."""
    root, taken = results_dir(), []
    for config in configs:
        if limit is not None and len(taken) >= limit:
            break
        if is_finished(config):
            continue
        key = config_hash(config)
        claim = leases.claim_path(root, profile, key)
        if not leases.try_claim(claim):
            continue
        # finished by another worker just before our claim, or held by a sweep of another profile
        if is_finished(config) or leases.yields_to_another(root, profile, key):
            leases.release(claim)
            continue
        leases.adopt_state(root, profile, key)
        heartbeat.add(claim)
        taken.append((config, claim))
    return taken


def _drive(ray, remote, configs, profile: str, options: RayOptions, limit: int | None, heartbeat, label: str,
           describe) -> int:
    """Send the runs, write what comes back, say so; cancel what is still out on any stop."""
    taken = _claim_pending(configs, profile, limit, heartbeat)
    threads = max(1, int(options.run_cpus))
    pending = {remote.remote(config, profile, str(results_dir()), threads): (config, claim) for config, claim in taken}
    failures = 0
    try:
        with tqdm(total=len(pending), desc=label) as bar:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    config, claim = pending.pop(ref)
                    try:
                        failures += not _write_back(ray, ref, config, describe(config))
                    finally:
                        heartbeat.discard(claim)
                        leases.release(claim)
                    bar.update(1)
    except BaseException:  # Ctrl-C, SIGTERM (sweep.main makes it a SystemExit), a lost cluster
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - a cluster that is gone has nothing left to cancel
                pass
        tqdm.write(f"stopped: {len(pending)} run(s) cancelled, none of them written; "
                   "run the same command again to continue")
        raise
    finally:
        for _, claim in pending.values():
            heartbeat.discard(claim)
            leases.release(claim)
    return failures


def _write_back(ray, ref, config: ExperimentConfig, config_text: str) -> bool:
    """Write the record or divergence a task sent back, as a local sweep writes it, and say so;
    False (and the reason on the console) when the run failed."""
    try:
        outcome = ray.get(ref)
    except ray.exceptions.RayError as error:  # a worker or node died more often than --max-retries, ...
        tqdm.write(failed_line(config, config_text, f"{type(error).__name__}: {error}"))
        return False
    if outcome.kind == "error":
        tqdm.write(failed_line(config, config_text, outcome.text))
        return False
    if outcome.record.key != config_hash(config):
        tqdm.write(failed_line(config, config_text,
                               f"the node computed the key {outcome.record.key} for this config, this machine "
                               f"{config_hash(config)}: the node runs other fedkd_core code (RECORD_VERSION, "
                               "config fields); install the same commit on every node. Nothing was written."))
        return False
    if outcome.kind == "diverged":
        save_divergence(outcome.record)
    else:
        file_record(outcome.record)
    tqdm.write(finished_line(config_text, outcome))
    return True
