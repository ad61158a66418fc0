"""Run a chapter's whole grid, resumably: finished runs are skipped, new ones saved at once.

    python -m fedkd_core.sweep CHAPTER --params notebooks/params/paper/CHAPTER.yaml [--dry-run]

Records go to ``<results>/<profile>/<algorithm>/<key>.json`` (see fedkd_core.results); stop
it at any time and run the same command again to continue where it stopped. On a machine with
spare cores, a second process with ``--reverse`` works through the grid from the other end.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml
from tqdm import tqdm

from .chapters import chapter_module
from .results import load_record, run_experiment


def describe(config) -> str:
    """One line naming what distinguishes a run within a sweep."""
    data = config.data
    size = f" n={data.samples_per_client}" if data.samples_per_client else ""
    return (f"{config.algorithm:14s} {data.dataset} {data.partition}(alpha={data.alpha}) "
            f"{data.num_clients} clients{size} seed={config.seed}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapter")
    parser.add_argument("--params", type=Path, required=True, help="papermill YAML of the profile")
    parser.add_argument("--dry-run", action="store_true", help="list what would run, run nothing")
    parser.add_argument("--limit", type=int, default=None, help="run at most this many new runs")
    parser.add_argument("--reverse", action="store_true",
                        help="run the grid from its end (a second process can then meet the first)")
    args = parser.parse_args(argv)

    chapter = chapter_module(args.chapter)
    params = chapter.Params(**(yaml.safe_load(args.params.read_text()) or {}))
    configs = chapter.experiments(params)
    todo = [c for c in configs if load_record(c) is None][:: -1 if args.reverse else 1]
    print(f"{args.chapter} ({params.profile}): {len(configs)} runs, {len(configs) - len(todo)} done, {len(todo)} to run")
    if args.dry_run:
        return
    start = time.perf_counter()
    for config in tqdm(todo[: args.limit], desc=f"sweep {args.chapter}"):
        if load_record(config) is not None:  # another sweep process finished it meanwhile
            continue
        record = run_experiment(config, profile=params.profile, progress=False)
        tqdm.write(f"{describe(config)}: ALMA {record.final['alma']:.4f} ({record.timings['total_seconds']:.0f} s)")
    print(f"finished in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
