"""Tag the parameter cells of executed chapters ``remove-input`` so the book shows the chapter's
parameters table (printed by its first code cell) instead of code listings.

    .venv/bin/python tools/hide_parameter_cells.py book/chapters/knfu.ipynb [...]

papermill adds an ``injected-parameters`` cell with whatever was passed by ``-p`` / ``-f``; its
tags cannot be set at injection time, so ``make book`` runs this after papermill.
"""

from __future__ import annotations

import sys

import nbformat

HIDDEN = {"parameters", "injected-parameters"}


def hide(path: str) -> int:
    notebook = nbformat.read(path, as_version=4)
    changed = 0
    for cell in notebook.cells:
        tags = cell.metadata.setdefault("tags", [])
        if HIDDEN & set(tags) and "remove-input" not in tags:
            tags.append("remove-input")
            changed += 1
    nbformat.write(notebook, path)
    return changed


if __name__ == "__main__":
    for notebook_path in sys.argv[1:]:
        hide(notebook_path)
