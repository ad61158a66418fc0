"""KnFu's claims, counted alike on the paper's tables and on our records, and its rows of the
book's Claims page (``fedkd_core.chapters.ledger``): as coded, and with every method under its
tuned schedule (:mod:`.tuning`)."""

from __future__ import annotations

import sys

import pandas as pd

from .grid import SHARING
from .paper import paper_table1, paper_table2
from .records import paper_profile_records
from .tables import final_table
from .tuning import tuned_records

EFFECT_CELL_KEYS = ("dataset", "alpha", "size")
METHOD_COLUMN = "algorithm"
# Sec. IV-A: the mean ± std are "derived from three separate repetitions with distinct random seeds".
PAPER_RUNS = 3

# The tuned-schedule rows of the ledger: the claim's name with this suffix, linked to this section.
TUNED_SUFFIX = " (schedules tuned)"
TUNED_SECTION = "knfu.html#are-the-baselines-as-strong-as-the-paper-s-the-round-s-schedule-tuned"


def observations(records) -> pd.DataFrame:
    """One row per run: its cell, method, seed, and its ALMA at the last round ("final") and at its
    best round ("best"), with what the convergence gate reads (evaluations, late gain in points)."""
    from ...verdicts import trajectory

    table = final_table(records)
    stats = pd.DataFrame([trajectory(r.history, "alma", r.config["rounds"]) for r in records],
                         columns=["final", "best", "evaluations", "late_gain"])
    machines = [r.environment.get("device_name", "unknown") for r in records]
    return pd.concat([table.drop(columns="alma"), stats], axis=1).assign(machine=machines)


def paper_observations() -> pd.DataFrame:
    """Tables 1-2 in :func:`observations`' columns, with the paper's mean and std (%)."""
    return pd.concat([paper_table1(), paper_table2()], ignore_index=True)


def effects_of(frame: pd.DataFrame, value: str = "final") -> pd.DataFrame:
    """Per (dataset, alpha, |D_n|, seed), each claim's effect on ``value`` (accuracy, positive where
    the claim holds): KnFu − FedMD, KnFu − Selective-FD, KnFu − the better of the two, and Local −
    the best sharing method, everywhere and at each dataset's smallest α and largest |D_n| (the
    paper: "Local is preferable with large, highly heterogeneous data"). A cell and seed missing
    one of a claim's methods has no effect for it."""
    keys = list(EFFECT_CELL_KEYS)
    wide = frame.pivot_table(index=keys + ["seed"], columns="algorithm", values=value)
    effects = pd.DataFrame(index=wide.index)
    has = set(wide.columns)

    def margin(better: str, worse: list[str]) -> pd.Series:
        return (wide[better] - wide[worse].max(axis=1)).where(wide[[better] + worse].notna().all(axis=1))

    if {"knfu", "fedmd"} <= has:
        effects["KnFu > FedMD"] = margin("knfu", ["fedmd"])
    if {"knfu", "selective_fd"} <= has:
        effects["KnFu > Selective-FD"] = margin("knfu", ["selective_fd"])
    rivals = [a for a in SHARING if a != "knfu" and a in has]
    if "knfu" in has and rivals:
        effects["KnFu best sharing method"] = margin("knfu", rivals)
    sharing = [a for a in SHARING if a in has]
    if "knfu_local" in has and sharing:
        local = margin("knfu_local", sharing)
        effects["Local ≥ every sharing method"] = local
        cells = wide.index.to_frame(index=False)
        corner = ((cells.alpha == cells.groupby("dataset").alpha.transform("min"))
                  & (cells["size"] == cells.groupby("dataset")["size"].transform("max"))).to_numpy()
        effects["Local ≥ sharing at smallest alpha, largest |D_n|"] = local.where(corner)
    return effects.reset_index()


def claim_effects(records) -> pd.DataFrame:
    """Per (dataset, alpha, |D_n|, seed): each claim's effect on final ALMA (:func:`effects_of`)."""
    return effects_of(observations(records), "final")


def ledger_rows(root=None) -> pd.DataFrame:
    """KnFu's claims for the book's Claims page, judged on the committed paper-profile records
    (every seed committed, :data:`~.records.READ_SEEDS`) and, over the same cells, on the paper's
    Tables 1-2; then the same claims (named with :data:`TUNED_SUFFIX`) on Table 1's cells rerun
    with every method under its tuned schedule (:mod:`.tuning`).
    The runs are at the paper's own round budget, so a cell still rising there counts (the note
    says how many)."""
    from ..ledger import evidence, judged_rows

    module = sys.modules[__package__]  # the chapter package, whose claims the ledger reads
    records, tuned = paper_profile_records(root), tuned_records(root)
    as_coded = judged_rows("KnFu", module, records, "knfu.html#verdict",
                           "paper: 20 clients, R = 15 (MNIST) / 30 (CIFAR-10)", evidence(records), enforce_gate=False)
    as_tuned = judged_rows("KnFu", module, tuned, TUNED_SECTION, "paper, MNIST (Table 1), every method under the "
                           "schedule it chose on a validation split", evidence(tuned), enforce_gate=False)
    return pd.concat([as_coded, as_tuned.assign(claim=as_tuned.claim + TUNED_SUFFIX)], ignore_index=True)
