"""The embedded cluster's worker processes, forked from one warm process instead of each spawned cold.

A spawned worker starts a fresh interpreter, imports distributed and numpy (about 0.45 s of CPU here), and loads
dpipe's compiled pass kernels from numba's cache when the store is opened (:func:`._memory.measure_workers`, about
0.6 s more). On the 2 cores of issue 40's machine, two such workers cost a 2x10^6 x 50 fit about 2 s of its 7.8 s, and
their interpreter's exit another 0.5 s. Python's *forkserver* does that work once: a single process imports
:data:`PRELOAD` (distributed, dpipe's worker preload and its pass kernels, warmed by :mod:`._warm_kernels`) while this
process goes on with its own setup, then forks every worker - and every worker a nanny restarts - from that warm
state. A forked worker exits without an interpreter's clean-up (multiprocessing ends the child with ``os._exit``
once its nanny has closed it).

The fork server is this process's (multiprocessing keeps one per process, started once and ended when this process
exits). A worker's environment is the fork server's, so :func:`start_fork_server` starts it with what the nannies
would set before spawning a worker (``distributed.nanny.pre-spawn-environ``: the thread counts of the numeric
libraries and :data:`._memory.WORKER_ALLOCATOR`), which must be in force when the worker's C libraries start. Where
fork servers do not exist (Windows), or one was already running with another preload, workers are spawned as before.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._cluster_spec import ClusterSpec

__all__ = ["PRELOAD", "WORKER_START", "worker_start_method", "forks_workers", "start_fork_server", "embeds_cluster", "prestart_workers"]

log = logging.getLogger("dpipe.engine")

#: what the fork server imports before it forks a worker: distributed (the worker's own code), dpipe's worker preload
#: (:mod:`dpipe._worker_logs`) and the pass kernels, loaded and run once (:mod:`._warm_kernels`)
PRELOAD = ("distributed", "dpipe._worker_logs", "dpipe.engine._warm_kernels")
#: the dask config key that names how a nanny starts its worker
WORKER_START = "distributed.worker.multiprocessing-method"


class _State:
    #: the preload the fork server of this process was started with (None: not started by dpipe)
    started: tuple[str, ...] | None = None


def worker_start_method() -> str:
    """``"forkserver"`` where this platform has fork servers, else ``"spawn"``."""
    if sys.platform == "win32" or "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    return "forkserver"


@contextlib.contextmanager
def _environ(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set (and put back after): what a process spawned meanwhile inherits."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _pre_spawn_environ() -> dict[str, str]:
    """What an embedded cluster's nanny sets in the environment before it starts a worker: ``distributed.nanny.pre-spawn-environ``
    with :data:`._memory.WORKER_ALLOCATOR` over it, under the variables already set (the nanny's own precedence)."""
    import dask.config

    from ._memory import WORKER_ALLOCATOR

    values = {**(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}), **WORKER_ALLOCATOR}
    return {str(k): os.environ.get(str(k), str(v)) for k, v in values.items() if v is not None}


def forks_workers(memory_limit: str | int | None) -> bool:
    """Whether the embedded cluster of this memory limit (the ``memory_limit`` argument or setting) forks its workers: where
    none is given (``"auto"``). A forked worker's footprint is bounded from above (:func:`._memory.worker_memory`: its own
    pages and all of the server's), which moves by a few MB with what the worker ran before it is measured (a fresh cluster
    measured 205 MB, one that had run a call and a local fit in its driver 218 MB): a limit a user sets, perhaps the smallest
    workable one an earlier run reported, is measured against spawned workers, exactly as before."""
    return memory_limit is None or (isinstance(memory_limit, str) and memory_limit.strip().lower() == "auto")


def start_fork_server() -> bool:
    """Start this process's fork server with :data:`PRELOAD` and the workers' environment, unless it runs already; returns
    whether the embedded cluster may fork its workers from it (:func:`worker_start_method`).

    It returns at once: the server imports and warms its preload in its own process, while this one goes on (a nanny's
    first fork waits for it).
    """
    if worker_start_method() != "forkserver":
        return False
    from multiprocessing import forkserver

    server = forkserver._forkserver  # multiprocessing's fork server of this process (its context's)
    running = getattr(server, "_forkserver_pid", None) is not None
    if running and _State.started is None:
        log.debug("a fork server runs already without dpipe's preload: spawning the workers")
        return False
    if not running:
        multiprocessing.get_context("forkserver").set_forkserver_preload(list(PRELOAD))
        # distributed sets its own preload (importing every optional package it knows, pandas included, into this
        # process) the first time it is asked for a forkserver context, unless told it has done so
        import distributed.utils

        if hasattr(distributed.utils, "_forkserver_preload_set"):
            distributed.utils._forkserver_preload_set = True
        with _environ(_pre_spawn_environ()):
            server.ensure_running()
        _State.started = PRELOAD
    return True


def embeds_cluster(spec: ClusterSpec) -> bool:
    """Whether ``spec`` runs on a cluster of worker processes dpipe starts on this machine whatever the store: engine
    ``"dask"`` and no cluster named (``engine="auto"`` decides by the store's size, later)."""
    if spec.engine != "dask" or spec.client is not None:
        return False
    from ._jobqueue import cluster_kind  # here: the local engine never imports distributed
    from ._scheduler import explicit_scheduler

    target = explicit_scheduler(spec.target)
    return not target and cluster_kind(spec.cluster, target) == "local"


def prestart_workers(spec: ClusterSpec) -> None:
    """Start the fork server now (:func:`start_fork_server`) where ``spec`` will start an embedded cluster: the command
    line calls it first, so that the workers' imports and kernels load while this process imports its own and opens the
    store. Anything odd in ``spec`` is left for the cluster's own checks to report."""
    from .._config import get_setting

    with contextlib.suppress(Exception):
        if embeds_cluster(spec) and forks_workers(get_setting("memory-limit", spec.memory_limit)):
            start_fork_server()
