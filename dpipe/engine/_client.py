"""Resolve the dask cluster dpipe runs on — the one place that decides it.

Order of precedence:

1. a ``distributed.Client`` passed in (used as is, never closed by dpipe);
2. the ``scheduler`` argument: a ``tcp://host:port`` (or any dask) address, or the
   path of a scheduler file written by ``dask scheduler --scheduler-file``;
3. the ``DPIPE_SCHEDULER`` environment variable (same forms);
4. the ``dpipe.scheduler`` dask config key (``DASK_DPIPE__SCHEDULER``);
5. otherwise an embedded :class:`distributed.LocalCluster` of worker *processes*
   (``workers`` processes, one thread each, ``memory_limit`` per worker), closed when
   the context ends. Its workers neither spill nor pause
   (:data:`~dpipe.engine._memory.EMBEDDED_WORKER_MEMORY`), and their allocator reuses
   freed arrays (:data:`~dpipe.engine._memory.WORKER_ALLOCATOR`); a memory limit too small
   for a store is refused when the store is opened (:mod:`dpipe.engine._memory`).

The embedded cluster is closed to everyone but its own client: every listener (scheduler,
nannies, workers, dashboard) binds to 127.0.0.1, and all its connections use TLS with a
throw-away key/certificate pair (:meth:`distributed.security.Security.temporary`, which needs
the ``cryptography`` package) that exists only in this process's memory and the cluster's
processes, so another local user cannot connect to the scheduler and run code in the workers.
An external scheduler with TLS is reached with ``tls://host:port`` and the usual dask
security config (``distributed.comm.tls.*``), which :class:`distributed.Client` reads itself.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
from collections.abc import Iterator

import dask.config
from distributed import Client, LocalCluster
from distributed.security import Security

from .._config import get_setting
from .._log import VERBOSE
from .._validation import check_int
from ..exceptions import ParameterError
from ._memory import EMBEDDED_WORKER_MEMORY, worker_environ_config

__all__ = ["cluster_client", "describe_client", "explicit_scheduler"]

log = logging.getLogger("dpipe.engine")


def _connect(target: str) -> Client:
    if os.path.exists(target):
        return Client(scheduler_file=target, set_as_default=False)
    if "://" not in target and ":" not in target:
        raise ParameterError(
            f"The 'scheduler' parameter must be a scheduler address such as tcp://127.0.0.1:8786 or an existing "
            f"scheduler file. Got {target!r} instead (no such file)."
        )
    return Client(target, set_as_default=False)


def _has_dashboard() -> bool:
    """Whether the embedded scheduler serves a dashboard (only when bokeh is installed)."""
    return importlib.util.find_spec("bokeh") is not None


def explicit_scheduler(scheduler: str | None = None) -> str | None:
    """The scheduler named by the argument, ``DPIPE_SCHEDULER`` or ``dpipe.scheduler``, in that order (None: none)."""
    return scheduler or os.environ.get("DPIPE_SCHEDULER") or get_setting("scheduler")


@contextlib.contextmanager
def cluster_client(
    client: Client | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    memory_limit: str | int | None = None,
    threads_per_worker: int | None = None,
) -> Iterator[Client]:
    """Yield a connected :class:`distributed.Client` (see the module docstring for the order).

    Parameters
    ----------
    client : distributed.Client, optional
        Use this client; it is not closed afterwards.
    scheduler : str, optional
        Scheduler address or scheduler file.
    workers : int, optional
        Worker processes of the embedded cluster (default: dask config
        ``dpipe.workers``, else ``min(2, cpu count)``).
    memory_limit : str or int, optional
        Memory limit per worker of the embedded cluster ("4GiB", bytes, or "auto").
    threads_per_worker : int, optional
        Threads per worker process of the embedded cluster (default 1).
    """
    if client is not None:
        yield client
        return
    target = explicit_scheduler(scheduler)
    if target:
        c = _connect(str(target))
        log.info("connected to scheduler %s (%d workers)", c.scheduler.address, len(c.scheduler_info().get("workers", {})))
        try:
            yield c
        finally:
            c.close()
        return
    n = get_setting("workers", workers)
    n = min(2, os.cpu_count() or 1) if n is None else check_int(n, "workers", "cluster_client", low=1)
    threads = check_int(get_setting("threads-per-worker", threads_per_worker), "threads_per_worker", "cluster_client", low=1)
    mem = get_setting("memory-limit", memory_limit)
    # Closed by default: TLS with temporary credentials, every listener on loopback only.
    security = Security.temporary()
    with dask.config.set({**EMBEDDED_WORKER_MEMORY, **worker_environ_config()}):  # the nannies keep this config for every (re)start of their worker
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=threads,
            processes=True,
            memory_limit=mem,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            protocol="tls://",
            security=security,
        )
    # direct_to_workers: results and actor calls go straight between the driver and the
    # workers (all on this host) instead of through the scheduler, which would relay -
    # and so send twice - the O(n) scores of every evaluation.
    try:
        c = Client(cluster, security=security, set_as_default=False, direct_to_workers=True)
    except BaseException:
        cluster.close()
        raise
    log.info("started local cluster: %d worker processes x %d thread(s), memory limit %s", n, threads, mem)
    if _has_dashboard():
        log.log(VERBOSE, "dashboard: %s", cluster.dashboard_link)
    try:
        yield c
    finally:
        _quiet_shutdown(c)
        c.close()
        cluster.close()


def _mute_worker_shutdown_logs() -> None:
    """Run on each embedded worker: only critical records from its logger from now on."""
    logging.getLogger("distributed.worker").setLevel(logging.CRITICAL)


def _quiet_shutdown(client: Client) -> None:
    """Mute the embedded workers' logger before the cluster closes them.

    A worker whose heartbeat is in flight when its connection pool closes logs a
    full traceback ("Failed to communicate with scheduler during heartbeat") to the
    terminal - a race in ``distributed`` at shutdown, not an error of the run. The
    run's own errors have reached the driver by now; a worker that cannot be
    reached is skipped.
    """
    with contextlib.suppress(Exception):
        client.run(_mute_worker_shutdown_logs, wait=True, on_error="ignore")


def describe_client(client: Client) -> str:
    """One line naming the scheduler, its workers and their memory."""
    info = client.scheduler_info()
    ws = info.get("workers", {})
    mem = sum(w.get("memory_limit", 0) or 0 for w in ws.values())
    threads = sum(w.get("nthreads", 0) for w in ws.values())
    return f"{info.get('address', '?')}: {len(ws)} workers, {threads} threads, {mem / 2**30:.1f} GiB"
