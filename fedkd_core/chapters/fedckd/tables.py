"""Our records as the paper's tables: one row per run, Tables I-V beside the paper's, Fig. 5's
per-client differences."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...data import data_dir
from ...report import pm, record_precision
from .grid import METHOD_NAMES, MODEL_FOR, SETTING_OF_PARTITION, Params, parse_scenarios
from .paper import paper_accuracy_table, paper_table3

NOT_REPRODUCED = "not reproduced: no offline copy of {dataset} here"


def offline_copy(dataset: str) -> bool:
    """Whether ``dataset`` is in the offline data directory (CIFAR-100 is not, here)."""
    return (data_dir() / f"{dataset}.npz").exists()


def summary(records) -> pd.DataFrame:
    """One tidy row per run: what varies in this chapter, final and best-round ALMA, client std."""
    rows = []
    for record in records:
        config, final = record.config, record.final
        rows.append({
            "dataset": config["data"]["dataset"],
            "setting": SETTING_OF_PARTITION[config["data"]["partition"]],
            "clients": config["data"]["num_clients"],
            "participation": config["participation"],
            "rounds": config["rounds"],
            "alpha": config["data"]["alpha"],
            "model": config["model"],
            "algorithm": config["algorithm"],
            "gamma": config["algorithm_params"].get("gamma"),
            "seed": config["seed"],
            "alma": final["alma"],
            "best_alma": max(row["alma"] for row in record.history),
            "client_std": final["client_acc_std"],
            "client_accuracies": record.client_accuracies,
            "profile": record.profile,
            "precision": record_precision(record),
        })
    return pd.DataFrame(rows)


def diverged_cells(diverged, setting: str) -> dict[tuple, str]:
    """(dataset, the paper's client scale, algorithm, profile) -> "seed s, round r" (joined by
    "; ") for the runs of ``diverged`` (``results.Divergence``) in ``setting``."""
    cells: dict[tuple, list[str]] = {}
    for run in diverged:
        data = run.config["data"]
        if SETTING_OF_PARTITION[data["partition"]] == setting:
            key = (data["dataset"], paper_scale(int(data["num_clients"])), run.algorithm, run.profile)
            cells.setdefault(key, []).append(f"seed {run.config['seed']}, round {run.round}")
    return {key: "; ".join(runs) for key, runs in cells.items()}


def with_divergences(ours: str, seeds: int, runs: str) -> str:
    """A cell's text with its diverged runs (``runs``, from :func:`diverged_cells`; "" for none)
    and the cell's divergence rate (diverged of all its runs, ``seeds`` finished ones counted):
    "2 of 2 diverged (seed 1, round 18; seed 2, round 12)" where no run finished, "96.80 (1 seed;
    2 of 3 diverged: seed 1, round 18; seed 2, round 12)" where one did, so a cell short of seeds
    never reads as one not yet run."""
    if not runs:
        return ours
    failed = runs.count("seed ")
    rate = f"{failed} of {failed + seeds} diverged"
    if seeds == 0:
        return f"{rate} ({runs})"
    detail = f"{rate}: {runs}"
    if ours.endswith(" seeds)") or ours.endswith("(1 seed)"):  # "(2 seeds)" -> "(2 seeds; 1 of 3 diverged: ...)"
        return f"{ours[:-1]}; {detail})"
    return f"{ours} ({detail})"


def divergence_rates(records, diverged) -> pd.DataFrame:
    """The divergence rate of every (profile, dataset, setting, paper client scale, method) that
    ``records`` (``RunRecord``) or ``diverged`` (``results.Divergence``) ran: its runs, how many
    diverged, and the rate in words ("2 of 3 diverged"), one row per cell and method, in the
    chapter's method order. A diverged run is a run of its cell: it counts in ``runs``."""
    rows: dict[tuple, dict] = {}
    for run, failed in [(r, False) for r in records] + [(d, True) for d in diverged]:
        data = run.config["data"]
        key = (run.profile, data["dataset"], SETTING_OF_PARTITION[data["partition"]],
               paper_scale(int(data["num_clients"])), run.config["algorithm"])
        row = rows.setdefault(key, {"runs": 0, "diverged": 0, "seeds": []})
        row["runs"] += 1
        row["diverged"] += failed
        if failed:
            row["seeds"].append(int(run.config["seed"]))
    order = {name: i for i, name in enumerate(METHOD_NAMES)}
    frame = pd.DataFrame([{"profile": k[0], "dataset": k[1], "setting": k[2], "clients": k[3],
                           "algorithm": METHOD_NAMES.get(k[4], k[4]), "runs": v["runs"], "diverged": v["diverged"],
                           "diverged seeds": ", ".join(str(s) for s in sorted(v["seeds"])),
                           "rate": f"{v['diverged']} of {v['runs']} diverged", "_order": order.get(k[4], len(order))}
                          for k, v in rows.items()],
                         columns=["profile", "dataset", "setting", "clients", "algorithm", "runs", "diverged",
                                  "diverged seeds", "rate", "_order"])
    return (frame.sort_values(["profile", "dataset", "setting", "clients", "_order"], kind="stable")
            .drop(columns="_order").reset_index(drop=True))


def divergence_rates_text(rates: pd.DataFrame) -> str:
    """:func:`divergence_rates` in words, per cell with a divergence: "Divergence rate, paper
    profile, Fashion-MNIST n = 100, pathological: LG-FedAvg 1 of 3, pFedSD 2 of 3; the other 6
    methods 0 of 3 each." ("" where no run diverged)."""
    lines = []
    for (profile, dataset, setting, clients), cell in rates.groupby(["profile", "dataset", "setting", "clients"],
                                                                    sort=False):
        failed = cell[cell.diverged > 0]
        if failed.empty:
            continue
        named = ", ".join(f"{r.algorithm} {r.diverged} of {r.runs}" for r in failed.itertuples())
        rest = cell[cell.diverged == 0]
        runs = sorted(set(rest.runs))
        counts = runs[0] if len(runs) == 1 else "/".join(map(str, runs))
        others = ("" if rest.empty else f"; the other method 0 of {counts}" if len(rest) == 1
                  else f"; the other {len(rest)} methods 0 of {counts} each")
        lines.append(f"profile {profile}, {dataset} n = {clients}, {setting}: {named}{others}")
    return "Divergence rate per method and cell (diverged of all runs): " + "; ".join(lines) + "." if lines else ""


def with_a_row_per_profile(table: pd.DataFrame, cells) -> pd.DataFrame:
    """``table`` (a :func:`fedkd_core.report.compare_with_paper` table) with a row for each
    (dataset, clients, algorithm, profile) of ``cells`` it lacks: a cell not run at all takes the
    profile; a cell another profile ran gets a row of its own, not run, so a profile whose runs
    all diverged still shows in the table."""
    table = table.copy()
    cell_keys = ["dataset", "clients", "algorithm"]
    for *cell, profile in cells:
        same = (table[cell_keys] == cell).all(axis=1)
        if not same.any() or (same & (table.profile == profile)).any():  # not a cell of the paper's table, or shown
            continue
        unclaimed = same & (table.seeds == 0) & (table.profile == "")
        if unclaimed.any():
            table.loc[unclaimed, "profile"] = profile
            continue
        row = table[same].iloc[[0]].copy()
        row[["ours", "seeds", "profile", "precision"]] = ["not run", 0, profile, ""]
        row[[c for c in ("rounds", "our n") if c in row]] = ""
        row[["mean_ours", "std_ours", "ours − paper"]] = np.nan
        row["agrees"] = None
        table = pd.concat([table, row], ignore_index=True)
    return table


def compare_accuracy(ours: pd.DataFrame, setting: str, diverged=()) -> pd.DataFrame:
    """Table I or II: the paper's cells beside ours (final ALMA, mean ± std over seeds, %), one
    row per profile that ran the cell, with its rounds.

    Our runs are set beside the paper's scenario of the nearest client scale (n = 20 or 100;
    column ``our n`` says what ran). Cells of datasets without an offline copy say so; runs that
    diverged (``diverged``: ``results.Divergence``) are named in their profile's cell, beside the
    seeds that finished or alone; other cells without a run say "not run".
    """
    from ...report import compare_with_paper, mean_std_per_profile

    keys = ["dataset", "clients", "algorithm"]
    frame = ours[ours.setting == setting] if len(ours) else pd.DataFrame(columns=keys + ["alma", "profile", "rounds"])
    frame = frame.assign(our_n=frame.clients, clients=[paper_scale(n) for n in frame.clients])
    per_profile = mean_std_per_profile(frame, keys, "alma")
    table = compare_with_paper(per_profile, paper_accuracy_table(setting), keys, digits=2)
    our_n = frame.groupby(keys + ["profile"])["our_n"].agg(lambda n: ",".join(str(v) for v in sorted(set(n))))
    table.insert(3, "our n", [our_n.get(tuple(row), "") for row in table[keys + ["profile"]].itertuples(index=False)])
    missing = [not offline_copy(d) for d in table.dataset]
    table.loc[missing, "ours"] = [NOT_REPRODUCED.format(dataset=d) for d in table.dataset[missing]]
    texts = diverged_cells(diverged, setting)
    table = with_a_row_per_profile(table, texts)
    table["ours"] = [with_divergences(ours, seeds, texts.get(cell, "")) for cell, seeds, ours
                     in zip(zip(table.dataset, table.clients, table.algorithm, table.profile), table.seeds, table.ours)]
    table["algorithm"] = table.algorithm.map(METHOD_NAMES)
    return table


def paper_scale(clients: int) -> int:
    """The paper's client scale (20 or 100) a run of ``clients`` clients is compared with."""
    return 20 if clients < 60 else 100


def per_client_difference(ours: pd.DataFrame, better: str = "fedckd", worse: str = "pfedsd") -> pd.DataFrame:
    """Fig. 5: per-client final accuracy of ``better`` minus ``worse`` (same config and seed), %."""
    keys = ["profile", "dataset", "setting", "clients", "participation", "alpha", "model", "seed"]
    a = ours[(ours.algorithm == better) & ours.gamma.ne(1.0)].set_index(keys)
    b = ours[ours.algorithm == worse].set_index(keys)
    rows = []
    for key in a.index.intersection(b.index):
        diff = (np.asarray(a.loc[key, "client_accuracies"]) - np.asarray(b.loc[key, "client_accuracies"])) * 100
        rows += [{**dict(zip(keys, key)), "client": k, "difference": d} for k, d in enumerate(diff)]
    return pd.DataFrame(rows)


def fairness_table(main: pd.DataFrame) -> pd.DataFrame:
    """Table III from our runs (:func:`summary` rows of the main grid): per profile, the practical
    setting at the largest client scale it ran; per dataset and method the mean client accuracy ±
    the standard deviation *across clients* (final round, each averaged over its ``seeds``, %),
    beside the paper's at n = 100."""
    practical = main[main.setting == "practical"]
    largest = practical[practical.clients == practical.groupby("profile").clients.transform("max")]
    table = largest.groupby(["dataset", "algorithm", "profile"], sort=False).agg(
        mean=("alma", "mean"), client_std=("client_std", "mean"), seeds=("seed", "nunique")).reset_index()
    table[["mean", "client_std"]] *= 100
    table = table.merge(paper_table3(), on=["dataset", "algorithm"], how="left", suffixes=("", "_paper"))
    table["ours"] = [pm(m, s, 2) for m, s in zip(table["mean"], table.client_std)]
    table["paper (n = 100)"] = [pm(m, s, 2) for m, s in zip(table.mean_paper, table.client_std_paper)]
    table = table.merge(largest.groupby("profile").clients.max().reset_index(), on="profile")
    return table.assign(algorithm=table.algorithm.map(METHOD_NAMES))[
        ["dataset", "clients", "algorithm", "ours", "seeds", "paper (n = 100)", "profile"]]


def annealing_table(annealing: pd.DataFrame) -> pd.DataFrame:
    """Table IV from our runs (:func:`summary` rows of the annealing grid): FedCKD's final ALMA with
    annealing (γ < 1) and without (γ = 1), mean ± std over seeds per profile and dataset."""
    from ...report import mean_std_per_profile

    return mean_std_per_profile(annealing.assign(annealing=annealing.gamma < 1.0), ["dataset", "annealing"], "alma")


def annealing_seed_gains(annealing: pd.DataFrame) -> pd.DataFrame:
    """(profile, dataset, seed, gain): FedCKD's final ALMA with annealing (γ < 1) minus without
    (γ = 1), in points, for each seed run both ways (:func:`summary` rows of the annealing grid):
    the pair shares its seed's data, so the per-seed differences show whether the gain is steady."""
    columns = ["profile", "dataset", "seed", "gain"]
    if annealing.empty:
        return pd.DataFrame(columns=columns)
    pivot = annealing.assign(annealing=annealing.gamma < 1.0).pivot_table(
        index=["profile", "dataset", "seed"], columns="annealing", values="alma")
    if not {True, False} <= set(pivot.columns):
        return pd.DataFrame(columns=columns)
    return ((pivot[True] - pivot[False]).dropna() * 100).rename("gain").reset_index()[columns]


def annealing_gains(table: pd.DataFrame) -> pd.DataFrame:
    """(profile, dataset, gain): what annealing adds to FedCKD's mean accuracy in each of
    :func:`annealing_table`'s pairs, in the table's unit."""
    pivot = table.pivot_table(index=["profile", "dataset"], columns="annealing", values="mean")
    return (pivot[True] - pivot[False]).rename("gain").reset_index()


def sensitivity_table(sensitivity: pd.DataFrame, params: Params) -> pd.DataFrame:
    """Table V from our runs (:func:`summary` rows of the sensitivity grid) in the paper's layout:
    a row per method, a column per (varied, value) — each α at the base participation and model,
    each r at ``params.alpha`` and the base model, each other backbone at ``params.alpha`` and the
    base participation — holding mean ± std over seeds (%)."""
    base = parse_scenarios(params.scenarios)[0]
    model = MODEL_FOR[sensitivity.dataset.iloc[0]]
    at_base = sensitivity.participation == base.participation
    at_alpha, with_model = sensitivity.alpha == params.alpha, sensitivity.model == model
    columns = ([("alpha", a, (sensitivity.alpha == a) & at_base & with_model) for a in sorted(sensitivity.alpha.unique())]
               + [("participation", r, at_alpha & (sensitivity.participation == r) & with_model)
                  for r in sorted(sensitivity.participation.unique())]
               + [("model", m, at_alpha & at_base & (sensitivity.model == m))
                  for m in sensitivity.model.unique() if m != model])
    rows = [{"algorithm": algorithm, "varied": varied, "value": value,
             "cell": pm(group.alma.mean() * 100, group.alma.std(ddof=0) * 100, 2)}
            for varied, value, mask in columns for algorithm, group in sensitivity[mask].groupby("algorithm", sort=False)]
    table = pd.DataFrame(rows).pivot(index="algorithm", columns=["varied", "value"], values="cell")
    return table.rename(index=METHOD_NAMES)


def best_round_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The final and the best-round accuracy (%) of the same runs (:func:`summary` rows), mean over
    seeds per profile, dataset, setting, client count and method (pFedSD's code reports the best
    mean over rounds, which may be what the paper's tables show); methods by the paper's names."""
    columns = ["profile", "dataset", "setting", "clients", "method", "final (%)", "best round (%)"]
    if not len(frame):
        return pd.DataFrame(columns=columns)
    best = frame.groupby(["profile", "dataset", "setting", "clients", "algorithm"], sort=False)[["alma", "best_alma"]].mean() * 100
    best = best.reset_index().rename(columns={"algorithm": "method", "alma": "final (%)", "best_alma": "best round (%)"})
    return best.assign(method=best.method.map(lambda key: METHOD_NAMES.get(key, key)))[columns]


def fig5_differences(main: pd.DataFrame) -> pd.DataFrame:
    """Fig. 5's clients: :func:`per_client_difference` at seed 0 and each profile's smallest client scale."""
    differences = per_client_difference(main) if len(main) else pd.DataFrame()
    if not len(differences):
        return differences
    smallest = differences.clients == differences.groupby("profile").clients.transform("min")
    return differences[(differences.seed == 0) & smallest]


def fig5_scale_text(differences: pd.DataFrame, verdict_params: Params) -> str:
    """Where Fig. 5's panels (:func:`fig5_differences` rows) are not at the verdicts' scale, one
    sentence saying so plainly: which profile and client count the panels draw, which the verdict on
    FedCKD > pFedSD rests on (``verdict_params``: the verdict basis's profile); "" where they agree."""
    drawn = differences[["profile", "clients"]].drop_duplicates().sort_values(["clients", "profile"])
    verdict = parse_scenarios(verdict_params.scenarios)[-1]
    at_scale = [(p, n) for p, n in drawn.itertuples(index=False) if p == verdict_params.profile and n == verdict.clients]
    if not len(drawn) or len(at_scale) == len(drawn):
        return ""
    shown = " and ".join(f"the {p} profile's {n}-client runs" for p, n in drawn.itertuples(index=False))
    return (f"Not the verdict's scale: the panels show {shown}, while the verdict on FedCKD > pFedSD (the box at "
            f"the top) rests on the {verdict_params.profile} profile's {verdict.clients}-client column (r = "
            f"{verdict.participation:g}, T = {verdict.rounds}), which this figure does not draw. Read it as the "
            "per-client picture of a smaller federation, not as the verdict's evidence.")


def per_client_counts(differences: pd.DataFrame) -> pd.DataFrame:
    """Fig. 5's counts from :func:`fig5_differences` rows (one seed and client scale each):
    per (profile, dataset, setting), the clients where FedCKD is better, equal, pFedSD better, and
    the mean difference (points)."""
    rows = [{"profile": profile, "dataset": dataset, "setting": setting, "clients": len(group),
             "FedCKD better": int((group.difference > 0).sum()), "equal": int((group.difference == 0).sum()),
             "pFedSD better": int((group.difference < 0).sum()), "mean difference": round(float(group.difference.mean()), 2)}
            for (profile, dataset, setting), group in differences.groupby(["profile", "dataset", "setting"], sort=False)]
    return pd.DataFrame(rows, columns=["profile", "dataset", "setting", "clients", "FedCKD better", "equal",
                                       "pFedSD better", "mean difference"])
