"""Write each profile yaml's measured cost into its header, from its committed records' timings
(issue 33 item 4): the runs, and the hours they took per named machine.

    .venv/bin/python tools/cost_headers.py [notebooks/params/paper/knfu_tuned.yaml ...]

Without arguments: every yaml of the reduced, paper, tuning and robustness profiles that has
committed records. Run it after committing a sweep's records; nothing is run.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fedkd_core.chapters.card import cost_header, with_cost_header
from fedkd_core.costs import profile_yamls


def update(path: Path) -> bool:
    """Rewrite ``path``'s cost lines; False (untouched) where no record of it is committed."""
    header = cost_header(path)
    if header[-1].endswith(" committed so far."):
        return False
    text = path.read_text()
    new = with_cost_header(text, header)
    if new != text:
        path.write_text(new)
    return True


def main(paths: list[str]) -> None:
    targets = [Path(p) for p in paths] or profile_yamls()
    for path in targets:
        try:
            print(f"{path}: {'updated' if update(path) else 'no committed records'}")
        except (ValueError, SystemExit) as error:  # a yaml that is no sweep grid (add_your_method's): left as it is
            print(f"{path}: left as it is ({error})")


if __name__ == "__main__":
    main(sys.argv[1:])
