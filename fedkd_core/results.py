"""Run records: one JSON file per run, keyed by a hash of its configuration.

``run_experiment(config)`` returns the stored record when one exists for the config's hash and
otherwise simulates, then writes the record atomically. Records hold the resolved config, the
seed, per-round metrics, per-client accuracies, timings, the device and library versions.

Records are filed by profile: ``<results>/<profile>/<algorithm>/<key>.json``; only
``results/paper/`` is committed. Where records go: ``$FEDKD_RESULTS`` if set; else ``results/`` of the source checkout this
package runs from (so committed paper-profile records are found); else ``~/.cache/fedkd/results``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .experiment import ExperimentConfig, default_device, simulate

# Bump when a change to the code makes earlier records stale; it is part of every key.
RECORD_VERSION = 1


def results_dir(root: str | os.PathLike | None = None) -> Path:
    if root is not None:
        return Path(root).expanduser()
    if "FEDKD_RESULTS" in os.environ:
        return Path(os.environ["FEDKD_RESULTS"]).expanduser()
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "pyproject.toml").exists():
        return checkout / "results"
    return Path("~/.cache/fedkd/results").expanduser()


def config_hash(config: ExperimentConfig) -> str:
    text = json.dumps({"version": RECORD_VERSION, **config.resolved()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunRecord:
    config: dict
    key: str
    history: list
    client_accuracies: list
    timings: dict
    environment: dict
    profile: str

    @property
    def final(self) -> dict:
        return self.history[-1]

    def history_frame(self) -> pd.DataFrame:
        """Per-round metrics (without the per-client lists) as a DataFrame."""
        rows = [{k: v for k, v in row.items() if k != "client_accuracies"} for row in self.history]
        frame = pd.DataFrame(rows)
        frame["algorithm"] = self.config["algorithm"]
        frame["seed"] = self.config["seed"]
        frame["dataset"] = self.config["data"]["dataset"]
        frame["alpha"] = self.config["data"]["alpha"]
        frame["profile"] = self.profile
        return frame


# Records live under <results>/<profile>/<algorithm>/<key>.json. A lookup takes the first
# profile in this order that holds the key, so a finished paper-profile run always wins.
PROFILE_PREFERENCE = ("paper", "quick", "smoke", "custom")


def record_path(config: ExperimentConfig, profile: str, root=None) -> Path:
    return results_dir(root) / profile / config.algorithm / f"{config_hash(config)}.json"


def load_record(config: ExperimentConfig, root=None) -> RunRecord | None:
    """The stored record of ``config`` under any profile (paper first), or None."""
    base = results_dir(root)
    key = config_hash(config)
    found = sorted(base.glob(f"*/{config.algorithm}/{key}.json"), key=_profile_rank)
    return RunRecord(**json.loads(found[0].read_text())) if found else None


def _profile_rank(path: Path) -> int:
    profile = path.parent.parent.name
    return PROFILE_PREFERENCE.index(profile) if profile in PROFILE_PREFERENCE else len(PROFILE_PREFERENCE)


def save_record(record: RunRecord, root=None) -> Path:
    """Write atomically: a temporary file in the same folder, then a rename."""
    path = results_dir(root) / record.profile / record.config["algorithm"] / f"{record.key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as handle:
        json.dump(record.__dict__, handle, indent=1)
    os.chmod(handle.name, 0o644)  # NamedTemporaryFile creates 0600; records are for everyone
    os.replace(handle.name, path)
    return path


def environment() -> dict:
    import torchvision

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "numpy": np.__version__,
        "device": str(default_device()),
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
    }


def run_experiment(config: ExperimentConfig, *, root=None, use_cache: bool = True,
                   profile: str = "custom", progress: bool = True, data=None) -> RunRecord:
    """The record of ``config``: loaded when stored (and ``use_cache``), else simulated and saved."""
    if use_cache and (stored := load_record(config, root)) is not None:
        return stored
    start = time.perf_counter()
    outcome = simulate(config, data=data, progress=progress)
    record = RunRecord(
        config=config.resolved(),
        key=config_hash(config),
        history=outcome["history"],
        client_accuracies=outcome["client_accuracies"],
        timings={"total_seconds": time.perf_counter() - start,
                 **outcome["totals"],  # train seconds and bytes over every round, evaluated or not
                 "finished": time.strftime("%Y-%m-%dT%H:%M:%S")},
        environment=environment(),
        profile=profile,
    )
    save_record(record, root)
    return record


def history_table(records: list[RunRecord]) -> pd.DataFrame:
    """All records' per-round metrics in one long DataFrame."""
    return pd.concat([r.history_frame() for r in records], ignore_index=True)
