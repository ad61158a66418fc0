"""Tables and plots that chapters share: seed summaries, comparisons with a paper, curves."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import pandas as pd

from .results import RunRecord, history_table, record_precision  # noqa: F401  (re-exported for chapters)


def flatten_config(config: dict, prefix: str = "") -> dict:
    """{"data": {"alpha": 0.5}} -> {"data.alpha": 0.5}."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(flatten_config(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def final_metrics(records: Sequence[RunRecord]) -> pd.DataFrame:
    """One row per run: its flattened config, final ALMA, client std, global accuracy, profile."""
    rows = []
    for record in records:
        final = record.final
        rows.append({
            **flatten_config(record.config),
            "alma": final["alma"],
            "client_acc_std": final["client_acc_std"],
            "global_acc": final["global_acc"],
            "bytes_per_round": np.mean([r["bytes_up"] + r["bytes_down"] for r in record.history]),
            "profile": record.profile,
            "precision": record_precision(record),
        })
    return pd.DataFrame(rows)


def mean_std(frame: pd.DataFrame, by: list[str], value: str, scale: float = 100.0) -> pd.DataFrame:
    """Mean, std (ddof=0, as over a handful of seeds) and count of ``value`` per group, in %."""
    grouped = frame.groupby(by, sort=False)[value]
    out = pd.DataFrame({
        "mean": grouped.mean() * scale,
        "std": grouped.std(ddof=0) * scale,
        "n": grouped.count(),
    })
    for label in ("profile", "precision"):  # which profiles and precisions produced each row
        if label in frame:
            out[label] = frame.groupby(by, sort=False)[label].agg(lambda p: "+".join(sorted(set(p))))
    return out.reset_index()


def mean_std_per_profile(frame: pd.DataFrame, by: list[str], value: str) -> pd.DataFrame:
    """:func:`mean_std` of ``value`` per group, one block per profile (methods are compared only
    within a profile), with the rounds behind each row ("10", or "10+15" where they differ)."""
    blocks = []
    for _, group in frame.groupby("profile"):
        table = mean_std(group, by, value)
        rounds = group.groupby(by, sort=False)["rounds"].agg(lambda r: "+".join(str(v) for v in sorted(set(r))))
        blocks.append(table.merge(rounds.rename("rounds").reset_index(), on=by, how="left"))
    blocks = [b for b in blocks if len(b)]
    return pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame(columns=by + ["mean", "std", "n", "profile", "rounds"])


def show_comparison(ours: pd.DataFrame, paper: pd.DataFrame, keys: list[str], title: str, names: dict,
                    digits: int = 1, method: str | None = None, rows: list[str] | None = None,
                    columns: list[str] | None = None, baseline: str | None = None,
                    key_names: dict | None = None) -> pd.DataFrame:
    """Display, under ``title``, the paper's cells beside ours from :func:`mean_std_per_profile`
    in the paper's layout (:func:`fedkd_core.tables.paper_layout`: ``method``, the key naming the
    methods, by default the last of ``keys`` ("" for none); ``rows``, by default the method; ``columns``, by
    default the other keys; ``baseline``, the method whose gain the reduced scale compares;
    ``key_names`` relabels the keys); ``names`` relabels values for display. Returns the whole
    comparison."""
    from IPython.display import HTML, Markdown, display

    from .tables import paper_layout

    table = compare_with_paper(ours, paper, keys, digits)
    ran = table[table.seeds > 0]
    display(Markdown(f"**{title}** — {len(ran[keys].drop_duplicates())} of {len(paper)} of the paper's cells run"))
    if len(ran):
        method = keys[-1] if method is None else method or None  # "" : no method key (a sensitivity table)
        rows = rows or [method]
        columns = columns or [k for k in keys if k not in rows]
        baseline_name = names.get(method, {}).get(baseline, baseline) if baseline and method else None
        display(HTML(paper_layout(table.replace(names), rows, columns, method=method, baseline=baseline_name,
                                  names=key_names, digits=digits)))
    return table


def pm(mean: float, std: float, digits: int = 1) -> str:
    """"88.1 ± 0.6"; "55.75 (no spread)" without a spread; "—" without a mean."""
    from .tables import mean_spread

    return mean_spread(mean, std, digits)


def compare_with_paper(ours: pd.DataFrame, paper: pd.DataFrame, keys: list[str], digits: int = 1,
                       tolerance: float = 2.0) -> pd.DataFrame:
    """Side by side: each paper cell with ours (mean ± std, n seeds, profile) and the difference.

    ``ours`` comes from :func:`mean_std`; ``paper`` has ``keys`` + ``mean`` + ``std`` columns.
    Paper cells without a run of ours show "not run"; a one-seed cell shows its value without a
    spread, and a cell with fewer seeds than others of its profile says how many (:func:`seeds_text`).
    ``agrees``: whether ours lies within the paper's std + ``tolerance`` points of its mean.
    """
    merged = paper.merge(ours, on=keys, how="left", suffixes=("_paper", "_ours"))
    table = merged[keys].copy()
    table["paper"] = [pm(m, s, digits) for m, s in zip(merged["mean_paper"], merged["std_paper"])]
    seeds = merged["n"].fillna(0).astype(int)
    profile = merged["profile"].fillna("") if "profile" in merged else pd.Series("", index=merged.index)
    most = seeds.groupby(profile).transform("max")  # the most seeds any cell of the row's profile has
    table["ours"] = [seeds_text(m, s, n, full, digits)
                     for m, s, n, full in zip(merged["mean_ours"], merged["std_ours"], seeds, most)]
    difference = merged["mean_ours"] - merged["mean_paper"]
    table["ours − paper"] = difference.round(digits) + 0.0  # + 0.0 turns -0.0 into 0.0
    table["seeds"] = seeds
    for label in ("profile", "precision"):
        table[label] = merged.get(label, pd.Series([""] * len(merged))).fillna("")
    if "rounds" in ours:  # from mean_std_per_profile: the rounds behind each of our rows
        table["rounds"] = merged["rounds"].fillna("")
    table["agrees"] = [None if np.isnan(d) else bool(abs(d) <= s + tolerance)
                       for d, s in zip(difference, merged["std_paper"].fillna(0))]
    table["mean_paper"], table["mean_ours"] = merged["mean_paper"], merged["mean_ours"]  # for tables.paper_layout
    table["std_ours"] = merged["std_ours"]  # for tables.paper_layout's ranks within noise
    return table


def seeds_text(mean: float, std: float, seeds: int, most: int, digits: int = 1) -> str:
    """A cell of ours: "not run"; "96.80 (1 seed)"; "73.36 ± 4.80 (2 seeds)" where other cells of the
    profile have more seeds (a sweep still running; a table whose cells all have 2 of 3 planned
    seeds marks none: its caption gives the seeds per cell); "97.58 ± 0.12" otherwise."""
    if np.isnan(mean):
        return "not run"
    if seeds == 1:
        return f"{mean:.{digits}f} (1 seed)"
    return pm(mean, std, digits) + (f" ({seeds} seeds)" if seeds < most else "")


def count_text(n: int, word: str) -> str:
    """"1 epoch", "2 epochs": ``n`` and ``word``, plural where ``n`` is not 1 (a regular plural)."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def markdown_list(lines: Sequence[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)


def parameters_table(params) -> pd.DataFrame:
    """A chapter's parameters as a small two-column table, headed by the profile's name."""
    values = {f.name: getattr(params, f.name) for f in dataclasses.fields(params) if f.name != "profile"}
    table = pd.DataFrame({"value": [str(v) for v in values.values()]}, index=pd.Index(list(values), name="parameter"))
    table.columns = [f"profile: {getattr(params, 'profile', '?')}"]
    return table


def record_values(records, path: str, by: str | None = None) -> str:
    """The values of config field ``path`` ("data.num_clients", "algorithm_params.lam") over
    ``records``, as the hyperparameter table of the numbers shown states them: "20", or "15, 30";
    with ``by`` (a config field such as "data.dataset"), per value of it: "mnist 15 / cifar10 30".
    A field a record lacks is left out; "—" when no record has it."""
    def value(record, field):
        node = record.config
        for part in field.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def joined(group) -> str:
        found = {value(r, path) for r in group if value(r, path) is not None}
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in found)
        found = sorted(found) if numeric else sorted(found, key=str)
        return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in found) or "—"

    if by is None:
        return joined(records)
    groups: dict = {}
    for record in records:
        groups.setdefault(value(record, by), []).append(record)
    return " / ".join(f"{key} {joined(group)}" for key, group in groups.items()) or "—"


def parse_list(text: str | float | int, cast, name: str) -> list:
    """"0.1,0.5, 1" -> [0.1, 0.5, 1.0]; a bad entry is a ValueError naming the parameter."""
    try:
        values = [cast(part) for part in str(text).split(",") if part.strip()]
    except ValueError as error:
        raise ValueError(f"{name} must be a comma-separated list of {cast.__name__} (got {text!r})") from error
    if not values:
        raise ValueError(f"{name} must not be empty")
    return values
