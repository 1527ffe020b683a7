"""The local engine: a store (or shards in memory) evaluated in this process, over a few threads.

:class:`LocalDataset` has :class:`._dataset.ShardedDataset`'s interface and runs the same
pure shard functions, each on one BLAS thread, and combines their results in the same
pairwise tree, so its fits are bit-identical to a cluster's. It never imports
``distributed``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .._config import get_setting
from .._interrupts import check_interrupted
from .._validation import check_int
from ..exceptions import ShardValueError
from ..io import Shard, Store, open_store
from ._blas import ONE_BLAS_THREAD
from ._pass_count import HOST_DATA_METHODS, LOAD, PassCount, Traffic, pass_kind, pass_starting
from ._tree import pairwise
from ._waits import killed_workers_as_cluster_errors

if TYPE_CHECKING:
    from ._hosts import ShardHost

__all__ = ["LocalDataset", "local_threads", "naming_store"]


@contextlib.contextmanager
def naming_store(store: Store | None) -> Iterator[None]:
    """Re-raise a pass's :class:`ShardValueError` (which names a shard and a row) naming the store too.

    The worker-side reductions see a shard, not its store; the dataset knows the
    store's path and where each shard starts, and adds both here on the driver.
    A task that killed its workers (:class:`distributed.scheduler.KilledWorker`)
    becomes one :class:`~dpipe.exceptions.ClusterError` line naming the store.
    """
    try:
        with killed_workers_as_cluster_errors(store.path if store is not None else "in-memory shards"):
            yield
    except ShardValueError as error:
        if store is None or error.store is not None:
            raise
        bounds = store.manifest.shard_bounds
        start = bounds[error.shard][0] if 0 <= error.shard < len(bounds) else None
        raise error.with_store(store.path, None if start is None else start + error.row).with_traceback(error.__traceback__) from None


def local_threads() -> int:
    """``dpipe.local-threads``: threads of the local engine (default: the cores this process may use)."""
    value = get_setting("local-threads")
    if value is None:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    return check_int(value, "local-threads", "the dpipe settings", 1)


class LocalDataset:
    """The same interface as :class:`ShardedDataset`, evaluated in this process.

    Parameters
    ----------
    store : Store or str, or list of Shard
        A store, or shards already in memory.
    cache : {"auto", "memory", "stream"}
        ``"stream"`` reads shards again on every pass; otherwise they are kept.
    group_names : list of str, optional
        In-memory shards: the names of their group codes (a store's are in its manifest).
    """

    def __init__(self, store: Store | str | list[Shard], cache: str | None = "memory", group_names: list[str] | None = None) -> None:
        self.group_names = group_names
        if isinstance(store, list):
            self.store = None
            # shard numbers identify shards within a pass (e.g. the score-order memo): make them unique
            self._shards = [dataclasses.replace(sh, index=i) for i, sh in enumerate(store)]
            self.cache = "memory"
        else:
            self.store = store if isinstance(store, Store) else open_store(store)
            self.cache = "stream" if cache == "stream" else "memory"
        self.threads = local_threads()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._hosts: list[ShardHost] | None = None  # built on the first host call (:meth:`_local_hosts`)
        #: the passes made over the shards (:mod:`._pass_count`)
        self.passes = PassCount()
        t0 = time.perf_counter()
        if self.store is not None:
            self._shards = []
            if self.cache == "memory":
                pass_starting(LOAD)
                self._shards = self._each(lambda shard, i: shard)  # read in parallel, one copy each
                self.passes.add(LOAD, Traffic(tasks=self.n_shards))
        #: seconds spent reading the store into memory (a fit's ``time_data`` counts them)
        self.load_seconds = time.perf_counter() - t0 if self.store is not None else 0.0

    @property
    def n_shards(self) -> int:
        """Number of shards."""
        return len(self._shards) if self.store is None else self.store.n_shards

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return self.store.manifest.n_features if self.store is not None else self._shards[0].block.shape[1]

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return self.store.manifest.n_rows if self.store is not None else sum(sh.n_rows for sh in self._shards)

    @property
    def weighted(self) -> bool:
        """Whether the rows carry sample weights."""
        return bool(self.store.manifest.has_weight) if self.store is not None else any(sh.weight is not None for sh in self._shards)

    def _shard(self, i: int) -> Shard:
        if self._shards:
            return self._shards[i]
        assert self.store is not None  # in-memory shards are never dropped before close
        return self.store.read_shard(i, mmap=self.cache == "stream")  # memory-mapped when streamed (read_shard)

    def _each(self, call: Callable[[Shard, int], Any]) -> list:
        """``[call(shard_i, i)]`` in shard order, over ``dpipe.local-threads`` threads, one BLAS thread each.

        One BLAS thread, as on the workers (:mod:`._blas`), makes the per-shard results
        bitwise equal to the workers' own; the passes' kernels (numba,
        ``nogil``) and NumPy's sorts and products release the GIL, so shards run in
        parallel. A streamed shard is read in the thread that uses it: at most one shard
        per thread is in memory.
        """
        check_interrupted()  # a safe point between passes
        with naming_store(self.store), ONE_BLAS_THREAD:
            if self.threads == 1 or self.n_shards <= 1:
                out = []
                for i in range(self.n_shards):
                    check_interrupted()  # and between shards, where one thread runs them
                    out.append(call(self._shard(i), i))
                return out
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(self.threads, thread_name_prefix="dpipe-local")
            return list(self._pool.map(lambda i: call(self._shard(i), i), range(self.n_shards)))

    @property
    def keeps_orders(self) -> str:
        """``"workers"``: this process keeps a score pass's row orders (4 bytes a row beside the shards)."""
        return "workers"

    def map_gather(self, fn: Callable, *args: Any) -> list:
        """``[fn(shard, *args) for shard]`` in shard order (see :meth:`_each`)."""
        pass_starting(pass_kind(fn))
        t0 = time.perf_counter()
        out = self._each(lambda s, i: fn(s, *args))
        self.passes.add(pass_kind(fn), Traffic(tasks=self.n_shards, seconds=time.perf_counter() - t0))  # nothing leaves this process
        return out

    def map_reduce(self, fn: Callable, combine: Callable[[Any, Any], Any], *args: Any) -> Any:
        """Apply ``fn`` to every shard and merge pairwise, in the same tree order as on a cluster."""
        return pairwise(self.map_gather(fn, *args), combine)

    def map_reduce_each(self, fn: Callable, combine: Callable[[Any, Any], Any], per_shard: Sequence[tuple], *args: Any) -> Any:
        """Merge ``fn(shard, *args, *per_shard[i])`` pairwise with ``combine``."""
        pass_starting(pass_kind(fn))
        t0 = time.perf_counter()
        out = self._each(lambda s, i: fn(s, *args, *per_shard[i]))
        self.passes.add(pass_kind(fn), Traffic(tasks=self.n_shards, seconds=time.perf_counter() - t0))
        return pairwise(out, combine)

    def has_hosts(self) -> bool:
        """Whether the range route can run here: the shards are held in memory (not streamed).

        The local engine's shard hosts are :class:`._hosts.ShardHost` objects in this process, one per thread, each
        holding a consecutive block of the shards; they run the same range-partitioned evaluations as a cluster's
        (:mod:`._ranges`), asking each other directly. A fit that takes that route
        (:func:`._ranges.resolve_exchange`: stores of at least :data:`._ranges.EXCHANGE_AUTO_ROWS` rows) is then
        bit-identical to the same fit on any cluster, whatever its hosts.
        """
        return self.cache == "memory" and bool(self._shards)

    def _local_hosts(self) -> list[ShardHost]:
        if self._hosts is None:
            from ._hosts import ShardHost  # the range route's host code: loaded by fits that take it

            n = len(self._shards)
            count = max(1, min(self.threads, n))
            hosts = [ShardHost(*self._shards[n * h // count: n * (h + 1) // count]) for h in range(count)]
            for i, host in enumerate(hosts):
                host.range_peers(hosts, i)
            self._hosts = hosts
        return self._hosts

    def host_count(self) -> int:
        """Number of shard hosts in this process (one per thread, at most one per shard)."""
        return len(self._local_hosts()) if self.has_hosts() else 0

    def host_calls(self, method: str, per_host: Sequence[tuple]) -> list:
        """``host.method(*per_host[i])`` on every shard host, one thread each; the results in host order."""
        hosts = self._local_hosts()
        if len(per_host) != len(hosts):
            raise ValueError(f"host_calls: {len(per_host)} argument tuples for {len(hosts)} hosts")
        check_interrupted()  # a safe point between passes
        data = method in HOST_DATA_METHODS
        if data:
            pass_starting(method)
        t0 = time.perf_counter()
        with naming_store(self.store), ONE_BLAS_THREAD:
            if len(hosts) == 1:
                out = [getattr(hosts[0], method)(*per_host[0])]
            else:
                if self._pool is None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(self.threads, thread_name_prefix="dpipe-local")
                out = list(self._pool.map(lambda h: getattr(hosts[h], method)(*per_host[h]), range(len(hosts))))
        self.passes.add(method, Traffic(tasks=len(hosts), seconds=time.perf_counter() - t0), data=data)  # nothing leaves this process
        return out

    def close(self) -> None:
        """Drop the shards held in memory and stop the threads."""
        if self._hosts is not None:
            for host in self._hosts:
                host.range_forget()
            self._hosts = None
        self._shards = []
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> LocalDataset:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
