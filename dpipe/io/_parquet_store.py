"""The Parquet store format: one file per shard.

``part-00000.parquet`` ... hold a shard each, with columns ``X`` (fixed-size list of d
float32), ``y`` (int8), and optionally ``group`` (int16) and ``weight`` (float32). A CSR
store's part holds two list columns instead of ``X``, ``indices`` (list of int32) and
``values`` (list of float32): Arrow's list offsets and values are then the shard's CSR
arrays, read without a copy. A map column holds the same buffers (the files are the same
size) but read slower here: 200,000 rows of 50 values (2^20 features) took 92-122 ms as two
list columns and 132-154 ms as a map (medians of 7, three rounds).

Every part carries its shard index and row range in its key-value metadata
(``dpipe.shard``), so a part swapped with or copied over another is caught without hashing.
pyarrow is imported on first use: a worker reading a Zarr store never loads it (about 35 MB).
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from ..exceptions import StoreError
from ..reduce._block import csr_block
from ._store_format import ShardCheck, ShardColumns, ShardSink, StoreFormat

if TYPE_CHECKING:
    from ._manifest import Manifest

__all__ = ["ParquetFormat"]

_PART = re.compile(r"part-(\d{5,})\.parquet$")


def part_name(index: int) -> str:
    """The file name of shard ``index``."""
    return f"part-{index:05d}.parquet"


def _check_part_position(table: Any, index: int, start: int, stop: int, where: str) -> None:
    meta = table.schema.metadata or {}
    raw = meta.get(b"dpipe.shard")
    if raw is None:
        return  # written before parts carried their position
    try:
        pos = json.loads(raw)
        got = (int(pos["index"]), int(pos["start"]), int(pos["stop"]))
    except (ValueError, KeyError, TypeError):
        raise StoreError(f"{where}: part file's dpipe.shard metadata is unreadable ({raw[:80]!r})") from None
    if got != (index, start, stop):
        raise StoreError(f"{where}: part file holds shard {got[0]} (rows {got[1]}..{got[2]}): parts swapped, copied or moved")


def _read_csr(table: Any, n_features: int, where: str) -> Any:
    """A part's ``indices`` and ``values`` list columns as one CSR block (Arrow's buffers, no copy)."""
    ind = table.column("indices").combine_chunks()
    val = table.column("values").combine_chunks()
    offsets = ind.offsets.to_numpy()
    if not np.array_equal(offsets, val.offsets.to_numpy()):
        raise StoreError(f"{where}: the indices and values columns disagree on how many values each row holds")
    base, end = (int(offsets[0]), int(offsets[-1])) if offsets.size else (0, 0)  # a sliced list array's values extend beyond its rows
    return csr_block(val.values.to_numpy(zero_copy_only=False)[base:end], ind.values.to_numpy(zero_copy_only=False)[base:end], offsets - base, n_features)


class _ParquetSink(ShardSink):
    """Writes each shard as its own part file."""

    def __init__(self, tmp: str, n_features: int, layout: str) -> None:
        self.tmp = tmp
        self.n_features = n_features
        self.layout = layout
        self.parts: list[str] = []  # the part files written, in shard order

    def write(self, index: int, start: int, stop: int, X: Any, y: np.ndarray, group: np.ndarray | None, weight: np.ndarray | None) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self.layout == "csr":
            offsets = pa.array(np.asarray(X.indptr, dtype=np.int32))
            cols = {"indices": pa.ListArray.from_arrays(offsets, pa.array(np.asarray(X.indices, dtype=np.int32))),
                    "values": pa.ListArray.from_arrays(offsets, pa.array(X.data, type=pa.float32())), "y": pa.array(y, type=pa.int8())}
        else:
            flat = pa.array(X.reshape(-1), type=pa.float32())
            cols = {"X": pa.FixedSizeListArray.from_arrays(flat, self.n_features), "y": pa.array(y, type=pa.int8())}
        if group is not None:
            cols["group"] = pa.array(np.asarray(group, dtype=np.int16), type=pa.int16())
        if weight is not None:
            cols["weight"] = pa.array(np.asarray(weight, dtype=np.float32), type=pa.float32())
        position = json.dumps({"index": index, "start": start, "stop": stop})
        table = pa.table(cols).replace_schema_metadata({"dpipe.shard": position})
        pq.write_table(table, os.path.join(self.tmp, part_name(index)))
        self.parts.append(part_name(index))

    def finish(self, manifest: Manifest) -> None:
        """Nothing to complete: every part was written whole."""

    def check_written(self, n_rows: int, nnz: int, where: str) -> None:
        """Every part file written is still in the temporary, and not empty."""
        for i, name in enumerate(self.parts):
            try:
                size = os.stat(os.path.join(self.tmp, name)).st_size
            except FileNotFoundError:
                raise StoreError(f"{where}: shard {i} ({name}) is missing") from None
            if size == 0:
                raise StoreError(f"{where}: shard {i} ({name}) is empty")


class ParquetFormat(StoreFormat):
    """The Parquet store format (module docstring)."""

    name = "parquet"

    def check_open(self, path: str, manifest: Manifest, raw_manifest: bytes, recording: bool) -> None:
        """Every part of the manifest's shards is present and non-empty, and no part lies beyond them."""
        m = manifest
        for i in range(m.n_shards):
            fn = os.path.join(path, part_name(i))
            if not os.path.exists(fn):
                raise StoreError(f"{path}: shard {i} is missing ({os.path.basename(fn)})")
            if os.path.getsize(fn) == 0:
                raise StoreError(f"{path}: shard {i}: {os.path.basename(fn)} is empty")
        extra = sorted(f for f in os.listdir(path) if (mt := _PART.match(f)) and int(mt.group(1)) >= m.n_shards)
        if extra:
            raise StoreError(f"{path}: {extra[0]} is not in the manifest ({m.n_shards} shards): a shard was dropped from the manifest")

    def read(self, path: str, index: int, start: int, stop: int, n_features: int, check: ShardCheck | None, where: str,
             mmap: bool) -> ShardColumns:
        import pyarrow.parquet as pq

        fn = os.path.join(path, part_name(index))
        if check is not None and not os.path.exists(fn):
            raise StoreError(f"{where}: part file {os.path.basename(fn)} is missing")
        table = pq.read_table(fn)
        n = table.num_rows
        if check is not None:
            _check_part_position(table, index, start, stop, where)
        if n != stop - start:
            raise StoreError(f"{where}: file has {n} rows, manifest says {stop - start}")
        names = table.column_names
        if "indices" in names:
            X = _read_csr(table, n_features, where)
        else:
            xcol = table.column("X").combine_chunks()
            X = np.asarray(xcol.values.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(n, n_features)
        y = table.column("y").to_numpy().astype(np.int8, copy=False)
        group = table.column("group").to_numpy() if "group" in names else None
        weight = table.column("weight").to_numpy() if "weight" in names else None
        return X, y, group, weight

    def sink(self, tmp: str, n_features: int, shard_rows: int, layout: str, with_group: bool, with_weight: bool) -> ShardSink:
        return _ParquetSink(tmp, n_features, layout)
