"""Bounded waits on a dask cluster: every wait ends, and says what it waited for.

A pass waits as long as the cluster makes progress: it fails with a
:class:`~dpipe.exceptions.ClusterError` only when *none* of its tasks has finished
for ``dpipe.timeout`` (a dask time such as ``300s`` or ``"5 minutes"``). A long pass
over a big store is never cut short; a pass whose workers are all gone (and none
comes back), paused for memory, or whose scheduler is lost, ends within the bound
instead of hanging. A worker that dies and comes back (a nanny restart, a new
``dask worker``) is progress: the scheduler recomputes what was lost.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .._config import seconds_setting
from ..exceptions import ClusterError

if TYPE_CHECKING:  # imported where a cluster is waited on: the local engine reads pass_timeout and never loads distributed
    from distributed import Client

__all__ = ["pass_timeout", "connect_timeout", "wait_for_progress", "gather_bounded", "result_bounded", "killed_workers_as_cluster_errors"]


def pass_timeout() -> float:
    """``dpipe.timeout`` in seconds (a number of seconds or a dask time string such as ``"5 minutes"``)."""
    return seconds_setting("timeout", "300 or '5 minutes'")


def connect_timeout() -> float:
    """``dpipe.connect-timeout`` in seconds: how long a scheduler may take to answer (connecting, or reconnecting after it was lost)."""
    return seconds_setting("connect-timeout", "5 or '10s'")


def _cluster_state(client: Client) -> str:
    try:
        n = len(client.scheduler_info().get("workers", {}))
    except Exception as error:  # noqa: BLE001 - the scheduler itself may be the thing that is gone
        return f"the scheduler did not answer ({type(error).__name__})"
    return "the cluster has no worker" if n == 0 else f"the cluster has {n} worker(s)"


def _stalled(client: Client, what: str, bound: float) -> ClusterError:
    return ClusterError(f"{what}: no task finished for {bound:g} s (dpipe.timeout) and {_cluster_state(client)}; gave up")


def wait_for_progress(client: Client, futures: Sequence[Any], what: str, watch: Sequence[Any] | None = None) -> None:
    """Wait until every future of ``futures`` is done, while the pass makes progress.

    Parameters
    ----------
    client : distributed.Client
        The client the futures belong to.
    futures : sequence of distributed.Future
        What is waited for.
    what : str
        Names the wait in the error (``"pass 'class_moments' over STORE"``).
    watch : sequence of distributed.Future, optional
        The futures whose completion counts as progress (default ``futures``): the
        leaves of a tree reduction, when ``futures`` are its last merges.

    Raises
    ------
    ClusterError
        When none of ``watch`` finished for ``dpipe.timeout`` seconds.
    """
    from distributed import wait

    bound = pass_timeout()
    watch = futures if watch is None else watch
    while True:
        pending = [f for f in watch if not f.done()]
        try:
            with client.as_current():  # wait() uses the current client; dpipe's clients are not the default
                wait(futures, timeout=bound)
            return
        except TimeoutError:
            if not any(f.done() for f in pending):
                raise _stalled(client, what, bound) from None


def gather_bounded(client: Client, futures: Sequence[Any], what: str, watch: Sequence[Any] | None = None) -> list:
    """:meth:`distributed.Client.gather` after :func:`wait_for_progress`, itself bounded by ``dpipe.timeout``.

    The gather after the wait only moves finished results, unless a worker died in
    between: then the scheduler recomputes them and the gather waits once more, up
    to the same bound.
    """
    wait_for_progress(client, futures, what, watch)
    bound = pass_timeout()
    try:
        return client.sync(functools.partial(client.gather, futures, asynchronous=True), callback_timeout=bound)
    except TimeoutError:
        raise _stalled(client, what, bound) from None


def result_bounded(future: Any, what: str, client: Client, alive: Callable[[], bool] | None = None, poll: float = 0.5) -> Any:
    """The result of one future or actor call, waiting while ``alive()`` holds, up to ``dpipe.timeout``.

    ``alive`` is polled every ``poll`` seconds; when it turns false the wait stops at
    once with :class:`ConnectionError` (an actor's worker left: the caller falls
    back), without waiting for the bound.
    """
    bound = pass_timeout()
    start = time.monotonic()
    while True:
        try:
            return future.result(timeout=min(poll, bound))
        except TimeoutError:
            if alive is not None and not alive():
                raise ConnectionError(f"{what}: the worker holding it left the cluster") from None
            if time.monotonic() - start >= bound:
                raise _stalled(client, what, bound) from None


class _NotLoaded(Exception):
    """Stands for distributed's KilledWorker while distributed is not imported (then nothing can raise it)."""


def _killed_worker() -> type[BaseException]:
    """:class:`distributed.scheduler.KilledWorker` once distributed is imported (looked up when an error is caught)."""
    return sys.modules["distributed.scheduler"].KilledWorker if "distributed.scheduler" in sys.modules else _NotLoaded


@contextlib.contextmanager
def killed_workers_as_cluster_errors(what: str) -> Iterator[None]:
    """Re-raise :class:`distributed.scheduler.KilledWorker` as one :class:`ClusterError` line."""
    try:
        yield
    except _killed_worker() as error:
        killed: Any = error  # a distributed KilledWorker (its class is looked up at run time)
        raise ClusterError(
            f"{what}: a task killed every worker that ran it ({killed.task}, last on {killed.last_worker.address if killed.last_worker else '?'}); "
            "the usual cause is a worker memory limit too small for a shard: raise 'memory_limit' or write smaller shards (ingest's shard_rows)"
        ) from None
