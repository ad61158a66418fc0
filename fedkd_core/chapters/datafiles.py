"""The chapters' data files: the papers' tables and the profiles, each written once.

**Papers' tables.** A chapter package (``fedkd_core/chapters/<chapter>/``) holds each table the
paper reports as ``paper_<table>.csv``: one row per number the paper prints (tidy: a column per
key, ``mean`` and, where the paper gives one, ``std``), its first lines comments (``#``) naming the
table and what its numbers are. ``tests/test_paper_tables.py`` checks them against the papers' text.

**Profiles.** A profile is a yaml of a chapter's ``Params`` fields, ``notebooks/params/<profile>/<chapter>.yaml``
(what ``papermill -f`` and ``python -m fedkd_core.sweep --params`` read). A chapter's profile
constants (``REDUCED_PROFILE``, ``ROBUSTNESS_BASE``, ...) are read from those files by
:func:`profile`, so each value is written once. The package sees the folder as
``fedkd_core/chapters/params``: in a checkout a link to ``notebooks/params``, in an installed
package (a wheel) a copy of it.

Both are package data (``pyproject.toml``), so a package installed from a wheel reads them too
(``tests/test_package_data.py``).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import pandas as pd
import yaml

from . import chapter_params

PROFILES = "params"  # fedkd_core/chapters/params: notebooks/params (a link in a checkout)


def paper_table(package: str, name: str) -> pd.DataFrame:
    """The table in file ``name`` of chapter package ``package`` (pass ``__package__``)."""
    with resources.files(package).joinpath(name).open() as handle:
        return pd.read_csv(handle, comment="#")


def profile(params_class: type, path: str):
    """The ``params_class`` instance of profile ``path`` under ``notebooks/params/`` (for example
    "reduced/fedckd.yaml"), checked as a sweep's yaml is (:func:`fedkd_core.chapters.chapter_params`)."""
    text = resources.files(__package__).joinpath(PROFILES, *path.split("/")).read_text()
    return chapter_params(params_class, yaml.safe_load(text) or {})


def profile_columns(roles: list[tuple[Any, str]]) -> dict[str, Any]:
    """Profiles by heading, from (``Params``, role) pairs such as (the reduced profile, "the
    committed records") and (the page's params, "this page"): one entry per distinct ``Params``,
    headed "<profile> profile (<role>)"; the same ``Params`` given twice is one entry naming both
    roles. Every chapter heads its per-profile tables and figures this way."""
    merged: dict[Any, list[str]] = {}
    for params, role in roles:
        merged.setdefault(params, []).append(role)
    return {f"{params.profile} profile ({'; '.join(named)})": params for params, named in merged.items()}


def profiles_shown(params, records):
    """The profiles behind what a chapter shows, by heading (:func:`profile_columns`): ``params``,
    the page's own profile, and ``records``, the reference profile whose committed records the
    results tables show in every profile (one entry when the page runs that profile itself)."""
    return profile_columns([(params, "this page"), (records, "the committed records")])


def is_reference_profile(path) -> bool:
    """Whether ``path`` is one of the committed reference profiles, a yaml under
    ``notebooks/params/reduced/`` or ``notebooks/params/paper/`` of this checkout or package: those
    name what the committed records are, so a sweep runs their whole grid under their label (a
    redesigned reduced profile under ``reduced/redesign/`` included)."""
    from pathlib import Path

    root = Path(str(resources.files(__package__).joinpath(PROFILES))).resolve()
    where = Path(path).resolve()
    return any(where.is_relative_to(root / kind) for kind in ("reduced", "paper"))
