"""Move the committed records of a profile's grid out of where chapters read them, when the
profile is redesigned (issue 33: FedUA's and FedGMKD's under-trained reduced profiles).

    .venv/bin/python tools/supersede_records.py CHAPTER OLD_YAML NAME [--keep-robustness YAML] [--dry-run]

Every record (and ``.diverged.json``) of the grid ``OLD_YAML`` describes, under
``results/<profile>/``, moves to ``results/superseded/NAME/<profile>/<algorithm>/`` with its file
name unchanged; nothing reads it there (a lookup reads only the profiles' own folders), git keeps
its history, and moving it back restores it.

``OLD_YAML`` may be the committed yaml before it is replaced or a copy anywhere; a copy must pin
every field whose default the redesign changed (FedUA's: ``results/superseded/fedua_resnet8/fedua.yaml``).

A robustness grid that stays on the old design reads some of those records (its first variant is
the old profile's grid): ``--keep-robustness notebooks/params/robustness/CHAPTER.yaml`` moves the
records that grid needs to ``results/robustness/<algorithm>/`` instead, where it still finds them
(a record's key is its config, whatever folder holds it). Run with ``--dry-run`` first and read the list.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import yaml

from fedkd_core.chapters import chapter_module, chapter_params
from fedkd_core.results import DIVERGED_SUFFIX, RECORD_SUFFIX, config_hash, filed_path, results_dir
from fedkd_core.sweep import load_grid

SUFFIXES = (RECORD_SUFFIX, DIVERGED_SUFFIX)


def superseded_paths(chapter: str, old_yaml: Path, root: Path) -> list[Path]:
    """The committed record files of ``old_yaml``'s whole grid under ``root`` (the yaml may lie
    anywhere: a copy of the old profile, every field the chapter's defaults have since changed
    pinned). A grid none of whose records is found is a ValueError: the yaml does not describe them."""
    module = chapter_module(chapter)
    params = chapter_params(module.Params, yaml.safe_load(Path(old_yaml).read_text()) or {})
    configs = module.experiments(params)
    paths = {filed_path(root, params.profile, config.algorithm, config_hash(config), suffix)
             for config in configs for suffix in SUFFIXES}
    found = sorted(path for path in paths if path.exists())
    if not found:
        raise ValueError(f"none of the {len(configs)} runs of {old_yaml} has a record under {root / params.profile}: "
                         "does the yaml pin every field whose default has changed since those runs?")
    return found


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
    if args.keep_robustness and not kept & {p.name.split(".")[0] for p in paths}:
        raise SystemExit(f"--keep-robustness {args.keep_robustness}: its grid reads none of these records")
    for path in paths:
        target = destination(path, root, args.name, kept)
        print(f"{path.relative_to(root)} -> {target.relative_to(root)}")
        if not args.dry_run:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, target)
    print(f"{len(paths)} files {'would move' if args.dry_run else 'moved'}")


if __name__ == "__main__":
    main()
