"""The ledger computed once per build: each chapter's ledger rows, cached on disk under a key of
everything they read (issue 62 item 2).

A chapter's rows (``module.ledger_rows()``) read the records under the results folder, the
profile yamls, the paper's tables and the code that judges them; nothing else. So the key is a
hash of the results folder's path and of every record's path, size and modification time, and of
the contents of the package's code and data files and the profile yamls. Any change to any of
them gives a new key, and the rows are computed again; otherwise every chapter page, the landing
page and the Claims page of one ``make book`` read the same stored frame instead of each
recomputing it (25-30 s a chapter on a 2-core CPU).

The cache is opt-in: it lives in ``$FEDKD_LEDGER_CACHE`` when that is set (``make book`` sets it
to ``book/_build/ledger_cache``) and is off otherwise, so that a test that patches the code the
rows come from never reads rows its patch did not make. ``python -m fedkd_core.chapters.ledger_cache``
fills it (``make book`` does, before the chapters run side by side).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

import pandas as pd

PACKAGE = Path(__file__).resolve().parents[1]
PARAMS = PACKAGE.parent / "notebooks" / "params"
CODE_SUFFIXES = (".py", ".csv", ".json", ".yaml")


def cache_dir() -> Path | None:
    """Where cached rows are kept; None (no cache) unless ``FEDKD_LEDGER_CACHE`` names a folder."""
    setting = os.environ.get("FEDKD_LEDGER_CACHE", "").strip()
    if not setting or setting.lower() == "off":
        return None
    return Path(setting).expanduser()


def _code_files() -> list[Path]:
    files = [p for p in PACKAGE.rglob("*") if p.suffix in CODE_SUFFIXES and "__pycache__" not in p.parts]
    if PARAMS.is_dir():
        files += list(PARAMS.rglob("*.yaml"))
    return sorted(files)


def inputs_key(chapter: str) -> str:
    """A hash of what ``chapter``'s rows read: the results folder's records (path, size, mtime)
    and the package's code and data files and the profile yamls (contents)."""
    from ..results import results_dir

    digest = hashlib.sha256(chapter.encode())
    results = results_dir()
    digest.update(str(results.resolve()).encode())
    if results.is_dir():
        for path in sorted(results.rglob("*.json")):
            if ".claims" in path.parts:
                continue
            stat = path.stat()
            digest.update(f"{path.relative_to(results)}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    for path in _code_files():
        digest.update(str(path.relative_to(PACKAGE.parent)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def cached(name: str, compute):
    """``compute()``, from the cache when the inputs :func:`inputs_key` hashes are unchanged since
    it was stored under ``name``; stored otherwise."""
    folder = cache_dir()
    if folder is None:
        return compute()
    path = folder / f"{name}-{inputs_key(name)}.pkl"
    if path.exists():
        try:
            return pickle.loads(path.read_bytes())
        except Exception:  # noqa: BLE001 - a damaged cache entry is recomputed, never trusted
            path.unlink(missing_ok=True)
    value = compute()
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, delete=False, suffix=".tmp") as handle:
        handle.write(pickle.dumps(value))
    os.replace(handle.name, path)  # atomic: a page reading at the same time sees all of it or none
    return value


def chapter_rows(module) -> pd.DataFrame:
    """``module.ledger_rows()``, computed once for unchanged inputs (:func:`cached`)."""
    return cached(module.__name__.rsplit(".", 1)[-1], module.ledger_rows)


def main() -> None:
    import time

    from .ledger import ledger

    began = time.perf_counter()
    table = ledger()
    print(f"ledger: {len(table)} claims ready in {time.perf_counter() - began:.0f} s (cache: {cache_dir()})")


if __name__ == "__main__":
    main()
