"""Wall time of a whole command (the test suite, the book's build), with what ran beside it.

    python benchmarks/wall_time.py make_test --beside "a 2-worker sweep at nice 10" -- make test
    python benchmarks/wall_time.py make_book -- make book

Runs the command after ``--`` from the repository root, passing its output through, and writes
benchmarks/results/<name>-<machine>.json for the book's Performance page: the seconds it took, its
exit status, the phase lines it printed (make's "== ... in N s" lines, pytest's summary line), and
what else ran on the machine (the load average and the busy processes, sampled at the start, every
minute and at the end; ``--beside`` adds words). Not a test: the time depends on the machine and
on what shares it, which the file names.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from fedkd_core import performance

ROOT = Path(__file__).resolve().parents[1]
PHASE = re.compile(r"^(== .* in \d+ s|=+ .*\b(passed|failed)\b.* in [\d.]+s.*=+)$")
TITLES = {"make_test": "The test suite (`make test`)", "make_book": "The book's build (`make book`)"}


# The command's processes set their own threads (make: OMP_NUM_THREADS=1 per process), not this one's.
THREADS = "threads as the command sets them"


def beside_note(words: str, samples: list[dict]) -> str:
    """What ran beside the command: ``words``, then the minute-by-minute load average and the
    busiest other processes (:func:`fedkd_core.performance.beside_now` samples)."""
    parts = [words.strip().rstrip(".")] if words.strip() else []
    loads = [sample["load_average"][0] for sample in samples]
    if loads:
        parts.append(f"load average (1 min) sampled every minute: mean {sum(loads) / len(loads):.1f}, max {max(loads):.1f}")
    busiest = {}
    for sample in samples:
        for process in sample["busy"]:
            key = f"{process['name']} (nice {process['nice']})"
            busiest[key] = max(busiest.get(key, 0), process["cpu_percent"])
    if busiest:
        parts.append("busiest other processes during the run: " + ", ".join(
            f"{name} up to {percent}% of a core"
            for name, percent in sorted(busiest.items(), key=lambda kv: -kv[1])[:6]))
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("usage: wall_time.py NAME [--beside TEXT] [--no-save] -- COMMAND ...", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", help="the result's name, e.g. make_test")
    parser.add_argument("--beside", default="", help="what else ran on the machine, in words")
    parser.add_argument("--no-save", action="store_true", help="print only; write no result file")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    started = performance.beside_now()
    samples, done = [], threading.Event()

    def sample() -> None:
        while not done.wait(60):
            samples.append(performance.beside_now())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    phases = []
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               bufsize=1)
    for line in process.stdout:
        sys.stdout.write(line)
        if PHASE.match(line.strip()):
            phases.append(line.strip().strip("= "))
    status = process.wait()
    seconds = time.perf_counter() - start
    done.set()
    minutes, rest = divmod(round(seconds), 60)
    print(f"{' '.join(command)}: {minutes} min {rest} s, exit status {status}")
    if not args.no_save:
        rows = [{"command": " ".join(command), "wall time": f"{minutes} min {rest} s", "seconds": round(seconds),
                 "exit status": status, "phases": "; ".join(phases) or "—"}]
        performance.save_result(args.name, TITLES.get(args.name, f"`{' '.join(command)}`"), rows, started=started,
                                beside_note=beside_note(args.beside, samples),
                                command=performance.command_line([sys.argv[0], *argv]),
                                extra={"order": 0, "samples": samples, "threads": THREADS})
    return status


if __name__ == "__main__":
    sys.exit(main())
