"""Claim files: how several sweep workers share one grid without running a run twice.

A worker claims a run by creating ``<results>/.claims/<profile>/<key>.claim`` with O_EXCL (one
creator wins, on any POSIX file system), runs it, saves its record, and deletes the claim. A
claim whose worker is gone is *stale*: on the same host, its process no longer exists; from
another host (results on a shared disk), it is older than ``stale_after`` seconds. A stale claim
is taken over by renaming it aside first (a rename succeeds for one worker only), then claiming
afresh.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

DEFAULT_STALE_AFTER = 24 * 3600.0


def claim_path(results_root: Path, profile: str, key: str) -> Path:
    return results_root / ".claims" / profile / f"{key}.claim"


def try_claim(path: Path, stale_after: float = DEFAULT_STALE_AFTER) -> bool:
    """Claim ``path`` for this process; False when a live worker holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if _create(path):
        return True
    if not is_stale(path, stale_after):
        return False
    aside = path.with_name(f"{path.name}.stale-{os.getpid()}-{time.time_ns()}")
    try:
        os.rename(path, aside)  # only one worker's rename of the stale claim succeeds
    except FileNotFoundError:
        return False
    aside.unlink(missing_ok=True)
    return _create(path)


def _create(path: Path) -> bool:
    try:
        handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(handle, "w") as out:
        json.dump({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}, out)
    return True


def release(path: Path) -> None:
    path.unlink(missing_ok=True)


def is_stale(path: Path, stale_after: float = DEFAULT_STALE_AFTER) -> bool:
    """Whether the worker that wrote the claim at ``path`` is gone (see the module docstring)."""
    try:
        age = time.time() - path.stat().st_mtime
        text = path.read_text()
    except FileNotFoundError:
        return False  # released meanwhile: not ours to take over, the run may be done
    try:
        owner = json.loads(text)
    except ValueError:
        return age > 60.0  # being written this instant, or left half-written by a killed worker
    if owner.get("host") == socket.gethostname():
        return not _process_exists(int(owner.get("pid", -1)))
    return age > stale_after


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


def claims_in(results_root: Path, profile: str) -> dict[str, Path]:
    """Key -> claim file of every claim of ``profile``."""
    folder = results_root / ".claims" / profile
    return {p.stem: p for p in folder.glob("*.claim")} if folder.exists() else {}
