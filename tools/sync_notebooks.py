"""Regenerate notebooks/<chapter>.ipynb from its jupytext source notebooks/<chapter>.py.

    .venv/bin/python tools/sync_notebooks.py [chapter ...]

The .py file is the source of truth, except for its papermill ``parameters`` cell: that cell is
written here from the chapter's ``Params`` defaults (``fedkd_core.chapters.parameters_cell``), so
each default is written once, in the dataclass. The .ipynb twin is what papermill and nbval run;
it is executed once with its smoke defaults so that cells tagged ``nbval-check-output`` (a tag, not
a comment, so that the rendered book shows no test marker) carry the reference output nbval
compares against. All other outputs are stripped to keep the file small.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import jupytext
import nbformat
from ipc_kernels import execute_notebook  # a sibling script: this file runs as tools/sync_notebooks.py

from fedkd_core.chapters import chapter_module, parameters_cell

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CHECK_TAG = "nbval-check-output"


def write_parameters_cell(source: Path, params_class: type) -> bool:
    """Rewrite the cell tagged "parameters" of the jupytext source ``source`` from ``params_class``'s
    defaults; True if that changed the file."""
    lines = source.read_text().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("# %%") and '"parameters"' in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("# %%"))
    text = "\n".join(lines[:start + 1] + parameters_cell(params_class).split("\n") + [""] + lines[end:])
    changed = text != source.read_text()
    if changed:
        source.write_text(text)
    return changed


def sync(chapter: str) -> Path:
    source = NOTEBOOKS / f"{chapter}.py"
    target = NOTEBOOKS / f"{chapter}.ipynb"
    write_parameters_cell(source, chapter_module(chapter).Params)
    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for index, cell in enumerate(notebook.cells):
        cell.id = f"{chapter}-{index:03d}"  # ids by position, not random: a one-line edit is a one-line diff
    with tempfile.TemporaryDirectory() as tmp:
        raw, executed = Path(tmp) / "raw.ipynb", Path(tmp) / "executed.ipynb"
        nbformat.write(notebook, raw)
        os.environ.setdefault("FEDKD_RESULTS", str(Path(tmp) / "results"))
        execute_notebook(raw, executed, progress_bar=False)
        ran = nbformat.read(executed, as_version=4)
    for cell in ran.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code" and CHECK_TAG not in cell.metadata.get("tags", []):
            cell.execution_count = None  # nbval treats a cell with a count as run: keep it only
            cell.outputs = []            # where the reference output is kept
    ran.metadata.pop("papermill", None)
    ran.metadata["jupytext"] = {"formats": "ipynb,py:percent"}
    nbformat.write(ran, target)
    return target


def main() -> None:
    chapters = sys.argv[1:] or sorted(p.stem for p in NOTEBOOKS.glob("*.py"))
    for chapter in chapters:
        print(f"{sync(chapter)} synced")
    subprocess.run(["git", "status", "--short", str(NOTEBOOKS)], check=False)


if __name__ == "__main__":
    main()
