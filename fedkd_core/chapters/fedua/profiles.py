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

# The base the robustness variants change: the reduced profile's Tables 2 and 3 (all three methods,
# three partitions, C = 1, 0.7, 0.4, 3 seeds); Table 1's selection runs are left out. The chapter's
# reading is the committed reduced records.
ROBUSTNESS_BASE = profile(Params, "robustness/fedua.yaml")


def profiles_shown(params: Params) -> dict[str, Params]:
    """This page's profile and :data:`REDUCED_PROFILE`, by heading (:func:`~..datafiles.profiles_shown`)."""
    return shared_profiles_shown(params, REDUCED_PROFILE)
