"""FedCKD's claims, counted alike on the paper's tables and on our records, and its rows of the
book's Claims page (``fedkd_core.chapters.ledger``)."""

from __future__ import annotations

import sys

import pandas as pd

from ..ledger import VerdictBasis
from .grid import METHOD_NAMES, METHODS, experiments, scale_text
from .paper import paper_accuracy_tables, paper_table4
from .profiles import PAPER_FMNIST100, REDUCED_PROFILE
from .records import cell_of, paper_scale_records, reduced_profile_records
from .tables import summary

PERSONALISED = ("fedper", "lg_fedavg", "pfedme", "fedfomo", "pfedsd", "fedckd")
ANNEALING_CLAIM = "annealing helps (γ < 1 > γ = 1)"
EFFECT_CELL_KEYS = ("dataset", "setting", "clients")
METHOD_COLUMN = "algorithm"

# The paper reports mean ± std without saying over how many runs; we assume 3, as ours.
PAPER_RUNS = 3
CONSTANT = "fedckd_constant"  # FedCKD with γ = 1 (no annealing), Table IV's other row


def observations(records) -> pd.DataFrame:
    """One row per run of Tables I, II and IV: its cell, method (FedCKD with γ = 1 as
    ``fedckd_constant``), seed, ALMA at the last round ("final") and at its best round ("best"),
    and what the convergence gate reads (evaluations, late gain in points)."""
    from ...verdicts import trajectory

    frame = summary(records)
    if not len(frame):
        return pd.DataFrame(columns=list(EFFECT_CELL_KEYS) + ["algorithm", "seed", "final", "best", "evaluations",
                                                                "late_gain", "rounds", "profile"])
    stats = pd.DataFrame([trajectory(r.history, "alma", r.config["rounds"]) for r in records])
    constant = (frame.algorithm == "fedckd") & (frame.gamma == 1.0)
    return frame[list(EFFECT_CELL_KEYS) + ["seed", "rounds", "profile"]].assign(
        algorithm=frame.algorithm.where(~constant, CONSTANT), **{c: stats[c] for c in stats})


def paper_observations() -> pd.DataFrame:
    """Tables I-II, and Table IV's FedCKD without annealing, in :func:`observations`' columns with
    the paper's mean and std (%). Table IV's FedCKD with annealing is Table I's CIFAR-100 cell."""
    constant = paper_table4()[lambda f: ~f.annealing].assign(algorithm=CONSTANT, setting="practical", clients=20)
    return pd.concat([paper_accuracy_tables(), constant.drop(columns="annealing")], ignore_index=True)


def effects_of(frame: pd.DataFrame, value: str = "final") -> pd.DataFrame:
    """Per (dataset, setting, clients, seed), each claim's effect on ``value`` (positive where it
    holds): FedCKD − pFedSD; FedCKD − the best other method; the worst personalised method − the
    better of FedAvg and FedProx; FedCKD with annealing − FedCKD with γ = 1. A claim needs all the
    methods it names in the cell and seed."""
    keys = list(EFFECT_CELL_KEYS) + ["seed"]
    wide = frame.pivot_table(index=keys, columns="algorithm", values=value)
    effects = pd.DataFrame(index=wide.index)
    has = set(wide.columns)

    def margin(better: list[str], worse: list[str]) -> pd.Series:
        return (wide[better].min(axis=1) - wide[worse].max(axis=1)).where(wide[better + worse].notna().all(axis=1))

    if {"fedckd", "pfedsd"} <= has:
        effects["FedCKD > pFedSD"] = margin(["fedckd"], ["pfedsd"])
    others = [a for a in METHODS if a != "fedckd" and a in has]
    if "fedckd" in has and len(others) > 1:  # with one other method it is "FedCKD > that method"
        effects["FedCKD best of the methods run"] = margin(["fedckd"], others)
    generic, personal = [a for a in ("fedavg", "fedprox") if a in has], [a for a in PERSONALISED if a in has]
    if generic and personal:
        effects["every personalised method beats FedAvg and FedProx"] = margin(personal, generic)
    if {"fedckd", CONSTANT} <= has:
        effects[ANNEALING_CLAIM] = margin(["fedckd"], [CONSTANT])
    return effects.reset_index()


def _stand_ins(divergences, value: float) -> pd.DataFrame:
    """One observation per diverged run, at ``value``: what its run would add had it finished."""
    rows = []
    for run in divergences:
        dataset, setting, clients, *_, algorithm, gamma = cell_of(run)
        rows.append({"dataset": dataset, "setting": setting, "clients": clients, "seed": int(run.config["seed"]),
                     "algorithm": CONSTANT if algorithm == "fedckd" and gamma == 1.0 else algorithm, "final": value,
                     "round": run.round})
    return pd.DataFrame(rows)


def diverged_seeds(records, divergences) -> dict[str, str]:
    """Claim -> the seeds it leaves out because a run it compares diverged, with that run's method
    and round ("pathological seeds 1, 2 (pFedSD diverged in rounds 18, 12)"). A claim needs every
    method it names in a cell and seed (:func:`effects_of`), so a diverged run takes its seed out of
    each claim that names its method: the verdict rests on the seeds left, and says so."""
    if not divergences:
        return {}
    keys = list(EFFECT_CELL_KEYS) + ["seed"]
    base = observations(records)
    stand_ins = _stand_ins(divergences, 0.0)
    without = effects_of(base).set_index(keys)
    lost: dict[str, dict[tuple, set]] = {}
    for _, run in stand_ins.iterrows():  # a run counts for a claim whose effect moves with its value
        others = stand_ins.drop(index=run.name)
        low = effects_of(pd.concat([base, others, stand_ins.loc[[run.name]]], ignore_index=True)).set_index(keys)
        high = effects_of(pd.concat([base, others, stand_ins.loc[[run.name]].assign(final=1.0)],
                                    ignore_index=True)).set_index(keys)
        row = tuple(run[k] for k in keys)
        for claim in low.columns:
            missing_before = row not in without.index or pd.isna(without.at[row, claim]) \
                if claim in without.columns else True
            moves = pd.notna(low.at[row, claim]) and low.at[row, claim] != high.at[row, claim]
            if missing_before and moves:
                label = f"{METHOD_NAMES.get(run.algorithm, 'FedCKD γ = 1')} diverged in round"
                lost.setdefault(claim, {}).setdefault((run.setting, label), set()).add((run.seed, run["round"]))
    return {claim: "left out, a run it compares having diverged: " + "; ".join(
        f"{setting} seed{'s' if len(found) > 1 else ''} {', '.join(str(s) for s, _ in sorted(found))} "
        f"({label}{'s' if len(found) > 1 else ''} {', '.join(str(r) for _, r in sorted(found))})"
        for (setting, label), found in sorted(groups.items())) for claim, groups in lost.items()}


def claim_effects(records) -> pd.DataFrame:
    """Per (dataset, setting, clients, seed): each claim's effect on final ALMA (:func:`effects_of`)."""
    return effects_of(observations(records), "final")


def verdict_basis(root=None) -> VerdictBasis:
    """The paper-scale Fashion-MNIST n = 100 column (:data:`PAPER_FMNIST100`) once every one of its
    runs is committed or diverged, judged without the convergence gate (T = 100 is the paper's); until then the
    committed reduced-profile records (cells that are still rising do not count). A partial column
    would judge a claim on whichever seeds and settings the sweep reached first (one seed of a few
    methods, with no interval), and take the claims it cannot judge yet off the reduced evidence."""
    from ..ledger import rerun_or

    return rerun_or(VerdictBasis(REDUCED_PROFILE, reduced_profile_records(root), scale_text(REDUCED_PROFILE), True),
                    VerdictBasis(PAPER_FMNIST100, paper_scale_records(root), scale_text(PAPER_FMNIST100), False),
                    experiments(PAPER_FMNIST100), root)


def verdict_basis_text(root=None) -> str:
    """What the verdicts rest on now (:func:`~fedkd_core.chapters.ledger.basis_text`): how many of
    the paper-scale column's runs are finished, and the profile the verdicts are judged on."""
    from ..ledger import basis_text

    basis = verdict_basis(root)
    rerun = (f"the paper-scale column (Tables I–II's Fashion-MNIST n = 100 cells and Table IV's pair; "
             f"{scale_text(PAPER_FMNIST100)})")
    return basis_text(basis, rerun, basis.params == PAPER_FMNIST100)


def ledger_rows(root=None) -> pd.DataFrame:
    """FedCKD's claims for the book's Claims page, judged on :func:`verdict_basis`'s records.
    Table IV's annealing pair runs on Fashion-MNIST; the paper's is on CIFAR-100, so its side of
    that claim is CIFAR-100's."""
    from ..ledger import evidence, judged_rows

    from ...results import stored_divergences

    module = sys.modules[__package__]  # the chapter package, whose claims the ledger reads
    basis = verdict_basis(root)
    rows = judged_rows("FedCKD", module, basis.records, "fedckd.html#verdict", basis.scale, evidence(basis.records),
                       enforce_gate=basis.enforce_gate, sections={ANNEALING_CLAIM: "fedckd.html#table-iv-annealing"})
    left_out = diverged_seeds(basis.records, stored_divergences(experiments(basis.params), root))
    rows["note"] = [("; ".join(filter(None, [note, left_out.get(claim, "")])))
                    for claim, note in zip(rows.claim, rows.note)]
    return rows
