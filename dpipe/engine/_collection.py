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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._config import get_setting
from ..io import Shard
from ..reduce._block import to_float32
from ._dataset import ShardedDataset, _n_rows
from ._memory import measure_workers
from ._pass_count import LOAD, PassCount, Traffic, pass_starting

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["CollectionDataset", "collection_blocks", "make_shard", "merge_vocabularies", "partition_vocabulary"]

log = logging.getLogger(__name__)


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
    X = to_float32(X.tocsr()) if hasattr(X, "tocsr") else np.ascontiguousarray(X, dtype=np.float32)
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


def collection_blocks(X: Any, y: Any, weight: Any = None, table: bool = False, rows: tuple[int, ...] | None = None) -> tuple[list, list, list]:
    """Delayed row blocks of ``X`` (dask array or dask DataFrame), with ``y`` and ``weight`` cut alike.

    The blocks follow ``X``'s row chunks (a DataFrame's partitions, whose lengths are computed
    first: one integer per partition to the driver, unless ``rows`` gives them; ``table``: the
    partitions stay pandas DataFrames, for :func:`make_shard` to encode); ``y`` and ``weight``
    are rechunked to them.
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

    def cut(v: Any, what: str) -> Any:
        if v is None:
            return None
        if hasattr(v, "to_dask_array"):
            from pandas.api.types import is_string_dtype

            if v.dtype != object and is_string_dtype(v.dtype):  # string labels: dask arrays hold them as objects
                v = v.astype(object)
            v = v.optimize().to_dask_array(lengths=True)
        elif not hasattr(v, "dask"):
            v = da.from_array(np.asarray(v), chunks=(rows,))
        if v.shape[0] != n_rows:
            raise ValueError(f"{what} has {v.shape[0]} rows; X has {n_rows}")
        return v.rechunk({0: rows})

    y, weight = cut(y, "y"), cut(weight, "sample_weight")
    ys = list(y.to_delayed().ravel())
    ws = [None] * len(xs) if weight is None else list(weight.to_delayed().ravel())
    return xs, ys, ws


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
    """

    def __init__(self, X: Any, y: Any, weight: Any, positive: Any, client: Client, name: str = "dask collection",
                 schema: list[dict[str, Any]] | None = None, rows: tuple[int, ...] | None = None) -> None:
        import dask

        self.store = None  # no store: shards built from blocks, always in memory (the methods that read the store stream)
        self.name = name
        self.group_names = None
        self.client = client
        self.driver_fanin = int(get_setting("driver-fanin"))
        xs, ys, ws = collection_blocks(X, y, weight, table=schema is not None, rows=rows)
        self._blocks = [dask.delayed(make_shard)(x, b, w, positive, i, schema) for i, (x, b, w) in enumerate(zip(xs, ys, ws))]
        if schema is not None:
            from ..io._tabular import TabularSchema

            self._n_features = TabularSchema.from_list(schema).n_features
        else:
            self._n_features = int(X.shape[1])
        self._weighted = weight is not None
        self.worker_memory = measure_workers(client, self._n_features)  # also loads the pass kernels on every worker
        self.workers = sorted(self.worker_memory)
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
