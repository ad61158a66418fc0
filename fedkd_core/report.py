"""Tables and plots that chapters share: seed summaries, comparisons with a paper, curves."""

from __future__ import annotations

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


def pm(mean: float, std: float, digits: int = 1) -> str:
    if mean is None or np.isnan(mean):
        return "—"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def compare_with_paper(ours: pd.DataFrame, paper: pd.DataFrame, keys: list[str], digits: int = 1) -> pd.DataFrame:
    """Side by side: each paper cell with ours (mean ± std, n seeds, profile) and the difference.

    ``ours`` comes from :func:`mean_std`; ``paper`` has ``keys`` + ``mean`` + ``std`` columns.
    Paper cells without a run of ours show "not run".
    """
    merged = paper.merge(ours, on=keys, how="left", suffixes=("_paper", "_ours"))
    table = merged[keys].copy()
    table["paper"] = [pm(m, s, digits) for m, s in zip(merged["mean_paper"], merged["std_paper"])]
    table["ours"] = [pm(m, s, digits) if not np.isnan(m) else "not run"
                     for m, s in zip(merged["mean_ours"], merged["std_ours"])]
    table["ours − paper"] = (merged["mean_ours"] - merged["mean_paper"]).round(digits)
    table["seeds"] = merged["n"].fillna(0).astype(int)
    for label in ("profile", "precision"):
        table[label] = merged.get(label, pd.Series([""] * len(merged))).fillna("")
    return table


def parameters_table(params) -> pd.DataFrame:
    """A chapter's parameters as a small two-column table, headed by the profile's name."""
    import dataclasses

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
