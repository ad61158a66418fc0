"""Chapter "Add your method": a method from outside the package, registered, checked, compared.

The page runs nothing through the sweep (``experiments`` is empty, as the Claims page's): its
few runs are made by :func:`fedkd_core.compare.compare` in the notebook itself, which finds the
chapter's own runs among the stored records where the same runs exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from ..compare import PROPOSED
from . import chapter_module, chapter_params

PARAMS_FOLDER = Path(__file__).resolve().parents[2] / "notebooks" / "params"


@dataclass(frozen=True)
class Params:
    """The page's parameters; the defaults are the smoke profile (seconds).

    ``chapter``: the chapter whose cells the example method runs in; ``chapter_params``: one of
    that chapter's profiles, a YAML under ``notebooks/params/`` ("" for its smoke defaults);
    ``seeds``: how many of its seeds (0: the profile's own); ``beta``: the example's server momentum.
    The smoke profile's one seed: the comparison runs the KnFu chapter's four methods and the
    example once each in KnFu's smoke cell (ten runs with two seeds; the KnFu chapter's own smoke
    page shows committed paper-profile records there, so none of these runs is stored before). The
    book's quick profile runs three seeds, with the t-intervals (``tests/test_compare.py`` checks them on two).
    """

    profile: str = "smoke"
    chapter: str = "knfu"
    chapter_params: str = ""
    seeds: int = 1
    beta: float = 0.9

    def __post_init__(self) -> None:
        if self.chapter not in PROPOSED:
            raise ValueError(f"chapter must be one of {sorted(PROPOSED)} (got {self.chapter!r})")
        if self.seeds < 0:
            raise ValueError(f"seeds must be >= 0 (got {self.seeds})")
        if not 0 <= self.beta < 1:
            raise ValueError(f"beta must be in [0, 1) (got {self.beta})")
        if self.chapter_params and not (PARAMS_FOLDER / self.chapter_params).is_file():
            raise ValueError(f"chapter_params must name a YAML under {PARAMS_FOLDER} (got {self.chapter_params!r})")
        self.compared()

    def compared(self):
        """The compared chapter's ``Params``: its profile (or smoke defaults) with this page's seeds."""
        given = yaml.safe_load((PARAMS_FOLDER / self.chapter_params).read_text()) if self.chapter_params else {}
        seeds = {"seeds": self.seeds} if self.seeds else {}
        return chapter_params(chapter_module(self.chapter).Params, {**(given or {}), **seeds})


def experiments(params: Params) -> list:
    return []
