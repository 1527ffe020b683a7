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
   for a store is refused when the store is opened (:mod:`dpipe.engine._memory`). Without a
   memory limit given, the workers are forked from one warm fork server, their imports and pass
   kernels loaded once (:mod:`dpipe.engine._forkserver`); with one, spawned.
   With ``cluster="slurm"`` (``--cluster slurm``, the ``dpipe.cluster`` key) the workers are
   Slurm batch jobs instead (:mod:`dpipe.engine._jobqueue`), cancelled when the context ends.

The embedded cluster is closed to everyone but its own client: every listener (scheduler,
nannies, workers, dashboard) binds to 127.0.0.1, and all its connections use TLS with a
throw-away key/certificate pair (:meth:`distributed.security.Security.temporary`, which needs
the ``cryptography`` package) that exists only in this process's memory and the cluster's
processes, so another local user cannot connect to the scheduler and run code in the workers.
The dashboard (read-only, plain HTTP) may be moved with ``dpipe.dashboard-address``
(``host:port``, default ``127.0.0.1:0``; null: none).

A named scheduler must answer within ``dpipe.connect-timeout`` (5 s): nothing listening,
something else listening (an HTTP server) and a dead scheduler file are one-line
errors (:class:`~dpipe.exceptions.ClusterError`) naming the address. A scheduler lost while the
client is in use must be back within the same time; otherwise the run ends with one line.

An external scheduler with TLS is reached with ``tls://host:port`` and the usual dask
security config (``distributed.comm.tls.*``), which :class:`distributed.Client` reads itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.util
import json
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import dask.config
from distributed import Client, LocalCluster
from distributed.comm import connect
from distributed.security import Security

from .._config import get_setting
from .._interrupts import deferred_interrupts
from .._log import VERBOSE
from .._validation import check_int
from ..exceptions import ClusterError, ParameterError
from ._cluster_spec import ClusterSpec
from ._forkserver import WORKER_START, forks_workers, start_fork_server
from ._jobqueue import cluster_kind, slurm_client
from ._memory import EMBEDDED_WORKER_MEMORY, embedded_nanny_config, worker_environ_config
from ._scheduler import explicit_scheduler
from ._waits import connect_timeout

__all__ = ["cluster_client", "client_for", "describe_client", "explicit_scheduler"]

log = logging.getLogger("dpipe.engine")


def _scheduler_file_address(path: str) -> str:
    """The address written in a scheduler file (``dask scheduler --scheduler-file``)."""
    try:
        with open(path) as f:
            address = json.load(f)["address"]
    except (ValueError, KeyError, TypeError) as error:
        raise ParameterError(f"The scheduler file {path} is not one 'dask scheduler --scheduler-file' writes: no address in it "
                             f"({type(error).__name__}: {error}).") from None
    if not isinstance(address, str):
        raise ParameterError(f"The scheduler file {path} is not one 'dask scheduler --scheduler-file' writes: its address is {address!r}.")
    return address


def _identify(address: str, where: str, bound: float, security: Security) -> None:
    """Connect to ``address`` and ask what answers there, all within ``bound`` seconds.

    :func:`distributed.comm.connect` retries a refused connection until its own timeout,
    but then waits for the peer's handshake without any bound: a port where something
    else listens (an HTTP server) would hang :class:`distributed.Client` forever. So
    the connection, the handshake and one ``identity`` request run under one deadline,
    in an event loop of their own (the caller's thread may run one already).

    Raises
    ------
    ClusterError
        Nothing answered (a one-line message naming ``where``, the cause and
        ``dpipe.connect-timeout``), or what answered is not a dask scheduler.
    """
    async def ask() -> Any:
        # the connection attempts stop a little before the deadline, so that a refused connection is told apart from a silent peer
        comm = await connect(address, timeout=0.9 * bound, **security.get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "reply": True, "close": True})
            return await comm.read()
        finally:
            await comm.close()

    async def bounded() -> Any:
        return await asyncio.wait_for(ask(), bound)

    if address.startswith("tls://") and security.get_connection_args("client").get("ssl_context") is None:
        raise ParameterError(f"The scheduler address {where} asks for TLS, but no client certificate is configured: set the dask config "
                             "distributed.comm.tls.ca-file, distributed.comm.tls.client.cert and .key (DASK_DISTRIBUTED__COMM__TLS__...).")
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dpipe-connect") as pool:
        try:
            identity = pool.submit(asyncio.run, bounded()).result()
        except TimeoutError:  # connected, but no dask answer: another server, or a stuck scheduler
            raise ClusterError(f"no dask scheduler answered at {where} within {bound:g} s (dpipe.connect-timeout): something listens there "
                               "but does not speak dask's protocol, or the scheduler is stuck") from None
        except OSError as error:  # distributed's connect gave up: nothing listens, the host is unreachable, TLS refused
            reasons, cause = [], error.__cause__
            while cause is not None:  # the last attempt's error: refused, unreachable (an attempt cut short has none)
                reasons.append(getattr(cause, "strerror", None))
                cause = cause.__cause__
            reason = next((f": {r}" for r in reasons if r), "")
            raise ClusterError(f"cannot connect to the scheduler at {where} within {bound:g} s (dpipe.connect-timeout){reason}") from None
        except Exception as error:  # noqa: BLE001 - bytes that are no dask message (an HTTP server's reply read as frame lengths: MemoryError)
            raise ClusterError(f"{where} did not answer as a dask scheduler ({type(error).__name__}: {' '.join(str(error).split())})") from None
    kind = identity.get("type") if isinstance(identity, dict) else None
    if kind != "Scheduler":
        raise ClusterError(f"{where} is not a dask scheduler (it answered as {kind or type(identity).__name__}): name the scheduler's address")


def _connect(target: str) -> Client:
    """A client of the scheduler at ``target`` (an address or a scheduler file), or a one-line error within ``dpipe.connect-timeout``."""
    bound = connect_timeout()
    if os.path.exists(target):
        address = _scheduler_file_address(target)
        where = f"{address} (from the scheduler file {target})"
    elif "://" not in target and ":" not in target:
        raise ParameterError(
            f"The 'scheduler' parameter must be a scheduler address such as tcp://127.0.0.1:8786 or an existing "
            f"scheduler file. Got {target!r} instead (no such file)."
        )
    else:
        address = where = target
    security = Security()  # what Client reads itself: the distributed.comm.tls.* config
    _identify(address, where, bound, security)
    # timeout: the connection made above, and how long a lost scheduler may take to come back before the client gives up
    return Client(address, security=security, set_as_default=False, timeout=bound)


class _ReconnectFailure(logging.Filter):
    """Drops distributed's "Failed to reconnect to scheduler" record: dpipe reports the loss as its own one-line error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to reconnect to scheduler")


def _scheduler_lost(client: Client, bound: float) -> bool:
    """Whether ``client`` lost its scheduler for good.

    A client that lost its scheduler tries to reconnect for ``bound`` seconds (its
    ``timeout``), then closes itself; this waits for that outcome (a little longer than
    ``bound``) rather than closing the client in the middle of it, which would log the
    cancelled reconnection's traceback at exit.
    """
    deadline = time.monotonic() + bound + 2.0
    while client.status in ("connecting", "closing") and time.monotonic() < deadline:
        time.sleep(0.05)
    return client.status != "running"


def _dashboard_address() -> str | None:
    """``dpipe.dashboard-address``: where the embedded cluster's dashboard listens (``host:port``; None: no dashboard)."""
    value = get_setting("dashboard-address")
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    if not isinstance(value, str) or ":" not in value or not value.rpartition(":")[2].isdigit():
        raise ParameterError(f"The dpipe.dashboard-address setting must be host:port such as 127.0.0.1:0 (port 0: any free one) or null (no "
                             f"dashboard). Got {value!r} instead.")
    return value


def _has_dashboard() -> bool:
    """Whether the embedded scheduler serves a dashboard (only when bokeh is installed)."""
    return importlib.util.find_spec("bokeh") is not None


def cluster_client(
    client: Client | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    memory_limit: str | int | None = None,
    threads_per_worker: int | None = None,
    cluster: str | None = None,
) -> contextlib.AbstractContextManager[Client]:
    """Yield a connected :class:`distributed.Client` (see the module docstring for the order): :func:`client_for` of
    the :class:`~dpipe.engine.ClusterSpec` of these options (their meaning is there).

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
    cluster : {"local", "slurm"}, optional
        Where dpipe's own cluster runs when no scheduler is named (default: dask config
        ``dpipe.cluster``, "local"): worker processes on this machine, or Slurm jobs
        (``workers`` jobs of ``memory_limit`` each, see :mod:`dpipe.engine._jobqueue`).
    """
    spec = ClusterSpec(client=client, scheduler=scheduler, workers=workers, memory_limit=memory_limit, cluster=cluster)
    return client_for(spec, threads_per_worker=threads_per_worker)


@contextlib.contextmanager
def client_for(spec: ClusterSpec | None = None, *, threads_per_worker: int | None = None) -> Iterator[Client]:
    """Yield a connected :class:`distributed.Client` of the cluster ``spec`` names (default ``ClusterSpec()``:
    ``dpipe.scheduler``, else an embedded one; its ``engine`` and ``cache`` are the dataset's); see the module docstring.

    ``threads_per_worker``: threads per worker process of the embedded cluster (default 1).
    """
    spec = spec or ClusterSpec()
    if spec.client is not None:
        yield spec.client
        return
    target = explicit_scheduler(spec.target)
    workers, memory_limit = spec.workers, spec.memory_limit
    if cluster_kind(spec.cluster, target) == "slurm":
        with slurm_client(workers, memory_limit, threads_per_worker) as c:
            yield c
        return
    if target:
        c = _connect(str(target))
        assert c.scheduler is not None  # a connected client
        address, bound = c.scheduler.address, connect_timeout()
        log.info("connected to scheduler %s (%d workers)", address, len(c.scheduler_info().get("workers", {})))
        mute = _ReconnectFailure()
        logging.getLogger("distributed.client").addFilter(mute)
        try:
            yield c
        except (Exception, asyncio.CancelledError) as error:  # a lost scheduler cancels every future: CancelledError, CommClosedError, ...
            if _scheduler_lost(c, bound):
                raise ClusterError(f"lost the scheduler {address}: it was not back within {bound:g} s (dpipe.connect-timeout); gave up") from error
            raise
        finally:
            c.close()
            logging.getLogger("distributed.client").removeFilter(mute)
        return
    n = get_setting("workers", workers)
    n = min(2, os.cpu_count() or 1) if n is None else check_int(n, "workers", "cluster_client", low=1)
    threads = check_int(get_setting("threads-per-worker", threads_per_worker), "threads_per_worker", "cluster_client", low=1)
    mem = get_setting("memory-limit", memory_limit)
    dashboard = _dashboard_address()
    # first: the fork server warms up the workers' imports while this process goes on (dpipe.engine._forkserver)
    forked = forks_workers(mem) and start_fork_server()
    config = {**EMBEDDED_WORKER_MEMORY, **worker_environ_config(), "distributed.worker.preload": ["dpipe._worker_logs"]}
    # Closed by default: TLS with temporary credentials, every listener on loopback only.
    security = Security.temporary()
    with contextlib.ExitStack() as stack:
        # how the nannies start their workers, read at every (re)start: in force while the cluster runs
        stack.enter_context(dask.config.set({WORKER_START: "forkserver" if forked else "spawn"}))
        # a cluster or client interrupted in its constructor would never be closed (dpipe._interrupts); the nannies
        # keep this config for every (re)start of their worker; the preload shows a dpipe error once (dpipe._worker_logs)
        with deferred_interrupts(), dask.config.set(config):
            local = LocalCluster(  # not 'cluster': that is the cluster kind asked for
                n_workers=n,
                threads_per_worker=threads,
                processes=True,
                memory_limit=mem,
                host="127.0.0.1",
                dashboard_address=dashboard or "127.0.0.1:0",  # the scheduler's HTTP routes (/health, ...) listen even without a dashboard
                scheduler_kwargs=None if dashboard else {"dashboard": False},
                protocol="tls://",
                security=security,
                config=embedded_nanny_config(),  # also for the workers a nanny restarts
            )
            stack.callback(local.close)
        # direct_to_workers: results and actor calls go straight between the driver and the
        # workers (all on this host) instead of through the scheduler, which would relay -
        # and so send twice - the O(n) scores of every evaluation.
        with deferred_interrupts():
            c = Client(local, security=security, set_as_default=False, direct_to_workers=True)
            stack.callback(c.close)
        stack.callback(_quiet_shutdown, c)  # first of the three at the end
        log.info("started local cluster: %d worker processes x %d thread(s), memory limit %s", n, threads, mem)
        if dashboard is not None and _has_dashboard():
            log.log(VERBOSE, "dashboard: %s", local.dashboard_link)
        yield c


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
