"""Seconds of FedGMKD's per-class mixture fits for one client, by how many BLAS/OpenMP threads they may use.

    python benchmarks/mixture_threads.py            # 1, 2, 4, ... up to this machine's cores
    python benchmarks/mixture_threads.py --repeats 5 --beside "nothing else running"

One client's cluster knowledge (``class_prototypes``: per class, full-covariance GMMs of 1..6
components chosen by BIC, as the paper profile fits them) on 500 synthetic 32-d features in 10
classes, each class three overlapping Gaussian clusters, timed with every thread pool the process
has loaded (OpenBLAS, OpenMP) limited to each count in turn. The package runs the fits on one thread
(``fedkd_core.host_threads``); this script calls the function underneath that limit to show what
the libraries' defaults cost, and checks that every count gives the one-thread prototypes. Not a test:
the figures depend on the machine, which is named with them in
benchmarks/results/mixture_threads-<machine>.json (the Performance page shows it; ``--no-save``
only prints).
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from threadpoolctl import threadpool_limits

from fedkd_core import performance
from fedkd_core.algorithms.fedgmkd import host_class_prototypes

SAMPLES, CLASSES, DIMENSIONS, CLUSTERS = 500, 10, 32, 3


def client_features(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """:data:`SAMPLES` features: class j's samples around :data:`CLUSTERS` centres of spread 2."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(CLASSES, CLUSTERS, DIMENSIONS, generator=g) * 2
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    cluster = torch.randint(0, CLUSTERS, (SAMPLES,), generator=g)
    return centres[labels, cluster] + torch.randn(SAMPLES, DIMENSIONS, generator=g), labels


def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, ... below ``cores``, then ``cores``."""
    counts = [1]
    while counts[-1] * 2 < cores:
        counts.append(counts[-1] * 2)
    return counts + [cores] if cores > 1 else counts


def seconds_per_client(features, labels, threads: int, repeats: int):
    """The mean seconds of one client's fits with ``threads`` threads per pool, and their output."""
    fit = host_class_prototypes.__wrapped__  # the fits without the package's one-thread limit
    with threadpool_limits(limits=threads):
        knowledge = fit(features, labels, CLASSES)  # warm-up: libraries load, pools start
        began = time.perf_counter()
        for _ in range(repeats):
            fit(features, labels, CLASSES)
        return (time.perf_counter() - began) / repeats, knowledge


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per thread count (default 3)")
    parser.add_argument("--beside", default="", help="what else ran on the machine, in words (for the result file)")
    parser.add_argument("--no-save", action="store_true", help="print only; write no result file")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    started = performance.beside_now()
    features, labels = client_features()
    rows, single = [], None
    for threads in thread_counts(os.cpu_count() or 1):
        seconds, knowledge = seconds_per_client(features, labels, threads, args.repeats)
        single = single or knowledge
        rows.append({"threads per pool": threads, "seconds per client": round(seconds, 3),
                     "x one thread": round(seconds / rows[0]["seconds per client"], 1) if rows else 1.0,
                     "same prototypes as one thread": torch.equal(knowledge.prototypes, single.prototypes)
                     and torch.equal(knowledge.components, single.components)})
        print(rows[-1], flush=True)
    if not args.no_save:
        performance.save_result(
            "mixture_threads", "FedGMKD's mixture fits, one client, by BLAS/OpenMP threads", rows,
            started=started, beside_note=args.beside,
            note=f"One client's per-class GMM fits (BIC over 1-6 full-covariance components; {SAMPLES} synthetic "
                 f"{DIMENSIONS}-d features in {CLASSES} classes), timed with every BLAS and OpenMP pool limited to "
                 "each thread count. On matrices this small the threads' spin-waiting between calls costs more than "
                 "the arithmetic (with OMP_WAIT_POLICY=PASSIVE two threads take one thread's time), so the "
                 "package fits on one thread (`fedkd_core.host_threads`), whatever the machine.",
            extra={"order": 4, "digits": {"seconds per client": 3, "x one thread": 1}})


if __name__ == "__main__":
    main()
