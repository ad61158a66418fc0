"""Our records as the paper's tables: one row per run (accuracies as the paper reads them, the mean
of the last rounds), the rows of Tables 1, 3 and 5, time per client-round against FedAvg's (beside
the paper's), bytes per round."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...algorithms import algorithm_config
from ...cpuinfo import machine_text
from ...report import mean_std_per_profile, record_precision
from ...tables import setting_text, signed
from .grid import TABLE3_METHODS
from .paper import paper_times
from .records import cell_of


def last_rounds_mean(record, metric: str, last: int) -> float:
    values = [row[metric] for row in record.history[-last:]]
    return float(np.mean(values))


def summary(records, last: int = 5) -> pd.DataFrame:
    """One row per run: its cell, seed, local and global accuracy (means of the last ``last``
    evaluated rounds, as the paper's), seconds per client-round (the median over rounds, so that a
    few rounds slowed by other work on the machine do not move it), bytes per round, profile."""
    rows = []
    for record in records:
        key, clients, alpha, lam, gamma = cell_of(record)
        history = record.history
        rows.append({"method": key, "clients": clients, "alpha": alpha, "lam": lam, "gamma": gamma,
                     "seed": record.config["seed"], "rounds": record.config["rounds"],
                     "local": last_rounds_mean(record, "alma", last), "global": last_rounds_mean(record, "global_acc", last),
                     "seconds_per_client_round": float(np.median([row["seconds"] / row["clients"] for row in history])),
                     "upload_mb": float(np.mean([row["bytes_up"] / row["clients"] for row in history])) / 1e6,
                     "download_mb": float(np.mean([row["bytes_down"] / row["clients"] for row in history])) / 1e6,
                     "profile": record.profile, "precision": record_precision(record),
                     "machine": record.environment.get("device_name", "unknown")})
    return pd.DataFrame(rows, columns=["method", "clients", "alpha", "lam", "gamma", "seed", "rounds", "local", "global",
                                       "seconds_per_client_round", "upload_mb", "download_mb", "profile", "precision",
                                       "machine"])


def long_accuracies(frame: pd.DataFrame) -> pd.DataFrame:
    """``summary`` rows as (…, metric, value) with metric "local" / "global"."""
    keep = [c for c in frame.columns if c not in ("local", "global")]
    return frame.melt(id_vars=keep, value_vars=["local", "global"], var_name="metric", value_name="value")


def at_default_weights(frame: pd.DataFrame) -> pd.Series:
    """Rows that are not one of Table 5's other (λ, γ): other methods, FedGMKD rows at the default
    λ and γ, and "only DAT" (λ = γ = 0 by definition)."""
    default = algorithm_config("fedgmkd", {})
    return (frame.lam.isna() | (frame.method == "only_dat")
            | ((frame.lam == default.lam) & (frame.gamma == default.gamma)))


def table1_rows(frame: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Runs of Table 1: Dir(alpha), FedGMKD rows at their default (λ, γ)."""
    return frame[(frame.alpha == alpha) & at_default_weights(frame)]


def table3_rows(frame: pd.DataFrame, clients: int) -> pd.DataFrame:
    """Runs of Table 3: its four methods at ``clients`` clients, any Dir(β), default (λ, γ)."""
    return frame[(frame.clients == clients) & frame.method.isin(TABLE3_METHODS) & at_default_weights(frame)]


def time_ratios(frame: pd.DataFrame) -> pd.DataFrame:
    """Seconds per client-round per (profile, machine, clients, method), the fastest of its runs
    (seeds), and the ratio to FedAvg's on the same machine. The fastest, as in benchmarking: a run
    that shared the machine's cores with other work is only ever slower, never faster, than the
    method's own cost. Per machine, because CPUs that report the same name can be 3x apart."""
    cell = ["profile", "machine", "clients"]
    fastest = frame.groupby(cell + ["method"], as_index=False).seconds_per_client_round.min()
    fedavg = fastest[fastest.method == "fedavg"].set_index(cell).seconds_per_client_round
    ratio = [r.seconds_per_client_round / fedavg.get((r.profile, r.machine, r.clients), np.nan) for r in fastest.itertuples()]
    return fastest.assign(ratio=ratio)


def history_frame(records) -> pd.DataFrame:
    """Per evaluated round of each run: its cell, seed, profile, local and global accuracy and
    FedGMKD's ``dat_shift`` (NaN for other methods)."""
    rows = []
    for record in records:
        key, clients, alpha, lam, gamma = cell_of(record)
        for row in record.history:
            rows.append({"method": key, "clients": clients, "alpha": alpha, "lam": lam, "gamma": gamma,
                         "seed": record.config["seed"], "profile": record.profile, "round": row["round"],
                         "alma": row["alma"], "global_acc": row["global_acc"], "dat_shift": row.get("dat_shift", np.nan)})
    return pd.DataFrame(rows, columns=["method", "clients", "alpha", "lam", "gamma", "seed", "profile", "round",
                                       "alma", "global_acc", "dat_shift"])


def dat_shift_table(history: pd.DataFrame, shown_rounds=(1, 2, 5, 10)) -> pd.DataFrame:
    """DAT's shift per profile, method and clients (mean over seeds) at a few rounds, the last round
    and the mean over every round: the whole trajectory is 15-50 columns, and DAT's shift settles
    within a few rounds. ``history``: :func:`history_frame` (rows without a shift are dropped)."""
    shifts = history.dropna(subset=["dat_shift"])
    keys = ["profile", "method", "clients"]
    if not len(shifts):
        return pd.DataFrame(columns=keys + ["mean over rounds"])
    wide = shifts.pivot_table(index=keys, columns="round", values="dat_shift")
    last = wide.apply(lambda row: row.dropna().iloc[-1], axis=1)
    rounds = [r for r in shown_rounds if r in wide.columns and r < wide.columns.max()]
    table = wide[rounds].rename(columns=lambda r: f"round {r}")
    return table.assign(**{"last round": last, "mean over rounds": wide.mean(axis=1)}).reset_index()


def accuracy_per_profile(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Local and global accuracy of :func:`summary` rows as mean ± std over seeds (%) per ``keys``
    (which may hold "metric") and profile."""
    return mean_std_per_profile(long_accuracies(frame), keys, "value")


def table5_rows(frame: pd.DataFrame, clients: int, alpha: float) -> pd.DataFrame:
    """Runs of Table 5: FedGMKD at ``clients`` clients and Dir(``alpha``), every (λ, γ)."""
    return frame[(frame.method == "fedgmkd") & (frame.clients == clients) & (frame.alpha == alpha)]


def cost_table(ratios: pd.DataFrame | None = None) -> pd.DataFrame:
    """Table 1's time column on CIFAR-10 (seconds per client-round and the ratio to FedAvg's) beside
    ours from :func:`time_ratios`, a pair of columns per profile and client count (and machine,
    where a profile ran on several)."""
    times = paper_times()
    cost = times[times.dataset == "CIFAR-10"][["method", "seconds", "ratio"]].rename(
        columns={"seconds": "paper s", "ratio": "paper ratio"})
    if ratios is None or not len(ratios):
        return cost
    several_machines = ratios.groupby("profile").machine.nunique() > 1
    for (profile, machine, count), group in ratios.groupby(["profile", "machine", "clients"]):
        label = f"{profile}, {count} clients" + (f", {machine_text(machine)}" if several_machines[profile] else "")
        cost = cost.merge(group[["method", "seconds_per_client_round", "ratio"]].rename(
            columns={"seconds_per_client_round": f"{label}: s", "ratio": f"{label}: ratio"}), on="method", how="outer")
    return cost


def _ratio_text(ratio, seconds) -> str:
    """"2.01× (0.494 s)": a method's time per client-round as its ratio to FedAvg's, the seconds beside."""
    if pd.isna(ratio) or pd.isna(seconds):
        return "—"
    return f"{ratio:.2f}× ({seconds:.3g} s)"


def cost_tables(ratios: pd.DataFrame | None = None) -> list[tuple[str, pd.DataFrame]]:
    """:func:`cost_table` reshaped to fit the book's column (issue 61: fifteen columns, 787 px in a
    676 px column): one narrow table per profile and machine, a row per method, a column for the
    paper's (two A100s) and one per client count, each cell the ratio to FedAvg's time per
    client-round on the same machine with its seconds beside ("2.01× (0.494 s)"). Returns (title,
    table) pairs; just the paper's where no run was measured."""
    times = paper_times()
    paper = times[times.dataset == "CIFAR-10"]
    paper = pd.DataFrame({"method": paper.method,
                          "paper, 2 A100s": [_ratio_text(r, t) for r, t in zip(paper.ratio, paper.seconds)]})
    if ratios is None or not len(ratios):
        return [("The paper's", paper)]
    shown = []
    for (profile, machine), group in ratios.groupby(["profile", "machine"], sort=False):
        table = paper.copy()
        for count, at in group.groupby("clients"):
            cells = {m: _ratio_text(r, t) for m, r, t in zip(at.method, at.ratio, at.seconds_per_client_round)}
            table = table.merge(pd.DataFrame({"method": list(cells), f"{count} clients": list(cells.values())}),
                                 on="method", how="outer")
        shown.append((f"{profile} profile, {machine_text(machine)}", table.fillna("—")))
    return shown


def traffic_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Bytes per client and round of each method and client count (:func:`summary` rows, mean over
    runs, kB), and the upload's ratio to FedAvg's at the same client count ("—" without FedAvg)."""
    traffic = frame.groupby(["method", "clients"], as_index=False)[["upload_mb", "download_mb"]].mean()
    fedavg_up = traffic[traffic.method == "fedavg"].set_index("clients").upload_mb
    return pd.DataFrame({"method": traffic.method, "clients": traffic.clients,
                         "upload (kB per client-round)": 1000 * traffic.upload_mb,
                         "download (kB per client-round)": 1000 * traffic.download_mb,
                         "upload vs FedAvg": [f"{u / fedavg_up[c]:.3f}×" if c in fedavg_up.index else "—"
                                              for u, c in zip(traffic.upload_mb, traffic.clients)]})


def fedgmkd_cost(ratios: pd.DataFrame) -> pd.DataFrame:
    """FedGMKD's time per client-round as a multiple of FedAvg's (``ratio``, from :func:`time_ratios`)
    per profile, machine and client count, beside the paper's on CIFAR-10 (``paper_ratio``)."""
    times = paper_times()
    paper = times[(times.dataset == "CIFAR-10") & (times.method == "fedgmkd")].ratio.iloc[0]
    ours = ratios[ratios.method == "fedgmkd"].sort_values(["profile", "machine", "clients"])
    return ours[["profile", "machine", "clients", "ratio"]].assign(paper_ratio=paper).reset_index(drop=True)


def both_values(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a :func:`fedkd_core.report.compare_with_paper` table (one profile's) that have
    our value and the paper's."""
    return table.dropna(subset=["mean_ours", "mean_paper"])


def first_places(table: pd.DataFrame, value: str, columns=("clients", "metric")) -> pd.Series:
    """In how many of the ``columns`` cells of a :func:`fedkd_core.report.compare_with_paper` table
    (one profile's) each method has the highest ``value`` ("mean_ours" or "mean_paper"), over the
    rows with both values; tied methods each count. Most first; methods never first left out."""
    rows = both_values(table)
    best = rows.groupby(list(columns))[value].transform("max")
    counts = rows[rows[value] == best].method.value_counts()
    return counts.sort_values(ascending=False, kind="stable")


def gains_over(table: pd.DataFrame, value: str, method: str, baseline: str, columns=("clients", "metric")) -> pd.Series:
    """``method``'s ``value`` minus ``baseline``'s in each ``columns`` cell of a
    :func:`fedkd_core.report.compare_with_paper` table (one profile's) where both have both values."""
    wide = both_values(table).set_index([*columns, "method"])[value].unstack("method")
    if method not in wide or baseline not in wide:
        return pd.Series(dtype=float)
    return (wide[method] - wide[baseline]).dropna()


def first_places_text(counts: pd.Series, names: dict) -> str:
    """"FedGen in 4, FedMD in 2" from :func:`first_places` counts, methods by their ``names``."""
    return ", ".join(f"{names.get(method, method)} in {count}" for method, count in counts.items())


def gains_text(gains: pd.Series) -> str:
    """"from -0.89 to +1.37 points, above 0 in 5 of 6 columns" for :func:`gains_over`'s values."""
    return (f"from {signed(gains.min(), 2)} to {signed(gains.max(), 2)} points, above 0 in {int((gains > 0).sum())} "
            f"of {len(gains)} columns")


def table5_cells(ours: pd.DataFrame, paper: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The paper's Table 5 rows in three parts: (shown, default only, not run). ``ours``
    (:func:`accuracy_per_profile` rows) covers the rows of the first two, not those of the third.
    Covered rows are shown beside ours unless the only (λ, γ) covered is FedGMKD's default, Table 1's
    own setting, which alone has nothing to be ranked against: then they are "default only"."""
    weights = ["lam", "gamma"]
    covered = ours[weights].drop_duplicates() if len(ours) else pd.DataFrame(columns=weights, dtype=float)
    default = algorithm_config("fedgmkd", {})
    varied = ((covered.lam != default.lam) | (covered.gamma != default.gamma)).any()
    marked = paper.merge(covered, on=weights, how="left", indicator=True)
    ran = (marked.pop("_merge") == "both").to_numpy()
    return marked[ran & varied], marked[ran & ~varied], marked[~ran]


def weight_pairs_text(cells: pd.DataFrame) -> str:
    """"(0.06, 0), (0.06, 0.02)": the distinct (λ, γ) of ``cells``, in their order, exactly."""
    pairs = cells[["lam", "gamma"]].drop_duplicates()
    return ", ".join(f"({setting_text(lam)}, {setting_text(gamma)})" for lam, gamma in pairs.itertuples(index=False))


def ranking_summary(table: pd.DataFrame, names: dict, method: str = "fedgmkd", baseline: str = "fedavg",
                    columns=("clients", "metric")) -> list[str]:
    """One line per profile of a :func:`fedkd_core.report.compare_with_paper` table: which methods
    are first in how many of its columns, ours and the paper's (over the same methods), and
    ``method``'s mean minus ``baseline``'s, ours and the paper's (left out where either is missing)."""
    lines = []
    for profile, part in table[table.mean_ours.notna()].groupby("profile", sort=False):
        count = len(both_values(part)[list(columns)].drop_duplicates())
        first = {side: first_places_text(first_places(part, f"mean_{side}", columns), names) for side in ("ours", "paper")}
        line = (f"**{profile} profile**, {count} columns. Highest mean of a column — ours: {first['ours']}; "
                f"the paper's: {first['paper']}.")
        gains = {side: gains_over(part, f"mean_{side}", method, baseline, columns) for side in ("ours", "paper")}
        if len(gains["ours"]):
            line += (f" {names.get(method, method)}'s mean minus {names.get(baseline, baseline)}'s — ours: "
                     f"{gains_text(gains['ours'])}; the paper's: {gains_text(gains['paper'])}.")
        lines.append(line)
    return lines
