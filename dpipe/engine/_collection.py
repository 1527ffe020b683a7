"""Dask collections fitted where their partitions live, as ``xgboost.dask``'s ``DaskDMatrix`` does.

A dask array or DataFrame given to :class:`~dpipe.DPipeClassifier` on a distributed
client becomes a :class:`CollectionDataset`: each row block (a chunk, a partition)
is turned into a :class:`~dpipe.io.Shard` by a task on the cluster - float32 features,
labels in {-1, +1}, the weights - and kept there, exactly as a store's shards are kept
(``cache="memory"``), with the same shard hosts and passes. The driver receives the
blocks' row counts and each pass's reduced results - moments, gradients, the threshold's
range counts (:mod:`._threshold`), the rank exchange's O(hosts) sketches - never the
features; where the driver merges the ranking itself (``auc``'s Newton steps and the smoothed
objectives below ``dpipe.rank-exchange``'s row count) it receives a score per row. A worker
lost meanwhile loses its shards; the scheduler computes them again from the collection's
graph.

Under ``engine="auto"`` a collection small enough is not fitted there: :func:`collection_engine` measures its
features' bytes against the cluster's break-even (:func:`break_even_bytes`) and the driver's memory, and below both :func:`collection_shards`
builds the same shards on the workers in one ``dask.compute`` and brings them here, for this process's threads
(:class:`._local.LocalDataset`, whose passes merge in the same tree: the same model as the cluster's).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._config import get_setting
from ..exceptions import ClusterError
from ..io import Shard
from ..reduce._block import block_of_input
from ._dataset import ShardedDataset, _n_rows
from ._local import local_threads
from ._memory import _warm_up
from ._open import local_limit
from ._pass_count import LOAD, PassCount, Traffic, pass_starting

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["CollectionDataset", "collection_blocks", "collection_engine", "collection_shards", "make_shard", "merge_vocabularies",
           "partition_vocabulary", "break_even_bytes", "cluster_threads", "CLUSTER_PASS_SECONDS", "THREAD_PASS_BYTES_PER_SECOND"]

log = logging.getLogger(__name__)

#: the least seconds a data pass costs on a cluster, whatever the data: the round trips from the driver to the shard
#: hosts and back (measured: ``python bench/dask_frame.py --break-even``, auc's Newton passes on 4,000 rows in 2
#: partitions, 2 worker processes on this machine: 16.7-20.6 ms at load 4; a cluster across a network costs more)
CLUSTER_PASS_SECONDS = 0.015
#: bytes of float32 features one thread reads per second in a data pass, in this process (measured alike: auc on
#: 4x10^5 x 50 against 10^5 x 50 rows in memory, 2 threads, 1.31 GB/s at load 4)
THREAD_PASS_BYTES_PER_SECOND = 0.65e9


def cluster_threads(client: Client) -> tuple[int, int]:
    """The worker threads of ``client``'s cluster on this machine and on other machines (a worker's host is one of
    this machine's addresses, or not)."""
    import psutil

    ours = {a.address for addresses in psutil.net_if_addrs().values() for a in addresses} | {"localhost"}
    here = elsewhere = 0
    for worker in client.scheduler_info(n_workers=-1).get("workers", {}).values():
        n = int(worker.get("nthreads") or 1)
        if worker.get("host") in ours:
            here += n
        else:
            elsewhere += n
    return here, elsewhere


def break_even_bytes(threads: int, here: int, elsewhere: int, cores: int) -> tuple[float, str]:
    """The bytes of features above which a cluster's data pass is faster than one of this process's ``threads``, and why.

    A pass costs this process ``B / (r t)`` (``r``: :data:`THREAD_PASS_BYTES_PER_SECOND`, ``t``: ``threads``) and
    the cluster ``c + B / (r w)`` (``c``: :data:`CLUSTER_PASS_SECONDS`; ``w``: its threads ``elsewhere`` plus those
    ``here``, on this machine, up to its ``cores``, which this process's threads use already). The cluster is faster
    from ``B = c r / (1/t - 1/w)``; never (infinity) when ``w <= t``: one machine's cluster buys nothing its threads lack.
    """
    w = elsewhere + min(here, cores)
    if w <= threads:
        return float("inf"), (f"the cluster's break-even, which is none: its {here + elsewhere} worker thread(s), {here} of them on this "
                              f"machine, make a pass no faster than this process's {threads}")
    b = CLUSTER_PASS_SECONDS * THREAD_PASS_BYTES_PER_SECOND / (1 / threads - 1 / w)
    return b, (f"the cluster's break-even of {b / 1e6:.0f} MB: a pass costs it {1000 * CLUSTER_PASS_SECONDS:.0f} ms at least, and its {w} "
               f"thread(s) read {THREAD_PASS_BYTES_PER_SECOND / 1e9:g} GB/s each as this process's {threads} do")


def collection_engine(n_rows: int | None, n_features: int, client: Client, name: str = "dask collection") -> str:
    """Where ``engine="auto"`` fits a collection of ``n_rows`` x ``n_features``: ``"local"`` (this process) or ``"dask"``.

    ``"local"`` when its float32 features take at most ``dpipe.local-max-bytes`` bytes, or with that setting unset,
    below both :func:`break_even_bytes` (for ``client``'s cluster, :func:`cluster_threads`) and the memory rule of
    stores (:func:`._open.local_limit`). ``n_rows`` None (a dask array of unknown chunk sizes): ``"dask"``. The choice
    is logged (INFO) with its reason.
    """
    if n_rows is None:
        log.info("%s: rows unknown (chunk sizes not computed): fitted where its partitions live", name)
        return "dask"
    nbytes = 4 * n_rows * n_features
    setting = get_setting("local-max-bytes")
    if setting is not None:
        here = nbytes <= int(setting)
        reasons = [f"{'below' if here else 'above'} dpipe.local-max-bytes, {int(setting) / 1e6:.1f} MB"]
    else:
        threads = local_threads()
        fast, fast_why = break_even_bytes(threads, *cluster_threads(client), _cores())
        memory, memory_why = local_limit()
        here = nbytes <= min(fast, memory)
        bounds = ((fast, fast_why), (memory, f"the driver's memory bound of {memory / 1e6:.0f} MB: {memory_why}"))
        reasons = [f"below {why}" for _, why in bounds] if here else [f"above {why}" for b, why in bounds if nbytes > b]
    log.info("%s: %d rows x %d features (%.1f MB as float32): %s (%s)", name, n_rows, n_features, nbytes / 1e6,
             "fitted in this process" if here else "fitted where its partitions live", "; ".join(reasons))
    return "local" if here else "dask"


def _cores() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def make_shard(X: Any, y: Any, weight: Any, positive: Any, index: int, schema: list[dict[str, Any]] | None = None) -> Shard:
    """One block of a collection as a shard (runs on a worker): float32 features (CSR kept sparse), ``y == positive`` as +1;
    with ``schema`` (a table's columns and vocabularies), the pandas partition is encoded as ingest encodes a table."""
    if schema is not None:
        from ..io._frames import encode_table, table_arrays
        from ..io._tabular import TabularSchema

        where = f"X partition {index}"
        X = encode_table(TabularSchema.from_list(schema), *table_arrays(X, where), where=where)
    elif hasattr(X, "to_numpy"):  # a pandas partition of a numeric dask DataFrame
        X = X.to_numpy()
    X = block_of_input(X).array  # float32; a sparse block as CSR
    y = np.asarray(y).reshape(-1)
    w = None if weight is None else np.asarray(weight, dtype=np.float64).reshape(-1)
    if y.shape[0] != X.shape[0] or (w is not None and w.shape[0] != X.shape[0]):
        raise ValueError(f"block {index}: {X.shape[0]} rows of X but {y.shape[0]} labels" + ("" if w is None else f" and {w.shape[0]} weights"))
    return Shard(X=X, y=np.where(y == positive, 1, -1).astype(np.int8), weight=w, index=index)


def partition_vocabulary(part: Any, index: int) -> list[dict[str, Any]]:
    """A pandas partition's columns, their types and sorted vocabularies, as ingest's first pass scans them (on a worker)."""
    from ..io._frames import scan_table, table_arrays

    where = f"X partition {index}"
    return scan_table(*table_arrays(part, where), where).to_list()


def merge_vocabularies(parts: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The partitions' :func:`partition_vocabulary` as one: every column's categories joined and sorted, as one scan of all rows sorts them."""
    merged = [dict(c) for c in parts[0]]
    for part in parts[1:]:
        for column, other in zip(merged, part):
            if column.get("type") == "categorical":
                column["categories"] = sorted(set(column.get("categories") or ()) | set(other.get("categories") or ()))
    return merged


def collection_blocks(X: Any, y: Any, weight: Any = None, table: bool = False, rows: tuple[int, ...] | None = None,
                      label_rows: tuple[int, ...] | None = None) -> tuple[list, list, list]:
    """Delayed row blocks of ``X`` (dask array or dask DataFrame), with ``y`` and ``weight`` cut alike.

    The blocks follow ``X``'s row chunks (a DataFrame's partitions, whose lengths are computed
    first: one integer per partition to the driver, unless ``rows`` gives them; ``table``: the
    partitions stay pandas DataFrames, for :func:`make_shard` to encode); ``y`` and ``weight``
    are rechunked to them (a dask Series ``y``'s partition lengths computed first, unless
    ``label_rows`` gives them).
    """
    import dask.array as da

    if hasattr(X, "columns"):
        # optimized first: dask merges the partitions of a Parquet read cut to some columns, and lengths must count those
        X = X.optimize()
        if table:
            rows = rows if rows is not None else tuple(int(n) for n in X.map_partitions(len).compute())
            xs, n_rows = list(X.to_delayed()), sum(rows)
        else:
            X = X.to_dask_array(lengths=rows if rows is not None else True)
    if not table:
        if X.ndim != 2:
            raise ValueError(f"X has shape {X.shape}; expected (n, d)")
        X = X.rechunk({1: -1})  # whole rows in each block
        xs, rows, n_rows = list(X.to_delayed()[:, 0]), X.chunks[0], X.shape[0]

    def cut(v: Any, what: str, lengths: tuple[int, ...] | None = None) -> Any:
        if v is None:
            return None
        if hasattr(v, "to_dask_array"):
            from pandas.api.types import is_string_dtype

            if v.dtype != object and is_string_dtype(v.dtype):  # string labels: dask arrays hold them as objects
                v = v.astype(object)
            v = v.optimize()
            v = v.to_dask_array(lengths=lengths if lengths is not None and len(lengths) == v.npartitions else True)
        elif not hasattr(v, "dask"):
            v = da.from_array(np.asarray(v), chunks=(rows,))
        if v.shape[0] != n_rows:
            raise ValueError(f"{what} has {v.shape[0]} rows; X has {n_rows}")
        return v.rechunk({0: rows})

    y, weight = cut(y, "y", label_rows), cut(weight, "sample_weight")
    ys = list(y.to_delayed().ravel())
    ws = [None] * len(xs) if weight is None else list(weight.to_delayed().ravel())
    return xs, ys, ws


def _shard_tasks(X: Any, y: Any, weight: Any, positive: Any, schema: list[dict[str, Any]] | None, rows: tuple[int, ...] | None,
                 label_rows: tuple[int, ...] | None) -> list:
    """One delayed :func:`make_shard` per row block of the collection."""
    import dask

    xs, ys, ws = collection_blocks(X, y, weight, table=schema is not None, rows=rows, label_rows=label_rows)
    return [dask.delayed(make_shard)(x, b, w, positive, i, schema) for i, (x, b, w) in enumerate(zip(xs, ys, ws))]


def collection_shards(X: Any, y: Any, weight: Any, positive: Any, client: Client, schema: list[dict[str, Any]] | None = None,
                      rows: tuple[int, ...] | None = None, label_rows: tuple[int, ...] | None = None) -> list[Shard]:
    """The shards :class:`CollectionDataset` would keep on the workers, built there by ``client`` and brought to this
    process in one compute (no shuffle: one task per block). Parameters as :class:`CollectionDataset`'s."""
    return list(client.compute(_shard_tasks(X, y, weight, positive, schema, rows, label_rows), sync=True))


class CollectionDataset(ShardedDataset):
    """Shards built on the workers from a dask collection's blocks, with a store's passes.

    Parameters
    ----------
    X, y, weight : dask collections
        Features (a dask array or a dask DataFrame), labels and optional weights.
    positive : label
        The label that is +1.
    client : distributed.Client
        Connected client.
    name : str
        What messages call the dataset.
    schema : list of dict, optional
        A table's columns and vocabularies (:func:`merge_vocabularies`): each pandas partition is encoded with them.
    rows : tuple of int, optional
        A DataFrame's partition lengths, when known (else computed: one integer a partition).
    label_rows : tuple of int, optional
        A dask Series ``y``'s partition lengths, when known (else computed alike).
    """

    def __init__(self, X: Any, y: Any, weight: Any, positive: Any, client: Client, name: str = "dask collection",
                 schema: list[dict[str, Any]] | None = None, rows: tuple[int, ...] | None = None,
                 label_rows: tuple[int, ...] | None = None) -> None:
        self.store = None  # no store: shards built from blocks, always in memory (the methods that read the store stream)
        self.name = name
        self.group_names = None
        self.client = client
        self.driver_fanin = int(get_setting("driver-fanin"))
        self._blocks = _shard_tasks(X, y, weight, positive, schema, rows, label_rows)
        if schema is not None:
            from ..io._tabular import TabularSchema

            self._n_features = TabularSchema.from_list(schema).n_features
        else:
            self._n_features = int(X.shape[1])
        self._weighted = weight is not None
        # the pass kernels loaded on every worker; not their memory measured (measure_workers: a gc.collect() on each worker,
        # 0.3 s a fit measured on adult): the shards are always kept, there is no cache to choose
        try:
            self.workers = sorted(client.run(_warm_up, self._n_features))
        except (OSError, RuntimeError) as error:  # CommClosedError is an OSError: a worker died loading them
            raise ClusterError(f"{name}: loading dpipe's pass kernels on the workers failed: {type(error).__name__}: {error}") from error
        self.cache = "memory"
        self.minimum_memory_limit = 0
        self._hosts: list[tuple[list[int], Any, Any]] = []
        self._rehost = False
        self.passes = PassCount()
        self._tally = None
        t0 = time.perf_counter()
        pass_starting(LOAD)
        self._shards = self._load_shards()
        self.passes.add(LOAD, Traffic(tasks=len(self._shards)))
        counts = self._gather([client.submit(_n_rows, f, pure=False) for f in self._shards], "building the shards", self._shards)
        self._n_rows = int(sum(counts))
        self._hosts = self._start_hosts()
        self.load_seconds = time.perf_counter() - t0
        log.info("%s: %d blocks, %d rows x %d features, built on %d workers in %.2f s", self.name, len(self._shards), self._n_rows,
                 self._n_features, len(self.workers), self.load_seconds)

    @property
    def n_shards(self) -> int:
        """Number of shards (the collection's row blocks)."""
        return len(self._blocks)

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return self._n_features

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return self._n_rows

    @property
    def weighted(self) -> bool:
        """Whether the rows carry sample weights."""
        return self._weighted

    def _load_shards(self) -> list:
        """One task per block, building its shard where the block is."""
        return self.client.compute(self._blocks) if self._blocks else []

    def _spread_shards(self) -> None:
        """Nothing to do: the scheduler computes a lost shard again from the collection's graph, where it chooses
        (a store's dataset loads every shard afresh instead; these blocks' keys are the same on every compute)."""
