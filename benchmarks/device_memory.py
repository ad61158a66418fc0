"""Device memory each paper profile needs, measured on a CPU (issue 32 item 3).

    .venv/bin/python benchmarks/device_memory.py [CHAPTER ...]   # default: every paper profile

For every method of a chapter's paper profile (its first run per model, dataset and client
count), two rounds run on the CPU with 2 and with 4 clients (each on a small slice of the data:
what a client keeps does not depend on how many images it holds) and
:func:`fedkd_core.memory.held_bytes` counts what the algorithm and the uploads hold when the
server's step begins. The growth from 2 to 4 clients is what one client adds; the profile's need
is the bytes at 2 clients plus that growth for every further client, plus the dataset resident in
float32: every client's state on the device at once, as the in-process simulation keeps it.

Writes ``benchmarks/results/device_memory.json`` and prints one line per profile (what the paper
yamls' headers quote). No GPU is needed: these are the bytes of the tensors a GPU would hold;
the CUDA context (~0.5 GB), the allocator's slack, cuDNN workspaces and one client's activations
and gradients come on top.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "notebooks" / "params" / "paper"
CHAPTERS = ("knfu", "fedckd", "fedua", "fedgmkd")
SLICE = 16  # images per client while measuring (per-client memory does not grow with them)


def small(config, clients: int):
    """``config`` on a slice of the data: ``clients`` clients of about ``SLICE`` images each."""
    data = config.data
    size = {"samples_per_client": SLICE} if data.samples_per_client else {"pool_size": SLICE * clients}
    return replace(config, data=replace(data, num_clients=clients, local_test_size=min(data.local_test_size, 8), **size),
                   global_test_size=8)


def representatives(configs) -> dict:
    """The first run of each (method, model, dataset, clients) of a grid."""
    chosen = {}
    for config in configs:
        chosen.setdefault((config.algorithm, config.model, config.data.dataset, config.data.num_clients), config)
    return chosen


def measure(chapter: str) -> dict:
    from fedkd_core.data import load_dataset
    from fedkd_core.memory import bytes_at_server_step, resident_dataset_bytes
    from fedkd_core.sweep import load_grid

    _, configs = load_grid(chapter, PAPER / f"{chapter}.yaml")
    runs = []
    for (algorithm, model, dataset, clients), config in representatives(configs).items():
        began = time.perf_counter()
        two, four = (bytes_at_server_step(small(config, n), n, rounds=2) for n in (2, 4))
        per_client = max(0, (four["server_step"] - two["server_step"]) / 2)
        dataset_bytes = resident_dataset_bytes(load_dataset(dataset))
        need = dataset_bytes + two["server_step"] + per_client * (clients - 2)
        runs.append({"algorithm": algorithm, "model": model, "dataset": dataset, "clients": clients,
                     "model_bytes": two["model"], "per_client_bytes": per_client, "dataset_bytes": dataset_bytes,
                     "need_bytes": need, "seconds": round(time.perf_counter() - began, 1)})
        print(f"  {chapter} {algorithm:14s} {model:18s} {dataset:13s} {clients:3d} clients: "
              f"{need / 2**30:6.2f} GiB ({per_client / 2**20:6.1f} MiB per client)", flush=True)
    return {"chapter": chapter, "runs": runs, "need_bytes": max(r["need_bytes"] for r in runs)}


def main(chapters: list[str]) -> None:
    import platform

    import torch

    from fedkd_core.results import device_name

    out = ROOT / "benchmarks" / "results" / "device_memory.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(out.read_text())["profiles"] if out.exists() else {}
    profiles = dict(previous)
    for chapter in chapters:
        profiles[chapter] = measure(chapter)
        print(f"{chapter} paper profile: at most {profiles[chapter]['need_bytes'] / 2**30:.1f} GiB of device memory")
    out.write_text(json.dumps({
        "what": "device bytes a paper profile's runs hold at most, per method (benchmarks/device_memory.py)",
        "date": time.strftime("%Y-%m-%d"), "cpu": device_name(torch.device("cpu")), "torch": torch.__version__,
        "python": platform.python_version(), "profiles": profiles}, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(CHAPTERS))
