"""The convergence gate: which cells of a claim count, because every run behind them was evaluated
often enough and had stopped rising; and which methods and cells a claim's effect reads.

A cell counts only if every run behind it was evaluated at least :data:`MIN_EVALUATIONS` times and
every method's mean curve gained less than :data:`MAX_LATE_GAIN` points over the last
:data:`LATE_SHARE` of the rounds (:func:`trajectory`, :func:`gate`). The rule is the book's own
(a plateau criterion stated before the runs were read), not a published test.
"""

from __future__ import annotations

import copy
import itertools
import pickle
import weakref
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .verdict_words import POINTS

# Per effects_of function (dropped with it), what :func:`claim_gates` and :func:`claims_cell_sources`
# found for a table of observations: a chapter's verdicts ask them for the same runs again and again
# (a judgement with the gate and without it, the cells' links and the gates). Each answer moves every
# method's or cell's values and computes effects_of again: the bulk of a verdict's cost.
_KNOWN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _remembered(effects_of, name: str, observations: pd.DataFrame, arguments: tuple, compute):
    """``compute()``, or a copy of what it gave for the same ``effects_of``, ``observations`` (by
    content) and ``arguments``; a function that cannot be weakly referenced is never remembered."""
    try:
        known = _KNOWN.setdefault(effects_of, {})
    except TypeError:
        return compute()
    key = (name, pickle.dumps((observations, arguments)))
    if key not in known:
        known[key] = compute()
    return copy.deepcopy(known[key])

# The convergence gate: a cell counts only if every run behind it was evaluated this often and its
# method's mean curve gained less than this many points over the last LATE_SHARE of the rounds.
MIN_EVALUATIONS = 10
MAX_LATE_GAIN = 1.0
LATE_SHARE = 0.2
LATE_SMOOTHING = 3  # evaluations averaged at each end of the late window (trajectory)


def gate_reasons(failed_rows) -> list[str]:
    """Why the gate failed these cells (:func:`gate` rows), the first rule first: too few
    evaluations ("evaluated 5 times, fewer than 10"), then the methods still rising
    (:func:`rising_text`); only the reasons that apply."""
    rows = list(failed_rows)
    return [text for text in (sparse_text(rows), rising_text(rows)) if text]


def evaluations_text(evaluations, least: int = MIN_EVALUATIONS) -> str:
    """"evaluated 5 times, fewer than 10" ("evaluated 4-5 times, ..." for a range)."""
    fewest, most = min(evaluations), max(evaluations)
    times = f"{fewest}" if fewest == most else f"{fewest}-{most}"
    return f"evaluated {times} time{'s' if most != 1 else ''}, fewer than {least}"


def sparse_text(failed_rows) -> str:
    """"evaluated 5 times, fewer than 10" where every failed cell was evaluated too rarely, "2 cells
    evaluated 5 times, fewer than 10" where only some were, "" where none was."""
    sparse = [int(row["evaluations"]) for row in failed_rows if row["evaluations"] < MIN_EVALUATIONS]
    if not sparse:
        return ""
    which = "" if len(sparse) == len(failed_rows) else f"{len(sparse)} cell{'s' if len(sparse) > 1 else ''} "
    return which + evaluations_text(sparse)


def rising_text(failed_rows) -> str:
    """"fedmd in 9 cells, selective_fd in 5 cells still rising" from the :func:`gate` rows of the
    failed cells ("" where no method was rising)."""
    methods: dict[str, int] = {}
    for row in failed_rows:
        for method in row["rising"]:
            methods[method] = methods.get(method, 0) + 1
    if not methods:
        return ""
    ranked = sorted(methods.items(), key=lambda item: -item[1])
    named = ", ".join(f"{m} in {n} cell{'s' if n > 1 else ''}" for m, n in ranked[:3])
    more = f" and {len(ranked) - 3} more methods" if len(ranked) > 3 else ""
    return f"{named}{more} still rising"


def passes_gate(gate_table: pd.DataFrame, cells: pd.DataFrame, cell_keys: Sequence[str]) -> list[bool]:
    """Per row of ``cells`` (columns ``cell_keys``), whether the :func:`gate` table passes it (a
    cell the table does not list passes)."""
    converged = gate_table["converged"].to_dict()
    return [bool(converged.get(key, True)) for key in cell_keys_of(cells, cell_keys)]


def cell_key(row: pd.Series, cell_keys: Sequence[str]):
    key = tuple(row[k] for k in cell_keys)
    return key if len(key) > 1 else key[0]


def cell_keys_of(cells: pd.DataFrame, cell_keys: Sequence[str]) -> list:
    """:func:`cell_key` of each row of ``cells``, read column by column (no row is built)."""
    rows = cells[list(cell_keys)].itertuples(index=False, name=None)
    return [row if len(cell_keys) > 1 else row[0] for row in rows]


def claims_in(effects: pd.DataFrame, cell_keys: Sequence[str]) -> list[str]:
    return [c for c in effects.columns if c not in set(cell_keys) | {"seed"}]


def trajectory(history: Sequence[dict], metric: str, rounds: int, late_share: float = LATE_SHARE,
               smoothing: int = LATE_SMOOTHING) -> dict:
    """From a run's evaluated rounds: the metric at the last evaluation ("final"), its best value
    ("best"), how many times it was evaluated, and its gain in points over the last ``late_share``
    of the rounds ("late_gain"): the mean of the last k evaluations minus the mean of the k
    evaluations ending at round (1 − ``late_share``) x ``rounds``, where k is ``smoothing`` or the
    number of evaluations after that round if fewer. One evaluation moves by up to a point from round
    to round (FedUA's FedAvg, evaluated every round); averaging three keeps that noise from reading
    as a rise or a plateau, and with one evaluation after the cut it is the plain difference."""
    points = [(row["round"], row[metric]) for row in history if row.get(metric) is not None and np.isfinite(row[metric])]
    if not points:
        return {"final": float("nan"), "best": float("nan"), "evaluations": 0, "late_gain": float("nan")}
    cut = (1 - late_share) * rounds
    before = [value for r, value in points if r <= cut]
    after = [value for r, value in points if r > cut]
    k = max(1, min(smoothing, len(after), len(before)))
    gain = (np.mean(after[-k:]) - np.mean(before[-k:])) * POINTS if before and after else float("nan")
    return {"final": points[-1][1], "best": max(value for _, value in points), "evaluations": len(points),
            "late_gain": float(gain)}


def gate(observations: pd.DataFrame, cell_keys: Sequence[str], method: str = "method",
         min_evaluations: int = MIN_EVALUATIONS, max_late_gain: float = MAX_LATE_GAIN) -> pd.DataFrame:
    """Per cell of ``observations`` (one row per run: ``cell_keys``, ``method``, final, evaluations,
    late_gain): whether every run was evaluated at least ``min_evaluations`` times and every
    method's mean late gain is below ``max_late_gain`` points; the methods still rising, the fewest
    evaluations, and the reason in words (e.g. "fedavg still rising: +3.2 points over the last 20%
    of rounds, ends at 23.1%")."""
    rows = {}
    fewest = observations.groupby(list(cell_keys), sort=True)["evaluations"].min()
    methods = _method_curves(observations, list(cell_keys), method)
    for cell, evaluations in fewest.items():
        cell = cell if isinstance(cell, tuple) else (cell,)
        reasons = []
        evaluations = int(evaluations)
        if evaluations < min_evaluations:
            reasons.append(evaluations_text([evaluations], min_evaluations))
        by_method = methods.get(cell, {})
        rising = [name for name, (gain, _) in by_method.items() if not gain < max_late_gain]
        reasons += [f"{name} still rising: {by_method[name][0]:+.1f} points over the last {LATE_SHARE:.0%} of rounds, "
                    f"ends at {by_method[name][1] * POINTS:.1f}%" if np.isfinite(by_method[name][0])
                    else f"{name} not evaluated in the last {LATE_SHARE:.0%} of rounds in some run" for name in rising]
        key = cell if len(cell_keys) > 1 else cell[0]
        rows[key] = {"converged": not reasons, "rising": rising, "evaluations": evaluations, "reason": "; ".join(reasons)}
    table = pd.DataFrame.from_dict(rows, orient="index", columns=["converged", "rising", "evaluations", "reason"])
    if len(cell_keys) > 1 and len(table):
        table.index = pd.MultiIndex.from_tuples(table.index, names=list(cell_keys))
    return table


def _method_curves(observations: pd.DataFrame, cell_keys: list[str], method: str) -> dict[tuple, dict]:
    """Per cell (a tuple of ``cell_keys``' values), per method in sorted order: the mean late gain
    of its runs (NaN where any run has none) and their mean final value, from one grouping of
    every cell's runs (a grouping per cell costs more than the gate's arithmetic)."""
    grouped = observations.groupby(cell_keys + [method], sort=True)
    finals = grouped["final"].mean()
    gains = observations["late_gain"].to_numpy(dtype=float)
    rows_of = grouped.indices
    curves: dict[tuple, dict] = {}
    for key, final in finals.items():
        curves.setdefault(key[:-1], {})[key[-1]] = (np.mean(gains[rows_of[key]]), final)
    return curves


def claim_methods(effects_of: Callable[[pd.DataFrame, str], pd.DataFrame], observations: pd.DataFrame,
                  cell_keys: Sequence[str], method: str = "method", value: str = "final") -> dict[str, set]:
    """Per claim of ``effects_of(observations)``, the methods its effect reads: a method belongs to
    a claim when moving that method's ``value`` far above, or far below, every other value changes
    the claim's effect somewhere. This finds the methods of a plain difference ("FedCKD > pFedSD"),
    and also those of a claim over whichever methods ran ("FedCKD best of the methods run", "every
    personalised method beats FedAvg and FedProx"), which lose no effect when one method is
    missing, so dropping a method's runs would not reveal that they read it. The convergence gate
    then reads exactly those methods (FedAvg still rising does not hold back "FedCKD > pFedSD")."""
    keys = list(cell_keys) + ["seed"]
    full = effects_of(observations, value)
    claims = claims_in(full, cell_keys)
    methods: dict[str, set] = {claim: set() for claim in claims}
    shifts = {name: _moved_values(observations, method, name, value) for name in observations[method].unique()}
    moved = iter(effects_of_each(effects_of, observations, value, [v for values in shifts.values() for v in values]))
    for name, values in shifts.items():
        for effects in itertools.islice(moved, len(values)):  # this method's moved tables, in order
            for claim in _changed_claims(full, effects, keys, claims):
                methods[claim].add(name)
    return methods


def _far(values: pd.Series) -> float:
    """A shift that moves a value past every other of ``values``."""
    return float(values.max() - values.min()) + 1.0


def _moved_values(observations: pd.DataFrame, method: str, name, value: str) -> list[pd.Series]:
    """``value`` with method ``name``'s values moved above every value, then below every value."""
    values = observations[value].astype(float)
    far = _far(values)
    own = (observations[method] == name).to_numpy()
    return [values.where(~own, values + shift) for shift in (far, -far)]


# Copies of a table are told apart by their seeds: copy i's seed s is filed as i * SEED_SPAN + s.
SEED_SPAN = 1_000_000


def effects_of_each(effects_of, frame: pd.DataFrame, value: str, columns: Sequence) -> list[pd.DataFrame]:
    """``effects_of(frame.assign(value=column), value)`` for each of ``columns``, from one call: the
    copies of ``frame`` go in together, copy i's seeds filed as i * :data:`SEED_SPAN` + seed, and
    each copy's effects come back under its own seeds. A chapter's effects read each seed's rows
    alone (:meth:`fedkd_core.contracts.ClaimsChapter.effects_of`), so each copy's effects are those
    of its own call; a verdict's perturbations (every method or cell moved, every printed mean
    nudged) cost one pivot of the chapter's table instead of one per perturbation. Seeds outside
    [0, SEED_SPAN) are computed one call at a time."""
    seeds = frame["seed"].to_numpy()
    if not len(columns) or not np.issubdtype(seeds.dtype, np.integer) or seeds.min(initial=0) < 0 \
            or seeds.max(initial=0) >= SEED_SPAN:
        return [effects_of(frame.assign(**{value: column}), value) for column in columns]
    copies = pd.concat([frame.assign(**{value: np.asarray(column), "seed": seeds + i * SEED_SPAN})
                        for i, column in enumerate(columns)], ignore_index=True)
    effects = effects_of(copies, value)
    which = effects["seed"].to_numpy() // SEED_SPAN
    return [effects[which == i].assign(seed=lambda f: f["seed"] % SEED_SPAN).reset_index(drop=True)
            for i in range(len(columns))]


def _changed_rows(full: pd.DataFrame, moved: pd.DataFrame, keys: list[str], claims: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Per claim of ``claims`` that ``moved`` still has, the ``keys`` of the rows where its effect
    in ``moved`` differs from ``full`` (an effect that disappears from a row counts as a change).
    One merge serves every claim: the rows are matched on ``keys`` alone."""
    present = [claim for claim in claims if claim in moved]
    if _same_rows(full, moved, keys):  # the usual case: no merge needed to match the rows
        rows = full[keys]
        return {claim: rows[_differs(full[claim], moved[claim])] for claim in present}
    # the moved effects under integer labels: no claim's name (a string) can collide with them
    renamed = moved[keys + present].set_axis(keys + list(range(len(present))), axis=1)
    both = full[keys + present].merge(renamed, on=keys, how="left")
    return {claim: both.loc[_differs(both[claim], both[i]), keys] for i, claim in enumerate(present)}


def _changed_claims(full: pd.DataFrame, moved: pd.DataFrame, keys: list[str], claims: Sequence[str]) -> list[str]:
    """The claims of ``claims`` whose effect in ``moved`` differs from ``full`` in some row, or
    disappears (:func:`_changed_rows`, without building the rows where only whether is asked)."""
    if _same_rows(full, moved, keys):
        return [claim for claim in claims if claim not in moved or _differs(full[claim], moved[claim]).any()]
    changed = _changed_rows(full, moved, keys, claims)
    return [claim for claim in claims if claim not in changed or len(changed[claim])]


def _same_rows(one: pd.DataFrame, other: pd.DataFrame, keys: list[str]) -> bool:
    """Whether two effect tables hold the same ``keys``, each once, row for row (a merge on ``keys``
    would then pair row i with row i)."""
    return (len(one) == len(other)
            and all(np.array_equal(one[key].to_numpy(), other[key].to_numpy()) for key in keys)
            and not one.duplicated(keys).any())


def _differs(these: pd.Series, those: pd.Series) -> np.ndarray:
    """Per row, whether two columns of effects differ (NaN equal to NaN, as a missing effect)."""
    return ~np.isclose(these.to_numpy(dtype=float), those.to_numpy(dtype=float), equal_nan=True)


def claim_gates(effects_of: Callable[[pd.DataFrame, str], pd.DataFrame], observations: pd.DataFrame,
                cell_keys: Sequence[str], method: str = "method") -> dict[str, pd.DataFrame]:
    """Per claim, the :func:`gate` of the runs of the methods it compares (:func:`claim_methods`),
    where a cell whose effect also reads the runs of other cells (FedUA's relative drop from C = 1)
    passes only if those cells pass too (:func:`claims_cell_sources`)."""
    return _remembered(effects_of, "gates", observations, (tuple(cell_keys), method),
                       lambda: _claim_gates(effects_of, observations, cell_keys, method))


def _claim_gates(effects_of, observations: pd.DataFrame, cell_keys: Sequence[str], method: str) -> dict[str, pd.DataFrame]:
    methods_of = claim_methods(effects_of, observations, cell_keys, method)
    sources = claims_cell_sources(effects_of, observations, cell_keys, list(methods_of))
    return {claim: with_sources(gate(observations[observations[method].isin(methods)], cell_keys, method),
                                sources.get(claim, {}))
            for claim, methods in methods_of.items()}


def cell_sources(effects_of: Callable[[pd.DataFrame, str], pd.DataFrame], observations: pd.DataFrame,
                 cell_keys: Sequence[str], claim: str, value: str = "final") -> dict[tuple, set]:
    """Per cell of ``claim``'s effects, the *other* cells whose runs its effect reads: moving every
    value of a cell far above the rest changes the effect there (a relative drop reads the C = 1
    cell it drops from)."""
    return claims_cell_sources(effects_of, observations, cell_keys, [claim], value).get(claim, {})


def claims_cell_sources(effects_of: Callable[[pd.DataFrame, str], pd.DataFrame], observations: pd.DataFrame,
                        cell_keys: Sequence[str], claims: Sequence[str],
                        value: str = "final") -> dict[str, dict[tuple, set]]:
    """:func:`cell_sources` of every claim of ``claims`` at once: each cell is moved once and every
    claim's effects read from that one move (a claim's effect reads only its own methods' runs, so
    moving the other methods' runs of the cell as well changes nothing for it)."""
    return _remembered(effects_of, "sources", observations, (tuple(cell_keys), tuple(claims), value),
                       lambda: _claims_cell_sources(effects_of, observations, cell_keys, claims, value))


def _claims_cell_sources(effects_of, observations: pd.DataFrame, cell_keys: Sequence[str], claims: Sequence[str],
                         value: str) -> dict[str, dict[tuple, set]]:
    keys = list(cell_keys)
    observations = observations.reset_index(drop=True)
    full = effects_of(observations, value)
    claims = [claim for claim in claims if claim in full]
    values = observations[value].astype(float)
    far = _far(values)
    sources: dict[str, dict[tuple, set]] = {claim: {} for claim in claims}
    groups = list(observations.groupby(keys, sort=False)) if claims else []
    every_moved = effects_of_each(effects_of, observations, value,
                                  [values.where(~observations.index.isin(runs.index), values + far) for _, runs in groups])
    for (source, runs), moved in zip(groups, every_moved):
        source = source if isinstance(source, tuple) else (source,)
        for claim, changed in _changed_rows(full, moved, keys + ["seed"], claims).items():
            for target in changed[keys].drop_duplicates().itertuples(index=False, name=None):
                if tuple(target) != source:
                    sources[claim].setdefault(tuple(target), set()).add(source)
    return sources


def joint_gate(one: pd.DataFrame | None, other: pd.DataFrame | None) -> pd.DataFrame | None:
    """Two :func:`gate` tables of the same claim on two sets of runs (a method as coded and tuned),
    as one: a cell passes only where it passes in both, so that both sets are judged on the same
    cells; the methods still rising and the fewest evaluations of either."""
    if one is None or other is None:
        return one if other is None else other
    index = one.index.union(other.index)
    a, b = one.reindex(index), other.reindex(index)
    passes = lambda t: t["converged"].map(lambda v: True if v is None or v != v else bool(v))  # noqa: E731
    rising = lambda t: t["rising"].map(lambda v: v if isinstance(v, list) else [])  # noqa: E731
    return pd.DataFrame({"converged": passes(a) & passes(b),
                         "rising": [sorted(set(x) | set(y)) for x, y in zip(rising(a), rising(b))],
                         "evaluations": pd.concat([a["evaluations"], b["evaluations"]], axis=1).min(axis=1),
                         "reason": ["; ".join(r for r in (x, y) if isinstance(r, str) and r) for x, y in zip(a["reason"], b["reason"])]},
                        index=index)


def with_sources(table: pd.DataFrame, sources: dict[tuple, set]) -> pd.DataFrame:
    """``table`` (a :func:`gate`) with each cell failing where a cell it reads (``sources``) fails,
    the reason naming that cell."""
    table = table.copy()

    def row_of(cell: tuple):
        key = cell if table.index.nlevels > 1 else cell[0]
        return table.loc[key] if key in table.index else None

    for target, cells in sources.items():
        mine = row_of(target)
        failing = [(cell, row) for cell in sorted(cells, key=str) if (row := row_of(cell)) is not None and not row.converged]
        if mine is None or not failing:
            continue
        key = target if table.index.nlevels > 1 else target[0]
        reasons = [mine.reason] if mine.reason else []
        reasons += [f"the cell it is measured against ({', '.join(map(str, cell))}): {row.reason}" for cell, row in failing]
        table.at[key, "converged"] = False
        table.at[key, "rising"] = sorted(set(mine.rising).union(*(row.rising for _, row in failing)))
        table.at[key, "evaluations"] = min([int(mine.evaluations)] + [int(row.evaluations) for _, row in failing])
        table.at[key, "reason"] = "; ".join(reasons)
    return table
