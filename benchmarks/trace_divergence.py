"""Rerun a diverged run with a per-step trace of every client's local training (issue 60, item 3).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/trace_divergence.py \
        results/paper/lg_fedavg/30bcd09506301b61.diverged.json --out /tmp/trace/lg_fedavg \
        [--stop-after ROUND] [--figure benchmarks/results/trace_divergence-lg_fedavg-pathological-s0.json]
    .venv/bin/python benchmarks/trace_divergence.py --figure-from PREFIX FIGURE.json [VAR=VALUE ...]

The run is the stored divergence's own config (its key is checked), simulated exactly as a sweep
runs it (``experiment.simulate``, one thread, fp32). Nothing of the training changes: the trace
reads values the step computes anyway, through

- the loss function ``train`` calls (the method's own: cross-entropy, pFedSD's CE + KD, ...), wrapped
  to keep the batch's loss and labels, and a forward hook on the trained model for its largest |logit|;
- torch's global optimizer step hooks, which read each step's gradient norm before the step and
  the weights and momentum after it (norms only; no tensor is written);
- the client step (``InProcessClients.step``), to know which round and client a step is in.

After each round the round's scores are compared with the stored divergence's history (the same
config run before, on another CPU): ``identical`` means every one of the 100 client accuracies
agrees exactly. After every round it writes ``<out>-steps.csv.gz`` (one row per local step of every
client) and ``<out>-rounds.json`` (per-round comparison, timing, machine, the environment variables
that choose kernels), so a stopped run keeps what it traced; ``--figure`` (or ``--figure-from`` on
a written trace) writes the chapter's figure data (``fedkd_core.chapters.fedckd.divergence``).

The Zen 5 that made the committed FedCKD column runs MKL's AVX2 kernels (MKL takes them on AMD
CPUs); an Intel CPU takes its AVX-512 ones, and its linear layers then round differently from round
1 on. ``MKL_ENABLE_INSTRUCTIONS=AVX2`` on the Intel Xeon of 2026-11-28 gave round 1 of the stored run
exactly (all 100 client accuracies); without it, 2 clients differed in round 1.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fedkd_core import experiment  # noqa: E402
from fedkd_core.experiment import RunDiverged, config_from_dict, simulate  # noqa: E402
from fedkd_core.randomness import mask_generator_of  # noqa: E402
from fedkd_core.results import config_hash, device_name  # noqa: E402
from fedkd_core.training import cross_entropy_loss  # noqa: E402

# Parameter groups of pfedsd_cnn_mnist, by state-dict name prefix.
GROUPS = {"conv1": "features.0.0.", "conv2": "features.0.3.", "fc1": "features.1.", "fc2": "features.3.",
          "head": "head."}
COLUMNS = ["round", "client", "step", "epoch", "loss", "max_logit", "mean_max_logit", "classes",
           "grad_norm", *[f"grad_{g}" for g in GROUPS], "weight_norm", *[f"weight_{g}" for g in GROUPS],
           "momentum_norm", "update_norm", *[f"update_{g}" for g in GROUPS], "finite"]


class Tracer:
    """Reads, per local step, what the step computes anyway. On a GPU every value stays on the device
    until the step is done and comes back in one transfer (one synchronisation per step)."""

    def __init__(self) -> None:
        self.round = 0
        self.client = -1
        self.step = 0
        self.steps_per_epoch = 1
        self.names: dict[int, str] = {}
        self.rows: list[dict] = []
        self.pending: dict = {}
        self.logits: torch.Tensor | None = None
        self.before: dict[int, torch.Tensor] = {}

    # ------------------------------------------------------------------ the client step
    def wrap_step(self, step):
        tracer = self

        def traced_step(algorithm, client, phase, message):
            tracer.round, tracer.client, tracer.step = algorithm.round, client, 0
            size = len(algorithm.ctx.data.client_train[client])
            batch = algorithm.ctx.train.batch_size
            tracer.steps_per_epoch = max(1, math.ceil(size / batch))
            return step(algorithm, client, phase, message)

        return traced_step

    # ------------------------------------------------------------------ train and its loss
    def wrap_train(self, train):
        """``train`` with the trained model's logits kept (a forward hook) and its loss function
        wrapped (whatever loss the method passes: cross-entropy, pFedSD's CE + KD, ...)."""
        tracer = self

        def traced_train(model, *args, **kwargs):
            tracer.names = {id(p): name for name, p in model.named_parameters()}
            kwargs["loss_fn"] = tracer.wrap_loss(kwargs.get("loss_fn", cross_entropy_loss))
            handle = model.register_forward_hook(tracer.keep_logits)
            try:
                return train(model, *args, **kwargs)
            finally:
                handle.remove()

        return traced_train

    def keep_logits(self, module, inputs, output) -> None:
        if module.training:
            self.logits = output

    def wrap_loss(self, loss_fn):
        tracer = self

        def traced_loss(model, batch):
            tracer.logits = None
            loss = loss_fn(model, batch)
            with torch.no_grad():
                values = {"loss": loss.detach().float()}
                if tracer.logits is not None:
                    top = tracer.logits.detach().abs().amax(1).float()
                    values |= {"max_logit": top.max(), "mean_max_logit": top.mean()}
                tracer.pending = {"values": values, "classes": batch.y}
            return loss

        return traced_loss

    # ------------------------------------------------------------------ optimizer hooks
    def _group(self, p) -> str | None:
        name = self.names.get(id(p), "")
        return next((g for g, prefix in GROUPS.items() if name.startswith(prefix)), None)

    def _sums(self, pairs) -> dict[str, torch.Tensor]:
        """{group: sum of squares} over (group, tensor) pairs, on the tensors' device, in float64."""
        sums: dict[str, torch.Tensor] = {}
        for g, t in pairs:
            if g is not None:
                sums[g] = sums.get(g, 0) + t.detach().double().pow(2).sum()
        return sums

    def pre_step(self, optimizer, args, kwargs):
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        self.pending.setdefault("values", {})
        self.pending["grads"] = self._sums((self._group(p), p.grad) for p in params)
        self.before = {id(p): p.detach().clone() for p in params}

    def post_step(self, optimizer, args, kwargs):
        params = [p for group in optimizer.param_groups for p in group["params"] if self._group(p) is not None]
        weights = self._sums((self._group(p), p) for p in params)
        updates = self._sums((self._group(p), p.detach() - self.before[id(p)]) for p in params if id(p) in self.before)
        buffers = [optimizer.state.get(p, {}).get("momentum_buffer") for p in params]
        momentum = self._sums(("all", b) for b in buffers if b is not None).get("all")
        finite = torch.stack([torch.isfinite(p).all() for p in params]).all() if params else torch.tensor(True)
        named = {**{f"value_{k}": v for k, v in self.pending.get("values", {}).items()},
                 **{f"grad_{g}": v for g, v in self.pending.get("grads", {}).items()},
                 **{f"weight_{g}": v for g, v in weights.items()}, **{f"update_{g}": v for g, v in updates.items()},
                 "finite": finite}
        if momentum is not None:
            named["momentum"] = momentum
        keys = list(named)
        device = finite.device
        numbers = torch.stack([torch.as_tensor(named[k], dtype=torch.float64, device=device) for k in keys]).tolist()
        got = dict(zip(keys, numbers))
        labels = self.pending.get("classes")
        row = {"round": self.round, "client": self.client, "step": self.step,
               "epoch": self.step // self.steps_per_epoch,
               **{k[len("value_"):]: got[k] for k in keys if k.startswith("value_")},
               "classes": int(torch.unique(labels).numel()) if labels is not None else None}
        for kind, name in (("grad", "grad_norm"), ("weight", "weight_norm"), ("update", "update_norm")):
            parts = {g: got.get(f"{kind}_{g}", 0.0) for g in GROUPS}
            row[name] = math.sqrt(sum(parts.values()))
            row |= {f"{kind}_{g}": math.sqrt(v) for g, v in parts.items()}
        row["momentum_norm"] = math.sqrt(got.get("momentum", 0.0))
        row["finite"] = int(got["finite"])
        self.before = {}
        self.rows.append(row)
        self.pending = {}
        self.step += 1


def traced_modules():
    """Every fedkd_core module that calls :func:`fedkd_core.training.train` by its own name."""
    import importlib
    import pkgutil

    from fedkd_core import algorithms, training

    modules = []
    for info in pkgutil.walk_packages(algorithms.__path__, algorithms.__name__ + "."):
        module = importlib.import_module(info.name)
        if getattr(module, "train", None) is training.train:
            modules.append(module)
    return modules


def device_drawn_masks() -> None:
    """Dropout as records without ``mask_generator`` drew it on a GPU: from the device's own
    generator (``nn.Dropout``), not the host's (:func:`fedkd_core.models.host_drawn` left out)."""
    from fedkd_core import models

    models.host_drawn = lambda model: model


def compare_round(round_index: int, scores: dict, selected: list, stored: dict | None) -> dict:
    """One round's scores beside the stored history's: identical when every client accuracy and
    the selected clients agree exactly."""
    if stored is None:
        return {"round": round_index, "stored": False, "alma": scores["alma"]}
    ours, theirs = scores["client_accuracies"], stored["client_accuracies"]
    diffs = [abs(a - b) for a, b in zip(ours, theirs)]
    return {"round": round_index, "stored": True, "identical": ours == theirs and selected == stored["selected"],
            "alma": scores["alma"], "stored_alma": stored["alma"], "clients_differing": sum(d > 0 for d in diffs),
            "max_abs_diff": max(diffs)}


STATS = ("loss", "grad_norm", "max_logit", "update_norm", "weight_norm", "grad_head", "weight_head", "momentum_norm")


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def figure_data(prefix: Path, extra: dict | None = None) -> dict:
    """The chapter's figure data (``fedkd_core.chapters.fedckd.divergence``) from a written trace
    (``<prefix>-steps.csv.gz``, ``<prefix>-rounds.json``): the blow-up (the first local step whose
    loss, gradient or weights are not finite), the steps of that client's update and of its earlier
    updates, every round's largest values, what the earlier rounds reached (the baseline) and which
    quantity passed its baseline first. ``extra``: environment variables the rerun ran under that its
    files do not name (a trace written before they were recorded)."""
    import pandas as pd

    from fedkd_core.federation import build_federated_data

    steps = pd.read_csv(f"{prefix}-steps.csv.gz")
    summary = json.loads(Path(f"{prefix}-rounds.json").read_text())
    stored = json.loads(Path(summary["divergence"]).read_text())
    config = config_from_dict(stored["config"])
    rerun = {**summary["rerun"]}
    rerun["environment_variables"] = {**rerun.get("environment_variables", {}), **(extra or {})}
    comparison = summary["comparison"]
    identical = [c["round"] for c in comparison if c.get("identical")]
    differing = [c["round"] for c in comparison if c.get("stored") and not c.get("identical")]
    determinism = {"rounds_compared": sum(bool(c.get("stored")) for c in comparison),
                   "rounds_identical": len(identical), "first_round_differing": differing[0] if differing else None,
                   "stored_device": stored.get("environment", {}).get("device_name")}
    bad = steps[~steps[["loss", "grad_norm", "weight_norm"]].apply(lambda c: c.map(_finite)).all(axis=1)
                | (steps.finite == 0)]
    data = {"key": summary["key"], "algorithm": stored["config"]["algorithm"], "seed": stored["config"]["seed"],
            "partition": stored["config"]["data"]["partition"], "stored_round": summary.get("stored_round"),
            "rerun": rerun, "determinism": determinism, "comparison": comparison}
    per_round = steps.groupby("round").agg(**{f"max_{s}": (s, "max") for s in STATS},
                                           clients=("client", "nunique")).reset_index()
    first_steps = steps[steps.step == 0]
    per_round = per_round.merge(first_steps.groupby("round").loss.max().rename("max_first_loss").reset_index(),
                                on="round")
    data["rounds"] = json.loads(per_round.to_json(orient="records"))
    if bad.empty:
        top = steps.loc[steps.loss.idxmax()]
        r, k = int(top["round"]), int(top.client)
        update = steps[(steps["round"] == r) & (steps.client == k)]
        data["finding"] = {"diverged": False, "rounds_traced": int(steps["round"].max()), "spike": {
            "round": r, "client": k, "step": int(top.step),
            **{s: float(top[s]) for s in ("loss", "grad_norm", "max_logit", "update_norm")},
            "median": {s: float(steps[s].median()) for s in ("loss", "grad_norm", "max_logit", "update_norm")},
            "client_earlier_rounds": sorted(int(x) for x in steps[(steps.client == k) & (steps["round"] < r)]["round"].unique()),
            "loss_before": float(update[update.step < top.step].loss.min()),
            "max_logit_before": float(update[update.step < top.step].max_logit.max())}}
        return data
    first = bad.iloc[0]
    round_b, client_b, step_b = int(first["round"]), int(first.client), int(first.step)
    before = steps[steps["round"] < round_b]
    baseline = {s: {"median": float(before[s].median()), "p999": float(before[s].quantile(0.999)),
                    "max": float(before[s].max())} for s in STATS}
    window = steps[(steps["round"] == round_b) & (steps.client == client_b)]
    passed = {}
    for s in STATS:
        over = window[window[s].map(lambda v: not _finite(v) or v > baseline[s]["max"])]
        if not over.empty:
            passed[s] = int(over.step.iloc[0])
    earlier = sorted(int(r) for r in steps[(steps.client == client_b) & (steps["round"] < round_b)]["round"].unique())
    fed = build_federated_data(config.data, config.seed)
    labels = fed.dataset.y_train[fed.client_train[client_b]]
    classes = {int(c): int(n) for c, n in zip(*np.unique(np.asarray(labels), return_counts=True))}
    others = steps[(steps["round"] == round_b) & (steps.client != client_b)]
    data["window"] = json.loads(window.to_json(orient="records"))
    data["earlier"] = {str(r): json.loads(steps[(steps["round"] == r) & (steps.client == client_b)]
                                          .to_json(orient="records")) for r in earlier}
    data["baseline"] = baseline
    data["finding"] = {
        "diverged": True, "round": round_b, "client": client_b, "step": step_b,
        "epoch": int(first.epoch), "steps_per_epoch": int(window.step.max() + 1) // max(int(window.epoch.max()) + 1, 1),
        "client_classes": classes, "client_earlier_rounds": earlier,
        "first_past_baseline": dict(sorted(passed.items(), key=lambda kv: kv[1])),
        "first_step_loss": float(window.loss.iloc[0]),
        "last_finite": json.loads(window[window.step < step_b].tail(3).to_json(orient="records")),
        "other_clients_max_grad_norm": float(others.grad_norm.max()) if len(others) else None,
        "other_clients": sorted(int(c) for c in others.client.unique()),
    }
    return data


class StopTrace(Exception):
    """Raised after ``--stop-after`` rounds: the trace is written and the run ends there."""


ENVIRONMENT_VARIABLES = ("OMP_NUM_THREADS", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")


@contextmanager
def tracing(tracer: "Tracer", scores: dict, device_masks: bool, threads: int):
    """The run's steps traced while it lasts: the client step and every module's ``train`` wrapped,
    torch's global optimizer hooks registered, each round's scores kept in ``scores``, the masks
    drawn on the device when ``device_masks``, ``threads`` torch threads; all of it undone on leaving,
    so a process (a test) that runs :func:`main` is left as it was."""
    from fedkd_core import models

    step = experiment.InProcessClients.__dict__["step"]
    trains = {module: module.train for module in traced_modules()}
    evaluate, host_drawn, saved_threads = experiment.evaluate, models.host_drawn, torch.get_num_threads()

    def scored(algorithm, *a, **kw):  # the round's scores, as simulate records them
        result = evaluate(algorithm, *a, **kw)
        scores[algorithm.round] = result
        return result

    experiment.InProcessClients.step = staticmethod(tracer.wrap_step(step.__func__))
    for module, train in trains.items():
        module.train = tracer.wrap_train(train)
    hooks = [register_optimizer_step_pre_hook(tracer.pre_step), register_optimizer_step_post_hook(tracer.post_step)]
    experiment.evaluate = scored
    if device_masks:
        device_drawn_masks()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(saved_threads)
        models.host_drawn, experiment.evaluate = host_drawn, evaluate
        for hook in hooks:
            hook.remove()
        for module, train in trains.items():
            module.train = train
        experiment.InProcessClients.step = step


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("divergence", help="a stored <key>.diverged.json")
    parser.add_argument("--out", default="/tmp/trace_divergence",
                        help="prefix of the raw output files (default: %(default)s)")
    parser.add_argument("--stop-after", type=int, default=0, help="stop after this round (0: run to the end)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda: where the rerun runs")
    parser.add_argument("--masks", choices=("stored", "host", "device"), default="stored",
                        help="dropout masks: as the stored run drew them (default), from the host's generator "
                             "(today's runs) or from the device's own (records from before mask_generator, on a GPU)")
    parser.add_argument("--smoke", action="store_true",
                        help="the stored config shrunk to 10 clients of a 600-image pool, 1 round (checks the script)")
    parser.add_argument("--figure", default="",
                        help="also write the chapter's figure data here (a benchmarks/results/*.json)")
    args = parser.parse_args(argv)

    stored = json.loads(Path(args.divergence).read_text())
    config = config_from_dict(stored["config"])
    if config_hash(config) != stored["key"]:
        raise SystemExit(f"config hashes to {config_hash(config)}, not the stored key {stored['key']}")
    if args.smoke:
        config = replace(config, rounds=1, participation=1.0,
                         data=replace(config.data, num_clients=10, pool_size=600, local_test_size=20))
    stored_rounds = {row["round"]: row for row in stored.get("history", [])}

    device = torch.device(args.device)
    stored_masks = mask_generator_of(stored.get("environment", {}))
    masks = {"stored": "device" if stored_masks != "cpu" else "host"}.get(args.masks, args.masks)
    print(f"rerun on {device_name(device)}; stored run: {stored.get('environment', {}).get('device_name')}, "
          f"masks {stored_masks}; this rerun's masks: {masks}", flush=True)

    tracer = Tracer()
    scores: dict[int, dict] = {}

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    steps_path = Path(f"{out}-steps.csv.gz")
    with gzip.open(steps_path, "wt") as handle:
        handle.write(",".join(COLUMNS) + "\n")
    written = 0
    began = time.perf_counter()
    diverged = None

    def flush(done: bool) -> None:
        nonlocal written
        with gzip.open(steps_path, "at") as handle:
            for row in tracer.rows[written:]:
                handle.write(",".join(repr(row.get(c)) if isinstance(row.get(c), float) else str(row.get(c, ""))
                                      for c in COLUMNS) + "\n")
        written = len(tracer.rows)
        selected = {}
        for row in tracer.rows:
            selected.setdefault(row["round"], set()).add(row["client"])
        summary = {
            "divergence": args.divergence, "key": stored["key"], "config": stored["config"],
            "stored_round": stored.get("round"), "stored_error": stored.get("error"),
            "stored_environment": stored.get("environment"),
            "rerun": {"finished": done, "diverged": diverged, "seconds": time.perf_counter() - began,
                      "device_name": device_name(device), "masks": masks, "threads": torch.get_num_threads(),
                      "torch": torch.__version__, "rounds_completed": len(scores), "steps_traced": len(tracer.rows),
                      "environment_variables": {v: os.environ[v] for v in ENVIRONMENT_VARIABLES if v in os.environ}},
            "comparison": [compare_round(r, scores[r], sorted(selected.get(r, ())), stored_rounds.get(r))
                           for r in sorted(scores)],
        }
        Path(f"{out}-rounds.json").write_text(json.dumps(summary, indent=1))

    def on_round(round_index: int, rounds: int) -> None:
        print(f"round {round_index}/{rounds} {time.perf_counter() - began:.0f} s", flush=True)
        flush(False)
        if args.stop_after and round_index >= args.stop_after:
            raise StopTrace

    with tracing(tracer, scores, masks == "device", int(os.environ.get("OMP_NUM_THREADS", "1"))):
        try:
            simulate(config, device=device, progress=False, on_round=on_round)
        except RunDiverged as error:
            diverged = {"round": error.round_index, "error": str(error)}
        except StopTrace:
            pass
    flush(True)
    if not tracer.rows:
        print("no step was traced: training.train steps plain SGD (no momentum, no weight decay) without an "
              "optimizer object, which the optimizer hooks cannot see", file=sys.stderr)
    summary = json.loads(Path(f"{out}-rounds.json").read_text())
    same = [c["round"] for c in summary["comparison"] if c.get("identical")]
    print(f"{len(same)} of {len(summary['comparison'])} rounds identical to the stored history; diverged: {diverged}; "
          f"{summary['rerun']['seconds']:.0f} s; {len(tracer.rows)} steps traced -> {steps_path}, {out}-rounds.json")
    if args.figure:
        Path(args.figure).write_text(json.dumps(figure_data(out), indent=1))
        print(f"figure data -> {args.figure}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--figure-from":
        # --figure-from PREFIX FIGURE.json [KEY=VALUE ...]: the figure data of a trace already written
        extra = dict(item.split("=", 1) for item in sys.argv[4:])
        data = figure_data(Path(sys.argv[2]), extra)
        Path(sys.argv[3]).write_text(json.dumps(data, indent=1))
        print(json.dumps(data["finding"], indent=1))
    else:
        main()
