"""Give stored run records the keys the current code computes, without rerunning anything.

    python -m fedkd_core.rekey [RESULTS_DIR] [--dry-run]

A record's key is a hash of its configuration (fedkd_core.results.key_of). When the code learns
a new setting whose default reproduces the old behaviour (``train.augment = "none"``), or stops
hashing a setting that only says how a run executes (``train.mixed_precision``), every key
changes although no result does. This rewrites each record's config with the new settings at
those defaults, stores it under its new key, and removes the old file. Records whose key is
already current are left alone; a record that cannot be read is reported and left alone.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .results import DIVERGED_SUFFIX, RecordError, RunRecord, key_of, read_record, results_dir, write_record

# Settings added after the first records were written, with the value every earlier run used.
ADDED_SETTINGS = {("train", "augment"): "none"}


def upgraded_config(config: dict) -> dict:
    """``config`` with every setting added since it was written, at its old behaviour's value."""
    upgraded = json.loads(json.dumps(config))
    for (section, name), value in ADDED_SETTINGS.items():
        upgraded.setdefault(section, {}).setdefault(name, value)
    return upgraded


def rekey(root: Path, dry_run: bool = False) -> list[tuple[Path, Path]]:
    """Move every record under ``root`` whose key is stale to its current key; the moves made."""
    moves = []
    for path in sorted(root.glob("*/*/*.json")):
        if path.name.endswith(DIVERGED_SUFFIX):  # not a record (results.Divergence): left as it is
            continue
        try:
            record = read_record(path)
        except RecordError as error:
            print(f"skipped: {error}")
            continue
        config = upgraded_config(record.config)
        key = key_of(config)
        if key == record.key and path.stem == key and config == record.config:
            continue
        target = path.with_name(f"{key}.json")  # same folder: the profile it was filed under
        if target != path and target.exists():
            print(f"skipped: {path} would replace {target.name}, a record of the same run (e.g. made in "
                  "another precision); keep one of the two by hand")
            continue
        moves.append((path, target))
        if not dry_run:
            write_record(RunRecord(**{**record.__dict__, "config": config, "key": key}), target)
            if target != path:
                path.unlink()
    return moves


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", nargs="?", type=Path, default=None, help="results folder (default: the project's)")
    parser.add_argument("--dry-run", action="store_true", help="say what would move, move nothing")
    args = parser.parse_args(argv)
    root = results_dir(args.root)
    moves = rekey(root, dry_run=args.dry_run)
    for old, new in moves:
        print(f"{old.relative_to(root)} -> {new.name}")
    print(f"{len(moves)} record(s) {'would be ' if args.dry_run else ''}rekeyed under {root}")


if __name__ == "__main__":
    main()
