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

Checked against a GPU (benchmarks/results/gpu_peak_memory-*, an H200): the server-step count is
the run's peak only since in-process clients drop their downloads and the average is taken in
slices (a528c6a); before, the peak at 50 ResNet-18 clients was 9.1 GiB where this count said 4.9.
On a CPU, ``fedkd_core.devicecheck.DeviceCheck.peak_bytes`` reads the whole run's peak on the stand-in
device (8.7 GiB before, 4.8 GiB after, for the same config): the cross-check to rerun after a change
to what a round keeps alive.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "notebooks" / "params" / "paper"
CHAPTERS = ("knfu", "fedckd", "fedua", "fedgmkd")
SLICE = 16  # images per client while measuring (per-client memory does not grow with them)


def small(config, clients: int):
    """``config`` on a slice of the data: ``clients`` clients of about ``SLICE`` images each, one
    local and one server epoch (what is held at the server's step does not depend on how many
    epochs made it; FedUA's 20 server epochs of ResNet-32 over 10,000 images would take hours on a
    CPU). The transfer set keeps its size: uploads of soft labels on it grow with it."""
    data = config.data
    size = {"samples_per_client": SLICE} if data.samples_per_client else {"pool_size": SLICE * clients}
    params = dict(config.algorithm_params)
    if "server_epochs" in params:
        params["server_epochs"] = min(params["server_epochs"], 1)
    return replace(config, data=replace(data, num_clients=clients, local_test_size=min(data.local_test_size, 8), **size),
                   global_test_size=8, train=replace(config.train, epochs=min(config.train.epochs, 1)),
                   algorithm_params=params)


def representatives(configs) -> dict:
    """The first run of each (method, model, dataset, clients) of a grid."""
    chosen = {}
    for config in configs:
        chosen.setdefault((config.algorithm, config.model, config.data.dataset, config.data.num_clients), config)
    return chosen


def measure(chapter: str) -> list[dict]:
    """One row per representative run of ``chapter``'s paper profile."""
    from fedkd_core.data import load_dataset
    from fedkd_core.memory import bytes_at_server_step, resident_dataset_bytes
    from fedkd_core.sweep import load_grid

    _, configs = load_grid(chapter, PAPER / f"{chapter}.yaml")
    rows = []
    for (algorithm, model, dataset, clients), config in representatives(configs).items():
        two, four = (bytes_at_server_step(small(config, n), n, rounds=2) for n in (2, 4))
        per_client = max(0, (four["server_step"] - two["server_step"]) / 2)
        dataset_bytes = resident_dataset_bytes(load_dataset(dataset))
        need = dataset_bytes + two["server_step"] + per_client * (clients - 2)
        # few, short columns: the Performance page's table must fit its text column (tests/test_book_browser.py);
        # the dataset's share is in the note
        rows.append({"method": algorithm, "model": model, "data": dataset, "clients": clients,
                     "MiB per client": round(per_client / 2**20, 2), "needs GiB": round(need / 2**30, 2)})
        print(f"  {chapter} {algorithm:14s} {model:18s} {dataset:13s} {clients:3d} clients: "
              f"{need / 2**30:6.2f} GiB ({per_client / 2**20:6.1f} MiB per client)", flush=True)
    return rows


def main() -> None:
    import argparse

    from fedkd_core import performance

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapters", nargs="*", default=list(CHAPTERS))
    parser.add_argument("--beside", default="", help="what else ran on the machine, in words (for the result file)")
    args = parser.parse_args()
    for chapter in args.chapters:
        started = performance.beside_now()
        rows = measure(chapter)
        most = max(row["needs GiB"] for row in rows)
        print(f"{chapter} paper profile: at most {most:.1f} GiB of device memory")
        performance.save_result(
            f"device_memory_{chapter}", f"Device memory of the {chapter} paper profile", rows, started=started,
            beside_note=args.beside, command=f"python benchmarks/device_memory.py {chapter}",
            note=("Bytes a GPU would hold for each method of the paper profile (its first run per model, dataset "
                  "and client count): the dataset resident in float32, plus what every client keeps and uploads at "
                  "the server's step (counted from the objects by `fedkd_core.memory.held_bytes` on 2 and 4 "
                  "clients and extrapolated), every client's state on the device at once. The CUDA context "
                  f"(~0.5 GB), allocator slack and one client's activations come on top. At most **{most:.1f} GiB**."),
            extra={"order": 5})


if __name__ == "__main__":
    main()
