"""Our records as the paper's tables: one row per run, Tables I-II beside the paper's, Fig. 5's
per-client differences."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...data import data_dir
from ...report import record_precision
from .grid import METHOD_NAMES, SETTING_OF_PARTITION
from .paper import paper_accuracy_table

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


def compare_accuracy(ours: pd.DataFrame, setting: str) -> pd.DataFrame:
    """Table I or II: the paper's cells beside ours (final ALMA, mean ± std over seeds, %), one
    row per profile that ran the cell, with its rounds.

    Our runs are set beside the paper's scenario of the nearest client scale (n = 20 or 100;
    column ``our n`` says what ran). Cells of datasets without an offline copy say so; other
    cells without a run say "not run".
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
