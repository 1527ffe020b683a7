"""One BLAS thread for every pass, in whichever process runs it.

A shard's partial result must be a function of the shard and the pass's parameters
only, never of the process that computes it: the driver combines the partial results
in shard order (:func:`._tree.pairwise`), so equal partial results give bit-identical
fits on any placement, any number of workers, after a lost worker and in
:class:`._dataset.LocalDataset`. OpenBLAS splits some products differently with more
threads, which changes their rounding: measured here, the weighted class moments
(``(B * v).T @ B``, a gemm at 50 features) and ``v @ B`` at 300 features differ in
their last bits between 1 and 2 threads. A worker started by a nanny runs one BLAS
thread (distributed's ``pre-spawn-environ``), but ``dask worker --no-nanny``, a
worker in the driver's process and the local engine would run as many as there are
cores. So every pass runs under :data:`ONE_BLAS_THREAD` (and the numba kernels of
:mod:`dpipe.reduce` use no BLAS).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from threadpoolctl import ThreadpoolController

__all__ = ["ONE_BLAS_THREAD", "single_blas_thread"]


class _OneBlasThread:
    """A context limiting BLAS to one thread in this process, safe to enter from several threads at once.

    BLAS's thread count is global to the process: the first thread to enter sets it
    to 1 and the last to leave restores it, so a worker (or the local engine) running
    several shards at once never runs one of them with BLAS's own thread count.
    Entering costs a few microseconds; the controller (a scan of the loaded libraries,
    about 0.6 ms) is built once per process.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._controller: ThreadpoolController | None = None
        self._limiter: Any = None

    def __enter__(self) -> _OneBlasThread:
        with self._lock:
            if self._depth == 0:
                if self._controller is None:
                    self._controller = ThreadpoolController()
                self._limiter = self._controller.limit(limits=1, user_api="blas")
            self._depth += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._limiter.restore_original_limits()
                self._limiter = None


#: the process's one-BLAS-thread context (reentrant, thread-safe)
ONE_BLAS_THREAD = _OneBlasThread()


def single_blas_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` under :data:`ONE_BLAS_THREAD`: the task a worker runs for a shard of a pass, or a merge of two partial results."""
    with ONE_BLAS_THREAD:
        return fn(*args)
