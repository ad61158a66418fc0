"""Why a run of the paper-scale column diverged: a per-step trace of its rerun (issue 60).

``benchmarks/trace_divergence.py`` reruns a stored divergence (its own config, one CPU thread,
fp32) and reads, at every local step of every client, the loss, the gradient's norm (whole and per
layer), the largest |logit| of the batch, the weights' and the momentum's norms and the step's
update, without changing a number of the run. Its figure data is committed as
``benchmarks/results/trace_divergence-<run>.json``; this module reads it, plots it
(:func:`plot_trace`) and says what it shows (:func:`trace_text`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ...numerics import BENCHMARK_RESULTS
from .grid import METHOD_NAMES

TRACE_PREFIX = "trace_divergence-"
DETERMINISM_PREFIX = "trace_determinism-"  # a rerun's rounds beside the stored run's, no step trace
# The panels of the figure: (column, label), each on a log scale.
PANELS = (("loss", "training loss"), ("grad_norm", "gradient norm"), ("max_logit", "largest |logit|"),
          ("update_norm", "step's update norm"), ("weight_norm", "weight norm"))
NAMES = {"loss": "the loss", "grad_norm": "the gradient norm", "max_logit": "the largest |logit|",
         "update_norm": "the step's update", "weight_norm": "the weight norm", "grad_head": "the head's gradient",
         "weight_head": "the head's weight norm", "momentum_norm": "the momentum buffer"}


def traces(folder: Path = BENCHMARK_RESULTS) -> list[dict]:
    """Every committed trace's figure data, in file-name order ([] where none is committed)."""
    return [json.loads(path.read_text()) for path in sorted(Path(folder).glob(f"{TRACE_PREFIX}*.json"))]


def steps_frame(trace: dict) -> pd.DataFrame:
    """The traced client's steps: its update in the blow-up round and its earlier updates, one row
    per local step, with ``update`` ("round r") and ``blowup`` (True for the round it diverged in)."""
    frames = [pd.DataFrame(rows).assign(blowup=False) for rows in trace.get("earlier", {}).values()]
    frames.append(pd.DataFrame(trace.get("window", [])).assign(blowup=True))
    frame = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else pd.DataFrame()
    if len(frame):
        frame["update"] = [f"round {int(r)}" for r in frame["round"]]
    return frame


def plot_trace(trace: dict, earlier: int = 2):
    """The figure: for the client whose update diverged, each quantity of :data:`PANELS` against its
    local step, in the blow-up round (red) and in its ``earlier`` last updates before (grey), with
    the largest value any client reached in the rounds before (dashed): where the blow-up leaves what
    training had ever reached. Returns the matplotlib Figure."""
    import numpy as np

    finding = trace["finding"]
    if not finding.get("diverged"):
        return plot_rounds(trace)
    frame = steps_frame(trace)
    fig, axes = _panels()
    shown_earlier = [str(r) for r in finding.get("client_earlier_rounds", [])[-earlier:]]
    for ax, (column, label) in zip(axes, PANELS):
        for r in shown_earlier:
            part = frame[(frame["round"] == int(r)) & ~frame.blowup]
            ax.plot(part.step, part[column], color="0.6", lw=1, label=f"round {r}")
        part = frame[frame.blowup]
        values = part[column].astype(float).replace([np.inf, -np.inf], np.nan)
        ax.plot(part.step, values, color="tab:red", lw=1.5, label=f"round {finding['round']}")
        ceiling = trace["baseline"][column]["max"]
        ax.axhline(ceiling, color="k", ls="--", lw=0.8, label="largest before (any client)")
        ax.axvline(finding["step"], color="tab:red", ls=":", lw=0.8)
        for boundary in range(finding["steps_per_epoch"], int(part.step.max()) + 1, finding["steps_per_epoch"]):
            ax.axvline(boundary - 0.5, color="0.85", lw=0.6, zorder=0)
        ax.set_yscale("log")
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("local step")
    return _finished(fig, axes, trace, f"client {finding['client']}'s local steps "
                     f"(non-finite from step {finding['step']} of round {finding['round']})")


def plot_rounds(trace: dict):
    """The figure of a rerun that did not diverge: each quantity of :data:`PANELS`, the largest any
    client's local step reached in each round, against the round, with the round the stored run
    diverged in marked (dotted). Returns the matplotlib Figure."""
    rounds = pd.DataFrame(trace["rounds"])
    fig, axes = _panels()
    for ax, (column, label) in zip(axes, PANELS):
        ax.plot(rounds["round"], rounds[f"max_{column}"], color="tab:blue", lw=1.2)
        if trace.get("stored_round"):
            ax.axvline(trace["stored_round"], color="tab:red", ls=":", lw=1, label="stored run diverged")
        ax.set_yscale("log")
        ax.set_title(f"{label}, largest per round", fontsize=10)
        ax.set_xlabel("round")
    return _finished(fig, axes, trace, f"the rerun, every client's local steps (no divergence in {len(rounds)} rounds)")


def trace_caption(trace: dict) -> str:
    """The caption of :func:`plot_trace`'s figure (and so its alt text): which run, what each panel
    and line shows."""
    finding = trace["finding"]
    name = METHOD_NAMES.get(trace["algorithm"], trace["algorithm"])
    quantities = ", ".join(label for _, label in PANELS)
    run = f"{name}, {trace['partition']}, seed {trace['seed']}"
    if finding.get("diverged"):
        return (f"The rerun of {run}: client {finding['client']}'s local steps, a panel per quantity ({quantities}; "
                f"log scale) against the local step: red, round {finding['round']}, where a value first became "
                "non-finite (dotted line: that step); grey, the client's updates before; dashed, the largest value any "
                "client reached in the rounds before.")
    stored = f" (dotted: round {trace['stored_round']}, where the stored run diverged)" if trace.get("stored_round") else ""
    return (f"The rerun of {run}, which did not diverge: a panel per quantity ({quantities}; log scale), the largest "
            f"value any client's local step reached in each round, against the round{stored}.")


def _panels():
    """A figure with one panel per :data:`PANELS` entry, two a row to fit the book's column."""
    from ...plots import grid

    fig, axes = grid(len(PANELS), height=3.0, per_row=2)
    for spare in fig.axes[len(PANELS):]:  # the grid's unused slot
        spare.remove()
    return fig, axes


def _finished(fig, axes, trace: dict, what: str):
    """``fig`` with its legend and a two-line title naming the run and ``what`` it shows."""
    axes[0].legend(loc="best")
    name = METHOD_NAMES.get(trace["algorithm"], trace["algorithm"])
    fig.suptitle(f"{name}, {trace['partition']}, seed {trace['seed']}:\n{what}", fontsize=10)
    fig.tight_layout()
    return fig


def _value(rows: list[dict], step: int, column: str) -> float | None:
    match = [row[column] for row in rows if row["step"] == step]
    return match[0] if match else None


def determinism_text(trace: dict) -> str:
    """Whether the rerun reproduced the stored run, in words."""
    from ...cpuinfo import machine_text

    d, rerun = trace["determinism"], trace["rerun"]
    settings = ", ".join(f"{k}={v}" for k, v in rerun.get("environment_variables", {}).items() if k != "OMP_NUM_THREADS")
    on_cpu = not str(rerun["device_name"]).startswith("NVIDIA")
    masks = {"device": ", dropout masks from the GPU's own generator (as the stored run drew them)",
             "host": ", dropout masks from the host's generator (not the stored run's draws)"}.get(
        rerun.get("masks", "") if not on_cpu else "", "")
    where = (f"{machine_text(rerun['device_name'])}{', one thread' if on_cpu else ''}{masks}"
             f"{f', {settings}' if settings else ''}")
    stored = machine_text(d["stored_device"]) if d.get("stored_device") else "another machine"
    if d["rounds_compared"] and d["rounds_identical"] == d["rounds_compared"]:
        agreement = (f"every client's accuracy in all {d['rounds_compared']} rounds the stored run recorded is the "
                     f"stored one exactly (it ran on {stored})")
    else:
        agreement = (f"{d['rounds_identical']} of the {d['rounds_compared']} recorded rounds agree exactly with the "
                     f"stored run (on {stored}); the first to differ is round {d['first_round_differing']}")
    diverged = trace["finding"].get("diverged")
    outcome = (f"it diverged in round {trace['finding']['round']}" if diverged
               else f"it had not diverged after {trace['finding'].get('rounds_traced')} rounds")
    return f"Rerun on {where}: {agreement}, and {outcome} (the stored run: round {trace['stored_round']})."


def trace_text(trace: dict) -> str:
    """What the trace shows, with its numbers: where the first non-finite value appeared (round,
    client, its classes, local step), which quantity left the range of every earlier step first, and
    the values at the steps before."""
    finding = trace["finding"]
    if not finding.get("diverged"):
        spike = finding.get("spike")
        if not spike:
            return determinism_text(trace)
        med = spike["median"]
        first = "its first update (its body still the initial one)" if not spike["client_earlier_rounds"] else \
            f"an update after round{'s' if len(spike['client_earlier_rounds']) > 1 else ''} " \
            f"{', '.join(map(str, spike['client_earlier_rounds']))}"
        return (f"{determinism_text(trace)} Its worst step: client {spike['client']} in round {spike['round']}, "
                f"{first}, local step {spike['step']}: loss {spike['loss']:.3g} (median step {med['loss']:.2g}), "
                f"gradient norm {spike['grad_norm']:.3g} (median {med['grad_norm']:.2g}), largest |logit| "
                f"{spike['max_logit']:.3g} (median {med['max_logit']:.2g}), update {spike['update_norm']:.2g} "
                f"(median {med['update_norm']:.2g}). Before it the client's loss had fallen to "
                f"{spike['loss_before']:.2g} while its logits kept growing (to {spike['max_logit_before']:.3g}) under "
                "momentum 0.9: with two classes, cross-entropy is satisfied by ever larger logits, and one sample on "
                "the wrong side then costs a loss and a gradient of that size. This run recovered; the stored run's "
                "non-finite loss fits a larger spike of this kind, which a rerun that parts from it cannot show.")
    baseline, window = trace["baseline"], trace["window"]
    order = list(finding["first_past_baseline"].items())
    classes = ", ".join(f"{c} ({n} images)" for c, n in finding["client_classes"].items())
    spe = finding["steps_per_epoch"]
    step = finding["step"]
    first = "; ".join(
        f"{NAMES.get(name, name)} at step {at}" + (
            f" ({_value(window, at, name):.3g} where no earlier step of any client passed {baseline[name]['max']:.3g})"
            if _value(window, at, name) is not None and pd.notna(_value(window, at, name)) else "")
        for name, at in order[:4])
    earlier = finding.get("client_earlier_rounds", [])
    poisoned = poisoned_round(trace)
    upload = "" if poisoned is None else (
        f" The model this client downloaded had already blown up: in round {poisoned['round']} a step reached loss "
        f"{poisoned['max_loss']:.3g} and weight norm {poisoned['max_weight_norm']:.3g} without turning non-finite, so "
        "the run's check (a non-finite loss) let that upload through, and the server averaged it into the global model.")
    return (f"{determinism_text(trace)}{upload} The first non-finite value is in client {finding['client']}'s update "
            f"(its classes: {classes}), local step {step} (epoch {step // spe + 1}, batch {step % spe + 1} of {spe}). "
            f"Leaving the range that every earlier step of every client kept: {first}. The client had trained in "
            f"round{'s' if len(earlier) != 1 else ''} {', '.join(map(str, earlier)) or 'none before'}; its first step "
            f"this round had loss {finding['first_step_loss']:.3g} (the largest first-step loss of any update before: "
            f"{max((r['max_first_loss'] for r in trace['rounds'] if r['round'] < finding['round']), default=float('nan')):.3g}).")


POISON_FACTOR = 100  # an earlier round whose largest weight norm is this many times the usual one blew up


def poisoned_round(trace: dict) -> dict | None:
    """The round before the blow-up whose largest weight norm is :data:`POISON_FACTOR` times the
    median over the rounds before it (an update that exploded without a non-finite value), or None."""
    if not trace["finding"].get("diverged"):
        return None
    prior = [r for r in trace.get("rounds", []) if r["round"] < trace["finding"]["round"]]
    if len(prior) < 2:
        return None
    usual = float(pd.Series([r["max_weight_norm"] for r in prior]).median())
    worst = max(prior, key=lambda r: r["max_weight_norm"])
    return worst if worst["max_weight_norm"] > POISON_FACTOR * usual else None


def determinism_checks(folder: Path = BENCHMARK_RESULTS) -> list[dict]:
    """Every committed rerun comparison (``trace_determinism-*.json``: a diverged run rerun on another
    machine, its rounds beside the stored ones), in file-name order."""
    return [json.loads(path.read_text()) for path in sorted(Path(folder).glob(f"{DETERMINISM_PREFIX}*.json"))]


def determinism_check_text(check: dict) -> str:
    """A rerun comparison in words: where the rerun left the stored run, and how far it got."""
    from ...cpuinfo import machine_text

    rows = [c for c in check["comparison"] if c.get("stored")]
    same = [c["round"] for c in rows if c.get("identical")]
    first = next((c for c in rows if not c.get("identical")), None)
    last = rows[-1] if rows else None
    settings = ", ".join(f"{k}={v}" for k, v in check["rerun"].get("environment_variables", {}).items()
                         if k != "OMP_NUM_THREADS")
    name = METHOD_NAMES.get(check["algorithm"], check["algorithm"])
    stored = machine_text(check["stored_environment"].get("device_name"))
    text = (f"{name}, {check['partition']}, seed {check['seed']} diverged in round {check['stored_round']} on {stored}. "
            f"Rerun on {machine_text(check['rerun']['device_name'])}, one thread{f', {settings}' if settings else ''}: ")
    if first is None:
        text += f"all {len(rows)} rounds compared agree with the stored run exactly"
    else:
        agree = "agree" if len(same) > 1 else "agrees"
        text += (f"round{'s' if len(same) != 1 else ''} {', '.join(map(str, same)) or 'none'} {agree} with the stored "
                 f"run exactly (all 100 client accuracies), round {first['round']} differs in "
                 f"{first['clients_differing']} of them")
        if last is not None and last is not first:
            text += f" and round {last['round']} in {last['clients_differing']}"
    passed = check.get("passed_round_without_diverging")
    if passed and passed >= check["stored_round"]:
        text += (f"; the rerun passed round {passed} without diverging. Rounding-level differences grow into "
                 "another run within a few rounds, and that run does not diverge where the stored one did: at "
                 "this learning rate the config sits at the edge of stability, whether and when a run crosses it "
                 "depends on rounding-level differences, and no rerun elsewhere can show the stored blow-up step by step")
    return text + "."


def _run_name(trace: dict) -> str:
    return f"{METHOD_NAMES.get(trace['algorithm'], trace['algorithm'])} seed {trace['seed']}"


def traces_finding_text(traces: list[dict]) -> str:
    """What the traces establish together: which stored divergences reran exactly (every recorded
    round identical, the non-finite loss in the stored round), and what reruns under other draws
    (other dropout masks, another CPU's rounding) did."""
    if not traces:
        return ""
    exact, other = [], []
    for trace in traces:
        d, finding = trace["determinism"], trace["finding"]
        same = d["rounds_compared"] and d["rounds_identical"] == d["rounds_compared"]
        if same and finding.get("diverged") and finding["round"] == trace["stored_round"]:
            exact.append(f"{_run_name(trace)} (round {finding['round']})")
        else:
            outcome = (f"diverged in round {finding['round']}" if finding.get("diverged")
                       else f"had not diverged after {finding.get('rounds_traced')} rounds")
            other.append(f"{_run_name(trace)} {outcome} (stored: round {trace['stored_round']})")
    text = ""
    if exact:
        text += (f"Rerun with the stored run's own draws on its own kind of device, {', '.join(exact)} diverged again "
                 "in the same round, every recorded round identical to the stored one: a divergence is a deterministic "
                 "outcome of the config, its seed and its random draws, not an accident of a machine's arithmetic. ")
    if other:
        text += (f"Under other draws (other dropout masks, or another CPU's rounding): {'; '.join(other)}. Whether a "
                 "run of this setting blows up depends on its draws, and every traced blow-up has the same shape: a "
                 "two-class client's logits grow while its loss falls, one batch then gives a gradient hundreds of "
                 "times the median, and momentum 0.9 carries it on until the loss overflows.")
    return text.strip()
