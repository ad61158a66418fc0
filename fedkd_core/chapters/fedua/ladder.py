"""FedUA's server-distillation budget, measured as a ladder (issue 60 items 1-2).

FedDF and FedUA differ from FedAvg only in how long the server distils. The reduced profile gives
it 1 epoch per round, the paper 20. The ladder runs FedDF and FedUA on one cell of Table 2 (step
partition, C = 1, 3 seeds) at 1, 5 and 20 server epochs, everything else the reduced profile's;
FedAvg has no server step, so the reduced profile's FedAvg runs are every rung's baseline, paired
by seed (same partition, same initial model, same client data).

At 20 epochs, FedUA also runs under the other readings of its lost Eqs. 1, 2a-2b that the code
has (:data:`READINGS`), so the chapter can say whether any of them gives the paper's
"FedUA > FedDF".

Every number here is a paired difference per seed, then a mean with Student's t interval over the
seeds (n - 1 degrees of freedom): the ladder is a diagnostic of one cell, not a claim of the
ledger, so it carries intervals and no verdict word.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ...tables import signed
from .grid import experiments
from .profiles import REDUCED_PROFILE

RUNGS = (1, 5, 20)  # server epochs per round; the paper's is 20
METHOD_NAMES = {"fedavg": "FedAvg", "feddf": "FedDF", "fedua": "FedUA"}


@dataclass(frozen=True)
class Reading:
    """One reading of FedUA's teacher weights (``fedkd_core.algorithms.fedua.FedUAConfig``)."""

    name: str
    weighting: str
    density_temperature: float | int
    rule: str  # how the reading is fixed, in words (never on a data split)


READINGS = (
    Reading("density (τ = 1)", "density", 1.0,
            "the normalised densities of Eq. 2b as the chapter reconstructs it (the reduced profile's)"),
    Reading("standardised density", "density_std", 1.0,
            "each teacher's log-density standardised by the mean and std over its own training features"),
    # 84 as the yaml writes it (an int): the run's key is the config's JSON, where 84 and 84.0 differ
    Reading("per-dimension density (τ = d = 84)", "density", 84,
            "log p_k(x) / d: the geometric mean of the d = 84 feature coordinates' densities, "
            "fixed by the model's width"),
)


def rung_params(epochs: int):
    """The ladder's cell (step, C = 1, FedDF and FedUA, no Table 1) at ``epochs`` server epochs."""
    return replace(REDUCED_PROFILE, partitions="step", participations="1.0", table1_ratios="",
                   algorithms="feddf,fedua", server_epochs=epochs)


def reading_params(reading: Reading, epochs: int = RUNGS[-1]):
    """FedUA alone under ``reading`` at ``epochs`` server epochs."""
    return replace(rung_params(epochs), algorithms="fedua", weighting=reading.weighting,
                   density_temperature=reading.density_temperature)


def baseline_params():
    """FedAvg on the ladder's cell: the reduced profile's runs."""
    return replace(rung_params(RUNGS[0]), algorithms="fedavg")


def ladder_configs() -> list[tuple[str, int, str, object]]:
    """(method, server epochs, reading name, ExperimentConfig) of every run the ladder reads."""
    rows = [("fedavg", 0, "", config) for config in experiments(baseline_params())]
    for epochs in RUNGS:
        for config in experiments(rung_params(epochs)):
            rows.append((config.algorithm, epochs, READINGS[0].name if config.algorithm == "fedua" else "", config))
    for reading in READINGS[1:]:
        rows += [("fedua", RUNGS[-1], reading.name, config) for config in experiments(reading_params(reading))]
    return rows


def ladder_runs(root=None) -> pd.DataFrame:
    """One row per ladder run: method, server epochs, reading, seed, final global accuracy (%),
    the device it ran on; NaN accuracy where the record is missing (the table says how many)."""
    from ...results import load_record

    rows = ladder_configs()
    records = [load_record(config, root) for *_, config in rows]
    frame = []
    for (method, epochs, reading, config), record in zip(rows, records):
        frame.append({"method": method, "server_epochs": epochs, "reading": reading, "seed": config.seed,
                      "accuracy": 100 * record.final["global_acc"] if record is not None else np.nan,
                      "device": record.environment.get("device_name", "") if record is not None else ""})
    return pd.DataFrame(frame)


def missing_text(runs: pd.DataFrame) -> str:
    """"" when every ladder run has its record, else how many are missing and how to run them."""
    missing = int(runs.accuracy.isna().sum())
    if not missing:
        return ""
    return (f"{missing} of the ladder's {len(runs)} runs have no record in this results folder; "
            "`python -m fedkd_core.sweep fedua --params notebooks/params/reduced/fedua_server20.yaml` "
            "(and `fedua_server5.yaml`, `fedua_server20_std.yaml`, `fedua_server20_perdim.yaml`) runs them.")


def paired_interval(differences) -> tuple[float, float, float]:
    """Mean of the paired per-seed ``differences`` and its 95% Student-t interval (n - 1 df;
    NaN bounds for fewer than 2 seeds)."""
    from scipy import stats

    values = np.asarray([d for d in differences if np.isfinite(d)], dtype=float)
    mean = float(values.mean()) if len(values) else np.nan
    if len(values) < 2:
        return mean, np.nan, np.nan
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return mean, mean - half, mean + half


def gains(runs: pd.DataFrame, baseline: str = "fedavg") -> pd.DataFrame:
    """Each (method, server epochs, reading) row's accuracy minus ``baseline``'s, seed by seed."""
    base = runs[runs.method == baseline].set_index("seed")["accuracy"]
    others = runs[runs.method != baseline].copy()
    others["gain"] = others.accuracy - others.seed.map(base)
    return others


def ladder_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per method and rung (FedUA's reconstructed reading): each seed's final accuracy,
    the paired gain over FedAvg per seed and its mean with a 95% t interval, beside the paper's."""
    from .paper import paper_table2

    paper = paper_table2().query("partition == 'step'").set_index("algorithm")["mean"]
    rows = []
    ladder = gains(runs)
    ladder = ladder[(ladder.method == "feddf") | (ladder.reading == READINGS[0].name)]
    for (method, epochs), group in ladder.groupby(["method", "server_epochs"], sort=True):
        group = group.sort_values("seed")
        mean, low, high = paired_interval(group.gain)
        rows.append({"method": METHOD_NAMES[method], "server epochs": epochs,
                     "accuracy per seed (%)": ", ".join(f"{a:.1f}" for a in group.accuracy),
                     "gain over FedAvg per seed": ", ".join(interval_text(g) for g in group.gain),
                     "mean gain [95% CI]": interval_text(mean, low, high),
                     "paper's gain (20 epochs)": signed(paper[method] - paper['fedavg'])})
    return pd.DataFrame(rows)


def readings_table(runs: pd.DataFrame, epochs: int = RUNGS[-1]) -> pd.DataFrame:
    """FedUA minus FedDF at ``epochs`` server epochs under each reading, paired by seed."""
    from .paper import paper_table2

    paper = paper_table2().query("partition == 'step'").set_index("algorithm")["mean"]
    feddf = runs[(runs.method == "feddf") & (runs.server_epochs == epochs)].set_index("seed")["accuracy"]
    rows = []
    for reading in READINGS:
        fedua = runs[(runs.method == "fedua") & (runs.server_epochs == epochs) & (runs.reading == reading.name)]
        fedua = fedua.sort_values("seed")
        differences = fedua.accuracy.to_numpy() - fedua.seed.map(feddf).to_numpy()
        mean, low, high = paired_interval(differences)
        rows.append({"reading of Eqs. 1-2b": reading.name, "fixed by": reading.rule,
                     "FedUA per seed (%)": ", ".join(f"{a:.1f}" for a in fedua.accuracy),
                     "FedUA − FedDF [95% CI]": interval_text(mean, low, high),
                     "paper": signed(paper['fedua'] - paper['feddf'])})
    return pd.DataFrame(rows)


def interval_text(mean: float, low: float = np.nan, high: float = np.nan) -> str:
    """"+1.2 [+0.4, +2.0]" at the book's one precision rule (one decimal, two under a point:
    :meth:`fedkd_core.verdict_cells.Interval.text`); the mean alone without an interval; "not run"
    for no runs."""
    from ...verdict_cells import Interval

    if not np.isfinite(mean):
        return "not run"
    return Interval(float(mean), float(low), float(high)).text()


def ladder_finding(runs: pd.DataFrame) -> str:
    """The ladder in one paragraph, from the records: FedDF's and FedUA's mean gain over FedAvg
    at each rung beside the paper's, and whether any reading gives "FedUA > FedDF"."""
    from .paper import paper_table2

    paper = paper_table2().query("partition == 'step'").set_index("algorithm")["mean"]
    table = gains(runs)
    text = []
    for method in ("feddf", "fedua"):
        rows = table[(table.method == method) & ((method == "feddf") | (table.reading == READINGS[0].name))]
        means = rows.groupby("server_epochs").gain.mean()
        if means.empty:
            continue
        steps = ", ".join(f"{interval_text(g)} at {e}" for e, g in means.items())
        text.append(f"{METHOD_NAMES[method]}'s mean gain over FedAvg is {steps} server epoch"
                    f"{'s' * (len(means) > 1 or means.index[0] != 1)} "
                    f"(the paper: {signed(paper[method] - paper['fedavg'])} at 20)")
    readings = readings_table(runs)
    above = [r["reading of Eqs. 1-2b"] for _, r in readings.iterrows() if _lower_bound(r["FedUA − FedDF [95% CI]"]) > 0]
    verdict = (f"under {len(above)} of the {len(readings)} readings the interval of FedUA − FedDF lies above zero "
               f"({', '.join(above)})" if above else
               f"under none of the {len(readings)} readings does the interval of FedUA − FedDF lie above zero")
    return "; ".join(text) + f". At {RUNGS[-1]} server epochs, {verdict}."


def _lower_bound(text: str) -> float:
    if "[" not in text:
        return np.nan
    return float(text.split("[")[1].split(",")[0].replace("−", "-"))


def plot_ladder(runs: pd.DataFrame):
    """Gain over FedAvg (points, per seed and mean with its 95% interval) against server epochs,
    FedDF and FedUA, FedUA's other readings at the last rung, and the paper's gains at 20 epochs
    as dashed lines."""
    import matplotlib.pyplot as plt

    from .paper import paper_table2

    paper = paper_table2().query("partition == 'step'").set_index("algorithm")["mean"]
    table = gains(runs)
    fig, ax = plt.subplots(figsize=(8.0, 5.6))
    colours = {"feddf": "tab:blue", "fedua": "tab:orange"}
    for offset, method in zip((-0.04, 0.04), ("feddf", "fedua")):
        rows = table[(table.method == method) & ((method == "feddf") | (table.reading == READINGS[0].name))]
        if rows.empty:
            continue
        summary = {e: paired_interval(g.gain) for e, g in rows.groupby("server_epochs")}
        epochs = np.array(sorted(summary))
        x = np.log(epochs) + offset
        means = np.array([summary[e][0] for e in epochs])
        errors = np.array([[summary[e][0] - summary[e][1], summary[e][2] - summary[e][0]] for e in epochs]).T
        ax.errorbar(x, means, yerr=errors, color=colours[method], marker="o", capsize=4,
                    label=f"{METHOD_NAMES[method]}, ours (mean, 95% CI)")
        ax.scatter(np.log(rows.server_epochs) + offset, rows.gain, color=colours[method], alpha=0.35, s=18)
        ax.axhline(paper[method] - paper["fedavg"], color=colours[method], linestyle="--",
                   label=f"{METHOD_NAMES[method]}, paper (20 epochs)")
    for (marker, colour, shift), reading in zip((("s", "tab:green", 0.1), ("^", "tab:purple", 0.2)), READINGS[1:]):
        rows = table[(table.method == "fedua") & (table.reading == reading.name)]
        if len(rows):
            mean, low, high = paired_interval(rows.gain)
            ax.errorbar([np.log(RUNGS[-1]) + shift], [mean], yerr=[[mean - low], [high - mean]], color=colour,
                        marker=marker, capsize=4, linestyle="none", label=f"FedUA, {reading.name}")
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(np.log(RUNGS), [str(e) for e in RUNGS])
    ax.set_xlabel("server epochs per round")
    ax.set_ylabel("gain over FedAvg (points)")
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return fig
