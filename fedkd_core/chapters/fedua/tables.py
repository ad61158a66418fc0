"""Our records as the paper's tables: one row per run, the rows of Tables 1-3, the per-round
history, and how close a step split is to FedBE's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...report import record_precision
from .grid import SELECTION_NAMES
from .records import cell_of


def summary(records) -> pd.DataFrame:
    """One row per run: its cell, seed, final global accuracy, profile and precision."""
    rows = []
    for record in records:
        partition, participation, algorithm, selection, ratio = cell_of(record)
        rows.append({"partition": partition, "participation": participation, "algorithm": algorithm,
                     "selection": selection, "ratio": ratio, "seed": record.config["seed"],
                     "rounds": record.config["rounds"], "global_acc": record.final["global_acc"],
                     "profile": record.profile, "precision": record_precision(record)})
    return pd.DataFrame(rows, columns=["partition", "participation", "algorithm", "selection", "ratio", "seed",
                                       "rounds", "global_acc", "profile", "precision"])


def table2_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Runs of Table 2: C = 1, FedDF on all of U (Table 1's selection runs excluded)."""
    return frame[(frame.participation == 1.0) & ((frame.algorithm != "feddf") | (frame.selection == "all"))]


def table3_rows(frame: pd.DataFrame, partition: str = "step") -> pd.DataFrame:
    """Runs of Table 3: every C on ``partition``, FedDF on all of U."""
    return frame[(frame.partition == partition) & ((frame.algorithm != "feddf") | (frame.selection == "all"))]


def table1_rows(frame: pd.DataFrame, partition: str = "step") -> pd.DataFrame:
    """Runs of Table 1: FedDF with a selection rule at each ratio, C = 1; the ratio-1 run (all of
    U) stands in both rows, since both rules keep every sample there."""
    feddf = frame[(frame.algorithm == "feddf") & (frame.partition == partition) & (frame.participation == 1.0)]
    whole = feddf[feddf.selection == "all"]
    return pd.concat([feddf[feddf.selection != "all"]] + [whole.assign(selection=s) for s in SELECTION_NAMES],
                     ignore_index=True)


def history_frame(records) -> pd.DataFrame:
    """Per evaluated round: the cell, seed, global accuracy and the server's diagnostics."""
    frames = []
    for record in records:
        partition, participation, algorithm, selection, ratio = cell_of(record)
        for row in record.history:
            frames.append({"partition": partition, "participation": participation, "algorithm": algorithm,
                           "selection": selection, "ratio": ratio, "seed": record.config["seed"],
                           "profile": record.profile, "round": row["round"], "global_acc": row["global_acc"],
                           "mean_max_weight": row.get("mean_max_weight"),
                           "bytes_up": row["bytes_up"], "bytes_down": row["bytes_down"], "clients": row["clients"]})
    return pd.DataFrame(frames)


def step_check(histograms: np.ndarray) -> dict:
    """How close a step split is to FedBE's: majors per client, images per major and minor class."""
    sorted_counts = np.sort(histograms, axis=1)
    return {"clients": len(histograms), "per client": f"{histograms.sum(1).min()}–{histograms.sum(1).max()}",
            "major images": f"{sorted_counts[:, -2:].min()}–{sorted_counts[:, -2:].max()}",
            "minor images": f"{sorted_counts[:, :-2].min()}–{sorted_counts[:, :-2].max()}"}


def partition_names(params) -> list[str]:
    """The partitions of ``params``, in its order ("step", "dir0.1", ...)."""
    return [name.strip() for name in params.partitions.split(",") if name.strip()]


def step_checks(profiles: dict, seed: int = 0) -> pd.DataFrame:
    """:func:`step_check` of the step split (seed ``seed``) of each profile of ``profiles``
    (heading -> params) that runs one, a row each, headed by the profile."""
    from ...federation import build_federated_data
    from .grid import data_config

    return pd.DataFrame([{"profile": heading,
                          **step_check(build_federated_data(data_config(params, "step"), seed).train_histograms())}
                         for heading, params in profiles.items() if "step" in partition_names(params)])


def jitter_counts(records) -> pd.DataFrame:
    """How many FedUA client fits of ``records`` (every evaluated round's GDAs, as the server used
    them) needed each relative jitter, per profile and partition: columns profile, partition,
    jitter (to 2 significant digits: the float32 upload moves the last ones), client fits."""
    rows = [{"profile": record.profile, "partition": cell_of(record)[0], "jitter": float(f"{jitter:.2g}")}
            for record in records if record.config["algorithm"] == "fedua"
            for row in record.history for jitter in row.get("gda_jitter", [])]
    frame = pd.DataFrame(rows, columns=["profile", "partition", "jitter"])
    return frame.groupby(["profile", "partition", "jitter"]).size().rename("client fits").reset_index()
