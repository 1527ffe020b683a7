"""Shard-aligned collections: one task per shard, results merged by tree reduction.

Two implementations with one interface:

* :class:`ShardedDataset` runs on a dask cluster. Shards are either persisted in
  worker memory (loaded once, kept as futures pinned round-robin to the workers) or
  streamed from the store by every pass, chosen by ``cache``:
  ``"memory"``, ``"stream"`` or ``"auto"`` (persist when the shards take at most
  ``dpipe.cache-headroom`` of the workers' total memory limit).
* :class:`LocalDataset` runs the same pure functions in this process — the plain
  NumPy path that the distributed results are checked against.

A pass calls ``fn(shard, *args)`` once per shard. Small parameters (a weight
vector of d floats) travel with each task; nothing but the per-shard results comes
back. :meth:`map_reduce` merges results pairwise on the workers and moves one
result to the driver; :meth:`map_gather` brings every shard's result to the driver
in shard order (used by evaluation and prediction, which need O(n) scores).

Iterative solvers call :meth:`map_gather` and :meth:`map_reduce_each` hundreds of
times. With persisted shards these two go through one dask *actor* per worker
(:class:`ShardHost`, holding that worker's shard futures): a call is one direct
driver-to-worker message, about 5 ms here, where a fresh task per shard costs a
scheduler round trip of 20-35 ms on this 2-core machine. Each host also merges
the partial results of its own shards before replying. If a host's worker is lost
the dataset drops the hosts, logs a warning and goes on with tasks (the scheduler
reloads lost shards from the store).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from dask.sizeof import sizeof
from threadpoolctl import ThreadpoolController
from distributed import Client
from distributed.comm.core import CommClosedError

from .._config import get_setting
from .._validation import check_choice
from ..exceptions import ShardValueError
from ..io import Shard, Store, open_store, read_shard

__all__ = ["ShardedDataset", "ShardHost", "LocalDataset", "CACHE_MODES", "choose_cache"]

log = logging.getLogger("dpipe.engine")

CACHE_MODES = ("auto", "memory", "stream")


def _apply_streamed(fn: Callable, shard_args: tuple, *args: Any) -> Any:
    return fn(read_shard(*shard_args), *args)


@contextlib.contextmanager
def _naming_store(store: Store | None):
    """Re-raise a pass's :class:`ShardValueError` (which names a shard and a row) naming the store too.

    The worker-side reductions see a shard, not its store; the dataset knows the
    store's path and where each shard starts, and adds both here on the driver.
    """
    try:
        yield
    except ShardValueError as error:
        if store is None or error.store is not None:
            raise
        bounds = store.manifest.shard_bounds
        start = bounds[error.shard][0] if 0 <= error.shard < len(bounds) else None
        raise error.with_store(store.path, None if start is None else start + error.row).with_traceback(error.__traceback__) from None


def _n_rows(shard: Shard) -> int:
    return shard.n_rows


def _worker_memory(client: Client) -> tuple[list[str], int]:
    info = client.scheduler_info()
    workers = sorted(info.get("workers", {}))
    total = sum((w.get("memory_limit") or 0) for w in info.get("workers", {}).values())
    return workers, int(total)


def choose_cache(cache: str, store_bytes: int, memory_total: int, headroom: float) -> str:
    """Resolve ``"auto"``: persist shards when they fit in ``headroom`` of the memory."""
    if cache != "auto":
        return cache
    if memory_total <= 0:  # no limit configured: persist
        return "memory"
    return "memory" if store_bytes <= headroom * memory_total else "stream"


class ShardHost:
    """Actor that holds one worker's persisted shards and runs passes over them.

    Parameters
    ----------
    *shards : Shard
        The shards persisted on this worker (resolved from their futures).
    """

    def __init__(self, *shards: Shard) -> None:
        self.shards = list(shards)

    def map(self, fn: Callable, args: tuple) -> list:
        """``[fn(shard, *args) for shard]`` in the order given at construction."""
        return [fn(s, *args) for s in self.shards]

    def map_each(self, fn: Callable, per_shard: Sequence[tuple], args: tuple) -> list:
        """``[fn(shard, *args, *per_shard[i]) for shard]`` over this host's shards."""
        return [fn(s, *args, *a) for s, a in zip(self.shards, per_shard)]


#: Errors that mean a host's worker (or the connection to it) is gone.
_HOST_LOST = (CommClosedError, OSError)


class ShardedDataset:
    """A store opened on a dask cluster.

    Parameters
    ----------
    store : Store or str
        The dataset store.
    client : distributed.Client
        Connected client.
    cache : {"auto", "memory", "stream"}
        Keep shards in worker memory or read them on every pass.
    """

    def __init__(self, store: Store | str, client: Client, cache: str | None = None) -> None:
        self.store = store if isinstance(store, Store) else open_store(store)
        self.client = client
        self.driver_fanin = int(get_setting("driver-fanin"))
        cache = check_choice(get_setting("cache", cache), "cache", "ShardedDataset", CACHE_MODES)
        self.workers, memory_total = _worker_memory(client)
        self.cache = choose_cache(cache, self.store.nbytes, memory_total, float(get_setting("cache-headroom")))
        self._shards: list[Any] = []
        self._hosts: list[tuple[list[int], Any, Any]] = []  # (shard positions, actor, its future)
        self.load_seconds = 0.0
        if self.cache == "memory":
            t0 = time.perf_counter()
            n_workers = max(1, len(self.workers))
            self._shards = [
                client.submit(
                    read_shard,
                    *self.store.shard_args(i),
                    workers=[self.workers[i % n_workers]] if self.workers else None,
                    allow_other_workers=True,
                    pure=False,
                )
                for i in range(self.store.n_shards)
            ]
            # Wait for the loads and re-raise a StoreError naming a bad shard, moving 8 bytes per shard.
            client.gather([client.submit(_n_rows, f, pure=False) for f in self._shards])
            self._hosts = self._start_hosts()
            self.load_seconds = time.perf_counter() - t0
        log.info(
            "%s: %d shards, %.1f MB, cache=%s%s",
            self.store.path,
            self.store.n_shards,
            self.store.nbytes / 1e6,
            self.cache,
            f" (loaded in {self.load_seconds:.2f} s)" if self.cache == "memory" else "",
        )

    @property
    def n_shards(self) -> int:
        """Number of shards."""
        return self.store.n_shards

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return self.store.manifest.n_features

    @property
    def weighted(self) -> bool:
        """Whether the rows carry sample weights."""
        return bool(self.store.manifest.has_weight)

    def _submit_map(self, fn: Callable, args: Sequence[Any]) -> list:
        if self.cache == "memory":
            return [self.client.submit(fn, s, *args, pure=False) for s in self._shards]
        return [self.client.submit(_apply_streamed, fn, self.store.shard_args(i), *args, pure=False) for i in range(self.n_shards)]

    def _start_hosts(self) -> list[tuple[list[int], Any, Any]]:
        """One :class:`ShardHost` actor per worker, over the shards persisted there."""
        placed: dict[str, list[int]] = {}
        who = self.client.who_has(self._shards)
        for pos, f in enumerate(self._shards):
            holders = who.get(f.key) or ()
            if not holders:
                return []
            placed.setdefault(sorted(holders)[0], []).append(pos)
        hosts = []
        for address in sorted(placed):
            positions = placed[address]
            fut = self.client.submit(
                ShardHost, *[self._shards[p] for p in positions], workers=[address], allow_other_workers=False, actor=True, pure=False,
            )
            hosts.append((positions, fut.result(), fut))
        return hosts

    def _drop_hosts(self, error: BaseException) -> None:
        log.warning("a shard host was lost (%s: %s); continuing with one task per shard", type(error).__name__, error)
        for _, _, fut in self._hosts:
            fut.release()
        self._hosts = []

    def _hosts_alive(self) -> bool:
        if self._hosts and any(fut.status != "finished" for _, _, fut in self._hosts):
            self._drop_hosts(RuntimeError("the worker holding it left the cluster"))
        return bool(self._hosts)

    def map_gather(self, fn: Callable, *args: Any) -> list:
        """``[fn(shard, *args) for shard]`` evaluated on the workers, in shard order."""
        with _naming_store(self.store):
            return self._map_gather(fn, args)

    def _map_gather(self, fn: Callable, args: tuple) -> list:
        if self._hosts_alive():
            try:
                with self.client.as_current():  # actor proxies bind to the current client
                    calls = [(positions, host.map(fn, args)) for positions, host, _ in self._hosts]
                out: list[Any] = [None] * self.n_shards
                for positions, call in calls:
                    for p, r in zip(positions, call.result()):
                        out[p] = r
                return out
            except _HOST_LOST as e:
                self._drop_hosts(e)
        return self.client.gather(self._submit_map(fn, args))

    def map_reduce(self, fn: Callable, combine: Callable[[Any, Any], Any], *args: Any) -> Any:
        """Apply ``fn`` to every shard and merge the results pairwise with ``combine``."""
        futures = self._submit_map(fn, args)
        n_tasks = 2 * len(futures) - 1
        with _naming_store(self.store):
            result = self._tree(futures, combine)
        if log.isEnabledFor(logging.DEBUG):
            args_bytes = sum(sizeof(a) for a in args) * self.n_shards
            log.debug(
                "pass %s: %d tasks, ~%d bytes sent as parameters, ~%d bytes of partial results moved",
                getattr(fn, "__name__", fn), n_tasks, args_bytes, sizeof(result) * n_tasks,
            )
        return result

    def map_reduce_each(self, fn: Callable, combine: Callable[[Any, Any], Any], per_shard: Sequence[tuple], *args: Any) -> Any:
        """Merge ``fn(shard, *args, *per_shard[i])`` over the shards pairwise with ``combine``.

        The merge runs in shard order whatever the placement of the shards, so the
        result is bitwise the same on any number of workers and in
        :class:`LocalDataset`. With shard hosts (meant for small results such as a
        d-vector per shard) the driver receives every shard's result and merges them.
        """
        with _naming_store(self.store):
            return self._map_reduce_each(fn, combine, per_shard, args)

    def _map_reduce_each(self, fn: Callable, combine: Callable[[Any, Any], Any], per_shard: Sequence[tuple], args: tuple) -> Any:
        if self._hosts_alive():
            try:
                with self.client.as_current():
                    calls = [(positions, host.map_each(fn, [per_shard[p] for p in positions], args)) for positions, host, _ in self._hosts]
                out: list[Any] = [None] * self.n_shards
                for positions, call in calls:
                    for p, r in zip(positions, call.result()):
                        out[p] = r
                return _tree_local(out, combine)
            except _HOST_LOST as e:
                self._drop_hosts(e)
        if self.cache == "memory":
            futures = [self.client.submit(fn, s, *args, *a, pure=False) for s, a in zip(self._shards, per_shard)]
        else:
            futures = [
                self.client.submit(_apply_streamed, fn, self.store.shard_args(i), *args, *a, pure=False)
                for i, a in enumerate(per_shard)
            ]
        return self._tree(futures, combine)

    def _tree(self, futures: list, combine: Callable[[Any, Any], Any]) -> Any:
        # Pairwise merges on the workers until few partial results are left; then the
        # driver gathers them and finishes the same pairwise tree itself. Every level
        # merged on the cluster costs a scheduler round trip (~10 ms here), far more
        # than moving a handful of small partial results.
        while len(futures) > self.driver_fanin:
            pairs = [self.client.submit(combine, futures[i], futures[i + 1], pure=False) for i in range(0, len(futures) - 1, 2)]
            if len(futures) % 2:
                pairs.append(futures[-1])
            futures = pairs
        return _tree_local(self.client.gather(futures), combine)

    def close(self) -> None:
        """Release the shard hosts and the persisted shards.

        Cancelled, not only released: an actor proxy keeps a future of its own key,
        and the proxies sit in reference cycles of distributed's callbacks, so a plain
        release left the previous dataset's shards in worker memory until the driver's
        garbage collector ran. On a long-lived cluster every second fit then held two
        copies of the data (found by the workers bench: a worker restarted at 95 % of
        its limit on a 5e6-row store).
        """
        futures = [fut for _, _, fut in self._hosts] + list(self._shards)
        self._hosts = []
        self._shards = []
        if futures:
            try:
                self.client.cancel(futures)
            except (*_HOST_LOST, RuntimeError) as error:  # the cluster may already be gone; nothing left to free then
                log.debug("cancelling the dataset's futures: %s", error)
            for f in futures:
                f.release()

    def __enter__(self) -> ShardedDataset:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_BLAS: ThreadpoolController | None = None


def _one_blas_thread():
    """Context limiting BLAS to one thread; the controller (a scan of loaded libraries,
    about 0.6 ms) is built once, not on every pass."""
    global _BLAS
    if _BLAS is None:
        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


def _tree_local(parts: list, combine: Callable[[Any, Any], Any]) -> Any:
    while len(parts) > 1:
        merged = [combine(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            merged.append(parts[-1])
        parts = merged
    return parts[0]


class LocalDataset:
    """The same interface as :class:`ShardedDataset`, evaluated in this process.

    Parameters
    ----------
    store : Store or str, or list of Shard
        A store, or shards already in memory.
    cache : {"auto", "memory", "stream"}
        ``"stream"`` reads shards again on every pass; otherwise they are kept.
    """

    def __init__(self, store: Store | str | list[Shard], cache: str | None = "memory") -> None:
        if isinstance(store, list):
            self.store = None
            # shard numbers identify shards within a pass (e.g. the score-order memo): make them unique
            self._shards = [dataclasses.replace(sh, index=i) for i, sh in enumerate(store)]
            self.cache = "memory"
        else:
            self.store = store if isinstance(store, Store) else open_store(store)
            self.cache = "stream" if cache == "stream" else "memory"
            self._shards = list(self.store.iter_shards()) if self.cache == "memory" else []
        self.load_seconds = 0.0

    @property
    def n_shards(self) -> int:
        """Number of shards."""
        return len(self._shards) if self.store is None or self.cache == "memory" else self.store.n_shards

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return self.store.manifest.n_features if self.store is not None else int(self._shards[0].X.shape[1])

    @property
    def weighted(self) -> bool:
        """Whether the rows carry sample weights."""
        return bool(self.store.manifest.has_weight) if self.store is not None else any(sh.weight is not None for sh in self._shards)

    def _iter(self):
        return iter(self._shards) if self.cache == "memory" else self.store.iter_shards()

    def map_gather(self, fn: Callable, *args: Any) -> list:
        """``[fn(shard, *args) for shard]`` in shard order, with one BLAS thread.

        One BLAS thread, as in a dask worker process (distributed sets it so), makes
        the per-shard results bitwise equal to the workers' own.
        """
        with _naming_store(self.store), _one_blas_thread():
            return [fn(s, *args) for s in self._iter()]

    def map_reduce(self, fn: Callable, combine: Callable[[Any, Any], Any], *args: Any) -> Any:
        """Apply ``fn`` to every shard and merge pairwise, in the same tree order as on a cluster."""
        return _tree_local(self.map_gather(fn, *args), combine)

    def map_reduce_each(self, fn: Callable, combine: Callable[[Any, Any], Any], per_shard: Sequence[tuple], *args: Any) -> Any:
        """Merge ``fn(shard, *args, *per_shard[i])`` pairwise with ``combine``."""
        with _naming_store(self.store), _one_blas_thread():
            parts = [fn(s, *args, *a) for s, a in zip(self._iter(), per_shard)]
        return _tree_local(parts, combine)

    def close(self) -> None:
        """Drop the shards held in memory."""
        self._shards = []

    def __enter__(self) -> LocalDataset:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


