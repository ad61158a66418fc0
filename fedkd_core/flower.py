"""Run any registered algorithm on Flower (Message API; simulation on Ray, or real nodes).

    pip install -e '.[flower]'
    python -m fedkd_core.flower CONFIG.yaml [CONFIG.yaml ...] [--workers N] [--timeout S] [--profile NAME]

The round is ``experiment._run_round`` with its client steps sent as Flower messages:

- the ServerApp runs the project's own loop (``experiment.simulate`` with ``FlowerClients``):
  its seeded client sampler, the algorithm's ``download`` / ``server_update`` / ``reply`` (server-side
  distillation runs there), the bytes of the same messages, the evaluation;
- each ClientApp step (``train.update``, ``train.finish``) loads the client's state from
  ``context.state``, runs ``experiment.client_step`` on a per-process replica of the algorithm,
  and keeps the new state in ``context.state``;
- for evaluation the server asks every client for its state (``query.state``) and scores each
  client's model exactly as in-process.

Randomness is per (seed, round, client) (fedkd_core.randomness), so the numbers equal an
in-process run's, with any number of Ray workers. The core never imports this module.
"""

from __future__ import annotations

import argparse
import functools
import pickle
import time
from contextlib import contextmanager
from pathlib import Path

import torch
import yaml

try:
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError("fedkd_core.flower needs Flower: pip install -e '.[flower]'") from error

from .algorithms import Context as AlgorithmContext, algorithm_class, algorithm_config
from .experiment import ExperimentConfig, client_step, default_device, simulate
from .federation import DataConfig, build_federated_data
from .training import TrainConfig

ENGINE = "flower"


# --- messages ------------------------------------------------------------------------------------

def to_record(message: dict, round_index: int, run: int) -> RecordDict:
    """A fedkd message (name -> tensor), the round and the run (which of the simulation's
    configs) as a Flower RecordDict."""
    arrays = {name: t.detach().cpu().float() if t.dtype == torch.bfloat16 else t.detach().cpu()
              for name, t in message.items()}
    return RecordDict({"m": ArrayRecord(torch_state_dict=arrays),
                       "cfg": ConfigRecord({"round": round_index, "run": run})})


def from_record(record: RecordDict) -> dict:
    return dict(record["m"].to_torch_state_dict()) if "m" in record else {}


# --- the client side -----------------------------------------------------------------------------

@functools.lru_cache(maxsize=2)
def _replica(config_blob: bytes):
    """This process's copy of the algorithm (same data split and initial model as the server's);
    it serves every client that lands on this process and keeps none of their states."""
    config: ExperimentConfig = pickle.loads(config_blob)
    torch.set_num_threads(1)
    data = build_federated_data(config.data, config.seed)
    ctx = AlgorithmContext(data=data, model_name=config.model, train=config.train, device=default_device(),
                           seed=config.seed)
    return algorithm_class(config.algorithm)(algorithm_config(config.algorithm, config.algorithm_params), ctx)


def _client_id(context: Context) -> int:
    return int(context.node_config["partition-id"])


def _saved_state(context: Context, run: int) -> dict:
    key = f"fedkd-run{run}"
    return dict(context.state[key].to_torch_state_dict()) if key in context.state else {}


def _run_client_step(blobs: list[bytes], phase: str, message: Message, context: Context) -> Message:
    client = _client_id(context)
    round_index, run = int(message.content["cfg"]["round"]), int(message.content["cfg"]["run"])
    output, new_state = client_step(_replica(blobs[run]), round_index, client, phase, from_record(message.content),
                                    _saved_state(context, run))
    context.state[f"fedkd-run{run}"] = ArrayRecord(torch_state_dict={k: v.cpu() for k, v in new_state.items()})
    return Message(to_record(output or {}, round_index, run), reply_to=message)


def client_app(configs: list[ExperimentConfig]) -> ClientApp:
    """The ClientApp of ``configs`` (run one after another by the ServerApp): the update and
    finish steps, the client's id and its state (kept in ``context.state``, one entry per run)."""
    blobs = [pickle.dumps(config) for config in configs]
    app = ClientApp()

    @app.train("update")
    def update(message: Message, context: Context) -> Message:
        return _run_client_step(blobs, "update", message, context)

    @app.train("finish")
    def finish(message: Message, context: Context) -> Message:
        return _run_client_step(blobs, "finish", message, context)

    @app.query("whoami")
    def whoami(message: Message, context: Context) -> Message:
        return Message(RecordDict({"cfg": ConfigRecord({"client": _client_id(context)})}), reply_to=message)

    @app.query("state")
    def state(message: Message, context: Context) -> Message:
        run = int(message.content["cfg"]["run"])
        return Message(to_record(_saved_state(context, run), 0, run), reply_to=message)

    return app


# --- the server side -----------------------------------------------------------------------------

class FlowerClients:
    """``experiment.simulate``'s client engine on a Flower Grid: each client step is a message to
    the node that holds that client (``InProcessClients`` is the in-process twin)."""

    def __init__(self, grid: Grid, num_clients: int, run: int = 0, timeout: float | None = None,
                 wait: float = 600.0):
        self.grid, self.run, self.timeout = grid, run, timeout
        deadline = time.monotonic() + wait
        while len(nodes := list(grid.get_node_ids())) < num_clients:  # nodes register asynchronously
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(nodes)} of {num_clients} Flower nodes connected within {wait:.0f} s")
            time.sleep(0.2)
        asks = [Message(RecordDict(), dst_node_id=node, message_type="query.whoami") for node in nodes]
        self.node = {int(r.content["cfg"]["client"]): r.metadata.src_node_id for r in self._exchange(asks)}

    def update(self, algorithm, downloads: dict) -> dict:
        return self._send("train.update", downloads, algorithm.round)

    def finish(self, algorithm, replies: dict) -> None:
        self._send("train.finish", replies, algorithm.round)

    @contextmanager
    def states_for_evaluation(self, algorithm, clients: list[int]):
        states = self._send("query.state", {k: {} for k in clients}, algorithm.round)
        for k, state in states.items():
            algorithm.load_client_state(k, state)
        try:
            yield
        finally:
            for k in states:
                algorithm.drop_client_state(k)

    def _send(self, message_type: str, payloads: dict, round_index: int) -> dict:
        missing = sorted(set(payloads) - set(self.node))
        if missing:
            raise RuntimeError(f"no Flower node holds client(s) {missing}; {len(self.node)} nodes answered")
        messages = [Message(to_record(m, round_index, self.run), dst_node_id=self.node[k], message_type=message_type)
                    for k, m in payloads.items()]
        client_of = {node: k for k, node in self.node.items()}
        replies = {client_of[r.metadata.src_node_id]: r for r in self._exchange(messages)}
        return {k: from_record(replies[k].content) for k in payloads}

    def _exchange(self, messages: list[Message]) -> list[Message]:
        sent = {m.metadata.dst_node_id for m in messages}
        replies = list(self.grid.send_and_receive(messages, timeout=self.timeout))
        failed = [r for r in replies if r.has_error()]
        answered = {r.metadata.src_node_id for r in replies}
        if failed or answered != sent:
            reasons = "; ".join(f"node {r.metadata.src_node_id}: {r.error.reason}" for r in failed)
            raise RuntimeError(f"Flower round failed: {len(failed)} client(s) raised, {len(sent - answered)} did not "
                               f"answer{' within ' + str(self.timeout) + ' s' if self.timeout else ''}. {reasons} "
                               "(the run stops here rather than go on without them)")
        return replies


def server_app(configs: list[ExperimentConfig], outcomes: list, timeout: float | None = None) -> ServerApp:
    """The ServerApp of ``configs``: the project's round loop over a Flower Grid for each config in
    turn; appends each run's outcome (as ``experiment.simulate`` returns it) to ``outcomes``."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        for run, config in enumerate(configs):
            clients = FlowerClients(grid, config.data.num_clients, run, timeout)
            outcomes.append(simulate(config, clients=clients, progress=False))

    return app


def simulate_on_flower(configs: list[ExperimentConfig], workers: int = 1, timeout: float | None = None) -> list[dict]:
    """Run ``configs`` one after another in one Flower simulation on Ray with ``workers`` client
    processes (Ray actors, one CPU each); each outcome equals ``experiment.simulate``'s."""
    sizes = {config.data.num_clients for config in configs}
    if len(sizes) != 1:
        raise ValueError(f"configs of one Flower simulation must have the same number of clients (got {sorted(sizes)})")
    outcomes: list = []
    backend = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
               "init_args": {"num_cpus": workers, "num_gpus": 0, "include_dashboard": False}}
    run_simulation(server_app(configs, outcomes, timeout), client_app(configs), num_supernodes=sizes.pop(),
                   backend_name="ray", backend_config=backend)
    if len(outcomes) != len(configs):
        raise RuntimeError(f"the Flower simulation ended after {len(outcomes)} of {len(configs)} runs; "
                           "see Flower's log above")
    return outcomes


# --- the command ---------------------------------------------------------------------------------

def load_config(path: Path) -> ExperimentConfig:
    """An ExperimentConfig from YAML (the fields of ExperimentConfig; ``data`` and ``train`` nested)."""
    raw = yaml.safe_load(Path(path).read_text()) or {}
    return ExperimentConfig(**{**raw, "data": DataConfig(**raw.get("data", {})),
                               "train": TrainConfig(**raw.get("train", {}))})


def main(argv: list[str] | None = None) -> None:
    from .results import outcome_record, save_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", type=Path, nargs="+", help="YAML files of ExperimentConfigs (one simulation)")
    parser.add_argument("--workers", type=int, default=1, help="Ray client processes (default 1)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds a round waits for its clients")
    parser.add_argument("--profile", default="custom", help="results/<profile>/ folder of the records")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be >= 1 (got {args.workers})")
    configs = [load_config(path) for path in args.configs]
    start = time.perf_counter()
    outcomes = simulate_on_flower(configs, args.workers, args.timeout)
    seconds = time.perf_counter() - start
    device = default_device()
    for config, outcome in zip(configs, outcomes):
        record = outcome_record(config, outcome, seconds / len(configs), device, args.profile,
                                engine=f"{ENGINE} (ray, {args.workers} workers)")
        path = save_record(record)
        print(f"{config.algorithm}: ALMA {outcome['history'][-1]['alma']:.4f}; record {path}")


if __name__ == "__main__":
    # Run main from the importable module, not from __main__: Ray workers must find the apps'
    # functions as fedkd_core.flower.*, which they can import.
    from fedkd_core.flower import main as module_main

    module_main()
