"""Each chapter's experiment grid, shared by its notebook and by ``python -m fedkd_core.sweep``.

A chapter module defines ``Params`` (a frozen dataclass of the notebook's flat parameters) and
``experiments(params) -> list[ExperimentConfig]``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

CHAPTERS: dict[str, str] = {
    "setting": "fedkd_core.chapters.setting",
    "knfu": "fedkd_core.chapters.knfu",
    "fedckd": "fedkd_core.chapters.fedckd",
}


def chapter_module(name: str) -> ModuleType:
    if name not in CHAPTERS:
        raise ValueError(f"chapter must be one of {sorted(CHAPTERS)} (got {name!r})")
    return importlib.import_module(CHAPTERS[name])
