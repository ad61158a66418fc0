"""Test settings: run records go to a throw-away folder, data comes from FEDKD_DATA; nbval runs each
chapter once, in the smoke book's environment, and keeps it for the book (tools/smoke_book.py)."""

import os
import tempfile
from pathlib import Path

import pytest

try:  # nbval runs the chapters; a machine without it (a lent GPU's image) still runs the tests under tests/
    import nbval.kernel
    import nbval.plugin
except ImportError:
    nbval = None

# Set before any notebook kernel starts (nbval kernels inherit the environment), so no test
# writes records into the checkout's results/ folder.
os.environ.setdefault("FEDKD_RESULTS", tempfile.mkdtemp(prefix="fedkd-test-results-"))
os.environ.setdefault("PYTHONHASHSEED", "0")
# One torch thread per process, as `make test` exports (Makefile): set before torch is imported, so a
# bare `pytest -n 2` does not run two threads in each worker on two cores (with the kernels and
# subprocesses beside them, 5-10x slower: 5 tiny runs took 24.3 s with two threads, 2.3 s with one).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# nbval's kernels on Unix sockets, not TCP ports that another process can take before the kernel
# binds them (that once failed CI; tools/ipc_kernels.py). Tests run papermill through its
# execute_notebook for the same reason.
if nbval is not None:
    from tools.ipc_kernels import UnixSocketKernelManager

    nbval.kernel.KernelManager = UnixSocketKernelManager


@pytest.fixture(scope="session")
def mnist():
    from fedkd_core.data import load_dataset

    return load_dataset("mnist")


# --- each chapter runs once per session (tools/smoke_book.py) ------------------------------------
# nbval's kernel for a chapter starts in the smoke book's environment (the committed records, one
# ledger cache), and a chapter whose every cell passed is written out with its outputs, for
# tests/test_book_browser.py to build the book from instead of executing the chapter again.

def _is_chapter_cell(item) -> bool:
    return nbval is not None and isinstance(item, nbval.plugin.IPyNbCell)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """A chapter's kernel starts in its first cell's setup: it inherits the book's environment
    (this process's own environment is restored after)."""
    if not _is_chapter_cell(item):
        yield
        return
    from tools import smoke_book

    with smoke_book.within(smoke_book.session_folder(item.config)):
        yield


_PASSED_CELLS = pytest.StashKey[int]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A chapter cell's outputs, as nbval received them from the kernel, become the cell's outputs
    in the notebook nbval read (``item.parent.nb``); the passed cells are counted."""
    outcome = yield
    if not _is_chapter_cell(item) or item.test_outputs is None:
        return
    item.cell.outputs = list(item.test_outputs)
    item.cell.execution_count = item.cell_num + 1
    if outcome.excinfo is None:
        item.parent.stash[_PASSED_CELLS] = item.parent.stash.get(_PASSED_CELLS, 0) + 1


def pytest_runtest_teardown(item, nextitem):
    """After a chapter's last cell: the executed chapter, if every code cell passed, into
    ``smoke_book.executed_dir`` (a chapter with a failed cell is left for the book to run again,
    where its failure is reported too)."""
    if not _is_chapter_cell(item) or (nextitem is not None and nextitem.parent is item.parent):
        return
    import nbformat

    from tools import smoke_book

    notebook = item.parent.nb
    cells = sum(cell.cell_type == "code" for cell in notebook.cells)
    if item.parent.stash.get(_PASSED_CELLS, 0) == cells:
        folder = smoke_book.executed_dir(smoke_book.session_folder(item.config))
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, folder / Path(str(item.parent.fspath)).name)
