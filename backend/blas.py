"""One BLAS thread per process: the bootstrap's small matrix products (1,000 x ~60 x 20) cost several
times more CPU when OpenBLAS spreads them over threads that spin while they wait (measured: ~16 ms of CPU
per latency verdict instead of ~2.6 ms on 2 cores); worker processes are the unit of parallelism."""

from __future__ import annotations

from threadpoolctl import threadpool_limits


def single_threaded() -> None:
    """Limit every BLAS library loaded in this process to one thread (from now on, for the process)."""
    threadpool_limits(limits=1, user_api="blas")
