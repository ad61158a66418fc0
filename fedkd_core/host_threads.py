"""Small host-side linear algebra on one thread.

OpenBLAS and OpenMP (scikit-learn's k-means) wake a team of threads for every call. On matrices as
small as one class's features (tens of samples, 32 dimensions) the team's start and spin-waits cost
far more than the arithmetic: FedGMKD's per-class mixture fits for one client (500 samples, 10
classes, 1-6 components each) took 5.1-5.2 s with the 2 threads both libraries take by default on a
2-core AMD EPYC Zen 5 and 0.16-0.18 s on one, with the same prototypes (nothing else running;
``benchmarks/mixture_threads.py``). A run with OMP_NUM_THREADS unset (a sweep, a chapter run outside
``make``) paid that per client and round; on a GPU host with 16 cores it likely explains why FedGMKD's
2-round run at 50 clients took 171.5 s against FedAvg's 13.7 s (measured before this limit). One
thread gives the numbers of the records, which ran single-threaded.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

from threadpoolctl import threadpool_limits

F = TypeVar("F", bound=Callable)


def on_one_host_thread(function: F) -> F:
    """``function`` run with every BLAS and OpenMP pool the process has loaded limited to one
    thread (restored afterwards). The limit costs a few milliseconds per call: put it around a
    whole batch of fits, not around each one."""

    @functools.wraps(function)
    def limited(*args, **kwargs):
        with threadpool_limits(limits=1):
            return function(*args, **kwargs)

    return limited  # type: ignore[return-value]
