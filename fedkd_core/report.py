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
                    digits: int = 1) -> pd.DataFrame:
    """Display, under ``title``, the paper's cells beside ours from :func:`mean_std_per_profile`
    (the cells we ran, with the rounds behind them; ``names`` relabels values for display) and
    return the whole comparison."""
    from IPython.display import Markdown, display

    table = compare_with_paper(ours, paper, keys, digits)
    ran = table[table.seeds > 0]
    display(Markdown(f"**{title}** — {len(ran[keys].drop_duplicates())} of {len(paper)} cells run"))
    if len(ran):
        display(styled_comparison(ran.replace(names).reset_index(drop=True), digits))
    return table


def pm(mean: float, std: float, digits: int = 1) -> str:
    if mean is None or np.isnan(mean):
        return "—"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def compare_with_paper(ours: pd.DataFrame, paper: pd.DataFrame, keys: list[str], digits: int = 1,
                       tolerance: float = 2.0) -> pd.DataFrame:
    """Side by side: each paper cell with ours (mean ± std, n seeds, profile) and the difference.

    ``ours`` comes from :func:`mean_std`; ``paper`` has ``keys`` + ``mean`` + ``std`` columns.
    Paper cells without a run of ours show "not run"; a one-seed cell shows its value without a
    spread. ``agrees``: whether ours lies within the paper's std + ``tolerance`` points of its mean.
    """
    merged = paper.merge(ours, on=keys, how="left", suffixes=("_paper", "_ours"))
    table = merged[keys].copy()
    table["paper"] = [pm(m, s, digits) for m, s in zip(merged["mean_paper"], merged["std_paper"])]
    seeds = merged["n"].fillna(0).astype(int)
    table["ours"] = [("not run" if np.isnan(m) else f"{m:.{digits}f} (1 seed)" if n == 1 else pm(m, s, digits))
                     for m, s, n in zip(merged["mean_ours"], merged["std_ours"], seeds)]
    difference = merged["mean_ours"] - merged["mean_paper"]
    table["ours − paper"] = difference.round(digits) + 0.0  # + 0.0 turns -0.0 into 0.0
    table["seeds"] = seeds
    for label in ("profile", "precision"):
        table[label] = merged.get(label, pd.Series([""] * len(merged))).fillna("")
    if "rounds" in ours:  # from mean_std_per_profile: the rounds behind each of our rows
        table["rounds"] = merged["rounds"].fillna("")
    table["agrees"] = [None if np.isnan(d) else bool(abs(d) <= s + tolerance)
                       for d, s in zip(difference, merged["std_paper"].fillna(0))]
    return table


AGREES = "background-color: #dcefdc"     # within the paper's spread + tolerance
DISAGREES = "background-color: #f7dcc6"  # outside it
NOT_RUN = "color: #8a8a8a"


def styled_comparison(table: pd.DataFrame, digits: int = 1):
    """A :func:`compare_with_paper` table as a pandas Styler: ``ours − paper`` green where it lies
    within the paper's spread + 2 points and orange where not, rows without a run greyed, thin
    column rules. The ``agrees`` column drives the colours and is hidden."""
    def row_style(row: pd.Series) -> list[str]:
        if row["agrees"] is None or (isinstance(row["agrees"], float) and np.isnan(row["agrees"])):
            return [NOT_RUN] * len(row)
        return [(AGREES if row["agrees"] else DISAGREES) if column == "ours − paper" else ""
                for column in row.index]

    return (table.style.apply(row_style, axis=1)
            .format({"ours − paper": f"{{:+.{digits}f}}"}, na_rep="—")
            .format_index(lambda v: f"{v:g}" if isinstance(v, float) else v, axis=0)
            .hide(["agrees"], axis="columns")
            .set_table_styles([{"selector": "th, td",
                                "props": "border-left: 1px solid #ddd; padding: 2px 10px; white-space: nowrap;"}]))


def markdown_list(lines: Sequence[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)


def parameters_table(params) -> pd.DataFrame:
    """A chapter's parameters as a small two-column table, headed by the profile's name."""
    values = {f.name: getattr(params, f.name) for f in dataclasses.fields(params) if f.name != "profile"}
    table = pd.DataFrame({"value": [str(v) for v in values.values()]}, index=pd.Index(list(values), name="parameter"))
    table.columns = [f"profile: {getattr(params, 'profile', '?')}"]
    return table


def parse_list(text: str | float | int, cast, name: str) -> list:
    """"0.1,0.5, 1" -> [0.1, 0.5, 1.0]; a bad entry is a ValueError naming the parameter."""
    try:
        values = [cast(part) for part in str(text).split(",") if part.strip()]
    except ValueError as error:
        raise ValueError(f"{name} must be a comma-separated list of {cast.__name__} (got {text!r})") from error
    if not values:
        raise ValueError(f"{name} must not be empty")
    return values
