"""Where does a new method stand among a chapter's methods, on the chapter's own cells and seeds?

    python -m fedkd_core.compare my_methods:FedAvgM --chapter knfu                 # smoke cells, seconds
    python -m fedkd_core.compare my_methods:FedAvgM --chapter fedua \\
        --params notebooks/params/reduced/fedua.yaml -p seeds 1                     # the reduced profile's cells
    python -m fedkd_core.compare my_methods:FedAvgM --chapter knfu -m beta 0.5 --against fedmd

or from Python, ``compare(FedAvgM, "knfu")`` (a :class:`Comparison`; ``print(c.text())``).

The new method runs in every setting of the chapter's grid for the given parameters (the
chapter's smoke defaults without ``--params``; ``-p`` overrides one, as papermill's ``-p``
does): the same data split, model, training settings, rounds, participation and seeds as the
chapter's own methods, with its own ``Config`` defaults (``-m KEY VALUE`` sets one). The
chapter's methods are taken from the stored records where a record of the very same run exists
(committed paper, reduced or robustness records, or earlier runs) and run otherwise: a record
stands for a run only with the same key, so a new method at smoke scale is never ranked against
records of another scale. New records go under ``results/custom/``.

Per cell (the chapter's ``EFFECT_CELL_KEYS``), every method ranked by the chapter's own metric
(its ``observations``' "final": KnFu's and FedCKD's final ALMA, FedUA's global accuracy,
FedGMKD's mean of the last rounds), beside the paper's number for that cell where it prints one;
then the new method's effect against the chapter's proposed method (or ``--against``): the
per-seed paired difference with its t-interval, and the verdict pooled over cells, with the
intervals and words of :mod:`fedkd_core.verdicts` (widened by the drift between machines where
the new method ran on a machine not shown to compute as the stored records' did:
:mod:`fedkd_core.numerics`).

The key of a record is its config, not the method's code: after changing the method, its runs
must run again, so they do by default (``reuse=True`` / ``--reuse`` reads them back instead).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .algorithms import algorithm_class, import_class
from .chapters import CHAPTERS, chapter_module, chapter_params
from .conformance import registered_name
from .contracts import check_needs
from .experiment import ExperimentConfig, RunDiverged
from .results import is_finished, run_experiment
from .numerics import drift_allowance
from .verdicts import POINTS, Verdict, cell_table, judge

PROFILE = "custom"
# Each paper chapter's proposed method (its observations' method label), the default to compare against.
PROPOSED = {"knfu": "knfu", "fedckd": "fedckd", "fedua": "fedua", "fedgmkd": "fedgmkd"}
# What compare asks of a chapter module (fedkd_core.contracts.ClaimsChapter, without the ledger's part).
NEEDED_MEMBERS = ("Params", "experiments", "observations", "paper_observations", "EFFECT_CELL_KEYS", "METHOD_COLUMN")


@dataclass(frozen=True)
class Comparison:
    """The outcome of :func:`compare`: ``observations`` one row per run (the chapter's columns),
    ``ranking`` per cell and method (ours in %, the paper's where printed, rank), ``effects`` per
    cell (the new method minus ``against``, points, t-interval), ``verdict`` pooled over cells."""

    method: str
    chapter: str
    against: str
    cell_keys: tuple[str, ...]
    observations: pd.DataFrame
    ranking: pd.DataFrame
    effects: pd.DataFrame
    verdict: Verdict
    stored: int  # the chapter's runs read from stored records
    ran: int  # the runs made now (the new method's and the chapter's that had no record)
    left_out: tuple[str, ...] = ()  # runs that diverged, one line each

    @property
    def claim(self) -> str:
        return f"{self.method} > {self.against}"

    def text(self) -> str:
        """The comparison as the command prints it: a ranked table per cell, its effect, the verdict."""
        lines = [f"{self.method} on the {self.chapter} chapter's cells: {self.ran} runs made now, "
                 f"{self.stored} of the chapter's runs from stored records (new records: results/{PROFILE}/)"]
        lines += [f"left out: {line}" for line in self.left_out]
        effects = self.effects.set_index(list(self.cell_keys)) if len(self.effects) else None
        for cell, table in self.ranking.groupby(list(self.cell_keys), sort=False):
            cell = cell if isinstance(cell, tuple) else (cell,)
            lines += ["", ", ".join(f"{k} = {v}" for k, v in zip(self.cell_keys, cell))]
            lines += ["  " + line for line in cell_display(table).to_string(index=False).splitlines()]
            if effects is not None and cell in effects.index:
                row = effects.loc[cell]
                row = row.iloc[0] if isinstance(row, pd.DataFrame) else row
                lines.append(f"  {self.claim}: {interval_text(row)} points over {int(row.seeds)} seed(s): {row.outcome}")
        lines += ["", f"{self.claim}, pooled over {self.verdict.cells} cell(s): {self.verdict.word}, "
                      f"{self.verdict.effect_text} points" + (f" ({self.verdict.note})" if self.verdict.note else "")]
        return "\n".join(lines)


def interval_text(row) -> str:
    if np.isnan(row.low):
        return f"{row.effect:+.1f}"
    return f"{row.effect:+.1f} [{row.low:+.1f}, {row.high:+.1f}]"


def cell_display(table: pd.DataFrame) -> pd.DataFrame:
    """One cell's ranking as printed: rank, method, ours (mean ± std, seeds), the paper's."""
    ours = [f"{m:.1f} ± {s:.1f}" if s == s else f"{m:.1f}" for m, s in zip(table["mean"], table["std"])]
    paper = [("—" if m != m else f"{m:.1f} ± {s:.1f}" if s == s else f"{m:.1f}")
             for m, s in zip(table["paper mean"], table["paper std"])]
    return pd.DataFrame({"rank": table["rank"].astype(int), "method": table["method"], "ours (%)": ours,
                         "seeds": table["seeds"].astype(int), "paper (%)": paper})


def compare(method, chapter: str, params=None, *, method_params: dict | None = None, name: str | None = None,
            against: str | None = None, reuse: bool = False, root=None, progress: bool = False) -> Comparison:
    """Run ``method`` (a class, ``"module:Class"`` or a registered name) in the cells of
    ``chapter`` at ``params`` (None: the smoke defaults; a dict of overrides, or the chapter's
    ``Params``) and rank it among the chapter's methods (see the module's docstring).
    ``method_params``: fields of the method's Config; ``name``: the name it is registered under
    (default: its class name, lower case); ``against``: the chapter's method its effect is
    measured against (default: the chapter's proposed method); ``reuse``: read the new method's
    stored runs back instead of running them again; ``root``: the results folder."""
    module = chapter_module(chapter)
    lacking = [member for member in NEEDED_MEMBERS if not hasattr(module, member)]
    if lacking:
        able = [c for c in CHAPTERS if not missing_members_of(c)]
        raise ValueError(f"chapter {chapter!r} cannot rank methods: it has no {', '.join(lacking)} "
                         f"(fedkd_core.contracts.ClaimsChapter); these chapters can: {', '.join(able)}")
    params = chapter_parameters(module, params)
    if isinstance(method, str) and ":" in method:
        method = import_class(method)
    name = registered_name(method, name)
    configs = module.experiments(params)
    new_configs = method_configs(configs, name, method_params or {})
    check_needs(name, algorithm_class(name).NEEDS, new_configs)
    stored = sum(is_finished(config, root) for config in configs)
    ran = len(configs) - stored + sum(not (reuse and is_finished(config, root)) for config in new_configs)
    left_out: list[str] = []
    new = run_all(new_configs, root, left_out, progress, use_cache=reuse)
    chapters_own = run_all(configs, root, left_out, progress)
    method_column, keys = module.METHOD_COLUMN, tuple(module.EFFECT_CELL_KEYS)
    theirs = module.observations(chapters_own)
    if name in set(theirs[method_column]):
        raise ValueError(f"{name!r} is already a method of the {chapter} chapter: register the new one under another name")
    ours = module.observations(new).assign(**{method_column: name})
    if not len(ours):
        raise ValueError(f"the {chapter} chapter's tables read none of the {len(new)} runs of {name} that finished "
                         f"(its observations() keep only the runs its tables show; see its Params' docstring), "
                         f"so there is nothing to rank")
    against = against or getattr(module, "PROPOSED", PROPOSED.get(chapter))
    if against not in set(theirs[method_column]):
        raise ValueError(f"against must be one of the {chapter} chapter's methods that ran, "
                         f"{sorted(set(theirs[method_column]))} (got {against!r})")
    cells = ours[list(keys)].drop_duplicates()
    observations = pd.concat([ours, theirs.merge(cells, on=list(keys))], ignore_index=True)
    effects = paired_effects(observations, keys, method_column, name, against)
    claim = f"{name} > {against}"
    return Comparison(
        method=name, chapter=chapter, against=against, cell_keys=keys, observations=observations,
        ranking=ranking(observations, module.paper_observations(), keys, method_column), effects=cell_table(effects, list(keys), claim),
        verdict=judge(effects, list(keys), claim, widen=drift_allowance(new + chapters_own)),
        stored=stored, ran=ran, left_out=tuple(left_out))


def missing_members_of(chapter: str) -> list[str]:
    module = chapter_module(chapter)
    return [member for member in NEEDED_MEMBERS if not hasattr(module, member)]


def chapter_parameters(module, params):
    """The chapter's ``Params``: its smoke defaults (None), checked overrides (a dict), or as given."""
    if params is None:
        return module.Params()
    if isinstance(params, dict):
        return chapter_params(module.Params, params)
    return params


def method_configs(configs: list[ExperimentConfig], name: str, method_params: dict) -> list[ExperimentConfig]:
    """One run of method ``name`` per distinct setting of ``configs`` (all but the method: data,
    model, training, rounds, participation, seed), in the chapter's order."""
    unique: dict[str, ExperimentConfig] = {}
    for config in configs:
        mine = replace(config, algorithm=name, algorithm_params=dict(method_params))
        unique.setdefault(repr(mine), mine)
    return list(unique.values())


def run_all(configs: list[ExperimentConfig], root, left_out: list[str], progress: bool,
            use_cache: bool = True) -> list:
    """The records of ``configs`` (stored ones read back when ``use_cache``), runs that diverge
    left out with a line each in ``left_out``."""
    records = []
    for config in configs:
        try:
            records.append(run_experiment(config, root=root, profile=PROFILE, progress=progress, use_cache=use_cache))
        except RunDiverged as diverged:
            left_out.append(f"{config.algorithm} (seed {config.seed}) diverged in round {diverged.round_index}")
    return records


def paired_effects(observations: pd.DataFrame, keys: tuple[str, ...], method_column: str, name: str,
                   against: str) -> pd.DataFrame:
    """Per cell and seed, ``name``'s final score minus ``against``'s (fractions, as a chapter's
    ``effects_of`` gives them); a seed missing either run has none."""
    wide = observations.pivot_table(index=list(keys) + ["seed"], columns=method_column, values="final")
    claim = f"{name} > {against}"
    if name not in wide or against not in wide:
        return pd.DataFrame(columns=list(keys) + ["seed", claim])
    return (wide[name] - wide[against]).rename(claim).dropna().reset_index()


def ranking(observations: pd.DataFrame, paper: pd.DataFrame, keys: tuple[str, ...], method_column: str) -> pd.DataFrame:
    """Per cell and method (column "method"): mean and std of the final score over seeds (%), the
    seeds, the paper's mean and std for that cell where it prints one, and the rank (1: best)
    within the cell. ``method_column`` names the method in ``observations`` and ``paper``."""
    by = list(keys) + [method_column]
    table = observations.groupby(by, sort=False)["final"].agg(mean="mean", std="std", seeds="count").reset_index()
    table[["mean", "std"]] *= POINTS
    printed = paper[by + ["mean", "std"]].rename(columns={"mean": "paper mean", "std": "paper std"})
    table = table.merge(printed.drop_duplicates(by), on=by, how="left").rename(columns={method_column: "method"})
    table["rank"] = table.groupby(list(keys))["mean"].rank(ascending=False, method="min")
    return table.sort_values(list(keys) + ["rank"], kind="stable").reset_index(drop=True)


# --- the command -----------------------------------------------------------------------------------

def parse_values(pairs) -> dict:
    """``-p KEY VALUE`` pairs as a dict, each value read as YAML (as papermill reads ``-p``)."""
    return {key: yaml.safe_load(value) for key, value in pairs or []}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("method", help="MODULE:CLASS of the new method (its folder on PYTHONPATH), or a registered name")
    parser.add_argument("--chapter", required=True, help=f"one of {sorted(PROPOSED)}")
    parser.add_argument("--params", type=Path, help="a profile's YAML (default: the chapter's smoke defaults)")
    parser.add_argument("-p", nargs=2, action="append", metavar=("KEY", "VALUE"), help="a chapter parameter")
    parser.add_argument("-m", nargs=2, action="append", metavar=("KEY", "VALUE"), help="a field of the method's Config")
    parser.add_argument("--name", help="the name to register the method under (default: its class name, lower case)")
    parser.add_argument("--against", help="the chapter's method to measure the effect against (default: its proposed one)")
    parser.add_argument("--reuse", action="store_true", help="read the new method's stored runs back instead of rerunning")
    args = parser.parse_args(argv)
    given = (yaml.safe_load(args.params.read_text()) or {}) if args.params else {}
    try:
        result = compare(args.method, args.chapter, {**given, **parse_values(args.p)}, method_params=parse_values(args.m),
                         name=args.name, against=args.against, reuse=args.reuse, progress=True)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    print(result.text())


if __name__ == "__main__":
    main()
