"""Run records: one JSON file per run, keyed by a hash of its configuration.

``run_experiment(config)`` returns the stored record when one exists for the config's hash and
otherwise simulates, then writes the record atomically. Records hold the resolved config, the
seed, per-round metrics, per-client accuracies, timings, the device and library versions.
A run that diverges leaves a :class:`Divergence` (``<key>.diverged.json``) instead of a record.

Records are filed by profile: ``<results>/<profile>/<algorithm>/<key>.json``; only
``results/paper/`` is committed. Where records go: ``$FEDKD_RESULTS`` if set; else ``results/`` of the source checkout this
package runs from (so committed paper-profile records are found); else ``~/.cache/fedkd/results``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .algorithms import ALGORITHMS
from .checkpoint import DEFAULT_EVERY_SECONDS, Checkpoints
from .leases import state_path
from .cpuinfo import CPUINFO, cpu_description
from .experiment import ExperimentConfig, RunDiverged, default_device, simulate
from .precision import execution_settings, precision_name, use_bf16
from .randomness import MASK_GENERATOR

# Bump when a change to the code makes earlier records stale; it is part of every key.
RECORD_VERSION = 2  # 2: randomness per (seed, round, party), fedkd_core.randomness


# The folder above this package: a source checkout when it holds a pyproject.toml.
CHECKOUT = Path(__file__).resolve().parents[1]


def results_dir(root: str | os.PathLike | None = None) -> Path:
    if root is not None:
        return Path(root).expanduser()
    if os.environ.get("FEDKD_RESULTS"):  # set and not empty (an empty one would mean the working directory)
        return Path(os.environ["FEDKD_RESULTS"]).expanduser()
    if (CHECKOUT / "pyproject.toml").exists():
        return CHECKOUT / "results"
    return Path("~/.cache/fedkd/results").expanduser()


# Settings that say how a run executes, not what it computes, as the device and the thread count
# do: each record stores what was used (environment "precision", "device", "threads"), and the key
# leaves them out, so a record made in bf16 on one machine serves a reader whose CPU runs fp32.
EXECUTION_SETTINGS = (("train", "mixed_precision"),)


# Fields added to a config after records were made, with the value that reproduces the runs made
# before them. At that value the key leaves the field out, so every committed record keeps its key;
# any other value is a different run with its own key. (section, name): value.
ADDED_FIELDS = {
    ("train", "drop_last"): False,
    ("train", "lr_decay_at"): [],
    ("train", "lr_decay_factor"): 0.1,
    ("train", "max_grad_norm"): None,  # gradient clipping, a labelled deviation (issue 60)
    ("algorithm_params", "personal"): "global",
    ("algorithm_params", "optimizer_state"): "fresh",
    ("algorithm_params", "digest_lr"): None,
    ("algorithm_params", "revisit_epochs"): 0,
    ("algorithm_params", "mixture_backend"): "sklearn",  # FedGMKD's mixture fits (fedkd_core.mixture)
    ("data", "validation_fraction"): 0.0,
}


def outcome_fields(config: dict) -> dict:
    """A copy of a (resolved or stored) config without its :data:`EXECUTION_SETTINGS`, and without
    the :data:`ADDED_FIELDS` that hold their original value: what decides the run's outcome."""
    fields = json.loads(json.dumps(config))  # a deep copy that is plain JSON data
    for section, name in EXECUTION_SETTINGS:
        fields.get(section, {}).pop(name, None)
    for (section, name), original in ADDED_FIELDS.items():
        section_fields = fields.get(section, {})
        if name in section_fields and section_fields[name] == original:
            del section_fields[name]
    return fields


def key_of(resolved: dict) -> str:
    """The record key of a resolved config (``ExperimentConfig.resolved()``)."""
    text = json.dumps({"version": RECORD_VERSION, **outcome_fields(resolved)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def config_hash(config: ExperimentConfig) -> str:
    """The record key of ``config``, computed once per process for each config (by its repr, and
    the algorithm class whose defaults fill its params in): a grid's configs are keyed again and
    again by every table that looks up their records."""
    memo = (repr(config), ALGORITHMS.get(config.algorithm))
    if memo not in _CONFIG_KEYS:
        _CONFIG_KEYS[memo] = key_of(config.resolved())
    return _CONFIG_KEYS[memo]


# config_hash's memo: (repr of a config, its algorithm's class) -> the config's record key.
_CONFIG_KEYS: dict[tuple, str] = {}


@dataclass(frozen=True)
class RunRecord:
    """A finished run as stored. :func:`read_record` hands the same object to every reader of a
    file in a process: read it, build from it, never change its lists or dicts in place."""

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
PROFILE_PREFERENCE = ("paper", "reduced", "quick", "smoke", "custom")


RECORD_SUFFIX = ".json"
DIVERGED_SUFFIX = ".diverged.json"  # a run that diverged (:class:`Divergence`), beside where its record would be


def filed_path(root, profile: str, algorithm: str, key: str, suffix: str = RECORD_SUFFIX) -> Path:
    """``<results>/<profile>/<algorithm>/<key><suffix>``: where a run's file is filed."""
    return results_dir(root) / profile / algorithm / f"{key}{suffix}"


def stored_paths(config: ExperimentConfig, suffix: str = RECORD_SUFFIX, root=None) -> list[Path]:
    """The files of ``config`` ending in ``suffix`` under every profile, in :data:`PROFILE_PREFERENCE` order."""
    return key_paths(config.algorithm, config_hash(config), suffix, root)


def key_paths(algorithm: str, key: str, suffix: str = RECORD_SUFFIX, root=None) -> list[Path]:
    """:func:`stored_paths` of the run filed as ``algorithm`` / ``key``: ``<profile>/<algorithm>/<key><suffix>``
    under each folder of the results folder that has it (a glob's matches, without its machinery)."""
    folder = results_dir(root)
    found = [folder / profile / algorithm / f"{key}{suffix}" for profile in _profile_folders(folder)
             if os.path.exists(os.path.join(folder, profile, algorithm, f"{key}{suffix}"))]
    return sorted(found, key=_profile_rank)


def _profile_folders(folder: Path) -> list[str]:
    """The names of the entries of the results folder ``folder`` (none where it is missing)."""
    try:
        with os.scandir(folder) as entries:
            return [entry.name for entry in entries if not entry.name.startswith(".")]  # as glob's "*"
    except (FileNotFoundError, NotADirectoryError):
        return []


def record_path(config: ExperimentConfig, profile: str, root=None) -> Path:
    return filed_path(root, profile, config.algorithm, config_hash(config))


def load_record(config: ExperimentConfig, root=None) -> RunRecord | None:
    """The stored record of ``config`` under any profile (paper first), or None."""
    found = stored_paths(config, root=root)
    return read_record(found[0]) if found else None


def stored_records(configs, root=None) -> list[RunRecord]:
    """The stored records of ``configs`` that have one (see :func:`load_record`; nothing is run)."""
    found = [load_record(config, root) for config in configs]
    return [record for record in found if record is not None]


class RecordError(ValueError):
    """A stored record that cannot be read back."""


def read_record(path: Path) -> RunRecord:
    """The record stored at ``path``; a RecordError naming the file and the way out when it cannot
    be read or is incomplete (:func:`missing_parts`): such a record never counts as a finished run.
    The file is read every time, and parsed again only when its text changed since this process
    last parsed it (:data:`_READ_RECORDS`): the ledger reads each committed record many times."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise _unreadable(path, error) from error
    digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
    known = _READ_RECORDS.get(str(path))
    if known is not None and known[0] == digest:
        return known[1]
    record = _parsed_record(path, text)
    _READ_RECORDS[str(path)] = (digest, record)
    return record


# read_record's memo: path -> a digest of the file's text and the record parsed from it (the
# digest, not the text, is kept: 16 bytes instead of ~26 kB a record). A record is shared by every
# reader of it, and no reader changes a record (they build tables from it; see RunRecord).
_READ_RECORDS: dict[str, tuple[bytes, RunRecord]] = {}


def _unreadable(path: Path, error: Exception) -> RecordError:
    return RecordError(
        f"results record {path} cannot be read ({type(error).__name__}: {error}). It may be "
        "truncated, hand-edited or hold merge-conflict markers. Restore it (for a committed "
        f"record: git checkout -- {path}) or delete it to run that experiment again.")


def _parsed_record(path: Path, text: str) -> RunRecord:
    """The record that the text of the file at ``path`` holds (see :func:`read_record`)."""
    try:
        record = RunRecord(**json.loads(text))
    except (json.JSONDecodeError, TypeError) as error:
        raise _unreadable(path, error) from error
    if missing := missing_parts(record):
        raise RecordError(f"results record {path} is incomplete: {missing}. Restore it (for a committed record: "
                          f"git checkout -- {path}) or delete it to run that experiment again.")
    return record


def missing_parts(record: RunRecord) -> str:
    """What a finished run's record lacks ("" when nothing): a history whose rows have a round and
    an ALMA, and the run's total seconds."""
    if not isinstance(record.history, list) or not record.history:
        return "its history is empty (no round was recorded)"
    if not all(isinstance(row, dict) and {"round", "alma"} <= row.keys() for row in record.history):
        return "a row of its history lacks 'round' or 'alma'"
    if not isinstance(record.timings, dict) or "total_seconds" not in record.timings:
        return "its timings lack 'total_seconds'"
    return ""


def _profile_rank(path: Path) -> int:
    profile = path.parent.parent.name
    return PROFILE_PREFERENCE.index(profile) if profile in PROFILE_PREFERENCE else len(PROFILE_PREFERENCE)


def save_record(record: RunRecord, root=None) -> Path:
    """Write to ``<results>/<profile>/<algorithm>/<key>.json`` (see :func:`write_record`)."""
    return write_record(record, filed_path(root, record.profile, record.config["algorithm"], record.key))


def write_record(record, path: Path) -> Path:
    """Write atomically: a temporary file in the same folder, then a rename. When that fails (a
    read-only or full disk), the record goes to a fallback folder (:data:`FALLBACK_FOLDERS`) and
    a :class:`RecordNotSaved` names both places: a finished run is never lost."""
    try:
        return _write_atomically(record, path)
    except OSError as error:
        fallback = _write_fallback(record, path)
        raise RecordNotSaved(
            f"could not write the record {path} ({type(error).__name__}: {error}). "
            + (f"The finished run is safe in {fallback}: once {path.parent} is writable, move it there "
               f"(mkdir -p {path.parent} && mv {fallback} {path})." if fallback else
               f"No fallback folder ({', '.join(map(str, FALLBACK_FOLDERS))}) was writable either: the run is lost.")
        ) from error


def _write_atomically(record, path: Path) -> Path:
    return write_json_atomically(record.__dict__, path)


def write_json_atomically(data: dict, path: Path) -> Path:
    """``data`` as JSON at ``path``: a temporary file in the same folder, then a rename, so a reader
    sees all of it or none; readable by everyone, and no temporary file left behind on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False)
    try:
        with handle:
            json.dump(data, handle, indent=1)
        os.chmod(handle.name, 0o644)  # NamedTemporaryFile creates 0600; records are for everyone
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)  # no half-written temporary file is left behind
        raise
    return path


class RecordNotSaved(OSError):
    """A finished run whose record could not be written where it belongs (the message says where it went)."""


# Where a record goes when its own folder cannot take it, first writable one wins (the record
# keeps its <profile>/<algorithm>/<key>.json below it).
FALLBACK_FOLDERS = (Path("~/.cache/fedkd/unsaved-records").expanduser(),
                    Path(tempfile.gettempdir()) / "fedkd-unsaved-records")


def _write_fallback(record, path: Path) -> Path | None:
    for folder in FALLBACK_FOLDERS:
        try:
            return _write_atomically(record, folder.joinpath(*path.parts[-3:]))
        except OSError:
            continue
    return None


# A record takes kilobytes; a checkpoint of a run's models, optimisers and history a few MB.
# Less free space than this before a run starts is refused rather than found out at its end.
MIN_FREE_BYTES = 64 * 2**20


class ResultsNotWritable(OSError):
    """The folder a run's record would go to cannot take it (the message says why and what to do)."""


def check_writable(folder: Path, min_free: int = MIN_FREE_BYTES) -> None:
    """Before a run trains: ``folder`` (created if missing) takes a file, and its disk has at
    least ``min_free`` bytes free; a :class:`ResultsNotWritable` naming it and the fix otherwise."""
    fix = ("make it writable, or point FEDKD_RESULTS at a folder that is (FEDKD_RESULTS=/path/to/results); "
           "nothing was run")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as error:
        raise ResultsNotWritable(f"results folder {folder} cannot be written ({type(error).__name__}: {error}): "
                                 f"{fix}") from error
    free = shutil.disk_usage(folder).free
    if free < min_free:
        raise ResultsNotWritable(f"results folder {folder} is on a disk with {free / 2**20:.0f} MiB free, less "
                                 f"than the {min_free / 2**20:.0f} MiB a run's record and checkpoints may need: "
                                 f"free some space, or {fix}")


def environment(device: torch.device, bf16: bool) -> dict:
    """Where and how a run executed: versions, device and its model, threads, precision, and the
    settings that make a GPU run reproducible (:func:`~fedkd_core.precision.execution_settings`)."""
    import torchvision

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "numpy": np.__version__,
        "device": str(device),
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "precision": precision_name(bf16),
        **execution_settings(device),
        "machine": platform.machine(),
        # which generator drew the dropout masks (fedkd_core.randomness.mask_generator_of reads
        # it; a record without it predates host-drawn masks)
        "mask_generator": MASK_GENERATOR,
    }


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's as :func:`cpu_description` gives it from /proc/cpuinfo."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        return cpu_description(CPUINFO.read_text())
    except (OSError, ValueError):
        return platform.processor() or platform.machine()


def on_gpu(run) -> bool:
    """Whether a record or divergence ran on a CUDA device (its ``environment``; CPU where unsaid)."""
    return str(run.environment.get("device", "cpu")).startswith("cuda")


def record_precision(record: RunRecord) -> str:
    """The precision a record ran in (records from before it was stored: the setting they forced),
    with " on GPU" for a run on a CUDA device, so every chapter table's ``precision`` column tells
    GPU records from CPU ones (the committed ones are all CPU, fp32)."""
    precision = record.environment.get("precision") or precision_name(record.config["train"].get("mixed_precision") is True)
    return f"{precision} on GPU" if on_gpu(record) else precision


def outcome_record(config: ExperimentConfig, outcome: dict, seconds: float, device: torch.device, profile: str,
                   engine: str | None = None) -> RunRecord:
    """The record of a run of ``config`` that ``experiment.simulate`` (or another engine, named
    in ``environment.engine``) returned as ``outcome`` after ``seconds``."""
    env = environment(device, use_bf16(config.train.mixed_precision, device))
    resumed = {"resumed_after_round": outcome["resumed_after_round"]} if "resumed_after_round" in outcome else {}
    return RunRecord(
        config=config.resolved(),
        key=config_hash(config),
        history=outcome["history"],
        client_accuracies=outcome["client_accuracies"],
        timings={"total_seconds": seconds + outcome.get("seconds_before", 0.0),  # every session of a resumed run
                 **outcome["totals"],  # train seconds and bytes over every round, evaluated or not
                 **resumed,
                 "finished": time.strftime("%Y-%m-%dT%H:%M:%S")},
        environment={**env, "engine": engine} if engine else env,
        profile=profile,
    )


def run_experiment(config: ExperimentConfig, *, root=None, use_cache: bool = True,
                   profile: str = "custom", progress: bool = True, data=None,
                   checkpoint_every: float = DEFAULT_EVERY_SECONDS, on_round=None) -> RunRecord:
    """The record of ``config``: loaded when stored (and ``use_cache``), else simulated and saved.
    ``on_round(round_index, rounds)`` is told of each round simulated (``simulate``).

    A run that diverges is a result too: its :class:`Divergence` is saved beside the records and
    :class:`RunDiverged` raised, now and (with ``use_cache``) whenever the config is asked for
    again, without running it again.

    A run saves its state every ``checkpoint_every`` seconds beside its claim (fedkd_core.checkpoint);
    asked for again after an interruption, it resumes from there with the numbers an uninterrupted
    run gives. The state is deleted once the record (or divergence) is written.
    """
    if use_cache and (stored := load_record(config, root)) is not None:
        return stored
    if use_cache and (diverged := load_divergence(config, root)) is not None:
        raise RunDiverged(f"{diverged.error} (stored: {divergence_path(config, diverged.profile, root)}; "
                          "delete that file to run it again)", diverged.round, diverged.history)
    check_writable(record_path(config, profile, root).parent)
    checkpoints = Checkpoints(state_path(results_dir(root), profile, config_hash(config)), config_hash(config),
                              checkpoint_every)
    start = time.perf_counter()
    device = default_device()
    try:
        outcome = simulate(config, data=data, device=device, progress=progress, checkpoints=checkpoints,
                           on_round=on_round)
    except RunDiverged as error:
        save_divergence(divergence_of(config, error, time.perf_counter() - start, device, profile), root)
        checkpoints.delete()
        raise
    record = outcome_record(config, outcome, time.perf_counter() - start, device, profile)
    file_record(record, root)
    checkpoints.delete()
    return record


def file_record(record: RunRecord, root=None) -> Path:
    """Save ``record`` and delete any stored divergence of its run (a rerun, or a run on
    another engine or machine, that finished: the record stands alone)."""
    path = save_record(record, root)
    forget_divergences(record.config["algorithm"], record.key, root)
    return path


def run_grid(configs, *, root=None, profile: str = "custom", progress: bool = True) -> list[RunRecord]:
    """The records of ``configs`` (:func:`run_experiment` each, in order). A run that diverges is
    left out, and a line says so, so that a chapter goes on with the rest: its tables then count
    the runs they have (seeds, cells), and the stored divergence says what happened."""
    records = []
    for config in configs:
        try:
            records.append(run_experiment(config, root=root, profile=profile, progress=progress))
        except RunDiverged as diverged:
            print(f"left out: {config.algorithm} (seed {config.seed}) diverged in round {diverged.round_index}: {diverged}")
    return records


# --- runs that diverged ---------------------------------------------------------------------------
# A diverged run is stored as <results>/<profile>/<algorithm>/<key>.diverged.json, beside where its
# record would be: load_record never reads it, so no table takes the accuracy of NaN weights.

@dataclass(frozen=True)
class Divergence:
    """A run whose training loss or weights became non-finite in ``round``: its config, the
    error, the rounds evaluated before it and where it ran."""

    config: dict
    key: str
    round: int
    error: str
    history: list
    timings: dict
    environment: dict
    profile: str

    @property
    def algorithm(self) -> str:
        return self.config["algorithm"]


def divergence_path(config: ExperimentConfig, profile: str, root=None) -> Path:
    return filed_path(root, profile, config.algorithm, config_hash(config), DIVERGED_SUFFIX)


def divergence_of(config: ExperimentConfig, error: RunDiverged, seconds: float, device: torch.device,
                  profile: str, engine: str | None = None) -> Divergence:
    """The :class:`Divergence` of a run of ``config`` that raised ``error`` after ``seconds``
    (on another engine than in-process: named in ``environment.engine``, as in a record)."""
    env = environment(device, use_bf16(config.train.mixed_precision, device))
    return Divergence(config=config.resolved(), key=config_hash(config), round=error.round_index, error=str(error),
                      history=error.history, timings={"total_seconds": seconds,
                                                      "finished": time.strftime("%Y-%m-%dT%H:%M:%S")},
                      environment={**env, "engine": engine} if engine else env, profile=profile)


def save_divergence(divergence: Divergence, root=None) -> Path:
    return write_record(divergence, filed_path(root, divergence.profile, divergence.algorithm, divergence.key,
                                               DIVERGED_SUFFIX))


def forget_divergences(algorithm: str, key: str, root=None) -> None:
    """Delete the stored divergences of the run ``algorithm`` / ``key`` (it has since finished: a record wins)."""
    for path in key_paths(algorithm, key, DIVERGED_SUFFIX, root):
        path.unlink(missing_ok=True)


def load_divergence(config: ExperimentConfig, root=None) -> Divergence | None:
    """The stored divergence of ``config`` under any profile (paper first), or None."""
    found = stored_paths(config, DIVERGED_SUFFIX, root)
    return read_divergence(found[0]) if found else None


def read_divergence(path: Path) -> Divergence:
    """The divergence stored at ``path``; a RecordError naming the file where it cannot be read."""
    try:
        return Divergence(**json.loads(Path(path).read_text()))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, TypeError) as error:
        raise RecordError(f"divergence record {path} cannot be read ({type(error).__name__}: {error}); "
                          "restore it or delete it to run that experiment again") from error


def stored_divergences(configs, root=None) -> list[Divergence]:
    """The stored divergences of ``configs`` that have one and no record (nothing is run)."""
    found = [load_divergence(config, root) for config in configs if not stored_paths(config, root=root)]
    return [divergence for divergence in found if divergence is not None]


def finished_runs(configs, records, root=None) -> int:
    """How many distinct runs of ``configs`` are finished: ``records`` (their stored records) and
    the divergences stored under ``root`` (a diverged run has no accuracy, and is finished). A run
    counts once however often it comes (FedCKD's γ = 0.99 runs are in two of its grids)."""
    planned = {config_hash(config): config for config in configs}
    done = {record.key for record in records} & set(planned)
    return len(done) + len({d.key for d in stored_divergences(planned.values(), root)})


def planned_runs(configs) -> int:
    """How many distinct runs ``configs`` plan (a config met twice is one run)."""
    return len({config_hash(config) for config in configs})


def every_run_finished(configs, records, root=None) -> bool:
    """Whether every run of ``configs`` is finished (:func:`finished_runs`): a sweep's verdicts
    move onto its runs only then, never onto the seeds or cells it reached first."""
    configs = list(configs)
    return finished_runs(configs, records, root) == planned_runs(configs)


def is_finished(config: ExperimentConfig, root=None) -> bool:
    """Whether ``config`` has run to its end: a stored record, or a stored divergence."""
    return load_record(config, root) is not None or load_divergence(config, root) is not None


def history_table(records: list[RunRecord]) -> pd.DataFrame:
    """All records' per-round metrics in one long DataFrame."""
    return pd.concat([r.history_frame() for r in records], ignore_index=True)
