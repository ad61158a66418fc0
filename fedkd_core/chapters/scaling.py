"""Book page "Scaling out": wall time of a round in-process and on Flower's Ray simulation.

Not an experiment grid (``experiments`` is empty, so ``make book``'s sweep has nothing to do):
the page times the same FedAvg runs on each engine. Each measurement runs ``rounds`` rounds;
the first round of a Flower run includes each Ray worker building its replica (data split,
initial model), so it is reported apart from the later rounds. The overhead per message is
measured with zero local epochs (a client step then only loads its state, averages nothing and
replies): (Flower's round − the in-process round) / messages of the round, with one worker.

    python -m fedkd_core.chapters.scaling --params notebooks/params/paper/scaling.yaml

writes ``results/scaling/<profile>-<cpu>.json``; the page shows every such file beside the
measurement it makes itself.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

from . import chapter_params
from ..experiment import ExperimentConfig, RunDiverged, default_device, simulate
from ..federation import DataConfig
from ..report import parse_list
from ..results import device_name, results_dir
from ..training import TrainConfig

IN_PROCESS = "in-process"


@dataclass(frozen=True)
class Params:
    """The page's parameters; defaults are the smoke profile (seconds: one small Flower run).
    ``clients`` and ``workers`` are comma-separated counts; ``workers`` empty measures in-process
    only."""

    profile: str = "smoke"
    clients: str = "4"
    workers: str = "1"
    rounds: int = 2
    samples_per_client: int = 20
    local_epochs: int = 1
    batch_size: int = 10
    dataset: str = "mnist"
    model: str = "knfu_m1"
    measure_overhead: bool = False

    def __post_init__(self) -> None:
        if self.rounds < 2:
            raise ValueError(f"rounds must be >= 2: the first round is reported apart (got {self.rounds})")
        for name, counts in (("clients", self.client_counts()), ("workers", self.worker_counts())):
            for count in counts:
                if count < 1:
                    raise ValueError(f"{name} must all be >= 1 (got {count})")

    def client_counts(self) -> list[int]:
        return parse_list(self.clients, int, "clients")

    def worker_counts(self) -> list[int]:
        return parse_list(self.workers, int, "workers") if self.workers else []


def experiments(params: Params) -> list:
    """Nothing for the sweep: this page measures engines, its runs are not records."""
    return []


def run_config(params: Params, clients: int, local_epochs: int | None = None) -> ExperimentConfig:
    """The timed FedAvg run: ``clients`` clients of ``samples_per_client`` images, all selected,
    evaluated every round so the history holds every round's seconds (evaluation itself is
    outside a round's timed part)."""
    data = DataConfig(params.dataset, num_clients=clients, samples_per_client=params.samples_per_client,
                      local_test_size=10)
    train = TrainConfig(epochs=params.local_epochs if local_epochs is None else local_epochs,
                        batch_size=params.batch_size, lr=0.01, mixed_precision=False)
    return ExperimentConfig(algorithm="fedavg", data=data, model=params.model, train=train, rounds=params.rounds,
                            eval_every=1, global_test_size=100, seed=0)


def time_engine(config: ExperimentConfig, workers: int | None) -> dict:
    """Seconds of the first round, mean seconds of the later rounds, and the whole call (start-up
    included) for ``config`` in-process (``workers`` None) or on Flower with ``workers`` Ray workers."""
    if workers is not None:
        return time_on_flower([config], workers)[0]
    start = time.perf_counter()
    outcome = simulate(config, progress=False)
    return timing(outcome, IN_PROCESS, config, time.perf_counter() - start)


def time_on_flower(configs: list[ExperimentConfig], workers: int) -> list[dict]:
    """:func:`time_engine`'s timing of each of ``configs`` (same client count), run one after another
    in one Flower simulation with ``workers`` Ray workers: Ray and Flower start once, and each run's
    whole time counts that start-up (the call's time less the other runs' seconds) and its own run."""
    from ..flower import simulate_on_flower

    start = time.perf_counter()
    outcomes = simulate_on_flower(list(configs), workers=workers)
    for outcome in outcomes:
        if isinstance(outcome, RunDiverged):  # as simulate raises it in-process
            raise outcome
    startup = time.perf_counter() - start - sum(outcome["seconds"] for outcome in outcomes)
    engine = f"flower, {workers} worker{'s' * (workers > 1)}"
    return [timing(outcome, engine, config, startup + outcome["seconds"]) for config, outcome in zip(configs, outcomes)]


def timing(outcome: dict, engine: str, config: ExperimentConfig, total: float) -> dict:
    seconds = [row["seconds"] for row in outcome["history"]]
    return {"engine": engine, "clients": config.data.num_clients, "first_round_s": seconds[0],
            "later_round_s": float(np.mean(seconds[1:])), "total_s": total, "alma": outcome["history"][-1]["alma"]}


def measure(params: Params) -> dict:
    """The page's table (one row per engine and client count), the overhead per message, and the
    machine it was measured on. The overhead's idle run on Flower shares the one-worker simulation
    of the largest client count (one start-up of Ray less)."""
    workers_list, counts = params.worker_counts(), params.client_counts()
    overhead_clients = max(counts) if params.measure_overhead and workers_list else None
    idle = run_config(params, overhead_clients, local_epochs=0) if overhead_clients else None
    rows, idle_flower = [], None
    for clients in counts:
        rows.append(time_engine(run_config(params, clients), None))
        for workers in workers_list:
            shares = idle is not None and clients == overhead_clients and workers == 1
            timed = time_on_flower([run_config(params, clients)] + ([idle] if shares else []), workers)
            rows.append(timed[0])
            if shares:
                idle_flower = timed[1]
    overhead = None
    if idle is not None:
        local, flower = time_engine(idle, None), idle_flower or time_engine(idle, 1)
        messages = 2 * overhead_clients  # a download and an upload per client per round
        overhead = {"clients": overhead_clients, "messages_per_round": messages,
                    "in_process_round_s": local["later_round_s"], "flower_round_s": flower["later_round_s"],
                    "seconds_per_message": (flower["later_round_s"] - local["later_round_s"]) / messages}
    return {"profile": params.profile, "params": asdict(params), "rows": rows, "overhead": overhead,
            "machine": machine()}


def machine() -> dict:
    return {"cpu": device_name(torch.device("cpu")), "cores": os.cpu_count(), "device": device_name(default_device()),
            "torch_threads": torch.get_num_threads(), "measured": time.strftime("%Y-%m-%d")}


def table(measurement: dict) -> pd.DataFrame:
    """The measurement as a table: seconds per round by engine and client count."""
    frame = pd.DataFrame(measurement["rows"])
    return frame.rename(columns={"first_round_s": "first round (s)", "later_round_s": "later rounds (s/round)",
                                 "total_s": "whole run incl. start-up (s)"}).drop(columns="alma")


def summary_text(measurement: dict) -> str:
    """Sentences (a Markdown list) computed from the measurement: per client count, each engine's
    later-round time relative to in-process; then the overhead per message, where measured."""
    frame = pd.DataFrame(measurement["rows"])
    lines = []
    for count, group in frame.groupby("clients"):
        base = group.loc[group.engine == IN_PROCESS, "later_round_s"].iloc[0]
        parts = [f"{row.engine}: {row.later_round_s / base:.2f}×" for row in group.itertuples()
                 if row.engine != IN_PROCESS]
        lines.append(f"- **{count} clients**: in-process {base:.2f} s per round; relative to it, " + "; ".join(parts) + ".")
    overhead = measurement.get("overhead")
    if overhead:
        lines.append(f"- **Overhead per message** (zero local epochs, {overhead['clients']} clients, 1 worker): "
                     f"{overhead['seconds_per_message'] * 1000:.1f} ms ({overhead['flower_round_s']:.2f} s vs "
                     f"{overhead['in_process_round_s']:.2f} s per round of {overhead['messages_per_round']} messages).")
    return "\n".join(lines)


def saved_measurements(root=None) -> list[dict]:
    """Every committed measurement (results/scaling/*.json), oldest first."""
    folder = results_dir(root) / "scaling"
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]


def save_measurement(measurement: dict, root=None) -> Path:
    cpu = re.sub(r"[^a-z0-9]+", "-", measurement["machine"]["cpu"].lower()).strip("-")
    path = results_dir(root) / "scaling" / f"{measurement['profile']}-{cpu}-{measurement['machine']['cores']}cores.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(measurement, indent=1))
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", type=Path, required=True, help="YAML of Params (e.g. notebooks/params/paper/scaling.yaml)")
    args = parser.parse_args(argv)
    params = chapter_params(Params, yaml.safe_load(args.params.read_text()) or {})
    measurement = measure(params)
    print(table(measurement).to_string(index=False))
    print("overhead:", measurement["overhead"])
    print("written to", save_measurement(measurement))


if __name__ == "__main__":
    main()
