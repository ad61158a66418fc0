"""What the verdict pages compute from committed records, computed once per build: each chapter's
ledger rows, the whole ledger, the robustness grids' claim tables, the paper's verdicts under other
assumed run counts, KnFu's tuning finding; cached on disk under a key of everything they read
(issue 62 item 2).

These read the records under the results folder, the profile yamls, the paper's tables and the
code that judges them; nothing else. So the key is a hash of the results folder's path and of
every record's path, size and modification time, and of the contents of the package's code and
data files and the profile yamls. Any change to any of them gives a new key, and the value is
computed again; otherwise every chapter page, the landing page and the Claims page of one
``make book`` read the same stored value instead of each recomputing it (25-30 s a chapter on a
2-core CPU).

The records of :data:`BUILD_PROFILES`, and those of methods outside the package
(:func:`package_algorithms`: the Add-your-method page's runs, under ``custom/``), are left out of
the key: they are what a build writes while it runs (``make book``'s quick grids, the Add-your-method
page's ``compare`` runs under ``custom/``; CI's smoke runs), and no
verdict reads them (the verdicts read the committed profiles' grids, and a lookup takes a paper or
reduced record before a quick one, :data:`fedkd_core.results.PROFILE_PREFERENCE`). Had the key
counted them, a page that writes a record while the others run would change the key in the middle
of the build, and every page after it would compute the ledger again. (What this leaves: a user's
own ``custom/`` run of a committed grid's config that has no committed record yet would be read by
a verdict computed afresh, but not change a cached one until another input changes.)

The cache is opt-in: it lives in ``$FEDKD_LEDGER_CACHE`` when that is set (``make book`` sets it
to ``book/_build/ledger_cache``) and is off otherwise, so that a test that patches the code the
values come from never reads values its patch did not make. ``python -m fedkd_core.chapters.ledger_cache``
fills it (``make book`` does, before the pages that show verdicts run), computing the independent
parts side by side on ``--jobs`` processes (:data:`PARTS`).
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
# Profiles a build writes records of while it runs; no verdict reads them (see the module's text).
# "custom": run_experiment's and compare's default, where the Add-your-method page runs its method
# and the chapter's baselines in the chapter's smoke cells while the verdict pages run.
BUILD_PROFILES = frozenset({"quick", "smoke", "custom"})


def cache_dir() -> Path | None:
    """Where cached values are kept; None (no cache) unless ``FEDKD_LEDGER_CACHE`` names a folder."""
    setting = os.environ.get("FEDKD_LEDGER_CACHE", "").strip()
    if not setting or setting.lower() == "off":
        return None
    return Path(setting).expanduser()


def _code_files() -> list[Path]:
    files = [p for p in PACKAGE.rglob("*") if p.suffix in CODE_SUFFIXES and "__pycache__" not in p.parts]
    if PARAMS.is_dir():
        files += list(PARAMS.rglob("*.yaml"))
    return sorted(files)


def package_algorithms() -> frozenset[str]:
    """The package's own methods: a method registered from a notebook or a user's module (the Add
    your method page's FedAvgM) is in no chapter's grid, so no verdict reads its records."""
    from ..algorithms import ALGORITHMS

    return frozenset(name for name, cls in ALGORITHMS.items() if cls.__module__.startswith(f"{PACKAGE.name}."))


def _read_by_verdicts(relative: Path, package: frozenset[str]) -> bool:
    """Whether a file under the results folder may be read by a verdict: any but a record
    (``<profile>/<algorithm>/<key>.json``) of a method outside the package."""
    return len(relative.parts) != 3 or relative.parts[1] in package


def inputs_key(name: str) -> str:
    """A hash of what the value ``name`` reads: the results folder's records (path, size, mtime;
    those of :data:`BUILD_PROFILES` and of methods outside the package left out) and the package's code and data files and the profile
    yamls (contents)."""
    from ..results import results_dir

    digest = hashlib.sha256(name.encode())
    results = results_dir()
    package = package_algorithms()
    digest.update(str(results.resolve()).encode())
    if results.is_dir():
        for path in sorted(results.rglob("*.json")):
            relative = path.relative_to(results)
            if ".claims" in path.parts or relative.parts[0] in BUILD_PROFILES or not _read_by_verdicts(relative, package):
                continue
            stat = path.stat()
            digest.update(f"{relative}|{stat.st_size}|{stat.st_mtime_ns}".encode())
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


def digest_of(*parts) -> str:
    """A short hash of ``parts``' reprs, for a cached value's name that must tell arguments apart
    (a robustness grid's base profile)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def chapter_rows(module) -> pd.DataFrame:
    """``module.ledger_rows()``, computed once for unchanged inputs (:func:`cached`)."""
    return cached(module.__name__.rsplit(".", 1)[-1], module.ledger_rows)


# --- filling the cache -------------------------------------------------------------------------

def parts() -> list[tuple[str, str]]:
    """The independent parts of what the verdict pages read, longest first (so that the longest
    starts at once when they run side by side): each chapter's ledger rows, each chapter's
    robustness claim table, the paper's verdicts under 2, 3 and 5 assumed runs, KnFu's tuning
    finding. The whole ledger (:func:`~fedkd_core.chapters.ledger.ledger`) is put together from
    them afterwards."""
    from . import CHAPTERS, chapter_module

    names = [name for name in CHAPTERS if hasattr(chapter_module(name), "ledger_rows")
             and name != "claims"]  # "claims" is the ledger itself (fedkd_core.chapters.ledger)
    order = {"fedckd": 0, "knfu": 1, "fedgmkd": 2, "fedua": 3}  # measured: FedCKD's rows take longest
    names.sort(key=lambda name: order.get(name, len(order)))
    robust = [name for name in names if hasattr(chapter_module(name), "ROBUSTNESS")]
    return ([("rows", name) for name in names[:1]] + [("robustness", name) for name in robust]
            + [("rows", name) for name in names[1:]] + [("paper_runs", ""), ("knfu_tuning", "")])


def compute_part(part: tuple[str, str]) -> tuple[str, str, float]:
    """Compute (and so cache) one of :func:`parts`; its name and the seconds it took."""
    import time

    from . import chapter_module

    began = time.perf_counter()
    kind, name = part
    if kind == "rows":
        chapter_rows(chapter_module(name))
    elif kind == "robustness":
        from .robustness import claim_table, grid_of

        module = chapter_module(name)
        grid = grid_of(module)
        claim_table(module, grid.base, enforce_gate=grid.enforce_gate)
    elif kind == "paper_runs":
        from .ledger_pages import paper_runs_table

        paper_runs_table()
    elif kind == "knfu_tuning":
        from .knfu import tuning_finding

        tuning_finding()
    else:
        raise ValueError(f"unknown part {part!r}")
    return kind, name, time.perf_counter() - began


def fill(jobs: int = 1) -> pd.DataFrame:
    """Compute every part (:func:`parts`) on ``jobs`` processes, then the whole ledger from them."""
    import time

    from .ledger import ledger

    todo = parts()
    if jobs > 1 and cache_dir() is not None:  # without a cache, the parts' values would be lost
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # fork: the workers start with the package already imported (a spawned one imports torch again)
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=context) as pool:
            for kind, name, seconds in pool.map(compute_part, todo):
                print(f"ledger cache: {kind} {name} in {seconds:.0f} s".replace("  ", " "), flush=True)
    began = time.perf_counter()
    table = ledger()
    print(f"ledger cache: the whole ledger in {time.perf_counter() - began:.0f} s", flush=True)
    return table


def main(argv: list[str] | None = None) -> None:
    import argparse
    import time

    parser = argparse.ArgumentParser(description="Fill the verdict pages' cache ($FEDKD_LEDGER_CACHE).")
    parser.add_argument("--jobs", type=int, default=1, help="processes computing the parts side by side (default 1)")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    table = fill(max(1, args.jobs))
    print(f"ledger: {len(table)} claims ready in {time.perf_counter() - began:.0f} s (cache: {cache_dir()})")


if __name__ == "__main__":
    main()
