"""Measurements of the chapter beyond its tables: forgetting when the global model arrives
(Fig. 1b), and why the literal KL direction can diverge (the sharpness of each loss in the logits)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch.autograd.functional import hessian
from torch.nn import functional as F

from ...algorithms import Context, algorithm_class, algorithm_config
from ...algorithms.fedckd import KL_DIRECTIONS
from ...cpuinfo import machine_text
from ...distill import tempered_softmax
from ...experiment import ExperimentConfig, clients_finish, clients_update, default_device, select_clients, server_update
from ...federation import build_federated_data
from ...precision import use_bf16
from ...results import config_hash, environment, results_dir, write_json_atomically
from ...tables import signed
from ...training import accuracy


def forgetting_trace(config: ExperimentConfig, rounds: int) -> pd.DataFrame:
    """Each selected client's accuracy on its local test set just *before* it receives the
    global model (its own model after local training) and just *after* (the freshly averaged
    global model that replaces it), round by round (FedCKD Fig. 1b).

    Runs ``config``'s algorithm (one that keeps personal models and a global model, e.g.
    FedCKD or pFedSD) for ``rounds`` rounds outside the record cache.
    """
    data = build_federated_data(config.data, config.seed)
    ctx = Context(data=data, model_name=config.model, train=config.train, device=default_device(), seed=config.seed)
    algorithm = algorithm_class(config.algorithm)(algorithm_config(config.algorithm, config.algorithm_params), ctx)
    if algorithm.global_model() is None:
        raise ValueError(f"algorithm {config.algorithm!r} has no global model to receive")
    sampler = np.random.default_rng([config.seed, 2])
    amp = config.train.mixed_precision
    rows = []
    for round_index in range(1, rounds + 1):
        algorithm.begin_round(round_index)
        selected = select_clients(sampler, data.num_clients, config.participation)
        uploads = clients_update(algorithm, selected)
        before = {k: accuracy(algorithm.personal_model(k), data.dataset, data.client_test[k], mixed_precision=amp)
                  for k in selected}
        server_update(algorithm, uploads)
        clients_finish(algorithm, selected)
        for k in selected:
            after = accuracy(algorithm.global_model(), data.dataset, data.client_test[k], mixed_precision=amp)
            rows.append({"round": round_index, "client": k, "before": before[k], "after": after})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class StoredTrace:
    """A :func:`forgetting_trace` as stored under ``results/traces/forgetting/``: its rows, where
    and when it was computed, and whether this call read it back or computed it."""

    frame: pd.DataFrame
    environment: dict
    measured: str
    seconds: float
    path: Path
    read_back: bool


def trace_path(config: ExperimentConfig, rounds: int, root=None) -> Path:
    """``results/traces/forgetting/<config key>-<rounds>rounds.json``: the key is the run's record
    key, so the precision and device it ran with are not part of it (as for records)."""
    return results_dir(root) / "traces" / "forgetting" / f"{config_hash(config)}-{rounds}rounds.json"


def stored_forgetting_trace(config: ExperimentConfig, rounds: int, root=None) -> StoredTrace:
    """:func:`forgetting_trace` of ``config`` over ``rounds`` rounds, read back from
    :func:`trace_path` when a trace is stored there, computed and stored otherwise (a build then
    reads it instead of running it again, as it reads records; delete the file to compute it anew)."""
    path = trace_path(config, rounds, root)
    if path.exists():
        stored = json.loads(path.read_text())
        return StoredTrace(pd.DataFrame(stored["rows"]), stored["environment"], stored["measured"], stored["seconds"],
                           path, read_back=True)
    began = time.perf_counter()
    frame = forgetting_trace(config, rounds)
    device = default_device()
    stored = {"config": config.resolved(), "rounds": rounds,
              "environment": environment(device, use_bf16(config.train.mixed_precision, device)),
              "measured": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
              "seconds": round(time.perf_counter() - began, 1),
              "rows": [{"round": int(row.round), "client": int(row.client), "before": float(row.before),
                        "after": float(row.after)} for row in frame.itertuples()]}
    write_json_atomically(stored, path)  # a page reading at the same time sees all of it or none
    return StoredTrace(frame, stored["environment"], stored["measured"], stored["seconds"], path, read_back=False)


def forgetting_by_round(forgetting: pd.DataFrame) -> pd.DataFrame:
    """Per round of a :func:`forgetting_trace` (its index, named "round"): the client-rounds, the
    mean accuracy (%) of the clients' own models ("before") and of the global model they receive
    ("after"), and in how many client-rounds the global model scores lower, higher and the same."""
    drop = forgetting.before - forgetting.after
    counted = forgetting.assign(lower=drop > 0, higher=drop < 0, same=drop == 0)
    table = counted.groupby("round").agg(client_rounds=("client", "size"), before=("before", "mean"),
                                         after=("after", "mean"), lower=("lower", "sum"), higher=("higher", "sum"),
                                         same=("same", "sum"))
    return table.assign(before=table.before * 100, after=table.after * 100).rename(
        columns={"client_rounds": "client-rounds", "before": "own model (%)", "after": "global model (%)",
                 "lower": "global lower", "higher": "global higher", "same": "same"})


def forgetting_text(forgetting: pd.DataFrame, profile: str, classes: int = 10, provenance: str = "") -> str:
    """What a :func:`forgetting_trace` shows, in numbers: the mean and median of (global model −
    the client's own model) on the client's test set, the client-rounds on each side, a warning
    where the global model is still below twice chance level (100 / ``classes`` %, an untrained model
    rather than forgetting), then what the run is: a demonstration of the measurement (one seed,
    the page's profile, not a record the verdicts read; ``provenance``, e.g. :func:`trace_provenance`,
    says where and when it ran), not evidence on the paper's Fig. 1b."""
    gap = (forgetting.after - forgetting.before) * 100
    rounds, received = forgetting["round"].nunique(), forgetting.after.mean() * 100
    untrained = (f" The global model is at {received:.1f}% on average on the clients' test sets (chance "
                 f"{100 / classes:g}%): it has barely started learning, so the gap is that of an untrained "
                 "global model, not forgetting." if received < 2 * 100 / classes else "")
    return (f"Over the {len(gap)} client-rounds of this run, the global model a client receives minus the client's "
            f"own model, on the client's test set: {signed(gap.mean())} points on average, median {signed(gap.median())}; "
            f"the global model is lower in {int((gap < 0).sum())}, higher in {int((gap > 0).sum())} and the same in "
            f"{int((gap == 0).sum())} of them.{untrained} This is a short demonstration run of this page's "
            f"**{profile}** profile ({rounds} round{'s' if rounds != 1 else ''}, one seed, not a record the verdicts "
            f"read{'; ' + provenance if provenance else ''}): it shows the measurement, not evidence for or against "
            "the paper's Fig. 1b.")


def trace_provenance(trace: StoredTrace) -> str:
    """Where the trace ran and whether this build read it back, as a reader needs it (the machine's
    plain name, :func:`~fedkd_core.cpuinfo.machine_text`; no file path): "computed on Intel Xeon
    (Emerald Rapids) in bf16 on 2026-11-29 in 30 s, stored with the results and read back by this build"."""
    env = trace.environment
    where = f"computed on {machine_text(env.get('device_name'))} in {env.get('precision', '?')} on {trace.measured}"
    kept = "stored with the results and read back by this build" if trace.read_back else "stored with the results by this build"
    return f"{where} in {trace.seconds:.0f} s, {kept}"


# --- why the literal KL can diverge ----------------------------------------------------------------

def logit_sharpness(loss_of, classes: int = 10) -> dict:
    """The largest |gradient| and the largest |Hessian eigenvalue| of ``loss_of`` (a function of a
    (1, classes) logit tensor) in the logits, at uniform (zero) logits."""
    student = torch.zeros(classes, requires_grad=True)
    loss_of(student.view(1, -1)).backward()
    curvature = torch.linalg.eigvalsh(hessian(lambda z: loss_of(z.view(1, -1)), torch.zeros(classes)))
    return {"largest |∂loss/∂z|": float(student.grad.abs().max()), "largest curvature": float(curvature.abs().max())}


def kl_sharpness(lam: float, temperature: float, classes: int = 10) -> pd.DataFrame:
    """:func:`logit_sharpness` of CE (label: the teacher's class) and of λ·τ²·KL in each direction of
    ``KL_DIRECTIONS``, for a student still uniform over ``classes`` classes and a teacher confident
    in class 0 (logits 40 and -60), at temperature ``temperature``: one row per loss (its index,
    named "loss")."""
    teacher = tempered_softmax(torch.tensor([[40.0] + [-60.0] * (classes - 1)]), temperature)
    losses = {"CE (label = the teacher's class)": lambda z: F.cross_entropy(z, torch.tensor([0]))}
    for direction, kl in KL_DIRECTIONS.items():
        losses[f"λ·τ²·KL({direction.replace('_', ' ‖ ')})"] = (
            lambda z, kl=kl: lam * kl(z, teacher, temperature, True))
    return pd.DataFrame({name: logit_sharpness(loss, classes) for name, loss in losses.items()}).T.rename_axis("loss")
