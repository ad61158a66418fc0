"""Move the committed records of a profile's grid out of where chapters read them, when the
profile is redesigned (issue 33: FedUA's and FedGMKD's under-trained reduced profiles).

    .venv/bin/python tools/supersede_records.py CHAPTER OLD_YAML NAME [--keep-robustness YAML] [--dry-run]

Every record (and ``.diverged.json``) of the grid ``OLD_YAML`` describes, under
``results/<profile>/``, moves to ``results/superseded/NAME/<profile>/<algorithm>/`` with its file
name unchanged; nothing reads it there (a lookup reads only the profiles' own folders), git keeps
its history, and moving it back restores it.

A robustness grid that stays on the old design reads some of those records (its first variant is
the old profile's grid): ``--keep-robustness notebooks/params/robustness/CHAPTER.yaml`` moves the
records that grid needs to ``results/robustness/<algorithm>/`` instead, where it still finds them
(a record's key is its config, whatever folder holds it). Run with ``--dry-run`` first and read the list.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from fedkd_core.results import DIVERGED_SUFFIX, RECORD_SUFFIX, config_hash, filed_path, results_dir
from fedkd_core.sweep import load_grid

SUFFIXES = (RECORD_SUFFIX, DIVERGED_SUFFIX)


def superseded_paths(chapter: str, old_yaml: Path, root: Path) -> list[Path]:
    """The committed record files of ``old_yaml``'s grid under ``root``."""
    params, configs = load_grid(chapter, old_yaml)
    paths = {filed_path(root, params.profile, config.algorithm, config_hash(config), suffix)
             for config in configs for suffix in SUFFIXES}
    return sorted(path for path in paths if path.exists())


def robustness_keys(chapter: str, robustness_yaml: Path | None) -> set[str]:
    """The record keys of the robustness grid around ``robustness_yaml`` (none without one)."""
    if robustness_yaml is None:
        return set()
    _, configs = load_grid(chapter, robustness_yaml, robustness=True)
    return {config_hash(config) for config in configs}


def destination(path: Path, root: Path, name: str, kept: set[str]) -> Path:
    """Where ``path`` goes: ``results/robustness/...`` when the robustness grid reads its key,
    ``results/superseded/NAME/...`` otherwise."""
    key = path.name.removesuffix(DIVERGED_SUFFIX).removesuffix(RECORD_SUFFIX)
    if key in kept:
        return root / "robustness" / path.parent.name / path.name
    return root / "superseded" / name / path.relative_to(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapter")
    parser.add_argument("old_yaml", type=Path)
    parser.add_argument("name", help="the folder under results/superseded/ (e.g. fedua_resnet8)")
    parser.add_argument("--keep-robustness", type=Path, metavar="YAML",
                        help="the robustness base whose grid still reads some of these records")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    root = results_dir()
    kept = robustness_keys(args.chapter, args.keep_robustness)
    paths = superseded_paths(args.chapter, args.old_yaml, root)
    for path in paths:
        target = destination(path, root, args.name, kept)
        print(f"{path.relative_to(root)} -> {target.relative_to(root)}")
        if not args.dry_run:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, target)
    print(f"{len(paths)} files {'would move' if args.dry_run else 'moved'}")


if __name__ == "__main__":
    main()
