"""Resolve the dask cluster dpipe runs on — the one place that decides it.

Order of precedence:

1. a ``distributed.Client`` passed in (used as is, never closed by dpipe);
2. the ``scheduler`` argument: a ``tcp://host:port`` (or any dask) address, or the
   path of a scheduler file written by ``dask scheduler --scheduler-file``;
3. the ``DPIPE_SCHEDULER`` environment variable (same forms);
4. the ``dpipe.scheduler`` dask config key (``DASK_DPIPE__SCHEDULER``);
5. otherwise an embedded :class:`distributed.LocalCluster` of worker *processes*
   (``workers`` processes, one thread each, ``memory_limit`` per worker), closed when
   the context ends.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from distributed import Client, LocalCluster

from .._config import get_setting
from .._validation import check_int
from ..exceptions import ParameterError

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
    cluster = LocalCluster(
        n_workers=n,
        threads_per_worker=threads,
        processes=True,
        memory_limit=mem,
        dashboard_address=":0",
        host="127.0.0.1",
    )
    # direct_to_workers: results and actor calls go straight between the driver and the
    # workers (all on this host) instead of through the scheduler, which would relay -
    # and so send twice - the O(n) scores of every evaluation.
    c = Client(cluster, set_as_default=False, direct_to_workers=True)
    log.info("started local cluster: %d worker processes x %d thread(s), memory limit %s", n, threads, mem)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def describe_client(client: Client) -> str:
    """One line naming the scheduler, its workers and their memory."""
    info = client.scheduler_info()
    ws = info.get("workers", {})
    mem = sum(w.get("memory_limit", 0) or 0 for w in ws.values())
    threads = sum(w.get("nthreads", 0) for w in ws.values())
    return f"{info.get('address', '?')}: {len(ws)} workers, {threads} threads, {mem / 2**30:.1f} GiB"
