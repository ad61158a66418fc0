"""Leases on runs: how several sweep workers share one grid without running a run twice.

A lease is a *claim file* (not to be confused with the papers' claims, judged by
``fedkd_core.chapters.ledger``); the files keep their name and folder, ``.claims/``, so that
sweeps of older code and newer code share a results folder.

A worker claims a run by creating ``<results>/.claims/<profile>/<key>.claim`` with O_EXCL (one
creator wins, on any POSIX file system), runs it, saves its record, and deletes the claim. A
claim whose worker is gone is *stale*: on the same host, its process no longer exists or its pid
now belongs to a process started at another time (pids are reused after a restart). From another
host (results on a shared disk) no process can be checked, so a claim carries a heartbeat: while
its run goes on, the worker touches the claim every ``heartbeat`` seconds (:class:`Heartbeat`, a
thread), and the claim is stale once :data:`MISSED_BEATS` beats in a row are missing (5 minutes by
default, rather than the 24 hours a claim without a heartbeat, written by older code, is given).
Hosts judge the age of a claim by its modification time against their own clock, so the hosts
that share a results folder need clocks that agree to well within that (NTP). A stale claim is
taken over by renaming it aside (a rename succeeds for one worker only) and checking that what
was renamed is still the claim judged stale, then claiming afresh.

A run's key is its config's hash, whatever profile a sweep files it under, and two profiles may
share runs (FedGMKD's 50-round robustness grid, profile ``robustness``, shares its reading's runs
with the 50-round rerun, profile ``reduced``). So a worker that wins its own profile's claim also
yields to a live claim of the same key under another profile (:func:`yields_to_another`: the
earlier claim keeps the run), and takes over the checkpoint another profile's stale worker left
(:func:`adopt_state`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

DEFAULT_STALE_AFTER = 24 * 3600.0  # a claim from another host that carries no heartbeat (older code)
HEARTBEAT_SECONDS = 60.0  # how often a worker touches the claims it holds
MISSED_BEATS = 5  # a claim from another host whose last beat is older than this many beats is stale


def claim_path(results_root: Path, profile: str, key: str) -> Path:
    return results_root / ".claims" / profile / f"{key}.claim"


def state_path(results_root: Path, profile: str, key: str) -> Path:
    """Where a run in progress keeps its checkpoint (fedkd_core.checkpoint): beside its claim."""
    return results_root / ".claims" / profile / f"{key}.state"


def try_claim(path: Path, stale_after: float = DEFAULT_STALE_AFTER, heartbeat: float = HEARTBEAT_SECONDS) -> bool:
    """Claim ``path`` for this process, promising to touch it every ``heartbeat`` seconds while it
    holds it (:class:`Heartbeat`); False when a live worker holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if _create(path, heartbeat):
        return True
    try:
        judged = path.read_text()
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return _create(path, heartbeat)  # released meanwhile
    if not _is_stale(judged, age, stale_after):
        return False
    aside = path.with_name(f"{path.name}.stale-{os.getpid()}-{time.time_ns()}")
    try:
        os.rename(path, aside)  # only one worker's rename of the stale claim succeeds
    except FileNotFoundError:
        return False
    if aside.read_text() != judged:  # another worker took the stale claim over first: give it back
        try:
            os.link(aside, path)
        except FileExistsError:
            pass
        aside.unlink(missing_ok=True)
        return False
    aside.unlink(missing_ok=True)
    return _create(path, heartbeat)


def _create(path: Path, heartbeat: float = HEARTBEAT_SECONDS) -> bool:
    try:
        handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(handle, "w") as out:
        json.dump({**_this_process(), "heartbeat": heartbeat}, out)
    return True


def _this_process() -> dict:
    pid = os.getpid()
    return {"pid": pid, "process_start": _process_start(pid), "host": socket.gethostname(), "started": time.time()}


class Heartbeat:
    """Touches every claim it holds each ``every`` seconds from a daemon thread, so that workers
    on other hosts see the claims' runs are alive (:func:`is_stale`). Use as a context manager;
    :meth:`add` a claim once taken and :meth:`discard` it once released. A claim that has gone
    (released, or taken over and renamed aside) is dropped, never re-created."""

    def __init__(self, every: float = HEARTBEAT_SECONDS):
        self.every = every
        self._held: set[Path] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="claim-heartbeat", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def add(self, path: Path) -> None:
        with self._lock:
            self._held.add(path)

    def discard(self, path: Path) -> None:
        with self._lock:
            self._held.discard(path)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            with self._lock:
                held = list(self._held)
            for path in held:
                try:
                    os.utime(path)
                except FileNotFoundError:
                    self.discard(path)


def release(path: Path) -> None:
    """Delete the claim at ``path`` if this process holds it (never another worker's)."""
    try:
        owner = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return
    if owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
        path.unlink(missing_ok=True)


def is_stale(path: Path, stale_after: float = DEFAULT_STALE_AFTER) -> bool:
    """Whether the worker that wrote the claim at ``path`` is gone (see the module docstring)."""
    try:
        age = time.time() - path.stat().st_mtime
        text = path.read_text()
    except FileNotFoundError:
        return False  # released meanwhile: not ours to take over, the run may be done
    return _is_stale(text, age, stale_after)


def _is_stale(text: str, age: float, stale_after: float) -> bool:
    try:
        owner = json.loads(text)
    except ValueError:
        return age > 60.0  # being written this instant, or left half-written by a killed worker
    if owner.get("host") == socket.gethostname():
        pid = int(owner.get("pid", -1))
        # The process is gone, or its pid now belongs to another process (a restarted container).
        return not _process_exists(pid) or owner.get("process_start") != _process_start(pid)
    beat = owner.get("heartbeat")
    return age > (MISSED_BEATS * float(beat) if beat else stale_after)


def _process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19])  # field 22 of stat; the first two (pid, comm) are before ")"
    except (OSError, IndexError, ValueError):
        return None


def _process_exists(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def live_claims_of(results_root: Path, key: str) -> list[Path]:
    """The claim files of ``key`` under every profile whose worker is alive (not :func:`is_stale`)."""
    return [path for path in sorted((results_root / ".claims").glob(f"*/{key}.claim")) if not is_stale(path)]


def saved_states_of(results_root: Path, key: str) -> list[Path]:
    """The checkpoints of ``key`` that a worker of any profile saved (:func:`state_path`)."""
    return sorted((results_root / ".claims").glob(f"*/{key}.state"))


def yields_to_another(results_root: Path, profile: str, key: str) -> bool:
    """Whether this process, holding ``profile``'s claim of ``key``, must give the run up to a live
    claim of the same key under another profile: the claim started first keeps it (the profile's
    name breaks a tie), so of two sweeps that claim it at once exactly one runs it."""
    def order(path: Path) -> tuple:
        try:
            return float(json.loads(path.read_text()).get("started", 0.0)), path.parent.name
        except (FileNotFoundError, ValueError):
            return float("inf"), path.parent.name  # released, or being written: not ahead of ours

    ours = claim_path(results_root, profile, key)
    others = [path for path in live_claims_of(results_root, key) if path.parent.name != profile]
    return any(order(path) < order(ours) for path in others)


def adopt_state(results_root: Path, profile: str, key: str) -> bool:
    """Move the checkpoint that a worker of another profile left for ``key`` (it stopped, its claim
    is gone or stale) beside this profile's claim, so that the run resumes from it instead of
    round 1; the same config is the same run whatever its profile. True if one was moved."""
    own = state_path(results_root, profile, key)
    if own.exists():
        return False
    for other in saved_states_of(results_root, key):
        if other.parent.name != profile and other.with_suffix(".claim") not in live_claims_of(results_root, key):
            own.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(other, own)
            except FileNotFoundError:  # taken by another worker meanwhile
                continue
            return True
    return False
