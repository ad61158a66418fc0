"""The book's Performance page, from the benchmark scripts' result files: nothing on it is typed.

    python -m fedkd_core.performance book/_generated/performance.md

Each script under ``benchmarks/`` ends with :func:`save_result`, which writes
``benchmarks/results/<benchmark>-<machine>.json``: what was measured (a table of rows), the command
that measured it, the date, the machine (the CPU as records describe it, :mod:`fedkd_core.cpuinfo`;
its cores; the GPU if any), torch's version and thread count, and what else ran on the machine
meanwhile (the load average, and every other process that used a tenth of a core or more while
the benchmark started and ended). One file per benchmark and machine: a rerun on the same machine
replaces its file, a run on another machine adds one. :func:`render` turns the files into the
page's Markdown, each table under the machine and date that produced it.
"""

from __future__ import annotations

import datetime as _dt
import json
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
    path = root / f"{benchmark}-{slug(machine_text(where['cpu']))}-{where['cores']}cores.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"result written to {path}")
    return path


# --- reading ----------------------------------------------------------------------------------------

def load_results(root: Path = RESULTS) -> list[dict]:
    """Every result file under ``root``, by benchmark then date; a ValueError naming a file that
    lacks a field the page needs."""
    results = []
    for path in sorted(root.glob("*.json")):
        result = json.loads(path.read_text())
        missing = [field for field in REQUIRED if field not in result]
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


def result_markdown(result: dict) -> str:
    where = result["machine"]
    plain = machine_text(where["cpu"], where.get("cores"))
    gpu = f", GPU {where['gpu']}" if where.get("gpu") else ""
    threads = result["threads"]
    threads = f"{threads} torch thread{'s' * (threads != 1)}" if isinstance(threads, int) else str(threads)
    lines = [f"**{plain}**{gpu}, {result['date']}: `{where['cpu']}`, torch {result['torch']}, {threads}.",
             "",
             f"Command: `{result['command']}`. Beside it: {beside_text(result['beside'])}.",
             ""]
    if result.get("note"):
        lines += [result["note"], ""]
    digits = result.get("digits", {})
    lines.append("| " + " | ".join(result["columns"]) + " |")
    lines.append("|" + "---|" * len(result["columns"]))
    for row in result["rows"]:
        lines.append("| " + " | ".join(number_text(value, digits.get(column))
                                       for column, value in zip(result["columns"], row)) + " |")
    lines.append("")
    for sentence in result.get("summary", []):
        lines.append(f"- {sentence}")
    if result.get("summary"):
        lines.append("")
    return "\n".join(lines)


def render(results: list[dict]) -> str:
    """The page's measurements: one section per benchmark, one block per machine and date."""
    if not results:
        return "No benchmark result is committed yet (`benchmarks/results/` is empty).\n"
    out = []
    title = None
    for result in results:
        if result["title"] != title:
            title = result["title"]
            out += [f"## {title}", ""]
        out.append(result_markdown(result))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0])
    root = Path(args[1]) if len(args) > 1 else RESULTS
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(load_results(root)))
    print(f"{target} written")


if __name__ == "__main__":
    main()
