"""FedGMKD's reference profiles, the ones whose records are committed, read from their yaml under
``notebooks/params/`` (:func:`fedkd_core.chapters.datafiles.profile`); ``tests/test_profiles.py``
checks that their records are the committed ones and how they derive from one another."""

from __future__ import annotations

from ..datafiles import profile
from .grid import Params

# The Table 1 block with every method, the released code's FedGMKD and Table 6's HK + DAT at three
# client counts, and Table 3 (the ablation at β 0.2 and 5, 10 clients), three seeds, at a size that
# 2 CPU cores finish in hours. Its records are committed under results/reduced/ and shown in every profile.
REDUCED_PROFILE = profile(Params, "reduced/fedgmkd.yaml")

# The base the robustness variants change: the reduced profile's Table 1 block with the paper's nine
# methods. The variants change only FedGMKD, so the eight baselines' records serve every variant
# (9 new FedGMKD runs per variant).
ROBUSTNESS_BASE = profile(Params, "robustness/fedgmkd.yaml")


def profiles_shown(params: Params) -> dict[str, Params]:
    """The profiles behind what the chapter shows, by column heading: ``params``, this page's
    profile, and, unless that is the reduced profile, :data:`REDUCED_PROFILE`, whose committed
    records the results tables show in every profile."""
    shown = {f"{params.profile} (this page's profile)": params}
    if params.profile != REDUCED_PROFILE.profile:
        shown[f"{REDUCED_PROFILE.profile} (the committed records)"] = REDUCED_PROFILE
    return shown
