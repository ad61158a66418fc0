"""The smoke book of a test session: where its chapters run, and the chapters nbval executed.

``make test`` runs every chapter twice over if nbval executes it (the README's promise: nbval runs
every chapter) and the browser check then executes it again for the book it opens. Instead, each
chapter runs once per session: nbval's kernel for a chapter runs in the book's environment (this
module's :func:`environment`: the committed records, as ``make book`` reads them, and one ledger
cache), the root ``conftest.py`` writes the executed notebook (each cell's outputs as nbval
received them) into :func:`executed_dir`, and ``tests/test_book_browser.py`` builds the book from
those notebooks, executing with papermill only the chapters nbval did not run in this session (all
of them when the book's file runs alone). nbval, the notebooks and the book's file are one xdist
unit of work (``tests/conftest.py``: ``work_unit``), so they share a worker, nbval's cells first.

    folder/results/<profile>   links to the checkout's committed records (read, never written)
    folder/results/smoke, custom   links to folder/own_runs/...: the runs the chapters make
    folder/ledger_cache        the verdicts computed once for every chapter (FEDKD_LEDGER_CACHE)
    folder/executed/<chapter>.ipynb   the chapters nbval executed, every cell passed
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ("paper", "reduced", "robustness", "tuning", "superseded")
# The profiles the chapters' own smoke runs are filed under. The ledger cache's key hashes the
# records under the results folder, less these (fedkd_core.chapters.ledger_cache.BUILD_PROFILES);
# their folders are links as well, which the key's walk does not enter either.
OWN_RUNS = ("smoke", "custom")
FOLDER = pytest.StashKey[Path]()


def session_folder(config: pytest.Config) -> Path:
    """This session's smoke-book folder (made on first use, one per pytest process)."""
    if FOLDER not in config.stash:
        config.stash[FOLDER] = Path(tempfile.mkdtemp(prefix="fedkd-smoke-book-"))
    return config.stash[FOLDER]


def environment(folder: Path) -> dict[str, str]:
    """The variables a chapter of the smoke book runs under: its records read from (links to) the
    committed ones, its own runs written under ``folder``, the ledger cached in ``folder`` (or where
    ``FEDKD_LEDGER_CACHE`` already points). The folders are made on first call."""
    results = folder / "results"
    if not results.exists():
        results.mkdir(parents=True)
        for name in COMMITTED:
            if (ROOT / "results" / name).is_dir():
                (results / name).symlink_to(ROOT / "results" / name, target_is_directory=True)
        for name in OWN_RUNS:
            (folder / "own_runs" / name).mkdir(parents=True)
            (results / name).symlink_to(folder / "own_runs" / name, target_is_directory=True)
    return {"FEDKD_RESULTS": str(results),
            "FEDKD_LEDGER_CACHE": os.environ.get("FEDKD_LEDGER_CACHE") or str(folder / "ledger_cache")}


@contextmanager
def within(folder: Path):
    """This process's environment set to :func:`environment` (what the kernels and processes it
    starts inherit), and restored on leaving."""
    env = environment(folder)
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def executed_dir(folder: Path) -> Path:
    return folder / "executed"
