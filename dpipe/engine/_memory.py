"""What a dask worker needs in memory for a store, measured on the workers themselves.

A worker process holds its own footprint (Python, dask, numpy, zarr, numba and the
compiled pass kernels: about 200 MB here), the shards persisted on it, and, while a
pass runs, the working memory of one shard: the decoded float32 features, zarr's
decoded chunk before it is copied out and the compressed bytes (about three times
the shard's feature bytes, measured: a 64 MB shard raised a worker's peak by 190 MB),
and per row of its shards, with the shards persisted: the sorted scores of a score pass
waiting to be gathered, the row order it remembers for the gradient pass (for two fits)
and the gradient pass's row weights waiting in its tasks (24 bytes a row), or, where the
scores are merged and weighed on the workers (:mod:`._ranges`: the sorted scores, row
order and prefix sums of its shards, its ranges' rows, their merge and their results),
64 bytes a row. Streamed, a worker holds nothing per row between passes (the driver keeps
the orders, :mod:`dpipe.reduce._driver_order`, and fetches each shard's scores as its task
ends), only the per-row results and weights of the shards in flight
(:data:`FLIGHT_ROW_BYTES`), unless the fit keeps its own per-row state there (the rate
objectives' cells and anchor margins: ``worker_row_bytes`` in their registry entries).

Measured against this model (without :data:`SAFETY`), streaming fits peaked at
418 MB for 417 MB predicted (2e6 x 120 rows in 64 MB shards, two workers) and at
318 MB for 331 MB predicted (7e6 x 120 rows in 16 MB shards).

A CSR shard is decoded a chunk at a time (:data:`CSR_WORKING_COPIES`), and a wide store's
d-vectors count, a few per pass (:data:`D_VECTORS`) and, where the results of a pass wait on
the worker, one per shard of the worker (:data:`SHARD_D_VECTORS`): streaming 10^6 x 2^20 text
rows in 6 shards on two workers peaked at 347-353 MB a worker; this model asks for 410 MB, and
refuses less at the start instead of paused workers waiting for ever. The refusal names the
shard size that needs the least (:meth:`MemoryNeed.workable_shard_rows`): not always a
smaller one, since at 2^20 features a shard's d-vectors outweigh its rows where they wait
on the worker, and none where no size fits ("use more workers").

dask pauses a worker whose memory passes ``distributed.worker.memory.pause`` (80 %
of its limit by default) and its nanny restarts one past ``terminate`` (95 %). A
worker that holds more than the pause line between passes never runs a task again,
and one whose peak passes the terminate line is killed over and over.
:func:`check_memory_limits` refuses such a limit before any shard is read, naming
the smallest one that works. The embedded cluster does not pause or spill
(:data:`EMBEDDED_WORKER_MEMORY`), so only its terminate line counts.
"""

from __future__ import annotations

import dataclasses
import gc
import math
from typing import Any

import numpy as np

from ..exceptions import ClusterError, ParameterError

__all__ = [
    "EMBEDDED_WORKER_MEMORY", "embedded_nanny_config", "WORKER_ALLOCATOR", "worker_environ_config", "FOOTPRINT_FLOOR", "WorkerMemory", "worker_memory", "measure_workers",
    "MemoryNeed", "memory_need", "shards_per_worker", "short_workers", "PLACEMENT_SLACK", "check_memory_limits", "WORKING_COPIES",
    "CSR_WORKING_COPIES", "D_VECTORS", "SHARD_D_VECTORS", "ROW_BYTES", "RANGE_ROW_BYTES", "FLIGHT_ROW_BYTES", "FLIGHT_SHARDS", "SAFETY", "StoreLayout", "uniform_shards",
]

#: a pass over a shard holds about this many copies of its feature bytes (decoded, zarr's chunk buffer, compressed)
WORKING_COPIES = 3
#: the same for a CSR shard: its values and indices, and one 4 MB chunk of them being decoded with its compressed bytes
#: (``dpipe.io._zarr_store._read_range``; through zarr's concurrent read a shard's values alone peaked at 2.2 times their
#: bytes, and this was 3). Measured on 10^6 x 2^20 text rows in 58 MB shards, streamed on 2 workers (auc, 10 Newton
#: steps): workers peaked at 347-353 MB with a footprint of 197 MB (this model: 356 MB before SAFETY)
CSR_WORKING_COPIES = 1.3
#: float64 d-vectors a worker holds while a pass runs: ``w`` (sent once a pass, ``ShardedDataset._shipped``, and
#: its copy on the way in), the result being computed and the previous one being fetched (two each for auc's Newton, a
#: (2, d) array), the two inputs and the output of a tree combine. Nothing at d = 100; 64 MB at d = 2^20
D_VECTORS = 8
#: and per shard it holds where its shards' results wait on it until the pass ends: two d-vectors for auc's Newton (the
#: gradient and the Jacobi diagonal, one (2, d) array) and for column moments (means and centred sums). That is the case
#: for persisted shards (a shard host answers for all its shards at once) and for a tree combined on the workers (more
#: shards than ``dpipe.driver-fanin``, whose leaves the pass watches); streamed passes of fewer shards send each result
#: to the driver as its task finishes (:func:`._waits.gather_bounded`, eager from 2^15 features; below, a shard's results
#: wait, but they are d-vectors of at most 256 KB). Measured before that (every result waiting) on
#: 10^6 x 2^20 text rows streamed on 2 workers (auc): re-written in 14 shards of 73,374 rows, which one vector a shard
#: said would fit 500 MB, the workers paused and restarted at 500 MB
SHARD_D_VECTORS = 2
#: bytes a worker holds per row of its persisted shards during a fit: float64 scores awaiting the gather (8), the
#: int32 row order remembered for two fits (8) and the float64 row weights of the gradient tasks (8).
#: A rate fit keeps 9-10 instead (cells and anchor margins, dpipe.reduce._rates), streamed too; auc-rate both (34: not yet counted)
ROW_BYTES = 24
#: streamed, per row of each shard in flight on a worker: its sorted scores and row order waiting to be fetched (12) and
#: its gradient task's row weights (8)
FLIGHT_ROW_BYTES = 20
#: shards in flight on a worker (each thread's running task and one result or queued task more: dask's queuing keeps
#: about ``worker-saturation`` (1.1) x threads tasks on a worker)
FLIGHT_SHARDS = 2
#: the same when the workers merge and weigh the scores by range (persisted shards, :mod:`._ranges`): measured peaks
#: of 53-61 bytes a row beyond the persisted shards (5e6 x 120 rows, 2 workers, auc-smooth; prbep-smooth's scalar
#: route 23-26, the driver-merged route 22-24)
RANGE_ROW_BYTES = 64
#: shards one worker may get beyond an even share when the scheduler places a batch of loads
PLACEMENT_SLACK = 1
#: a worker's footprint with dpipe's pass kernels loaded, measured here (Linux x86-64, Python 3.11): 200 MB.
#: Used only to explain workers that died before they could be measured.
FOOTPRINT_FLOOR = 200_000_000
#: the most shards :meth:`MemoryNeed.workable_shard_rows` prices (each a task per pass): shard sizes below n / this are not advised
MAX_ADVISED_SHARDS = 100_000
#: margin on the computed minimum (allocator slack, the 100 ms between two of the nanny's memory checks)
SAFETY = 1.08

#: dask memory management of the embedded cluster's workers. dpipe's passes hold no
#: dask-managed data worth spilling: a streamed shard is dropped when its task ends, and
#: shards are persisted only when they fit. Pausing at 80 % would only stop new tasks
#: while the running one holds its shard; the nanny's restart at 95 % stays on.
EMBEDDED_WORKER_MEMORY = {
    "distributed.worker.memory.target": False,
    "distributed.worker.memory.spill": False,
    "distributed.worker.memory.pause": False,
}


def embedded_nanny_config() -> dict[str, Any]:
    """Each embedded nanny's own config (``distributed.Nanny(config=...)``, merged over the config in force, a level deep):
    :data:`EMBEDDED_WORKER_MEMORY` over the ``distributed`` section. The nanny gives it to every worker it starts; the
    config in force when the cluster starts reached only the first workers, and a worker restarted by its nanny paused
    at 80 % (measured, distributed 2026.8)."""
    import dask.config

    memory = {key.rsplit(".", 1)[1]: value for key, value in EMBEDDED_WORKER_MEMORY.items()}
    return {"distributed": dask.config.merge(dask.config.get("distributed"), {"worker": {"memory": memory}})}


#: glibc allocator settings of the embedded cluster's workers (environment of their processes).
#: dask sets ``MALLOC_TRIM_THRESHOLD_=65536`` for every worker, which also switches off glibc's
#: sliding mmap threshold: every temporary array over 128 KiB is then a fresh mmap whose pages
#: fault in and are zeroed on first touch. dpipe's passes allocate such arrays per shard (scores,
#: sort keys and orders, gathered rows); measured on 10^7 x 120 rows, 2 workers: scoring and sorting
#: every shard 1.03 -> 0.62 s, and X @ w alone 0.49 -> 0.40 s (bench/results/scaling.md). Arrays up
#: to 4 MiB come from the heap instead (a shard's per-row float64 arrays up to 524,288 rows), and up to
#: 64 MiB of freed heap is kept for reuse: at most that much more resident memory per worker, within
#: :data:`SAFETY`'s margin on real limits. Larger arrays stay mmapped and go back to the system when freed:
#: with a 16 MiB threshold a wide store's 8 MB d-vectors (2^20 features) stayed on a fragmented heap, and
#: workers streaming 10^6 x 2^20 text rows peaked at 523-555 MB instead of 453-476 MB.
WORKER_ALLOCATOR = {
    "MALLOC_MMAP_THRESHOLD_": 4 * 2**20,
    "MALLOC_TRIM_THRESHOLD_": 64 * 2**20,
}


def worker_environ_config() -> dict[str, Any]:
    """The dask config that gives new worker processes :data:`WORKER_ALLOCATOR` (the nannies' pre-spawn environment)."""
    return {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_ALLOCATOR.items()}


@dataclasses.dataclass(frozen=True)
class WorkerMemory:
    """One worker's memory, as it reports it.

    Attributes
    ----------
    footprint : int
        Resident bytes after loading the pass kernels (the worker's floor).
    limit : int
        Its memory limit in bytes (0: none).
    pause, terminate : float
        Fractions of the limit at which dask pauses the worker / its nanny restarts it (1.0: never).
    """

    footprint: int
    limit: int
    pause: float
    terminate: float


def _fraction(value: Any) -> float:
    return float(value) if value not in (None, False) else 1.0


#: features of the warm-up shard: the compiled kernels do not depend on ``d``, and a store's ``d`` may be 10^6
#: (the moments pass would allocate d x d)
WARM_UP_FEATURES = 16


def _warm_up(n_features: int) -> None:
    """Run the worker-side pass kernels once on a tiny shard (64 rows, at most :data:`WARM_UP_FEATURES` columns),
    so that their compiled code is loaded."""
    from ..io import Shard
    from ..reduce import class_moments_of_shard, class_scores, column_moments_of_shard, shard_sorted_scores

    d = max(1, min(int(n_features), WARM_UP_FEATURES))
    rng = np.random.default_rng(0)
    shard = Shard(X=rng.standard_normal((64, d)).astype(np.float32), y=np.where(np.arange(64) % 2 == 0, 1, -1).astype(np.int8), index=0)
    w = np.ones(d)
    class_moments_of_shard(shard)
    column_moments_of_shard(shard)
    class_scores(shard, w)
    shard_sorted_scores(shard, w, 0.0)


def _resident_bytes() -> int:
    """This process's resident bytes, and for a process forked from a fork server (:mod:`._forkserver`) what they may grow
    to: its own pages (USS) plus every page of the server's, which it shares until it touches them - measured, a forked
    worker is resident at 103 MB of which 19 MB its own, beside a server of 185 MB; after a fit, 216 MB."""
    import psutil

    me = psutil.Process()
    rss = int(me.memory_info().rss)
    try:
        parent = me.parent()
        if parent is None or "multiprocessing.forkserver" not in " ".join(parent.cmdline()):
            return rss
        return max(rss, int(me.memory_full_info().uss) + int(parent.memory_info().rss))
    except psutil.Error:  # the server's figures are out of reach: its own, which a limit must hold anyway
        return rss


def worker_memory(n_features: int, dask_worker: Any = None) -> WorkerMemory:
    """Measure this worker (run through :meth:`distributed.Client.run`)."""
    import dask.config

    _warm_up(n_features)
    gc.collect()
    manager = getattr(dask_worker, "memory_manager", None)
    return WorkerMemory(
        footprint=_resident_bytes(),
        limit=int(getattr(manager, "memory_limit", None) or 0),
        pause=_fraction(getattr(manager, "memory_pause_fraction", None)),
        # the nanny's threshold; a worker started by a nanny runs with the nanny's config
        terminate=_fraction(dask.config.get("distributed.worker.memory.terminate")),
    )


def measure_workers(client: Any, n_features: int) -> dict[str, WorkerMemory]:
    """:func:`worker_memory` of every worker of ``client``'s cluster.

    A worker whose limit is below its own footprint dies while it loads the pass
    kernels (its nanny restarts it, and it dies again); that is reported as a
    :class:`ParameterError` naming the limit, not as a lost connection.
    """
    limits = sorted({int(w.get("memory_limit") or 0) for w in client.scheduler_info().get("workers", {}).values()} - {0})
    try:
        # in two rounds: a worker's first call and reply touch code and objects it has not yet (in a forked worker, copying
        # pages it shared with the fork server: 7 MB more after it, measured); the second measures it as later calls find it
        client.run(_warm_up, n_features)
        measured: dict[str, WorkerMemory] = client.run(worker_memory, n_features)
    except (OSError, RuntimeError) as error:  # CommClosedError is an OSError; "Stream is closed"
        floor = MemoryNeed(0, 0).minimum_limit(WorkerMemory(FOOTPRINT_FLOOR, 0, 1.0, 0.95))
        if limits and limits[0] < floor:
            raise _below_footprint(limits[0], FOOTPRINT_FLOOR, floor, "the workers died loading dpipe's pass kernels") from None
        raise ClusterError(f"measuring the workers' memory failed: {type(error).__name__}: {error}") from error
    # a worker forked from a fork server may be measured below its limit while what it shares with the server is not
    below = [(w.limit, w.footprint, floor) for w in measured.values() if w.limit and w.limit < (floor := MemoryNeed(0, 0).minimum_limit(w))]
    if below:
        raise _below_footprint(*min(below), "measured")
    return measured


def _below_footprint(limit: int, footprint: int, floor: int, how: str) -> ParameterError:
    return ParameterError(
        f"a worker memory limit of {limit / 1e6:.0f} MB is below a worker's own footprint: {how} (about {footprint / 1e6:.0f} MB with "
        f"dpipe's pass kernels); raise the workers' memory limit ('memory_limit') to at least {floor / 1e6:.0f} MB plus what the store needs"
    )


@dataclasses.dataclass(frozen=True)
class MemoryNeed:
    """Bytes a worker holds for a store beyond its footprint.

    Attributes
    ----------
    resident : int
        Held through a fit: the persisted shards (cache "memory") and the per-row state (:func:`memory_need`).
    working : int
        Held only while a pass runs over one shard.
    """

    resident: int
    working: int
    #: the store as :func:`memory_need` saw it, for :meth:`workable_shard_rows` (None: built by hand)
    layout: StoreLayout | None = None

    def minimum_limit(self, worker: WorkerMemory) -> int:
        """The smallest limit under which this worker neither stays paused nor is restarted, with :data:`SAFETY`."""
        steady = worker.footprint + self.resident
        need = max(steady / worker.pause, (steady + self.working) / worker.terminate) * SAFETY
        return int(math.ceil(need / 10e6) * 10e6)

    def workable_shard_rows(self, worker: WorkerMemory) -> int | None:
        """Rows per streamed shard under which this worker's limit holds a pass (with 10 MB to spare), the size that needs the
        least, or None where no size works or none is needed (shards persisted: their bytes count whatever their size).

        Not always smaller shards: each shard also costs :data:`SHARD_D_VECTORS` d-vectors, which at 2^20 features
        outweigh a small shard's bytes.
        """
        lay = self.layout
        if lay is None or lay.persisted or not worker.limit or lay.n_rows < 2:
            return None
        smallest = min(lay.n_rows, max(1000, -(-lay.n_rows // MAX_ADVISED_SHARDS)))
        grid = np.unique(np.geomspace(smallest, lay.n_rows, 120).astype(np.int64))
        needs = [(uniform_shards(lay, int(r)).minimum_limit(worker), int(r)) for r in grid]
        best_need, best_rows = min(needs, key=lambda t: (t[0], -t[1]))
        return best_rows if best_need <= worker.limit - 10e6 else None


@dataclasses.dataclass(frozen=True)
class StoreLayout:
    """What :func:`memory_need` was given, apart from the shard sizes: enough to price other shard sizes."""

    n_rows: int
    n_workers: int
    bytes_per_row: float
    persisted: bool
    row_bytes: int
    n_features: int
    csr: bool
    driver_fanin: int = 0


def uniform_shards(layout: StoreLayout, rows: int) -> MemoryNeed:
    """The :class:`MemoryNeed` of the same store written in shards of ``rows`` rows."""
    sizes = [rows] * (layout.n_rows // rows) + ([layout.n_rows % rows] if layout.n_rows % rows else [])
    return memory_need([int(r * layout.bytes_per_row) for r in sizes], sizes, layout.n_workers, layout.persisted, layout.row_bytes,
                       n_features=layout.n_features, csr=layout.csr, driver_fanin=layout.driver_fanin)


def shards_per_worker(n_shards: int, n_workers: int) -> int:
    """The most shards the scheduler puts on one worker: an even share plus :data:`PLACEMENT_SLACK`."""
    return min(n_shards, math.ceil(n_shards / max(1, n_workers)) + PLACEMENT_SLACK)


def memory_need(shard_bytes: list[int], shard_rows: list[int], n_workers: int, persisted: bool, row_bytes: int = ROW_BYTES,
                n_features: int = 0, csr: bool = False, driver_fanin: int = 0) -> MemoryNeed:
    """What one worker holds for a store spread over ``n_workers`` (evenly, give or take a shard, as the scheduler places it).

    ``row_bytes`` per row of its shards: :data:`ROW_BYTES`, or :data:`RANGE_ROW_BYTES` where the
    workers may merge and weigh the scores (persisted shards, ``dpipe.rank-exchange``); streamed, what
    the fit keeps per row on the workers (0 for the ranking passes, whose orders the driver keeps) and
    :data:`FLIGHT_ROW_BYTES` per row of :data:`FLIGHT_SHARDS` shards while a pass runs. While a
    pass runs: :data:`WORKING_COPIES` (:data:`CSR_WORKING_COPIES` for a ``csr`` store) of the
    largest shard, and :data:`D_VECTORS` float64 vectors of ``n_features``, plus :data:`SHARD_D_VECTORS` per shard of
    the worker unless the shards are streamed and at most ``driver_fanin`` (``dpipe.driver-fanin``; 0: a tree combined
    on the workers whatever the number of shards).
    """
    per_worker = shards_per_worker(len(shard_bytes), n_workers)
    largest = sorted(shard_bytes, reverse=True)[:per_worker]
    most_rows = sorted(shard_rows, reverse=True)[:per_worker]
    resident = (sum(largest) if persisted else 0) + row_bytes * sum(most_rows)
    copies = CSR_WORKING_COPIES if csr else WORKING_COPIES
    waiting = per_worker if persisted or len(shard_bytes) > driver_fanin else 0
    flight = 0 if persisted else FLIGHT_ROW_BYTES * sum(most_rows[:FLIGHT_SHARDS])
    working = copies * max(shard_bytes, default=0) + flight + (D_VECTORS + SHARD_D_VECTORS * waiting) * 8 * n_features
    layout = StoreLayout(sum(shard_rows), n_workers, sum(shard_bytes) / max(1, sum(shard_rows)), persisted, row_bytes, n_features, csr, driver_fanin)
    return MemoryNeed(resident=int(resident), working=int(working), layout=layout)


def _thresholds(w: WorkerMemory) -> str:
    named = [f"{name} at {value:.0%}" for name, value in (("pause", w.pause), ("restart", w.terminate)) if value < 1.0]
    return "dask's " + " and ".join(named) + " of the limit" if named else "the limit"


def short_workers(workers: dict[str, WorkerMemory], need: MemoryNeed) -> dict[str, tuple[WorkerMemory, int]]:
    """The workers whose limit is below what ``need`` asks of them, with the smallest limit each would need."""
    return {address: (w, need.minimum_limit(w)) for address, w in workers.items() if w.limit and w.limit < need.minimum_limit(w)}


def check_memory_limits(workers: dict[str, WorkerMemory], need: MemoryNeed, store: str, cache: str) -> None:
    """Raise :class:`ParameterError` when a worker's limit is below what ``need`` asks of it.

    The message gives the measured footprint, the store's share and the smallest
    limit to use.
    """
    short = short_workers(workers, need)
    if not short:
        return
    address, (w, minimum) = max(short.items(), key=lambda item: item[1][1])
    raise ParameterError(
        f"{store}: a worker memory limit of {w.limit / 1e6:.0f} MB is below the {minimum / 1e6:.0f} MB this store needs with cache={cache!r} "
        f"({len(short)} of {len(workers)} worker(s), e.g. {address}): the worker's own footprint is {w.footprint / 1e6:.0f} MB (measured), "
        f"it holds {need.resident / 1e6:.0f} MB between passes and {need.working / 1e6:.0f} MB more while a pass reads a shard, "
        f"under {_thresholds(w)}; raise the workers' memory limit ('memory_limit') to at least {minimum / 1e6:.0f} MB, "
        + ("or use more workers" if (rows := need.workable_shard_rows(w)) is None
           else f"or write shards of {rows:,} rows (ingest's 'shard_rows'), which need the least")
    )
