"""The book's Performance page, from the benchmark scripts' result files: nothing on it is typed.

    python -m fedkd_core.performance book/_generated/performance.md

Each script under ``benchmarks/`` ends with :func:`save_result`, which writes
``benchmarks/results/<benchmark>-<machine>.json``: what was measured (a table of rows), the command
that measured it, the date, the machine (the CPU as records describe it, :mod:`fedkd_core.cpuinfo`;
its cores; the GPU if any), torch's version and thread count, and what else ran on the machine
meanwhile (the load average, and every other process that used a tenth of a core or more while
the benchmark started and ended). One file per benchmark and machine: a rerun on the same machine
replaces its file, a run on another machine adds one. :func:`render` turns the files into the
page's Markdown, each table under the machine and date that produced it. One section is computed
from the committed run records instead (:func:`machine_drift_markdown`): the drift between
machines that the verdicts allow for, beside the direct reruns of the precision-drift benchmark.
"""

from __future__ import annotations

import datetime as _dt
import json
import html
import math
import os
import platform
import re
import shlex
import sys
from pathlib import Path

from .cpuinfo import machine_text

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
REQUIRED = ("benchmark", "title", "command", "date", "machine", "torch", "threads", "beside", "columns", "rows")


# --- writing ----------------------------------------------------------------------------------------

def machine() -> dict:
    """This machine as a result file names it."""
    import torch

    from .results import device_name

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {"cpu": device_name(torch.device("cpu")), "cores": os.cpu_count(), "gpu": gpu}


def busy_processes(interval: float = 1.0, threshold: float = 10.0) -> list[dict]:
    """Other processes (outside this one and its children) that used ``threshold`` percent of a
    core or more over ``interval`` seconds: name, nice value, percent of a core."""
    import psutil

    me = psutil.Process()
    ours = {me.pid, *(child.pid for child in me.children(recursive=True))}
    ours |= {parent.pid for parent in me.parents()}
    candidates = []
    for process in psutil.process_iter(["pid", "name", "nice"]):
        if process.pid in ours:
            continue
        try:
            process.cpu_percent(None)
            candidates.append(process)
        except psutil.Error:
            pass
    import time

    time.sleep(interval)
    busy = []
    for process in candidates:
        try:
            percent = process.cpu_percent(None)
        except psutil.Error:
            continue
        if percent >= threshold:
            busy.append({"name": process_label(process), "nice": process.info["nice"], "cpu_percent": round(percent)})
    return sorted(busy, key=lambda p: -p["cpu_percent"])


def process_label(process) -> str:
    """A process in a few words: "python -m fedkd_core.sweep", "python (worker)", "chromium"."""
    name = process.info["name"]
    try:
        argv = process.cmdline()
    except Exception:  # noqa: BLE001 - gone or not ours to read: its name will do
        return name
    if "-m" in argv[:-1]:
        return f"{name} -m {argv[argv.index('-m') + 1]}"
    if "-c" in argv[:-1]:
        return f"{name} (worker)" if "multiprocessing" in argv[argv.index('-c') + 1] else f"{name} -c"
    scripts = [Path(arg).name for arg in argv[1:3] if arg.endswith(".py")]
    return f"{name} {scripts[0]}" if scripts else name


def beside_now(note: str = "") -> dict:
    """What else runs on the machine now: the load average and the busy processes."""
    return {"note": note, "load_average": [round(x, 2) for x in os.getloadavg()], "busy": busy_processes()}


def command_line(argv: list[str] | None = None) -> str:
    """The command that ran, as a reader would type it from the repository root."""
    argv = list(sys.argv if argv is None else argv)
    for flag in ("--beside",):  # its words are shown as "beside it", not in the command
        while flag in argv[:-1]:
            at = argv.index(flag)
            del argv[at:at + 2]
    script = Path(argv[0])
    try:
        script = script.resolve().relative_to(ROOT)
    except ValueError:
        pass
    return shlex.join(["python", script.as_posix(), *argv[1:]])


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def result_path(benchmark: str, root: Path = RESULTS, where: dict | None = None) -> Path:
    """Where :func:`save_result` writes ``benchmark``'s result on this machine (``where``: its
    :func:`machine`): one file per benchmark, machine and core count, replaced by each run."""
    where = where or machine()
    return root / f"{benchmark}-{slug(machine_text(where['cpu']))}-{where['cores']}cores.json"


def save_result(benchmark: str, title: str, rows: list[dict], *, started: dict, note: str = "",
                beside_note: str = "", command: str | None = None, extra: dict | None = None,
                root: Path = RESULTS) -> Path:
    """Write one benchmark's result file and return its path. ``started`` is :func:`beside_now`
    taken before the measurement (it is sampled again now, after it); ``rows`` are the table's
    rows (dicts of the same keys, numbers unformatted); ``note`` says what the figures mean."""
    import torch

    where = machine()
    columns = [key for key in dict.fromkeys(key for row in rows for key in row)  # a column with no value is left out
               if any(row.get(key) is not None for row in rows)]
    result = {"benchmark": benchmark, "title": title, "command": command or command_line(),
              "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": where, "torch": torch.__version__, "threads": torch.get_num_threads(),
              "python": platform.python_version(), "note": note,
              "beside": {"note": beside_note, "at_start": started, "at_end": beside_now()},
              "columns": columns, "rows": [[row.get(column) for column in columns] for row in rows],
              **(extra or {})}
    root.mkdir(parents=True, exist_ok=True)
    path = result_path(benchmark, root, where)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"result written to {path}")
    return path


# --- reading ----------------------------------------------------------------------------------------

def load_results(root: Path = RESULTS) -> list[dict]:
    """Every result file under ``root``, by benchmark then date; a ValueError naming a file that
    lacks a field the page needs. A file with none of the page's fields is a script's own output,
    not a page result (``benchmarks/gpu_masks.py``'s, which the FedCKD chapter reads), and is left out."""
    results = []
    for path in sorted(root.glob("*.json")):
        result = json.loads(path.read_text())
        missing = [field for field in REQUIRED if field not in result]
        if "benchmark" not in result and "rows" not in result:
            continue
        if missing:
            raise ValueError(f"{path}: benchmark result without {', '.join(missing)}")
        results.append({**result, "file": path.name})
    return sorted(results, key=lambda r: (r.get("order", 99), r["benchmark"], r["date"]))


def number_text(value, digits: int | None = None) -> str:
    """A figure as the page prints it: thousands separated, no raw float, "—" for nothing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value).replace("|", "\\|")
    if digits is None:
        digits = 0 if isinstance(value, int) or abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:,.{digits}f}"


def beside_text(beside: dict) -> str:
    """What ran beside the benchmark, in words."""
    parts = [beside["note"]] if beside.get("note") else []
    seen = {}
    for moment in ("at_start", "at_end"):
        here = {}
        for process in (beside.get(moment) or {}).get("busy", []):
            name = f"{process['name']} (nice {process['nice']})"
            count, percent = here.get(name, (0, 0))
            here[name] = (count + 1, percent + process["cpu_percent"])
        for name, (count, percent) in here.items():
            seen[name] = max(seen.get(name, (0, 0)), (count, percent), key=lambda cp: cp[1])
    if seen:
        parts.append("busy processes sampled at start and end: " + ", ".join(
            f"{f'{count}× ' if count > 1 else ''}{name} {percent}% of a core"
            for name, (count, percent) in sorted(seen.items(), key=lambda kv: -kv[1][1])))
    else:
        parts.append("no other process used a tenth of a core at start or end")
    loads = [tuple((beside.get(moment) or {}).get("load_average", [])) for moment in ("at_start", "at_end")]
    loads = [load for load in loads if load]
    if loads:
        parts.append("load average (1 min) " + " → ".join(f"{load[0]:.1f}" for load in loads))
    return "; ".join(parts)


WIDEST = 8  # more columns than this do not fit the book's column: the table is shown turned


def table_lines(columns: list, rows: list, digits: dict) -> list[str]:
    """A result's table in Markdown, turned (a row per column, a column per row, headed by the first
    column's values) where it has more than :data:`WIDEST` columns and fewer rows than that."""
    cells = [[number_text(value, digits.get(column)) for column, value in zip(columns, row)] for row in rows]
    header, body = list(columns), cells
    if len(columns) > WIDEST and len(rows) < WIDEST:
        header = [columns[0], *(f"{row[0]}" for row in cells)]
        body = [[column, *(row[i] for row in cells)] for i, column in enumerate(columns) if i]
    return (["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(map(str, row)) + " |" for row in body])


def result_markdown(result: dict) -> str:
    where = result["machine"]
    plain = machine_text(where["cpu"], where.get("cores"))
    gpu = f", GPU {where['gpu']}" if where.get("gpu") else ""
    threads = result["threads"]
    threads = f"{threads} torch thread{'s' * (threads != 1)}" if isinstance(threads, int) else str(threads)
    lines = [f"**{plain}**{gpu}, {result['date']}, torch {result['torch']}, {threads}.", ""]
    if result.get("note"):
        lines += [result["note"], ""]
    lines += table_lines(result["columns"], result["rows"], result.get("digits", {}))
    lines.append("")
    for sentence in result.get("summary", []):
        lines.append(f"- {sentence}")
    if result.get("summary"):
        lines.append("")
    # the machine's state at the time, folded under what was measured (issue 61)
    lines += [f'<details class="fedkd-earlier"><summary>How it was run: the command, the CPU, what ran beside it'
              f"</summary><p>Command: <code>{html.escape(result['command'])}</code>. CPU: <code>{html.escape(where['cpu'])}</code>. "
              f"Beside it: {html.escape(beside_text(result['beside']))}.</p></details>", ""]
    return "\n".join(lines)


RATIO = re.compile(r" / |ratio|×|\bx\b|speed-?up", re.I)


def headline(result: dict) -> str:
    """A result in one line: its first summary sentence, else the range of each ratio column (a
    header with " / ", "ratio" or "×"), else its first row."""
    if result.get("summary"):
        return result["summary"][0]
    columns, rows = result["columns"], result["rows"]
    parts = []
    for i, column in enumerate(columns):
        values = [row[i] for row in rows if isinstance(row[i], (int, float)) and not isinstance(row[i], bool)
                  and math.isfinite(row[i])]
        if RATIO.search(str(column)) and values:
            low, high = min(values), max(values)
            parts.append(f"{column} {number_text(low, 2)}" + (f" to {number_text(high, 2)}" if high != low else "")
                         + f" over {len(values)} row{'s' * (len(values) != 1)}")
    if parts:
        return "; ".join(parts)
    return ", ".join(f"{c} {number_text(v)}" for c, v in zip(columns, rows[0])) if rows else "no rows"


def overview(results: list[dict]) -> str:
    """What the page measured, first: per benchmark and machine, what it found in one line (the
    ratio it measured), above the sections that give the tables and, folded, the machine's state."""
    lines = []
    for result in results:
        where = result["machine"]
        lines.append(f"- **{result['title']}** ({machine_text(where['cpu'], where.get('cores'))}"
                     f"{', ' + where['gpu'] if where.get('gpu') else ''}, {result['date'][:10]}): {headline(result)}")
    return ("## What was measured\n\n" + "\n".join(lines) + "\n") if lines else ""


def render(results: list[dict], after: dict[str, str] | None = None) -> str:
    """The page's measurements: one section per benchmark, one block per machine and date; each
    entry of ``after`` (benchmark → Markdown) follows that benchmark's section (at the end where
    no result of it is committed)."""
    after = dict(after or {})
    if not results:
        return "No benchmark result is committed yet (`benchmarks/results/` is empty).\n" + \
            "".join(f"\n{text}" for text in after.values())
    out = [overview(results)]
    title = benchmark = None
    for result in results:
        if result["title"] != title:
            if benchmark in after:
                out.append(after.pop(benchmark))
            title = result["title"]
            out += [f"## {title}", ""]
        benchmark = result["benchmark"]
        out.append(result_markdown(result))
    if benchmark in after:
        out.append(after.pop(benchmark))
    out += list(after.values())
    return "\n".join(out)


# --- drift between machines, from the committed records ------------------------------------------

# Robustness variants whose runs would be identical on one machine, up to the base's last round, to
# the runs of their grid's base (its variant without overrides): (chapter, variant). Such a variant
# changes nothing but the rounds, and its schedule does not depend on them: KnFu's "R = 30 rounds"
# (Adam at a constant lr), whose first 15 rounds repeat the base's R = 15 runs.
DRIFT_PAIRS = (("knfu", "R = 30 rounds"),)


def drift_pairs(records_root=None):
    """One row per pair of committed runs of :data:`DRIFT_PAIRS` that share config and seed but
    the rounds: the method, cell and seed, the round compared (the shorter run's last), the
    machine each run was made on (``environment.device_name``), each run's ALMA there (%), and
    the absolute difference (points). A pair is kept only where both ran in fp32 and the local lr
    schedule does not depend on the rounds (no ``lr_decay_at``): on one machine such runs agree
    to the last digit, so whatever differs is the machines' (other kernels round differently)."""
    import dataclasses

    import pandas as pd

    from .chapters import chapter_module
    from .chapters import robustness as shared
    from .experiment import config_from_dict
    from .results import record_precision

    def same_run(record) -> str:
        config = config_from_dict(record.config)
        return repr(dataclasses.replace(config, rounds=1, train=dataclasses.replace(config.train, mixed_precision=False)))

    rows = []
    for chapter, longer_name in DRIFT_PAIRS:
        module = chapter_module(chapter)
        longer_variant = next(variant for variant in module.ROBUSTNESS if variant.name == longer_name)
        base_variant = next(variant for variant in module.ROBUSTNESS if not variant.overrides)
        if set(longer_variant.overrides) != {"rounds"}:
            raise ValueError(f"{chapter}'s variant {longer_name!r} changes more than the rounds: its runs are no drift pairs")
        base = {same_run(r): r for r in shared.variant_records(module, module.ROBUSTNESS_BASE, base_variant, records_root)}
        for longer in shared.variant_records(module, module.ROBUSTNESS_BASE, longer_variant, records_root):
            shorter = base.get(same_run(longer))
            if shorter is None or {record_precision(longer), record_precision(shorter)} != {"fp32"} \
                    or longer.config["train"].get("lr_decay_at") or shorter.config["train"].get("lr_decay_at"):
                continue
            at = shorter.config["rounds"]
            values = [next((h.get("alma") for h in r.history if h["round"] == at), None) for r in (longer, shorter)]
            if None in values:
                continue
            data = longer.config["data"]
            rows.append({"chapter": chapter, "variant": longer_name, "method": longer.config["algorithm"],
                         "dataset": data["dataset"], "alpha": data.get("alpha"), "seed": longer.config["seed"],
                         "round": at, "longer run on": longer.environment.get("device_name", "unknown"),
                         "shorter run on": shorter.environment.get("device_name", "unknown"),
                         "alma longer": 100 * values[0], "alma shorter": 100 * values[1],
                         "drift": abs(100 * (values[0] - values[1]))})
    return pd.DataFrame(rows, columns=["chapter", "variant", "method", "dataset", "alpha", "seed", "round", "longer run on",
                                       "shorter run on", "alma longer", "alma shorter", "drift"])


def drift_summary(pairs) -> list[dict]:
    """Per pair of machines (the two runs made on different CPUs, or on the same one: a check of
    determinism, never averaged with the others) of :func:`drift_pairs`: the number of pairs, the
    mean and largest absolute difference of ALMA (points) and how many are identical."""
    out = []
    if not len(pairs):
        return out
    for (chapter, variant, one, other), group in pairs.groupby(["chapter", "variant", "longer run on", "shorter run on"], sort=False):
        out.append({"chapter": chapter, "variant": variant, "machines": (one, other), "same machine": one == other,
                    "pairs": len(group), "mean": float(group.drift.mean()), "max": float(group.drift.max()),
                    "identical": int((group.drift == 0).sum()), "round": int(group["round"].iloc[0]),
                    "methods": sorted(set(group.method)), "datasets": sorted(set(group.dataset))})
    return out


def drift_sentence(summary: dict) -> str:
    """One line of :func:`drift_summary` in words, naming what was compared, on which CPUs, how many."""
    one, other = (machine_text(m) for m in summary["machines"])
    where = f"both made on {one}" if summary["same machine"] else f"made on {one} and on {other}"
    return (f"{summary['chapter']}'s robustness variant \"{summary['variant']}\" read at round {summary['round']} against "
            f"the base's runs of the same config and seed ({', '.join(summary['methods'])}; {', '.join(summary['datasets'])}; "
            f"fp32, {where}): ALMA differs by {summary['mean']:.2f} points on average and {summary['max']:.2f} at most over "
            f"{summary['pairs']} pair{'s' * (summary['pairs'] != 1)} ({summary['identical']} identical)")


def machine_drift_markdown(records_root=None) -> str:
    """The Performance page's section on the drift between machines: what the committed records
    measure (:func:`drift_pairs`), beside the allowance the verdicts use
    (:data:`fedkd_core.verdicts.MACHINE_DRIFT`) and how it relates to the reruns above."""
    from .verdicts import MACHINE_DRIFT, effect_drift

    summaries = drift_summary(drift_pairs(records_root))
    lines = ["## Drift between machines, from the committed records", "",
             "Runs that would be identical on one machine, compared where they were made on different CPUs "
             "(computed from the committed records when the book is built, `fedkd_core.performance.drift_pairs`): "
             "a robustness variant that only lengthens training, read at the base's last round, against the base's "
             "run of the same config and seed.", ""]
    lines += [f"- {drift_sentence(summary)}." for summary in summaries] or ["- No such pair is committed."]
    across = [summary for summary in summaries if not summary["same machine"]]
    lines += ["", f"The verdicts allow `fedkd_core.verdicts.MACHINE_DRIFT` = {MACHINE_DRIFT:.2f} points per run between "
              f"machines and widen a verdict's or a robustness variant's intervals by √2 × that = {effect_drift():.2f} "
              "points where an effect pairs runs of one cell and seed from machines not shown to compute alike "
              "(`fedkd_core.numerics`: machines whose fp32 reruns of each other's records came out identical, in the "
              "precision-drift results above, count as one)"
              + (f"; the {across[0]['pairs']} pairs above give {across[0]['mean']:.2f}" if len(across) == 1 else "")
              + ". The precision-drift table above reruns stored records directly (its summary says over how many "
              "runs each figure is averaged); `results/README.md` also reports a direct fp32 rerun of 8 KnFu records "
              "made before these result files existed (no result file was kept for it). A record's CPU named only "
              "`AMD EPYC` is the AVX2-only Zen (family 23) that records were made on before CPUs were named with "
              "their family and model (`results/README.md`).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0])
    root = Path(args[1]) if len(args) > 1 else RESULTS
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(load_results(root), after={"precision_drift": machine_drift_markdown(ROOT / "results")}))
    print(f"{target} written")


if __name__ == "__main__":
    main()
