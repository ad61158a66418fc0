"""FedUA's reference profiles, the ones whose records are committed, read from their yaml under
``notebooks/params/`` (:func:`fedkd_core.chapters.datafiles.profile`); ``tests/test_profiles.py``
checks that their records are the committed ones and how they derive from one another."""

from __future__ import annotations

from ..datafiles import profile
from ..datafiles import profiles_shown as shared_profiles_shown
from .grid import Params

# The paper's design at a size that 2 CPU cores finish in hours. Its records are committed under
# results/reduced/ and the chapter shows them whatever profile it is executed with.
REDUCED_PROFILE = profile(Params, "reduced/fedua.yaml")

# The paper's settings (ResNet-32, 20 local and 20 server epochs per round): run on a GPU; the
# reduced profile's scale text names its epochs beside these.
PAPER_PROFILE = profile(Params, "paper/fedua.yaml")

# The base the robustness variants change: Tables 2 and 3 (all three methods, three partitions,
# C = 1, 0.7, 0.4, 3 seeds) without Table 1's selection runs, on the reduced profile's FIRST design
# (ResNet-8, 10 rounds evaluated 5 times: every cell fails the convergence gate); it was not rerun
# when the reduced profile was redesigned, and its yaml says so.
ROBUSTNESS_BASE = profile(Params, "robustness/fedua.yaml")


def profiles_shown(params: Params) -> dict[str, Params]:
    """This page's profile and :data:`REDUCED_PROFILE`, by heading (:func:`~..datafiles.profiles_shown`)."""
    return shared_profiles_shown(params, REDUCED_PROFILE)
