"""Run any registered algorithm on Flower (Message API; simulation on Ray, or real nodes).

    pip install -e '.[flower]'
    python -m fedkd_core.flower CONFIG.yaml [CONFIG.yaml ...] [--workers N] [--timeout S] [--profile NAME]

or, on real nodes, the same apps through Flower's deployment engine (``flower_app/README.md``).

The round is ``experiment._run_round`` with its client steps sent as Flower messages:

- the ServerApp runs the project's own loop (``experiment.simulate`` with ``FlowerClients``):
  its seeded client sampler, the algorithm's ``download`` / ``server_update`` / ``reply`` (server-side
  distillation runs there), the bytes of the same messages, the evaluation;
- each ClientApp step (``train.update``, ``train.finish``) loads the client's state from
  ``context.state``, runs ``experiment.client_step`` on a per-process replica of the algorithm
  (built from the run's config, which travels in every message, so one module-level ``clientapp``
  serves any run, in simulation and on real nodes), and keeps the new state in ``context.state``
  (``fedkd_core.flower_clientapp``, which imports torch only for these steps);
- for evaluation the server asks every client for its state (``query.state``) and scores each
  client's model exactly as in-process.

Randomness is per (seed, round, client) (fedkd_core.randomness), so the numbers equal an
in-process run's, with any number of Ray workers. The core never imports this module.

Faults: a client that raises, or does not answer within ``timeout`` seconds, stops the run with
an error naming the client(s) and the reason (a reply is matched to the message it answers: for a
SuperNode that has gone, the SuperLink itself sends the error) (no retry: a retried client step would draw its
randomness again and the run would no longer equal the in-process one). Ray that cannot start
is reported with the usual causes and their fixes.

Divergence is a result, not a fault, as in-process: a client whose training loss (or model)
becomes non-finite answers so, the run stops with ``experiment.RunDiverged`` (its round and the
history so far), the other configs of the simulation go on, and the command stores it as a
``.diverged.json`` beside the records (``results.Divergence``). The command saves each config's
record (or divergence) as that config finishes, so a fault in a later one loses no finished run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch
import yaml

try:
    from flwr.app import Context, Message, RecordDict
    from flwr.serverapp import Grid, ServerApp
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError("fedkd_core.flower needs Flower: pip install -e '.[flower]'") from error

from .experiment import ExperimentConfig, RunDiverged, config_from_dict, default_device, on_device, simulate
from .flower_clientapp import DIVERGED, clientapp, from_record, to_record  # noqa: F401 (clientapp: the app's name here)
from .results import (check_writable, config_hash, divergence_of, file_record, outcome_record, results_dir,
                      save_divergence)
from .training import NonFiniteLoss

ENGINE = "flower"
DEFAULT_TIMEOUT = 3600.0  # seconds one exchange (all of a round's clients) may take


# --- the client side: fedkd_core.flower_clientapp (imports torch only for a step that trains) ---

def config_json(config: ExperimentConfig) -> str:
    """The config as JSON, with its hash, for the clients to rebuild it (plain data, no pickle)."""
    return json.dumps({"config": dataclasses.asdict(config), "key": config_hash(config)})


# --- the server side -----------------------------------------------------------------------------

class FlowerClients:
    """``experiment.simulate``'s client engine on a Flower Grid: each client step is a message to
    the node that holds that client (``InProcessClients`` is the in-process twin)."""

    def __init__(self, grid: Grid, config: ExperimentConfig, run: int = 0, timeout: float | None = DEFAULT_TIMEOUT,
                 wait: float = 600.0):
        self.grid, self.run, self.timeout, self.config = grid, run, timeout, config_json(config)
        num_clients = config.data.num_clients
        deadline = time.monotonic() + wait
        while len(nodes := list(grid.get_node_ids())) < num_clients:  # nodes register asynchronously
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(nodes)} of {num_clients} Flower nodes connected within {wait:.0f} s")
            time.sleep(0.2)
        asks = [Message(RecordDict(), dst_node_id=node, message_type="query.whoami") for node in nodes]
        self.node = {int(r.content["cfg"]["client"]): node
                     for node, r in self._exchange(asks, {node: f"node {node}" for node in nodes}).items()}
        if sorted(self.node) != list(range(num_clients)):
            raise RuntimeError(f"the Flower nodes hold partition ids {sorted(self.node)}; the run needs exactly "
                               f"0..{num_clients - 1} (start each SuperNode with --node-config 'partition-id=K')")

    def update(self, algorithm, downloads: dict) -> dict:
        return self._send("train.update", downloads, algorithm.round)

    def finish(self, algorithm, replies: dict) -> None:
        self._send("train.finish", replies, algorithm.round)

    @contextmanager
    def states_for_evaluation(self, algorithm, clients: list[int]):
        states = self._send("query.state", {k: {} for k in clients}, algorithm.round)
        for k, state in states.items():
            algorithm.load_client_state(k, on_device(state, algorithm.ctx.device))
        try:
            yield
        finally:
            for k in states:
                algorithm.drop_client_state(k)

    def _send(self, message_type: str, payloads: dict, round_index: int) -> dict:
        messages = [Message(to_record(m, round_index, self.run, self.config), dst_node_id=self.node[k],
                            message_type=message_type) for k, m in payloads.items()]
        client_of = {node: k for k, node in self.node.items()}
        names = {self.node[k]: f"client {k}" for k in payloads}
        replies = {client_of[node]: r for node, r in self._exchange(messages, names, round_index).items()}
        raise_if_diverged({k: reply.content["cfg"] for k, reply in replies.items()})
        return {k: from_record(replies[k].content) for k in payloads}

    def _exchange(self, messages: list[Message], names: dict, round_index: int = 0) -> dict:
        """Send and wait for every reply; the replies by the node each message went to. A client
        that raised or did not answer in time stops the run with an error naming it (``names``:
        node id -> "client k") and the seconds waited. A reply is matched to the message it
        answers, not to its sender: the SuperLink itself answers for a node that has gone."""
        start = time.monotonic()
        replies = list(self.grid.send_and_receive(messages, timeout=self.timeout))
        waited = time.monotonic() - start
        sent_to = {m.metadata.message_id: m.metadata.dst_node_id for m in messages}  # ids set by sending
        answers = {sent_to[r.metadata.reply_to_message_id]: r for r in replies}
        raised = {node: r.error.reason for node, r in answers.items() if r.has_error()}
        silent = sorted(set(names) - set(answers), key=str)
        if raised or silent:
            problems = [f"{names.get(node, f'node {node}')} raised: {reason}" for node, reason in raised.items()]
            if silent:
                problems.append(f"{', '.join(names[node] for node in silent)} did not answer within "
                                f"{self.timeout} s (waited {waited:.1f} s)")
            raise RuntimeError(f"Flower run {self.run}, round {round_index}: " + "; ".join(problems)
                               + " (the run stops rather than go on without them; see fedkd_core.flower's docstring)")
        return answers


def raise_if_diverged(answers: dict) -> None:
    """Raise NonFiniteLoss (``experiment.simulate`` stops the run with RunDiverged) naming the
    clients whose answer (client -> its reply's ConfigRecord) says their training diverged."""
    diverged = {k: str(cfg[DIVERGED]) for k, cfg in answers.items() if DIVERGED in cfg}
    if diverged:
        raise NonFiniteLoss("; ".join(f"client {k}: {text}" for k, text in sorted(diverged.items())))


def run_on_grid(grid: Grid, configs: list[ExperimentConfig], timeout: float | None = DEFAULT_TIMEOUT,
                progress: bool = True):
    """Run ``configs`` one after another over ``grid``; yield each run's (outcome, seconds), the
    outcome as ``experiment.simulate`` returns it, or the :class:`RunDiverged` it raised (the
    next config goes on)."""
    for run, config in enumerate(configs):
        start = time.perf_counter()
        try:
            outcome = simulate(config, clients=FlowerClients(grid, config, run, timeout), progress=progress)
        except RunDiverged as diverged:
            outcome = diverged
        yield outcome, time.perf_counter() - start


def server_app(configs: list[ExperimentConfig], outcomes: list, timeout: float | None = DEFAULT_TIMEOUT,
               progress: bool = True, on_finish=None) -> ServerApp:
    """The ServerApp of ``configs``: the project's round loop over a Flower Grid for each config in
    turn; appends each run's (outcome, seconds) to ``outcomes`` and, as each run ends, calls
    ``on_finish(config, outcome, seconds)`` (the command saves its record there, so a fault in a
    later config loses no finished one)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        for config, run in zip(configs, run_on_grid(grid, configs, timeout, progress)):
            outcomes.append(run)
            if on_finish is not None:
                on_finish(config, *run)

    return app


serverapp = ServerApp()
"""The ServerApp for Flower's deployment engine (``flwr run flower_app ...``): runs the YAML
configs named in the run config's ``configs`` (comma-separated paths on the SuperLink's machine)
and writes a record for each, as ``python -m fedkd_core.flower`` does."""


@serverapp.main()
def _deployed(grid: Grid, context: Context) -> None:
    run_config = context.run_config
    configs = [load_config(Path(path.strip())) for path in str(run_config["configs"]).split(",")]
    timeout = float(run_config.get("timeout", DEFAULT_TIMEOUT))
    check_writable(results_dir())
    for config, (outcome, seconds) in zip(configs, run_on_grid(grid, configs, timeout)):
        save_outcome(config, outcome, seconds, str(run_config.get("profile", "custom")),
                     f"{ENGINE} (deployment, {config.data.num_clients} SuperNodes)")


def save_outcome(config: ExperimentConfig, outcome: dict | RunDiverged, seconds: float, profile: str,
                 engine: str) -> Path:
    """Write the record of a run that ``engine`` made (as a local run's, marked with the engine),
    or its divergence, and say where it went."""
    device = default_device()
    if isinstance(outcome, RunDiverged):
        path = save_divergence(divergence_of(config, outcome, seconds, device, profile, engine=engine))
        print(f"{config.algorithm}: DIVERGED in round {outcome.round_index} ({outcome}); stored {path}")
        return path
    path = file_record(outcome_record(config, outcome, seconds, device, profile, engine=engine))
    print(f"{config.algorithm}: ALMA {outcome['history'][-1]['alma']:.4f}; record {path}")
    return path


def client_gpu_fraction(workers: int) -> float:
    """The share of a GPU each client process asks Ray for by default: the clients follow the
    server, so on a machine with GPUs the ``workers`` processes share them (at most one each), and
    a client's step runs on the device the in-process run uses; 0 without a GPU. (Ray hides the GPUs
    from a process that asks for none, and its client would train on the CPU.)"""
    gpus = torch.cuda.device_count()
    return min(1.0, gpus / workers) if gpus else 0.0


def start_ray(workers: int, object_store_mb: int | None = None) -> None:
    """Start Ray for ``workers`` client processes (Flower's simulation then uses it and shuts it
    down at the end), or say why it cannot start and what usually fixes it."""
    import ray

    # Ray runs its workers at nice 15 unless told otherwise: beside any busy process at normal
    # priority (another experiment, a test) they starve (measured on 2 busy cores: importing torch
    # in a client process took 65 s instead of 3 s). Clients here are the experiment, not background work.
    os.environ.setdefault("RAY_worker_niceness", "0")
    # Ray's workers inherit the environment, not this process's sys.path (as Flower's own start-up does).
    pythonpath = os.pathsep.join([*sys.path, *filter(None, [os.environ.get("PYTHONPATH")])])
    init_args = {"num_cpus": workers, "num_gpus": torch.cuda.device_count(), "include_dashboard": False,
                 "log_to_driver": False,
                 "runtime_env": {"env_vars": {"PYTHONPATH": pythonpath}},
                 # When a driver connects, Ray starts idle workers for tasks to come; the clients are
                 # actors, which start workers of their own: 2 clients made 4 worker processes, 2
                 # without this (tests/test_flower.py's simulation, 2026-11-29).
                 "_system_config": {"prestart_worker_first_driver": False}}
    if object_store_mb is not None:
        init_args["object_store_memory"] = object_store_mb * 2**20
    try:
        ray.init(**init_args)
    except Exception as error:  # noqa: BLE001 - any failure gets the same advice
        free = shutil.disk_usage("/dev/shm").free / 2**20 if Path("/dev/shm").exists() else float("nan")
        raise RuntimeError(
            f"Ray could not start ({type(error).__name__}: {error}). /dev/shm has {free:.0f} MiB free. Usual fixes: "
            "give /dev/shm more space (docker run --shm-size=2g), or ask for a smaller object store "
            "(--object-store-mb 512, simulate_on_flower(object_store_mb=512)); stop a stale Ray ('ray stop'); "
            "or run in-process instead (python -m fedkd_core.sweep / experiment.simulate), which gives the "
            "same numbers.") from error


def simulate_on_flower(configs: list[ExperimentConfig], workers: int = 1, timeout: float | None = DEFAULT_TIMEOUT,
                       object_store_mb: int | None = None, progress: bool = False,
                       gpu_fraction: float | None = None) -> list[dict | RunDiverged]:
    """Run ``configs`` one after another in one Flower simulation on Ray with ``workers`` client
    processes (Ray actors, one CPU each); each outcome equals ``experiment.simulate``'s, with the
    run's wall time (Flower's start-up excluded) added as ``outcome["seconds"]``. A run that
    diverged is in the list as the :class:`RunDiverged` that ``experiment.simulate`` raises
    (as ``asyncio.gather(..., return_exceptions=True)`` lists errors). ``gpu_fraction``: the share of
    a GPU each client process gets (default :func:`client_gpu_fraction`; 0 runs the clients on the CPU)."""
    return [{**outcome, "seconds": seconds} if isinstance(outcome, dict) else outcome
            for outcome, seconds in timed_runs_on_ray(configs, workers, timeout, object_store_mb, progress,
                                                      gpu_fraction)]


def timed_runs_on_ray(configs: list[ExperimentConfig], workers: int, timeout: float | None,
                      object_store_mb: int | None, progress: bool, gpu_fraction: float | None = None,
                      on_finish=None) -> list[tuple]:
    """:func:`simulate_on_flower`'s runs as (outcome or RunDiverged, seconds) pairs; ``on_finish``
    as in :func:`server_app`."""
    import ray
    # Here, not at the top: the simulation engine is a second of imports that a ClientApp process of
    # the deployment engine (one per message) and each Ray worker never use.
    from flwr.simulation import run_simulation

    sizes = {config.data.num_clients for config in configs}
    if len(sizes) != 1:
        raise ValueError(f"configs of one Flower simulation must have the same number of clients (got {sorted(sizes)})")
    outcomes: list = []
    fraction = client_gpu_fraction(workers) if gpu_fraction is None else gpu_fraction
    backend = {"client_resources": {"num_cpus": 1, "num_gpus": fraction}}
    start_ray(workers, object_store_mb)
    try:
        run_simulation(server_app(configs, outcomes, timeout, progress, on_finish), clientapp,
                       num_supernodes=sizes.pop(), backend_name="ray", backend_config=backend)
    finally:
        if ray.is_initialized():
            ray.shutdown()
    if len(outcomes) != len(configs):
        raise RuntimeError(f"the Flower simulation ended after {len(outcomes)} of {len(configs)} runs"
                           f"{' (each one finished was saved as it ended)' if on_finish and outcomes else ''}; "
                           "see Flower's log above")
    return outcomes


# --- the command ---------------------------------------------------------------------------------

def load_config(path: Path) -> ExperimentConfig:
    """An ExperimentConfig from YAML (the fields of ExperimentConfig; ``data`` and ``train`` nested)."""
    return config_from_dict(yaml.safe_load(Path(path).read_text()) or {})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", type=Path, nargs="+", help="YAML files of ExperimentConfigs (one simulation)")
    parser.add_argument("--workers", type=int, default=1, help="Ray client processes (default 1)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds one exchange (all of a round's clients) may take (default {DEFAULT_TIMEOUT:.0f})")
    parser.add_argument("--object-store-mb", type=int, default=None, help="Ray's object store size (default: Ray's)")
    parser.add_argument("--profile", default="custom", help="results/<profile>/ folder of the records")
    parser.add_argument("--gpu-fraction", type=float, default=None,
                        help="share of a GPU per client process (default: the GPUs shared by the workers, "
                             "at most one each; 0: clients on the CPU)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be >= 1 (got {args.workers})")
    if args.gpu_fraction is not None and not 0 <= args.gpu_fraction <= 1:
        parser.error(f"--gpu-fraction must be in [0, 1] (got {args.gpu_fraction})")
    configs = [load_config(path) for path in args.configs]
    check_writable(results_dir())
    engine = f"{ENGINE} (ray, {args.workers} workers)"
    timed_runs_on_ray(configs, args.workers, args.timeout, args.object_store_mb, progress=True,
                      gpu_fraction=args.gpu_fraction,
                      on_finish=lambda config, outcome, seconds: save_outcome(config, outcome, seconds, args.profile,
                                                                              engine))


if __name__ == "__main__":
    # Run main from the importable module, not from __main__, so the process holds one copy of this
    # module (its FlowerClients, simulate, ... are the ones other code imports). The ClientApp that
    # Ray's workers run is fedkd_core.flower_clientapp's, importable however the command starts.
    from fedkd_core.flower import main as module_main

    module_main()
