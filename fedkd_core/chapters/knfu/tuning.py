"""Every method's phase schedule, chosen with the same budget on a validation split.

Issue 33 found that the round's *schedule* (a fresh optimiser per phase, the digest's learning
rate, a revisit of the client's data after the digest) decides the baselines' results as much as
their methods do. So each of the paper's four methods runs the same eight schedules
(:data:`CANDIDATES`, :mod:`fedkd_core.algorithms.shapes.schedule`) in the tuning cells (MNIST,
|D_n| = 100, Dir(0.1 / 0.5 / 1), seed 0), trained on 80% of every client's data and scored on the
20% held out (never on the test data); each method keeps the schedule with the highest mean
validation ALMA at the last round. :data:`~.profiles.TUNING_PROFILE` is that grid
(``notebooks/params/tuning/knfu.yaml``), and :data:`~.profiles.TUNED_PROFILE` the paper profile's
MNIST cells rerun under the chosen schedules (``notebooks/params/paper/knfu_tuned.yaml``; a test
checks that its schedules are the ones :func:`chosen_schedules` computes from the committed tuning
records). :data:`~.profiles.TUNED_CIFAR_PROFILE` reruns Table 2's cells (CIFAR-10) under the same
schedules, chosen on MNIST and not re-tuned there.

It comes after ``tables`` and before ``claims`` (whose ``ledger_rows`` reads :func:`tuned_records`);
:func:`verdict_changes` judges the claims through the chapter package, at call time.
"""

from __future__ import annotations

import sys
from dataclasses import fields, replace

import pandas as pd

from ...algorithms.shapes.schedule import PhaseSchedule, schedule_text
from ...results import stored_records
from ...tables import signed
from .grid import METHODS, TUNED, Params, experiments
from .paper import paper_table1, paper_table2
from .profiles import PAPER_PROFILE, TUNED_CIFAR_PROFILE, TUNED_PROFILE, TUNING_PROFILE
from .tables import final_table

# Two choices for each of the three: optimiser state, digest learning rate, revisit epochs.
CANDIDATES = ("fresh/-/0", "fresh/0.0001/0", "fresh/-/1", "fresh/0.0001/1",
              "kept/-/0", "kept/0.0001/0", "kept/-/1", "kept/0.0001/1")
DEFAULT = "fresh/-/0"  # the round as first coded: what the committed paper-profile records ran
GAIN_COLUMN = "vs as first coded (points)"  # a schedule's validation ALMA less DEFAULT's
# verdict_changes' columns: each claim's word and effect on every cell, as first coded and tuned
CODED_VERDICT, TUNED_VERDICT = "as first coded, every cell", "tuned, every cell"


def schedule_of(record) -> str:
    """A record's schedule as text (the method's Config defaults fill what the record lacks)."""
    params = record.config["algorithm_params"]
    return schedule_text(PhaseSchedule(**{f.name: params[f.name] for f in fields(PhaseSchedule) if f.name in params}))


def schedules_text(runs) -> str:
    """Each method's round schedule in ``runs`` (:func:`schedule_of`), "KnFu: kept/-/1; Local: kept/-/0",
    for the methods whose schedule is tuned (:data:`~.grid.TUNED`)."""
    return "; ".join(f"{METHODS[algorithm]}: {schedule}" for algorithm, schedule in
                     sorted({(r.config["algorithm"], schedule_of(r)) for r in runs if r.config["algorithm"] in TUNED}))


def tuning_records(root=None) -> list:
    """The committed records of :data:`~.profiles.TUNING_PROFILE` (nothing is run)."""
    return stored_records(experiments(TUNING_PROFILE), root)


def tuning_table(records) -> pd.DataFrame:
    """One row per method and schedule: validation ALMA (%) at the last round per tuning cell, its mean
    over the cells every schedule of the method has run (``cells``), and the gain over the default
    schedule (:data:`GAIN_COLUMN`, points)."""
    rows = [{"method": METHODS[r.config["algorithm"]], "algorithm": r.config["algorithm"],
             "schedule": schedule_of(r), "alpha": float(r.config["data"]["alpha"]),
             "alma": 100 * r.final["alma"]} for r in records]
    if not rows:
        return pd.DataFrame(columns=["method", "algorithm", "schedule", "cells", "validation ALMA (%)",
                                     GAIN_COLUMN])
    frame = pd.DataFrame(rows)
    wide = frame.pivot_table(index=["method", "algorithm", "schedule"], columns="alpha", values="alma")
    # the mean is over the cells where every schedule of the method has run, so schedules are compared
    # on the same cells while a sweep is under way (a cell's own column shows what has run)
    complete = wide.notna().groupby(level="algorithm").transform("all")
    wide.columns = [f"α = {alpha:g}" for alpha in wide.columns]
    shared = wide.where(complete.to_numpy())
    table = wide.assign(cells=shared.notna().sum(axis=1), **{"validation ALMA (%)": shared.mean(axis=1)}).reset_index()
    default = table[table.schedule == DEFAULT].set_index("algorithm")["validation ALMA (%)"]
    table[GAIN_COLUMN] = table["validation ALMA (%)"] - table.algorithm.map(default)
    return table.sort_values(["method", "validation ALMA (%)"], ascending=[True, False], ignore_index=True)


def chosen_schedules(records, cells: int = 3) -> dict[str, str]:
    """Each tuned method's schedule with the highest mean validation ALMA, among schedules run in
    all ``cells`` tuning cells; a method whose candidates are not all complete has no choice yet."""
    table = tuning_table(records)
    chosen = {}
    for algorithm, group in table.groupby("algorithm"):
        complete = group[group.cells == cells]
        if len(complete) == len(CANDIDATES):
            chosen[algorithm] = complete.loc[complete["validation ALMA (%)"].idxmax(), "schedule"]
    return chosen


def tuned_params(chosen: dict[str, str], base: Params = PAPER_PROFILE, datasets: str = "mnist") -> Params:
    """The paper profile's cells of ``datasets`` with ``chosen`` schedules (a method at the default
    schedule keeps the committed records' keys)."""
    text = ", ".join(f"{method}={chosen[method]}" for method in TUNED if method in chosen)
    return replace(base, datasets=datasets, schedules=text)


def tuned_records(root=None) -> list:
    """The committed records of :data:`~.profiles.TUNED_PROFILE` (nothing is run)."""
    return stored_records(experiments(TUNED_PROFILE), root)


def tuned_cifar_records(root=None) -> list:
    """The committed records of :data:`~.profiles.TUNED_CIFAR_PROFILE` (nothing is run)."""
    return stored_records(experiments(TUNED_CIFAR_PROFILE), root)


def _run_keys(frame: pd.DataFrame) -> pd.Series:
    return frame[["dataset", "alpha", "size", "seed"]].apply(tuple, axis=1)


def same_runs(coded, tuned) -> list:
    """The records of ``coded`` whose method, cell and seed some record of ``tuned`` has: the two
    schedules compared on the same cells and seeds while the tuned sweep is under way (methods the
    tuned set does not rerun, FedMD's original form, are left out)."""
    if not tuned:
        return []
    wanted = set(_run_keys(final_table(tuned)))
    methods = {r.config["algorithm"] for r in tuned}
    return [r for r, key in zip(coded, _run_keys(final_table(coded)))
            if key in wanted and r.config["algorithm"] in methods]


def schedule_table(coded, tuned) -> pd.DataFrame:
    """Per cell and method: mean final ALMA (%) as first coded and under the tuned schedule over the
    same seeds, the change (points), the seeds, and the paper's Table 1 (MNIST) or 2 (CIFAR-10)."""
    coded = final_table(same_runs(coded, tuned)).assign(schedule="as coded")
    tuned_frame = final_table(tuned).assign(schedule="tuned")
    both = pd.concat([coded, tuned_frame], ignore_index=True)
    columns = ["dataset", "alpha", "size", "method", "as coded", "tuned", "change (points)", "seeds", "paper"]
    if both.empty:
        return pd.DataFrame(columns=columns)
    both["alma"] *= 100
    keys = ["dataset", "alpha", "size", "algorithm"]
    wide = both.pivot_table(index=keys, columns="schedule", values="alma").reset_index()
    seeds = tuned_frame.groupby(keys).seed.nunique().rename("seeds").reset_index()
    paper = pd.concat([paper_table1(), paper_table2()], ignore_index=True).rename(columns={"mean": "paper"})
    table = wide.merge(seeds, on=keys).merge(paper[keys + ["paper"]], on=keys, how="left")
    table["change (points)"] = table["tuned"] - table["as coded"]
    table["method"] = table.algorithm.map(METHODS)
    return table[columns].sort_values(["dataset", "size", "alpha", "method"], ascending=[False, True, True, True],
                                      ignore_index=True)


def schedule_gaps(table: pd.DataFrame) -> str:
    """From a :func:`schedule_table`, each method's mean of ours − the paper's (points) over the
    cells with a paper value, as first coded and tuned: whether tuning the round's schedule closed
    the baselines' gap to the paper, or overshot it."""
    rows = table.dropna(subset=["paper"])
    if rows.empty:
        return ""
    gaps = {label: (rows[column] - rows["paper"]).groupby(rows["method"]).mean()
            for label, column in (("as first coded", "as coded"), ("tuned", "tuned"))}
    cells = len(rows[["alpha", "size"]].drop_duplicates())
    return (f"Ours − the paper's, in points, on average over these {cells} cells: "
            + "; ".join(f"{label}, " + ", ".join(f"{method} {signed(gap)}" for method, gap in values.items())
                        for label, values in gaps.items()) + ".")


def verdict_changes(coded, tuned) -> pd.DataFrame:
    """Per claim: the verdict (word, pooled effect and interval, cells) on the as-coded records and
    on the tuned ones over the same cells and seeds, the paper's over those cells, whether the word
    changed, and how many of the cells both sets have converged in (:func:`~fedkd_core.verdicts.joint_gate`).
    Every cell counts on both sides, so the two verdicts read the same cells: the as-coded runs are
    mostly still rising at R = 15, and the gate would leave the comparison a cell or two (the
    chapter's verdicts, on the tuned runs alone, apply it). A claim none of these cells test (Local
    over every sharing method: a CIFAR-10 claim) is left out."""
    from ...verdicts import claim_gates, joint_gate
    from ..ledger import NO_RECORDS, judge_chapter, kept_cells, one_precision, paper_text

    chapter = sys.modules[__package__]  # the chapter package, whose claims the ledger reads
    coded = same_runs(coded, tuned)
    if not tuned:
        return pd.DataFrame(columns=["claim", CODED_VERDICT, TUNED_VERDICT, "verdict changed",
                                     "converged in both", "the paper's, these cells"])
    keys = list(chapter.EFFECT_CELL_KEYS)
    one, other = (claim_gates(chapter.effects_of, chapter.observations(runs), keys, chapter.METHOD_COLUMN)
                  for runs in (coded, tuned))
    gates = {claim: joint_gate(one.get(claim), other.get(claim)) for claim in set(one) | set(other)}
    kept = kept_cells(chapter.effects_of(chapter.observations(tuned), "final"), keys, gates)
    before, after = (judge_chapter(chapter, runs, enforce_gate=False) for runs in (coded, tuned))
    rows = []
    for claim, verdicts in after.items():
        was = before.get(claim, {}).get("final")
        now = verdicts["final"]
        if now.word == NO_RECORDS:
            continue
        rows.append({"claim": claim,
                     CODED_VERDICT: f"{was.word}, {one_precision(was.effect_text)}" if was else "—",
                     TUNED_VERDICT: f"{now.word}, {one_precision(now.effect_text)}",
                     "verdict changed": "yes" if was is None or was.word != now.word else "no",
                     "converged in both": f"{len(kept.get(claim, []))} of {now.cells} cells",
                     "the paper's, these cells": one_precision(paper_text(verdicts["paper"]))})
    return pd.DataFrame(rows)


# KnFu's headline (issue 61): its lead over FedMD as first coded, under an equal tuning budget, and
# the paper's, per dataset, on the same cells and seeds.
HEADLINE_CLAIM = "KnFu > FedMD"
DATASET_NAMES = {"mnist": "MNIST", "cifar10": "CIFAR-10"}


def tuning_finding(root=None) -> pd.DataFrame:
    """Per dataset with a tuned rerun: KnFu's lead over FedMD (points, 95% interval) as first coded
    and under the schedules every method chose with the same budget, on the same cells and seeds,
    every cell counted on both sides (:func:`verdict_changes`' reading), the tuned verdict's word, and
    the paper's lead on those cells (Tables 1-2, 3 runs assumed). Read from the committed records,
    once per build where the ledger's cache is on; empty without tuned records."""
    from ..ledger_cache import cached

    return cached("knfu_tuning_finding", lambda: _tuning_finding(root))


def _tuning_finding(root=None) -> pd.DataFrame:
    from ..ledger import judge_chapter
    from .records import ORIGINAL, paper_profile_records

    chapter = sys.modules[__package__]
    coded_all = [r for r in paper_profile_records(root) if r.config["algorithm"] != ORIGINAL]
    rows = []
    for dataset, tuned in (("mnist", tuned_records(root)), ("cifar10", tuned_cifar_records(root))):
        tuned = [r for r in tuned if r.config["algorithm"] in ("knfu", "fedmd")]
        coded = same_runs([r for r in coded_all if r.config["algorithm"] in ("knfu", "fedmd")], tuned)
        if not tuned or not coded:
            continue
        before = judge_chapter(chapter, coded, enforce_gate=False).get(HEADLINE_CLAIM)
        after = judge_chapter(chapter, tuned, enforce_gate=False).get(HEADLINE_CLAIM)
        if not before or not after:
            continue
        paper = after["paper"]
        rows.append({"dataset": DATASET_NAMES.get(dataset, dataset),
                     "as first coded": before["final"].interval.mean, "as first coded text": before["final"].effect_text,
                     "equal budget": after["final"].interval.mean, "equal budget text": after["final"].effect_text,
                     "equal budget word": after["final"].word,
                     "paper": paper.interval.mean if paper else float("nan"),
                     "paper text": paper.effect_text if paper else "—",
                     "cells": after["final"].cells})
    return pd.DataFrame(rows, columns=["dataset", "as first coded", "as first coded text", "equal budget",
                                       "equal budget text", "equal budget word", "paper", "paper text", "cells"])


def _points(value: float) -> str:
    """An effect in points at the book's one precision: one decimal, two under a point."""
    return signed(value, 1 if abs(round(value, 1)) >= 1 else 2).replace("-", "−")


def tuning_finding_text(finding: pd.DataFrame, short: bool = False) -> str:
    """KnFu's headline in words from :func:`tuning_finding`: "Given the same tuning budget as every
    other method, KnFu's lead over FedMD falls from +4.8 to +0.34 points on MNIST and from +21.2 to
    +1.7 on CIFAR-10 (the paper reports +2.7 and +21.9)"; with ``short``, without the paper's
    numbers' origin. "" without tuned records."""
    if finding is None or not len(finding):
        return ""
    parts = [f"from {_points(row['as first coded'])} to {_points(row['equal budget'])}"
             + (" points" if i == 0 else "") + f" on {row.dataset}" for i, (_, row) in enumerate(finding.iterrows())]
    paper = " and ".join(_points(v) for v in finding["paper"] if v == v)
    text = ("KnFu's lead over FedMD falls " + " and ".join(parts)
            + " once every method gets the same tuning budget (every cell counted"
            + ("" if short else ", as first coded and tuned on the same seeds") + ")")
    if paper:
        text += f"; the paper reports {paper}"
    return text + "."
