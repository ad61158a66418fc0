"""The chapters' data files: the papers' tables, kept as CSV beside each chapter's modules.

A chapter package (``fedkd_core/chapters/<chapter>/``) holds each table the paper reports as
``paper_<table>.csv``: one row per number the paper prints (tidy: a column per key, ``mean`` and,
where the paper gives one, ``std``), its first lines comments (``#``) naming the table and what
its numbers are. They are package data (``pyproject.toml``), so an installed package reads them
too; ``tests/test_paper_tables.py`` checks their numbers against the papers' text.
"""

from __future__ import annotations

from importlib import resources

import pandas as pd


def paper_table(package: str, name: str) -> pd.DataFrame:
    """The table in file ``name`` of chapter package ``package`` (pass ``__package__``)."""
    with resources.files(package).joinpath(name).open() as handle:
        return pd.read_csv(handle, comment="#")
