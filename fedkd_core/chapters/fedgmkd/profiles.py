"""FedGMKD's reference profiles, the ones whose records are committed, read from their yaml under
``notebooks/params/`` (:func:`fedkd_core.chapters.datafiles.profile`); ``tests/test_profiles.py``
checks that their records are the committed ones and how they derive from one another."""

from __future__ import annotations

from ..datafiles import profile
from ..ledger import Rerun
from ..datafiles import profiles_shown as shared_profiles_shown
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
    """This page's profile and :data:`REDUCED_PROFILE`, by heading (:func:`~..datafiles.profiles_shown`)."""
    return shared_profiles_shown(params, REDUCED_PROFILE)

# The reduced profile at the paper's round budget (T = 50, issue 33 item 2): the same grid, 50 rounds
# instead of 15, where FedAvg was still rising. Its sweep is complete and the verdicts rest on it:
# they move onto it only once every run is committed or diverged (claims.verdict_basis), and until
# then the chapter shows how far it has got (:mod:`.redesign`).
REDESIGN_PROFILE = profile(Params, "reduced/redesign/fedgmkd.yaml")


# The robustness grid at the 50-round rerun's scale: ROBUSTNESS_BASE with the paper's T = 50. Its
# chapter's-reading runs are the rerun's; the robustness column moves onto it once the verdicts have
# moved and every one of its runs is finished (robustness.robustness_grid).
ROBUSTNESS_RERUN = profile(Params, "robustness/redesign/fedgmkd.yaml")


# The reruns the verdicts (and the robustness column) move onto once every run is finished, and the
# rows they decide (the Claims page shows how far each has got; the rows' scale says which records
# they rest on now).
RERUNS = (Rerun("FedGMKD", REDESIGN_PROFILE, "reduced/redesign/fedgmkd.yaml",
                "every FedGMKD row testable offline", pace_reference=REDUCED_PROFILE),
          Rerun("FedGMKD", ROBUSTNESS_RERUN, "robustness/redesign/fedgmkd.yaml",
                "the robustness column of those rows", pace_reference=ROBUSTNESS_BASE,
                robustness=True))
