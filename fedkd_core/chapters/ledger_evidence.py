"""What a chapter's verdicts rest on: the records (a :class:`VerdictBasis`), the reruns at a larger
scale and how far they have got (:class:`Rerun`, :func:`reruns_table`), the evidence line, and the
robustness column of the ledger (:func:`robustness_column`). Part of :mod:`fedkd_core.chapters.ledger`,
which re-exports every name here."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pandas as pd

from ..verdicts import NO_RECORDS


@dataclass(frozen=True)
class VerdictBasis:
    """The records a chapter's verdicts rest on: which reference profile (``params``), its
    committed ``records``, the scale as the verdict box states it, and whether the convergence gate
    applies (``enforce_gate``: off only for runs at the paper's own scale and round budget); where a
    rerun at a larger scale is under way, how many of its runs are finished of those planned, and
    the claims judged on it already (``moved``: every run such a claim compares is finished, while
    runs of others are not; :func:`claims_settled`)."""

    params: object
    records: list
    scale: str
    enforce_gate: bool
    rerun_finished: int = 0
    rerun_planned: int = 0
    moved: tuple = ()


def rerun_or(fallback: VerdictBasis, rerun: VerdictBasis, configs, root=None) -> VerdictBasis:
    """``rerun`` once every run of its grid ``configs`` is finished (its records committed, or
    diverged: :func:`fedkd_core.results.finished_runs`), else ``fallback``, never a partial rerun
    (it would judge each claim on whichever seeds and cells the sweep reached first); either with
    the rerun's progress."""
    from dataclasses import replace

    from ..results import finished_runs, planned_runs

    planned = planned_runs(configs)
    finished = finished_runs(configs, rerun.records, root)
    chosen = rerun if rerun.records and finished == planned else fallback
    return replace(chosen, rerun_finished=finished, rerun_planned=planned)


def claims_settled(effects_of, observed: pd.DataFrame, to_come: pd.DataFrame, keys: list[str]) -> tuple[str, ...]:
    """The claims of ``effects_of`` on ``observed`` (one row per finished run, :func:`observations`'
    columns) that no run still ``to_come`` (stand-in rows for the planned runs not finished) can
    change: with the stand-ins scoring 0 and with them scoring 100, the claim's effect in every
    cell and seed is what the finished runs alone give, and there is at least one. A claim that
    compares a method with runs still to come, or gains a seed or cell from them, is not settled.
    Two extremes bound every value the runs to come can take for effects that rise or fall with
    each run's score (differences, the min or max over methods, as every chapter's are)."""
    now = effects_of(observed, "final").set_index(keys)
    extremes = [effects_of(pd.concat([observed, to_come.assign(final=score)], ignore_index=True), "final").set_index(keys)
                for score in (0.0, 100.0)]

    def unchanged(claim: str, later: pd.DataFrame) -> bool:
        return claim in later.columns and now[claim].dropna().sort_index().equals(later[claim].dropna().sort_index())

    return tuple(claim for claim in now.columns
                 if now[claim].notna().any() and all(unchanged(claim, later) for later in extremes))


@dataclass(frozen=True)
class Rerun:
    """A sweep that reruns a chapter's evidence at a larger scale: the chapter as the Claims page
    names it, its grid's profile (``params``), its yaml under ``notebooks/params/`` (``path``), and
    the rows that move onto it once every one of its runs is finished (``decides``), the
    profile whose committed runs of the same methods pace the kinds it has not run yet
    (``pace_reference``: :func:`fedkd_core.sweep.calibrated_paces`), and whether it is a robustness
    grid (``robustness``: its runs are every variant's, :func:`~.robustness.experiments`). A chapter
    lists its own in ``RERUNS``."""

    chapter: str
    params: object
    path: str
    decides: str
    pace_reference: object = None  # a profile whose committed runs of the same methods pace kinds not run yet
    robustness: bool = False

    def configs(self, module, params=None) -> list:
        """The runs of the rerun's grid (of ``params``, default its own): the chapter's
        ``experiments``, or every robustness variant's for a robustness grid."""
        from .robustness import experiments as variant_runs

        params = self.params if params is None else params
        return variant_runs(module, params) if self.robustness else module.experiments(params)

    def complete_text(self, module, root=None) -> str:
        """What a complete rerun's row says: the verdicts rest on it; a robustness grid's, whether
        the robustness column does yet (only once the verdicts have moved too: :func:`~.robustness.grid_of`)."""
        from .robustness import grid_of

        if not self.robustness:
            return "none: complete, the verdicts rest on it"
        if grid_of(module, root).rerun:
            return "none: complete, the robustness column rests on it"
        return "none: complete, it counts once the verdicts have moved"


RERUN_COLUMNS = ["chapter", "rerun", "decides", "runs finished", "one core's time left"]


def rerun_row(module, rerun: Rerun, root=None, earlier: frozenset = frozenset()) -> dict:
    """How far ``rerun`` has got: its runs finished (records, and diverged runs) of those planned,
    and one worker's time for the rest at the pace of the finished ones (on the machines
    :func:`rerun_machines` names; "—" before any has finished), or that it is complete. Runs it
    shares with an earlier rerun of the chapter (their keys: ``earlier``) count there, not here:
    its time is then what it adds "after" that one."""
    from ..results import config_hash, stored_divergences, stored_records
    from ..sweep import duration_text, estimated_seconds

    configs = rerun.configs(module)
    records, diverged = stored_records(configs, root), stored_divergences(configs, root)
    finished = {record.key for record in records} | {divergence.key for divergence in diverged}
    unfinished = [config for config in configs if config_hash(config) not in finished]
    left = [config.resolved() for config in unfinished if config_hash(config) not in earlier]
    reference = stored_records(rerun.configs(module, rerun.pace_reference), root) if rerun.pace_reference else []
    seconds = estimated_seconds(left, on_cpu(records), reference=on_cpu(reference)) if left else None
    shared = len(left) < len(unfinished)
    pace = (duration_text(seconds) + (" after the rerun above" if shared else "") if seconds
            else rerun.complete_text(module, root) if not unfinished
            else "none after the rerun above" if not left else "—")
    count = f"{len(records) + len(diverged)} of {len(configs)}" + (f" ({len(diverged)} diverged)" if diverged else "")
    return {"chapter": rerun.chapter, "rerun": rerun.path, "decides": rerun.decides, "runs finished": count,
            "one core's time left": pace}


def on_cpu(records) -> list:
    """The ``records`` of runs made on a CPU: the pace of one core's time left (a GPU run's pace,
    several runs sharing the device, says nothing about a core's)."""
    from ..results import on_gpu

    return [record for record in records if not on_gpu(record)]


def chapter_reruns() -> list[tuple]:
    """(chapter module, :class:`Rerun`) for every rerun a chapter lists, in the book's order."""
    from . import CHAPTERS, chapter_module

    return [(module, rerun) for name in CHAPTERS for module in [chapter_module(name)]
            for rerun in getattr(module, "RERUNS", ())]


def rerun_machines(root=None) -> str:
    """The CPUs the reruns' finished runs ran on (their pace is the time left's), one name each."""
    from ..results import stored_records

    from ..cpuinfo import machine_text

    names = {machine_text(record.environment.get("device_name")) for module, rerun in chapter_reruns()
             for record in on_cpu(stored_records(rerun.configs(module), root))}
    return ", ".join(sorted(names)) or "none yet"


def reruns_table(root=None) -> pd.DataFrame:
    """Every chapter's reruns (``RERUNS``) in the book's chapter order, one :func:`rerun_row` each; a
    run two reruns of a chapter share is timed in the first."""
    from ..results import config_hash

    rows, earlier = [], {}
    for module, rerun in chapter_reruns():
        keys = earlier.setdefault(rerun.chapter, set())
        rows.append(rerun_row(module, rerun, root, frozenset(keys)))
        keys.update(config_hash(config) for config in rerun.configs(module))
    return pd.DataFrame(rows, columns=RERUN_COLUMNS)


def basis_text(basis: VerdictBasis, rerun: str, moved: bool) -> str:
    """What a chapter's verdicts rest on (a :func:`rerun_or` basis): how many of the runs of the
    ``rerun`` they move to are finished (committed or diverged), whether they have ``moved``, and
    the profile (with its scale and runs) that the verdicts are judged on now."""
    finished = f"**{basis.rerun_finished} of the {basis.rerun_planned} runs** of {rerun} are finished (committed, or diverged)"
    if moved:  # named as the rerun's: a profile's earlier, smaller runs may count as many records
        return (f"{finished}, and the verdicts have moved to it: they rest on the rerun's {len(basis.records)} "
                f"committed records ({basis.scale}), not on earlier runs of the **{basis.params.profile}** profile.")
    if basis.moved:
        named = [f"*{claim}*" for claim in basis.moved]
        claims = ", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else named[0]
        return (f"{finished}. Every run that {claims} compare{'s' if len(basis.moved) == 1 else ''} is among them, "
                f"so {'that claim is' if len(basis.moved) == 1 else 'those claims are'} judged on it already (no run "
                f"still to come can change {'it' if len(basis.moved) == 1 else 'them'}); the others move once all the "
                f"runs are finished, and until then rest on the **{basis.params.profile}** profile's "
                f"{len(basis.records)} committed records ({basis.scale}).")
    return (f"{finished}, and the verdicts move to it once all of them are. Until then they rest on the "
            f"**{basis.params.profile}** profile's {len(basis.records)} committed records ({basis.scale}).")


def evidence(records) -> str:
    """"profile paper: 152 runs, 1-3 seeds per cell, 15/30 rounds" for the records a claim rests
    on (a cell is a configuration up to its seed)."""
    if not records:
        return NO_RECORDS
    by_profile: dict[str, list] = {}
    for record in records:
        by_profile.setdefault(record.profile, []).append(record)
    return "; ".join(f"profile {p}: {len(rs)} runs, {_seeds_per_cell(rs)} seed(s) per cell, "
                     f"{'/'.join(str(n) for n in sorted({r.config['rounds'] for r in rs}))} rounds"
                     for p, rs in sorted(by_profile.items()))


def _seeds_per_cell(records) -> str:
    from ..results import key_of  # a record's key without its seed: fields added later, at their old value, drop out

    cells = Counter(key_of({**r.config, "seed": None}) for r in records)
    fewest, most = min(cells.values()), max(cells.values())
    return str(fewest) if fewest == most else f"{fewest}-{most}"


def robustness_column(module, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with a "robustness" column for claims the chapter's robustness grid covers, "—"
    for the others: "holds in k, inconclusive in j of V variants that bear on it (C of N variants run)", with the
    convergence gate's reason where it left a variant no cell, and the variants whose diverged runs
    left the claim without a cell (:func:`robustness.claim_text`). Only complete
    variants count; of those, a variant bears on a claim unless it leaves every method the claim
    compares as the chapter's reading has them (Selective-FD's threshold for "KnFu > FedMD").
    A chapter whose rows name their claims differently from its grid maps them with
    ``robustness_claim(row_claim) -> grid claim or None`` and says how the grid's reading differs
    in ``ROBUSTNESS_ROW_PREFIX`` (KnFu: rows on tuned schedules, a grid on the round as first coded);
    where the verdicts have moved onto a rerun at a larger scale, :func:`grid_scale_prefix` says
    at which scale the grid is read."""
    from .robustness import claim_table, grid_of

    if not hasattr(module, "ROBUSTNESS"):
        return rows.assign(robustness="—")
    grid = grid_of(module)
    table = claim_table(module, grid.base, enforce_gate=grid.enforce_gate)
    texts = robustness_texts(table, planned=len(module.ROBUSTNESS))
    grid_claim = getattr(module, "robustness_claim", lambda claim: claim)
    prefix = getattr(module, "ROBUSTNESS_ROW_PREFIX", "")
    basis = module.verdict_basis() if hasattr(module, "verdict_basis") else None  # once, not once per claim
    scale = {claim: grid_scale_prefix(module, grid, claim, basis) for claim in rows.claim}
    return rows.assign(robustness=[prefix + scale[claim] + texts[grid_claim(claim)]
                                   if grid_claim(claim) in texts.index else "—" for claim in rows.claim])


# How the Claims page's robustness text starts where the grid is not read at the verdicts' scale, and
# where it is read on a rerun at the paper's round budget with the still-rising cells counted.
GRID_APART_PREFIX = ("from the grid at the reduced profile's smaller scale, superseded (no robustness evidence yet at the "
                     "verdict's scale{rerun}): ")
GRID_RERUN_LISTED = "; its rerun is on the Claims page's reruns table"
GRID_RERUN_PREFIX = "grid rerun at the verdict's scale, still-rising cells counted: "


def grid_apart(module, grid=None, claim: str | None = None, basis: VerdictBasis | None = None) -> bool:
    """Whether a chapter's verdicts have moved off its reduced profile onto a rerun at a larger scale
    (``verdict_basis()``: FedGMKD's 50 rounds, FedCKD's paper column; with ``claim``, that claim's
    verdict; without, any of them, :attr:`VerdictBasis.moved`) while its robustness grid
    (``grid``, :func:`~.robustness.grid_of`'s) is still the one derived from the reduced profile.
    ``basis``: the chapter's ``verdict_basis()`` where the caller has it already."""
    from .robustness import grid_of

    if not hasattr(module, "verdict_basis"):
        return False
    basis = basis or module.verdict_basis()
    if basis.params == module.REDUCED_PROFILE and not (claim in basis.moved if claim else basis.moved):
        return False
    return not (grid or grid_of(module)).rerun


def grid_scale_prefix(module, grid=None, claim: str | None = None, basis: VerdictBasis | None = None) -> str:
    """:data:`GRID_APART_PREFIX` where the verdicts (``claim``'s, or any) and the robustness grid
    read runs at different scales (:func:`grid_apart`), :data:`GRID_RERUN_PREFIX` where the grid is
    rerun at the verdicts' scale and judged as they are, every cell counted; else "" (``basis`` as
    :func:`grid_apart`'s)."""
    from .robustness import grid_of

    if not hasattr(module, "verdict_basis"):  # verdicts that never move: the grid is at their scale
        return ""
    grid = grid or grid_of(module)
    if grid_apart(module, grid, claim, basis):
        listed = any(rerun.robustness for rerun in getattr(module, "RERUNS", ()))
        return GRID_APART_PREFIX.format(rerun=GRID_RERUN_LISTED if listed else "")
    return GRID_RERUN_PREFIX if grid.rerun and not grid.enforce_gate else ""


def robustness_texts(table: pd.DataFrame, planned: int) -> pd.Series:
    """Per claim of a :func:`robustness.claim_table`, the Claims page's robustness text
    (:func:`robustness.claim_texts`)."""
    from .robustness import claim_texts

    return claim_texts(table, planned)
