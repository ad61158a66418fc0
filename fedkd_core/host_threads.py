"""Small host-side linear algebra on one thread.

OpenBLAS and OpenMP (scikit-learn's k-means) run every call on a team of threads, and by default
the team's threads spin while they wait for the next call. On matrices as small as one class's
features (tens of samples, 32 dimensions) the waiting costs more than the arithmetic. FedGMKD's
per-class mixture fits for one client (500 samples, 10 classes, 1-6 components each) on a 2-core
AMD EPYC Zen 5 (``benchmarks/mixture_threads.py``): 0.09 s on one thread and 0.60-0.67 s on the
two threads the libraries take by default with nothing else running; beside two busy processes 0.16 s
against 5.2 s. With ``OMP_WAIT_POLICY=PASSIVE`` (no spinning) the two-thread time falls to the
one-thread time, so the spinning, not the arithmetic, is what costs. A run with OMP_NUM_THREADS
unset (a sweep, a chapter run outside ``make``) paid that per client and round. One thread gives
the same prototypes (the benchmark compares them), the ones of the records, which ran single-threaded.
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
