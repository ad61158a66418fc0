"""Write the book's generated pages into a folder, in one process (the package imported once):
the landing page's glance (it reads the ledger), the Performance page's and the cluster page's
tables, each as its module's own command writes it (``python -m fedkd_core.glance OUT.md``)::

    python tools/generated_pages.py book/_generated

``make book`` (its ``generated`` target) and the browser check's smoke book both call this.
"""

import importlib
import sys
from pathlib import Path

PAGES = ("glance", "performance", "costs")  # fedkd_core.<page> writes <folder>/<page>.md


def main(argv: list[str]) -> None:
    folder = Path(argv[0])
    for page in PAGES:
        importlib.import_module(f"fedkd_core.{page}").main([str(folder / f"{page}.md")])


if __name__ == "__main__":
    main(sys.argv[1:])
