"""``jupyter-book build`` with Sphinx's parallel read and write on ``--jobs`` processes.

jupyter-book's command line builds on one process (its ``build_sphinx`` takes ``jobs`` but the
command never passes it); every extension the book uses declares itself parallel-safe, so
``make book`` builds on JOBS processes instead. Any other argument is the command's own::

    python tools/build_book.py --jobs 2 book/
"""

import functools
import sys


def main(argv: list[str]) -> None:
    jobs = 1
    if argv[:1] == ["--jobs"]:
        jobs, argv = int(argv[1]), argv[2:]
    import jupyter_book.sphinx as sphinx
    from jupyter_book.cli.main import main as jupyter_book

    # the command imports build_sphinx from the module when it runs, so it finds this one
    sphinx.build_sphinx = functools.partial(sphinx.build_sphinx, jobs=max(1, jobs))
    jupyter_book(["build", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
