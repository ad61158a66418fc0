"""Move the committed records of a profile's grid out of where chapters read them, when the
profile is redesigned (issue 33: FedUA's and FedGMKD's under-trained reduced profiles).

    .venv/bin/python tools/supersede_records.py CHAPTER OLD_YAML NAME [--dry-run]

Every record (and ``.diverged.json``) of the grid ``OLD_YAML`` describes, under
``results/<profile>/``, moves to ``results/superseded/NAME/<profile>/<algorithm>/`` with its file
name unchanged; nothing reads it there (a lookup reads only the profiles' own folders), git keeps
its history, and moving it back restores it. Records another grid still needs are moved too: run
it with ``--dry-run`` first and read the list.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from fedkd_core.results import DIVERGED_SUFFIX, RECORD_SUFFIX, config_hash, filed_path, results_dir
from fedkd_core.sweep import load_grid


def superseded_paths(chapter: str, old_yaml: Path, root: Path) -> list[Path]:
    """The committed record files of ``old_yaml``'s grid under ``root``."""
    params, configs = load_grid(chapter, old_yaml)
    paths = {filed_path(root, params.profile, config.algorithm, config_hash(config), suffix)
             for config in configs for suffix in (RECORD_SUFFIX, DIVERGED_SUFFIX)}
    return sorted(path for path in paths if path.exists())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapter")
    parser.add_argument("old_yaml", type=Path)
    parser.add_argument("name", help="the folder under results/superseded/ (e.g. fedua-reduced-v1)")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    root = results_dir()
    paths = superseded_paths(args.chapter, args.old_yaml, root)
    for path in paths:
        target = root / "superseded" / args.name / path.relative_to(root)
        print(f"{path.relative_to(root)} -> {target.relative_to(root)}")
        if not args.dry_run:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, target)
    print(f"{len(paths)} files {'would move' if args.dry_run else 'moved'}")


if __name__ == "__main__":
    main()
