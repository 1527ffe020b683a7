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
from .._interrupts import check_interrupted
from ..exceptions import ClusterError

if TYPE_CHECKING:  # imported where a cluster is waited on: the local engine reads pass_timeout and never loads distributed
    from distributed import Client

#: seconds a wait on the cluster blocks before it checks for a signal (:func:`dpipe._interrupts.check_interrupted`) and goes on
WAIT_SLICE = 1.0

__all__ = ["WAIT_SLICE", "pass_timeout", "connect_timeout", "gather_bounded", "result_bounded", "killed_workers_as_cluster_errors"]


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


def gather_bounded(client: Client, futures: Sequence[Any], what: str, watch: Sequence[Any] | None = None, *, eager: bool = False) -> list:
    """The results of ``futures`` in their order, fetched once all are done or, with ``eager``, each as soon as its task
    finishes (its future then released).

    Eager, a worker holds only the results not yet fetched: streaming 10^6 x 2^20 text rows
    in 6 shards, each (2, d) gradient of 16 MB left the worker while it read its next
    shard, where waiting for the whole pass kept three of them on every worker. Not by
    default: a fetch per task cost 4 % of a streamed fit of 10^6 x 120 rows in 8 shards,
    whose results are small.

    Fails with :class:`~dpipe.exceptions.ClusterError` when none of ``watch`` (default
    ``futures``; the leaves of a tree reduction, when ``futures`` are its last merges)
    finished for ``dpipe.timeout`` seconds; ``what`` names the wait in that error. A fetch
    only moves finished results, unless a worker died in between: then the scheduler
    recomputes them and the fetch waits once more, up to the same bound. Raises the first
    failed task's error.
    """
    from distributed import wait

    bound = pass_timeout()
    watch = futures if watch is None else watch
    results: list[Any] = [None] * len(futures)
    left = dict(enumerate(futures))
    pending: list[Any] | None = None  # the watched tasks not done when the cluster last made progress
    since = time.monotonic()
    while left:
        check_interrupted()  # a safe point: the wait is cut in slices of WAIT_SLICE seconds, so a signal whose raise was dropped ends it
        done = [i for i, f in left.items() if f.done()]
        if not done or (not eager and len(done) < len(left)):
            if pending is None or any(f.done() for f in pending):
                pending, since = [f for f in watch if not f.done()], time.monotonic()
            try:
                with client.as_current():  # wait() uses the current client; dpipe's clients are not the default
                    wait(list(left.values()), timeout=min(WAIT_SLICE, bound), return_when="FIRST_COMPLETED" if eager else "ALL_COMPLETED")
            except TimeoutError:
                if not any(f.done() for f in pending) and time.monotonic() - since >= bound:
                    raise _stalled(client, what, bound) from None
            continue
        pending = None
        try:
            fetched = client.sync(functools.partial(client.gather, [left[i] for i in done], asynchronous=True), callback_timeout=bound)
        except TimeoutError:
            raise _stalled(client, what, bound) from None
        for i, result in zip(done, fetched):
            results[i] = result
            left.pop(i).release()
    return results


def result_bounded(future: Any, what: str, client: Client, alive: Callable[[], bool] | None = None, poll: float = 0.5) -> Any:
    """The result of one future or actor call, waiting while ``alive()`` holds, up to ``dpipe.timeout``.

    ``alive`` is polled every ``poll`` seconds; when it turns false the wait stops at
    once with :class:`ConnectionError` (an actor's worker left: the caller falls
    back), without waiting for the bound.
    """
    bound = pass_timeout()
    start = time.monotonic()
    while True:
        check_interrupted()  # a safe point between polls
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
