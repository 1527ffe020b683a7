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
scheduler round trip of 20-35 ms on this 2-core machine.

Order-deterministic reductions: a host returns one result per shard and never
combines them; every combination runs in one fixed-shape pairwise tree over the
shard indices (:func:`._tree.pairwise`), on the driver or, for :meth:`map_reduce`'s
first levels, in tasks that pair the same shards. Each shard's result is computed on
one BLAS thread (:mod:`._blas`). A float sum then has the same association whichever
worker holds which shard, on any number of workers, after a lost worker (whose shards
are read again elsewhere) and in :class:`LocalDataset`: the fits are bit-identical.

Workers may die and come back. Shard loads carry no worker restriction (a task
restricted to a worker that is gone waits in the scheduler's ``no-worker`` state
even after a replacement joins), so the scheduler reloads a lost shard from the
store on whichever worker is there. A host whose worker is lost is dropped with a
warning; passes go on with one task per shard, and the hosts are started again
once every shard is back in memory. Every wait is bounded (:mod:`._waits`): a pass
none of whose tasks finishes for ``dpipe.timeout`` fails with one line.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from dask.sizeof import sizeof
from dask.utils import funcname

from .._config import get_setting
from .._interrupts import check_interrupted
from .._validation import check_choice
from ..exceptions import ClusterError
from ..io import Shard, Store, open_store, read_shard
from ..reduce._block import LAYOUTS
from ._blas import ONE_BLAS_THREAD, single_blas_thread
from ._cluster_spec import CACHE_MODES
from ._hosts import HOST_CHECK_SECONDS, HostsLost, ShardHost, host_lost_errors
from ._local import naming_store
from ._memory import RANGE_ROW_BYTES, ROW_BYTES, MemoryNeed, WorkerMemory, check_memory_limits, measure_workers, memory_need, shards_per_worker, short_workers
from ._pass_count import HOST_DATA_METHODS, LOAD, PassCount, Traffic, pass_kind, pass_starting
from ._range_host import StaleScores
from ._ranges import exchange_may_run
from ._tree import pairwise
from ._waits import gather_bounded, result_bounded

if TYPE_CHECKING:  # distributed is imported by the cluster's code paths only: LocalDataset never loads it
    from distributed import Client

__all__ = ["ShardedDataset", "CACHE_MODES", "choose_cache"]

log = logging.getLogger("dpipe.engine")


#: arguments of a pass at least this big (a float64 d-vector from 2^15 features) go to the workers once, not with each task
SHIP_ONCE_BYTES = 1 << 18


def _argument(value: Any) -> Any:
    """The task that holds a big argument of a pass (:meth:`ShardedDataset._shipped`)."""
    return value


def _apply_streamed(fn: Callable, shard_args: tuple, *args: Any) -> Any:
    """``fn`` on a shard read for this pass only (memory-mapped when it can be: :func:`dpipe.io.read_shard`), on one BLAS thread."""
    with ONE_BLAS_THREAD:
        return fn(read_shard(*shard_args, mmap=True), *args)


def _task_key(fn: Callable) -> str:
    """A fresh key named after the pass (``single_blas_thread`` runs every task, which would otherwise name them all)."""
    return f"{funcname(fn)}-{uuid.uuid4().hex}"


def _n_rows(shard: Shard) -> int:
    return shard.n_rows


def _worker_addresses(client: Client) -> list[str]:
    return sorted(client.scheduler_info().get("workers", {}))


def _has_worker(client: Client, address: str) -> bool:
    return address in _worker_addresses(client)


def choose_cache(cache: str, store_bytes: int, memory_free: int, headroom: float) -> str:
    """Resolve ``"auto"``: persist shards when they fit in ``headroom`` of the workers' free memory.

    ``memory_free`` is the sum over the workers of their limit less their measured
    footprint (0: no limit configured, persist).
    """
    if cache != "auto":
        return cache
    if memory_free <= 0:  # no limit configured: persist
        return "memory"
    return "memory" if store_bytes <= headroom * memory_free else "stream"


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

    Attributes
    ----------
    cache : str
        The resolved mode, ``"memory"`` or ``"stream"``.
    worker_memory : dict of str to WorkerMemory
        Each worker's measured footprint, memory limit and thresholds.
    minimum_memory_limit : int
        The smallest worker memory limit (bytes) under which this store can be
        fitted in that mode, from the workers' measured footprint (:mod:`._memory`);
        a smaller limit is refused with :class:`~dpipe.exceptions.ParameterError`.
    """

    def __init__(self, store: Store | str, client: Client, cache: str | None = None, worker_row_bytes: int = ROW_BYTES) -> None:
        self.store = store if isinstance(store, Store) else open_store(store)
        #: what the fit keeps per row on the workers between passes, where the shards are streamed (:mod:`._memory`)
        self.worker_row_bytes = int(worker_row_bytes)
        #: what messages call the dataset (the store's path)
        self.name = self.store.path
        self.client = client
        self.driver_fanin = int(get_setting("driver-fanin"))
        cache = check_choice(get_setting("cache", cache), "cache", "ShardedDataset", CACHE_MODES)
        self.worker_memory = measure_workers(client, self.n_features)  # also loads the pass kernels on every worker
        self.workers = sorted(self.worker_memory)
        self.cache = self._resolve_cache(cache, self.worker_memory)
        self._shards: list[Any] = []
        self._hosts: list[tuple[list[int], Any, Any]] = []  # (shard positions, actor, its future)
        self._rehost = False  # start the hosts again once the shards are back (after a lost worker)
        self.load_seconds = 0.0
        #: the passes made over the shards (:mod:`._pass_count`)
        self.passes = PassCount()
        self._tally: Traffic | None = None  # the traffic of the round running (:meth:`_round`)
        if self.cache == "memory":
            t0 = time.perf_counter()
            pass_starting(LOAD)
            self._shards = self._load_shards()
            self.passes.add(LOAD, Traffic(tasks=len(self._shards)))
            # Wait for the loads and re-raise a StoreError naming a bad shard, moving 8 bytes per shard.
            with naming_store(self.store):
                self._gather([client.submit(_n_rows, f, pure=False) for f in self._shards], "loading the shards", self._shards)
            self._hosts = self._start_hosts()
            self.load_seconds = time.perf_counter() - t0
        log.info(
            "%s: %d shards, %.1f MB, cache=%s%s",
            self.name,
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
    def n_rows(self) -> int:
        """Number of rows."""
        return self.store.manifest.n_rows

    @property
    def weighted(self) -> bool:
        """Whether the rows carry sample weights."""
        return bool(self.store.manifest.has_weight)

    @property
    def keeps_orders(self) -> str:
        """``"driver"`` for streamed shards (their workers hold nothing per row between passes), else ``"workers"``."""
        return "driver" if self.cache == "stream" else "workers"

    def _memory_need(self, persisted: bool) -> MemoryNeed:
        bounds = self.store.manifest.shard_bounds
        rows = [stop - start for start, stop in bounds]
        per_row = self.store.nbytes / max(1, self.store.manifest.n_rows)
        row_bytes = (RANGE_ROW_BYTES if exchange_may_run(self.store.manifest.n_rows) else ROW_BYTES) if persisted else self.worker_row_bytes
        return memory_need([int(r * per_row) for r in rows], rows, len(self.workers), persisted, row_bytes,
                           n_features=self.store.manifest.n_features, csr=LAYOUTS[self.store.manifest.layout].block.sparse, driver_fanin=self.driver_fanin)

    def _resolve_cache(self, cache: str, measured: dict[str, WorkerMemory]) -> str:
        """The cache mode for these workers, refusing a memory limit too small for it (:mod:`._memory`).

        ``"auto"`` persists when the store fits in ``dpipe.cache-headroom`` of the memory
        the workers have left beyond their footprint, and every worker's limit holds its share.
        """
        limited = [w for w in measured.values() if w.limit]
        free = sum(max(0, w.limit - w.footprint) for w in limited)
        chosen = choose_cache(cache, self.store.nbytes, free, float(get_setting("cache-headroom")))
        if cache == "auto" and chosen == "memory" and short_workers(measured, self._memory_need(persisted=True)):
            chosen = "stream"
        need = self._memory_need(persisted=chosen == "memory")
        self.minimum_memory_limit = max((need.minimum_limit(w) for w in measured.values()), default=0)
        check_memory_limits(measured, need, self.store.path, chosen)
        if limited:
            log.info(
                "%s: worker footprint %.0f MB (measured), memory limit %.0f MB, smallest workable limit %.0f MB",
                self.store.path, max(w.footprint for w in limited) / 1e6, min(w.limit for w in limited) / 1e6, self.minimum_memory_limit / 1e6,
            )
        return chosen

    def _load_shards(self) -> list:
        """Submit one load per shard, in one batch and without worker restrictions.

        The scheduler spreads one batch of loads evenly, give or take a shard (measured
        with 2 workers: 8 / 8 or 7 / 9 of 16 shards; :data:`~._memory.PLACEMENT_SLACK`),
        and can reload a shard on any worker when its worker is gone. A restriction, even
        a loose one, would leave the reload waiting in ``no-worker`` once every worker
        had died, even after a new one joined (distributed 2026.8 re-checks only tasks
        a new worker satisfies, ignoring ``allow_other_workers``).
        """
        args = [self.store.shard_args(i) for i in range(self.store.n_shards)]
        return self.client.map(read_shard, *zip(*args), pure=False) if args else []

    def _what(self, fn: Callable | str) -> str:
        name = fn if isinstance(fn, str) else f"pass {getattr(fn, '__name__', fn)!r}"
        return f"{self.name}: {name}"

    def _gather(self, futures: list, fn: Callable | str, watch: list | None = None, per_row: bool = False) -> list:
        # results fetched as their tasks end where a shard's result is a d-vector worth a worker's memory, or, streamed,
        # rows' results (the memory model counts those of FLIGHT_SHARDS shards only)
        eager = 8 * self.n_features >= SHIP_ONCE_BYTES or (per_row and self.cache == "stream")
        results = gather_bounded(self.client, futures, self._what(fn), watch, eager=eager)
        self._count(received=results)
        return results

    def _submit_map(self, fn: Callable, args: Sequence[Any]) -> list:
        args = self._shipped(args)
        self._count(self.n_shards, sent=[args] * self.n_shards)
        if self.cache == "memory":
            return [self.client.submit(single_blas_thread, fn, s, *args, key=_task_key(fn)) for s in self._shards]
        return [self.client.submit(_apply_streamed, fn, self.store.shard_args(i), *args, key=_task_key(fn)) for i in range(self.n_shards)]

    def _shipped(self, args: Sequence[Any]) -> tuple:
        """``args`` with every array of :data:`SHIP_ONCE_BYTES` or more replaced by the future of a task returning it.

        A task's literal arguments travel inside the task, so a pass of one task per shard
        sent such a vector once per shard, and each worker held one copy per task queued on it
        (``w`` of 8 MB at 2^20 features, with distributed's warning about large graphs). As one
        task's result it travels once to each worker, which keeps one copy while the pass's tasks
        refer to it; and unlike scattered data, the scheduler computes it again if its worker dies.
        """
        big = [isinstance(a, np.ndarray) and a.nbytes >= SHIP_ONCE_BYTES for a in args]
        self._count(sum(big), sent=[a for a, b in zip(args, big) if b])
        return tuple(self.client.submit(_argument, a, pure=False, key=_task_key(_argument)) if b else a for a, b in zip(args, big))

    def _start_hosts(self) -> list[tuple[list[int], Any, Any]]:
        """One :class:`ShardHost` actor per worker, over the shards persisted there."""
        placed: dict[str, list[int]] = {}
        who = self.client.who_has(self._shards)
        for pos, f in enumerate(self._shards):
            holders = who.get(f.key) or ()
            if not holders:
                return []
            placed.setdefault(sorted(holders)[0], []).append(pos)
        started = [
            (address, positions, self.client.submit(
                ShardHost, *[self._shards[p] for p in positions], workers=[address], allow_other_workers=False, actor=True, pure=False,
            ))
            for address, positions in sorted(placed.items())
        ]
        hosts = []
        try:
            for address, positions, fut in started:
                alive = functools.partial(_has_worker, self.client, address)
                hosts.append((positions, result_bounded(fut, self._what("starting a shard host"), self.client, alive=alive), fut))
        except ClusterError:
            raise
        except host_lost_errors() + (RuntimeError,) as error:  # its worker left meanwhile ("Worker holding Actor was lost"): tasks for now, hosts again later
            self._rehost = True
            log.warning("a shard host could not start (%s: %s); continuing with one task per shard", type(error).__name__, error)
            hosts = []
        if len(hosts) < len(started):
            for _, _, fut in started:
                fut.release()
            return []
        actors = [host for _, host, _ in hosts]
        try:
            with self.client.as_current():
                calls = [host.range_peers(actors, i) for i, host in enumerate(actors)]
            for call in calls:
                result_bounded(call, self._what("introducing the shard hosts"), self.client, alive=self._hosts_finished)
        except host_lost_errors() + (RuntimeError,) as error:
            self._rehost = True
            log.warning("the shard hosts could not be introduced to each other (%s: %s); continuing with one task per shard", type(error).__name__, error)
            for _, _, fut in started:
                fut.release()
            return []
        return hosts

    def _forget_hosts(self) -> None:
        """Ask every host still up to drop its peers' handles (:meth:`._ranges.RangeHost.range_forget`), so that releasing
        the hosts frees them; a host that does not answer within :data:`HOST_CHECK_SECONDS` x 10 is skipped."""
        try:
            with self.client.as_current():
                calls = [host.range_forget() for _, host, fut in self._hosts if fut.status == "finished"]
            for call in calls:
                try:
                    call.result(timeout=10 * HOST_CHECK_SECONDS)
                except Exception as error:  # noqa: BLE001 - best effort: a lost host holds nothing anyway
                    log.debug("a shard host did not drop its peers: %s", error)
        except host_lost_errors() + (RuntimeError,) as error:
            log.debug("the shard hosts could not be asked to drop their peers: %s", error)

    def _drop_hosts(self, error: BaseException) -> None:
        log.warning("a shard host was lost (%s: %s); continuing with one task per shard", type(error).__name__, error)
        self._forget_hosts()
        for _, _, fut in self._hosts:
            fut.release()
        self._hosts = []
        self._rehost = True

    def _hosts_finished(self) -> bool:
        return all(fut.status == "finished" for _, _, fut in self._hosts)

    def _hosts_alive(self) -> bool:
        """Whether passes can use the hosts; drops lost ones, restarts them once every shard is back."""
        if self._hosts and not self._hosts_finished():
            self._drop_hosts(RuntimeError("the worker holding it left the cluster"))
        elif not self._hosts and self._rehost and self._cluster_recovered():
            self._rehost = False
            self._spread_shards()
            self._hosts = self._start_hosts()
            if self._hosts:
                log.info("%s: shard hosts started again on %d worker(s)", self.name, len(self._hosts))
        return bool(self._hosts)

    def _cluster_recovered(self) -> bool:
        """Every shard is in memory again and the cluster has as many workers as when the store was opened."""
        return all(f.status == "finished" for f in self._shards) and len(_worker_addresses(self.client)) >= len(self.workers)

    def _spread_shards(self) -> None:
        """Load the shards again when the reloads after a loss piled them on fewer workers than there are.

        The scheduler reloads a lost shard on whichever worker is up at the time; a
        worker that comes back later holds nothing, and the others twice their share.
        A fresh load of every shard is spread evenly again (about the cost of opening
        the store); the old copies are released once the new ones are in.
        """
        holders = [sorted(h)[0] if h else None for h in map(self.client.who_has(self._shards).get, (f.key for f in self._shards))]
        counts = [holders.count(w) for w in set(holders)]
        if max(counts) <= shards_per_worker(self.n_shards, len(self.workers)):
            return
        fresh = self._load_shards()
        with naming_store(self.store):
            self._gather([self.client.submit(_n_rows, f, pure=False) for f in fresh], "loading the shards again", fresh)
        old, self._shards = self._shards, fresh
        self.client.cancel(old)
        log.info("%s: shards loaded again to spread them over %d workers", self.name, len(self.workers))

    def _host_results(self, fn: Callable, calls: list) -> list:
        out: list[Any] = [None] * self.n_shards
        for positions, call in calls:
            for p, r in zip(positions, result_bounded(call, self._what(fn), self.client, alive=self._hosts_finished)):
                out[p] = r
        self._count(len(calls), received=out)
        return out

    @contextlib.contextmanager
    def _round(self, kind: str, data: bool = True) -> Iterator[None]:
        """One round of work over the shards (a pass where ``data``), its tasks and bytes counted (:mod:`._pass_count`)."""
        check_interrupted()  # a safe point between passes
        if data:
            pass_starting(kind)
        self._tally = tally = Traffic()
        t0 = time.perf_counter()
        try:
            with naming_store(self.store):
                yield
        finally:
            self._tally = None
            tally.seconds = time.perf_counter() - t0
            self.passes.add(kind, tally, data=data)

    def _count(self, tasks: int = 0, sent: Any = None, received: Any = None) -> None:
        """Add to the running round's traffic: ``tasks``, and the payload bytes of what was ``sent`` and ``received``."""
        if self._tally is not None:
            self._tally.tasks += tasks
            self._tally.from_driver += int(sizeof(sent)) if sent is not None else 0
            self._tally.to_driver += int(sizeof(received)) if received is not None else 0

    def map_gather(self, fn: Callable, *args: Any) -> list:
        """``[fn(shard, *args) for shard]`` evaluated on the workers, in shard order."""
        with self._round(pass_kind(fn)):
            return self._map_gather(fn, args)

    def has_hosts(self) -> bool:
        """Whether passes run through shard hosts (persisted shards, every host up)."""
        return self._hosts_alive()

    def host_count(self) -> int:
        """Number of shard hosts (0 without)."""
        return len(self._hosts)

    def host_calls(self, method: str, per_host: Sequence[tuple]) -> list:
        """``host.method(*per_host[i])`` on every shard host at once; the results in host order.

        Raises :class:`HostsLost` (after dropping the hosts) when one is lost meanwhile.
        """
        if not self._hosts_alive() or len(per_host) != len(self._hosts):
            raise HostsLost(f"{self.name}: the shard hosts are gone")
        with self._round(method, data=method in HOST_DATA_METHODS):
            try:
                with self.client.as_current():
                    calls = [getattr(host, method)(*args) for (_, host, _), args in zip(self._hosts, per_host)]
                results = [result_bounded(call, self._what(method), self.client, alive=self._hosts_finished) for call in calls]
                self._count(len(calls), list(per_host), results)
                return results
            except host_lost_errors() + (RuntimeError,) as error:
                if not self._host_lost(error):
                    raise
                self._drop_hosts(error)
                raise HostsLost(f"{self.name}: {type(error).__name__}: {error}") from error

    def _host_lost(self, error: BaseException) -> bool:
        """Whether ``error`` from a call on the shard hosts means a host is gone (its worker, or the connection to it).

        A ``RuntimeError`` counts once a host's future is no longer finished: distributed raises "Worker holding Actor
        was lost" when the actor's worker died, sometimes before the scheduler has marked the future (hence the wait);
        any other RuntimeError, and :class:`StaleScores`, are the call's own.
        """
        if isinstance(error, StaleScores):
            return False
        if isinstance(error, RuntimeError) and not isinstance(error, host_lost_errors()):
            time.sleep(HOST_CHECK_SECONDS)
            return not self._hosts_finished()
        return True

    def _map_gather(self, fn: Callable, args: tuple) -> list:
        if self._hosts_alive():
            try:
                with self.client.as_current():  # actor proxies bind to the current client
                    calls = [(positions, host.map(fn, args)) for positions, host, _ in self._hosts]
                self._count(sent=[args] * len(calls))
                return self._host_results(fn, calls)
            except host_lost_errors() + (RuntimeError,) as error:
                if not self._host_lost(error):
                    raise
                self._drop_hosts(error)
        return self._gather(self._submit_map(fn, args), fn, per_row=True)

    def map_reduce(self, fn: Callable, combine: Callable[[Any, Any], Any], *args: Any) -> Any:
        """Apply ``fn`` to every shard and merge the results pairwise with ``combine``, in the tree of :func:`._tree.pairwise` over the shard indices."""
        with self._round(pass_kind(fn)):
            futures = self._submit_map(fn, args)
            n_tasks = 2 * len(futures) - 1
            result = self._tree(fn, futures, combine)
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
        with self._round(pass_kind(fn)):
            return self._map_reduce_each(fn, combine, per_shard, args)

    def _map_reduce_each(self, fn: Callable, combine: Callable[[Any, Any], Any], per_shard: Sequence[tuple], args: tuple) -> Any:
        if self._hosts_alive():
            try:
                with self.client.as_current():
                    calls = [(positions, host.map_each(fn, [per_shard[p] for p in positions], args)) for positions, host, _ in self._hosts]
                self._count(sent=[list(per_shard), args])
                return pairwise(self._host_results(fn, calls), combine)
            except host_lost_errors() as e:
                self._drop_hosts(e)
        args = self._shipped(args)
        self._count(len(per_shard), sent=[list(per_shard), [args] * len(per_shard)])
        if self.cache == "memory":
            futures = [self.client.submit(single_blas_thread, fn, s, *args, *a, key=_task_key(fn)) for s, a in zip(self._shards, per_shard)]
        else:
            futures = [
                self.client.submit(_apply_streamed, fn, self.store.shard_args(i), *args, *a, key=_task_key(fn))
                for i, a in enumerate(per_shard)
            ]
            if 8 * self.n_features < SHIP_ONCE_BYTES:
                # Streamed with per-shard values (a row's weight each): each result fetched as its task ends and merged
                # here, in the same tree. A leaf waiting on a worker for its merge kept its task, and the task its
                # values: measured, 5x10^7 rows streamed on one worker held 400 MB more through each gradient pass
                return pairwise(self._gather(futures, fn, per_row=True), combine)
        return self._tree(fn, futures, combine)

    def _tree(self, fn: Callable, futures: list, combine: Callable[[Any, Any], Any]) -> Any:
        # Pairwise merges on the workers until few partial results are left; then the
        # driver gathers them and finishes the same pairwise tree itself. Every level
        # merged on the cluster costs a scheduler round trip (~10 ms here), far more
        # than moving a handful of small partial results. Each level pairs the same
        # shard positions as :func:`pairwise` does (a task merges positions 2i and 2i+1,
        # an odd last one waits for the next level), so where a level runs, and which
        # worker runs it, never changes the association of the result.
        every = list(futures)  # a finished shard task or merge is progress
        while len(futures) > self.driver_fanin:
            pairs = [self.client.submit(single_blas_thread, combine, futures[i], futures[i + 1], key=_task_key(combine)) for i in range(0, len(futures) - 1, 2)]
            self._count(len(pairs))
            if len(futures) % 2:
                pairs.append(futures[-1])
            every += pairs
            futures = pairs
        return pairwise(self._gather(futures, fn, every), combine)

    def close(self) -> None:
        """Release the shard hosts and the persisted shards.

        Cancelled, not only released: an actor proxy keeps a future of its own key,
        and the proxies sit in reference cycles of distributed's callbacks, so a plain
        release left the previous dataset's shards in worker memory until the driver's
        garbage collector ran. On a long-lived cluster every second fit then held two
        copies of the data (found by the workers bench: a worker restarted at 95 % of
        its limit on a 5e6-row store).
        """
        if self._hosts:
            self._forget_hosts()
        futures = [fut for _, _, fut in self._hosts] + list(self._shards)
        self._hosts = []
        self._shards = []
        if futures:
            try:
                self.client.cancel(futures)
            except host_lost_errors() + (RuntimeError,) as error:  # the cluster may already be gone; nothing left to free then
                log.debug("cancelling the dataset's futures: %s", error)
            for f in futures:
                f.release()

    def __enter__(self) -> ShardedDataset:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
