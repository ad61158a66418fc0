"""FedCKD's claims, counted alike on the paper's tables and on our records, and its rows of the
book's Claims page (``fedkd_core.chapters.ledger``)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pandas as pd

from ...results import config_hash
from ..ledger import VerdictBasis
from .grid import METHOD_NAMES, METHODS, experiments, scale_text
from .paper import paper_accuracy_tables, paper_table4
from .profiles import PAPER_FMNIST100, REDUCED_PROFILE
from .records import cell_of, paper_scale_records, reduced_profile_records
from .tables import summary
from ... import verdicts as V

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
        return V.margin(wide, better, worse)

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


LEFT_OUT = ("a diverged run counts as its method's failure on that seed, scored at the worst accuracy of any "
            "run in its cell: ")


def _stand_in(run) -> dict:
    """The observation a diverged run would have added had it finished (its value is never read:
    :func:`diverged_seeds` asks only whether a claim has an effect with it and without it)."""
    dataset, setting, clients, *_, algorithm, gamma = cell_of(run)
    return {"dataset": dataset, "setting": setting, "clients": clients, "seed": int(run.config["seed"]),
            "algorithm": CONSTANT if algorithm == "fedckd" and gamma == 1.0 else algorithm, "final": 0.0}


def _planned_stand_in(config) -> dict:
    """The observation a planned run not finished yet will add (as :func:`_stand_in`)."""
    return _stand_in(SimpleNamespace(config={**config.resolved(), "seed": config.seed}))


def _unfinished(planned, records, divergences) -> list[dict]:
    """Stand-ins (:func:`_planned_stand_in`) for the configs of ``planned`` with neither a record
    nor a divergence."""
    if not planned:
        return []
    finished = {record.key for record in records} | {run.key for run in divergences}
    return [_planned_stand_in(config) for config in planned if config_hash(config) not in finished]


def divergences_text(records, divergences, planned) -> str:
    """The paper-scale column's diverged runs in words, and the seeds each takes out of the claims
    that name its method (:func:`diverged_seeds`): while runs of ``planned`` (the column's configs)
    are still to come, those lost so far and those lost once the column is complete if no other
    run diverges; once it is complete, what is lost. "" without divergences."""
    from ...cpuinfo import machine_text

    if not divergences:
        return ""
    runs = "; ".join(f"{METHOD_NAMES[d.algorithm]}, {d.config['data']['partition']}, seed {d.config['seed']}: "
                     f"{_error_words(d.error)}, in round {_round_text(d)}, on "
                     f"{machine_text(d.environment.get('device_name'))}" for d in divergences)
    lost = _claims_and_seeds(diverged_seeds(records, divergences))
    text = (f"Runs of the paper-scale column that diverged (no accuracy; stored as `.diverged.json`): {runs}. "
            "A claim needs every method it names in a seed, so a diverged run takes its seed out of the claims "
            "that name its method")
    if not _unfinished(planned, records, divergences):
        return f"{text} (of the paper's 3 seeds per setting): {lost}."
    projected = _claims_and_seeds(diverged_seeds(records, divergences, planned))
    return (f"{text}; with the runs finished so far (a seed still missing another method is out already, and "
            f"is named once that method has run): {lost}."
            + (f" Once every run of the column has finished, if no other run diverges, they will take out: "
               f"{projected} (of the paper's 3 seeds per setting)." if projected else ""))


def _claims_and_seeds(lost: dict[str, str]) -> str:
    """:func:`diverged_seeds` as one line: "*claim*: seeds; *claim*: seeds"."""
    return "; ".join(f"*{claim}*: {seeds}" for claim, seeds in lost.items())


def _round_text(run) -> str:
    return "?" if run.round is None else str(int(run.round))


def _error_words(error: str) -> str:
    """A diverged run's error as a reader reads it: its first clause, a non-finite value named in
    words ("training loss became non-finite (lr=0.01, ...)", not "became nan")."""
    import re

    return re.sub(r"\bbecame (?:nan|[+-]?inf)\b", "became non-finite", str(error).split("; ")[0], flags=re.I)


def diverged_seeds(records, divergences, planned=()) -> dict[str, str]:
    """Claim -> the seeds it leaves out because a run it compares diverged, with that run's method
    and round ("pathological seeds 1, 2 (pFedSD diverged in rounds 18, 12)"; :data:`LEFT_OUT`
    introduces it in a verdict's note). A claim needs every
    method it names in a cell and seed (:func:`effects_of`): a diverged run took a seed out of a
    claim where, with a stand-in for every diverged run, the claim has an effect in that seed, and
    without this run's stand-in it has none (so two runs diverged in one seed are both named).
    With ``planned`` (the grid's configs), the runs of it not finished yet count as finished: what
    the divergences will take out once the grid is complete, if no other run diverges."""
    if not divergences:
        return {}
    keys = list(EFFECT_CELL_KEYS) + ["seed"]
    base = observations(records)
    to_come = _unfinished(planned, records, divergences)
    if to_come:
        base = pd.concat([base, pd.DataFrame(to_come)], ignore_index=True)
    stand_ins = [_stand_in(run) for run in divergences]
    with_all = effects_of(pd.concat([base, pd.DataFrame(stand_ins)], ignore_index=True)).set_index(keys)
    lost: dict[str, dict[tuple, list]] = {}
    for i, (run, stand_in) in enumerate(zip(divergences, stand_ins)):
        others = pd.DataFrame(stand_ins[:i] + stand_ins[i + 1:], columns=list(stand_in))
        without = effects_of(pd.concat([base, others], ignore_index=True)).set_index(keys)
        row = tuple(stand_in[k] for k in keys)
        for claim in with_all.columns:
            has_with = pd.notna(with_all.at[row, claim])
            has_without = row in without.index and claim in without.columns and pd.notna(without.at[row, claim])
            if has_with and not has_without:
                cell = (stand_in["dataset"], stand_in["clients"], stand_in["setting"], stand_in["algorithm"])
                lost.setdefault(claim, {}).setdefault(cell, []).append((stand_in["seed"], _round_text(run)))
    return {claim: "; ".join(_lost_text(cell, found, len({c[:2] for c in cells}) > 1)
                             for cell, found in sorted(cells.items()))
            for claim, cells in lost.items()}


def _lost_text(cell: tuple, found: list, name_the_data: bool) -> str:
    """"pathological seeds 1, 2 (pFedSD diverged in rounds 18, 12)"; with ``name_the_data``, the
    dataset and client count too."""
    dataset, clients, setting, algorithm = cell
    found = sorted(found)
    plural = "s" if len(found) > 1 else ""
    where = f"{dataset}, n = {clients}, {setting}" if name_the_data else setting
    return (f"{where} seed{plural} {', '.join(str(seed) for seed, _ in found)} "
            f"({METHOD_NAMES.get(algorithm, 'FedCKD γ = 1')} diverged in round{plural} "
            f"{', '.join(text for _, text in found)})")


def claim_effects(records) -> pd.DataFrame:
    """Per (dataset, setting, clients, seed): each claim's effect on final ALMA (:func:`effects_of`)."""
    return effects_of(observations(records), "final")


def verdict_basis(root=None) -> VerdictBasis:
    """The paper-scale Fashion-MNIST n = 100 column (:data:`PAPER_FMNIST100`) once every one of its
    runs is committed or diverged, judged without the convergence gate (T = 100 is the paper's); until then the
    committed reduced-profile records (cells that are still rising do not count), except for the
    claims ``moved`` to the column already: those whose every run is finished, so that no run still
    to come can change them (:func:`~fedkd_core.chapters.ledger.claims_settled`: Table IV's pair
    once its six runs are in). A claim is never judged on part of its runs (one seed of a few
    methods, with no interval, on whichever seeds the sweep reached first)."""
    from dataclasses import replace

    from ..ledger import rerun_or

    paper = paper_scale_records(root)
    basis = rerun_or(VerdictBasis(REDUCED_PROFILE, reduced_profile_records(root), scale_text(REDUCED_PROFILE), True),
                     VerdictBasis(PAPER_FMNIST100, paper, scale_text(PAPER_FMNIST100), False),
                     experiments(PAPER_FMNIST100), root)
    return basis if basis.params == PAPER_FMNIST100 else replace(basis, moved=settled_claims(paper, root))


def settled_claims(records, root=None) -> tuple[str, ...]:
    """The claims whose every paper-scale run is finished among ``records`` (the column's committed
    records) and its stored divergences (:func:`~fedkd_core.chapters.ledger.claims_settled`)."""
    from ...results import stored_divergences
    from ..ledger import claims_settled

    if not records:
        return ()
    planned = experiments(PAPER_FMNIST100)
    to_come = pd.DataFrame(_unfinished(planned, records, stored_divergences(planned, root)),
                           columns=list(EFFECT_CELL_KEYS) + ["seed", "algorithm", "final"])
    return claims_settled(effects_of, observations(records), to_come, list(EFFECT_CELL_KEYS) + ["seed"])


def verdict_basis_text(root=None) -> str:
    """What the verdicts rest on now (:func:`~fedkd_core.chapters.ledger.basis_text`): how many of
    the paper-scale column's runs are finished, the profile the verdicts are judged on, and the
    claims judged on the column already."""
    from ..ledger import basis_text

    basis = verdict_basis(root)
    rerun = (f"the paper-scale column (Tables I–II's Fashion-MNIST n = 100 cells and Table IV's pair; "
             f"{scale_text(PAPER_FMNIST100)})")
    return basis_text(basis, rerun, basis.params == PAPER_FMNIST100)


def ledger_rows(root=None) -> pd.DataFrame:
    """FedCKD's claims for the book's Claims page, judged on :func:`verdict_basis`'s records; a
    claim moved to the paper-scale column already is judged there. Each claim is judged on the runs
    it compares (:func:`claim_rows`). Table IV's annealing pair runs on Fashion-MNIST; the paper's
    is on CIFAR-100, so its side of that claim is CIFAR-100's."""
    basis = verdict_basis(root)
    rows = claim_rows(basis.params, basis.records, basis.scale, basis.enforce_gate, root)
    if not basis.moved:
        return rows
    paper = claim_rows(PAPER_FMNIST100, paper_scale_records(root), scale_text(PAPER_FMNIST100), False, root)
    return pd.concat([(paper if claim in basis.moved else rows)[lambda f, c=claim: f.claim == c] for claim in rows.claim],
                     ignore_index=True)[rows.columns]


def claim_rows(params, records, scale: str, enforce_gate: bool, root=None) -> pd.DataFrame:
    """The ledger's rows of every claim of ``records`` of the profile ``params``, each judged on the
    runs it compares (:func:`records_read`: its evidence counts them, and its interval is widened
    for machines that compute differently only where its own pairs of runs mix them), with the
    seeds a diverged run of that profile left out named in the note (:func:`diverged_seeds`)."""
    from ...results import stored_divergences

    divergences = stored_divergences(experiments(params), root) if records else []
    failures = failure_rows(records, divergences)
    every, reads = _judged(records, scale, enforce_gate, failures), records_read(records, failures)

    def row_of(claim: str) -> pd.DataFrame:
        read = reads.get(claim, [])
        judged = _judged(read, scale, enforce_gate, failures) if read and len(read) < len(records) else every
        return judged[judged.claim == claim]

    rows = pd.concat([row_of(claim) for claim in every.claim], ignore_index=True)
    left_out = diverged_seeds(records, divergences)
    rows["note"] = [("; ".join(filter(None, [note, LEFT_OUT + left_out[claim] if claim in left_out else ""])))
                    for claim, note in zip(rows.claim, rows.note)]
    return rows


def _judged(records, scale: str, enforce_gate: bool, failures: pd.DataFrame | None = None) -> pd.DataFrame:
    from ..ledger import evidence, judged_rows

    module = sys.modules[__package__]  # the chapter package, whose claims the ledger reads
    return judged_rows("FedCKD", module, records, "fedckd.html#verdict", scale, evidence(records),
                       enforce_gate=enforce_gate, sections={ANNEALING_CLAIM: "fedckd.html#table-iv-annealing"},
                       failures=failures)


def failure_rows(records, divergences) -> pd.DataFrame:
    """Observations that count each diverged run of ``divergences`` as its method's failure on its
    seed: scored at the worst final (and best-round) ALMA of any run of ``records`` in its cell
    (:func:`~fedkd_core.chapters.ledger.failure_observations`). Empty without divergences."""
    from ..ledger import failure_observations

    if not divergences or not records:
        return pd.DataFrame()
    return failure_observations(observations(records), [_stand_in(run) for run in divergences], list(EFFECT_CELL_KEYS))


def records_read(records, failures: pd.DataFrame | None = None) -> dict[str, list]:
    """Per claim with an effect on ``records`` (and the diverged runs' stand-ins ``failures``, which
    are never dropped), the runs of them its effects read: those without which its effect in some
    cell and seed changes or goes."""
    keys = list(EFFECT_CELL_KEYS) + ["seed"]
    observed = observations(records)
    if failures is not None and len(failures):
        observed = pd.concat([observed, failures], ignore_index=True)
    effects = effects_of(observed).set_index(keys)
    every = {claim: effects[claim].dropna().sort_index() for claim in effects.columns}
    read: dict[str, list] = {claim: [] for claim in every}
    for i, record in enumerate(records):
        without = effects_of(observed.drop(index=i)).set_index(keys)
        for claim, effect in every.items():
            if claim not in without.columns or not without[claim].dropna().sort_index().equals(effect):
                read[claim].append(record)
    return read
