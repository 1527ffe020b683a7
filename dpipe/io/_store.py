"""Open a dataset store and read it shard by shard.

A store is a directory holding ``manifest.json`` and either a Zarr v3 group with
arrays ``X`` (n x d float32), ``y`` (n int8 in {-1, +1}) and optionally ``group``
(int16 codes) and ``weight`` (float32), or a Parquet dataset with one file per shard
(``part-00000.parquet`` ...) whose columns are ``X`` (fixed-size list of d float32),
``y``, and optionally ``group`` and ``weight``.

:func:`read_shard` is a pure function of (path, format, shard bounds): dask workers
call it to load their shards.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pyarrow.parquet as pq
import zarr

from ..exceptions import StoreError
from ._manifest import Manifest, read_manifest

__all__ = ["Shard", "Store", "open_store", "read_shard"]


@dataclasses.dataclass
class Shard:
    """Rows of one shard.

    Attributes
    ----------
    X : ndarray of shape (n, d), float32
    y : ndarray of shape (n,), int8 in {-1, +1}
    group : ndarray of shape (n,), int16, or None
    weight : ndarray of shape (n,), float32, or None
    index : int
        Shard number in the store.
    """

    X: np.ndarray
    y: np.ndarray
    group: np.ndarray | None = None
    weight: np.ndarray | None = None
    index: int = 0

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        return sum(a.nbytes for a in (self.X, self.y, self.group, self.weight) if a is not None)


def read_shard(path: str, format: str, index: int, start: int, stop: int, n_features: int) -> Shard:
    """Read shard ``index`` (rows ``start:stop``) of the store at ``path``."""
    where = f"{path}, shard {index} (rows {start}..{stop})"
    try:
        if format == "zarr":
            root = zarr.open_group(path, mode="r")
            X = np.asarray(root["X"][start:stop], dtype=np.float32)
            y = np.asarray(root["y"][start:stop], dtype=np.int8)
            group = np.asarray(root["group"][start:stop]) if "group" in root else None
            weight = np.asarray(root["weight"][start:stop]) if "weight" in root else None
        elif format == "parquet":
            table = pq.read_table(os.path.join(path, f"part-{index:05d}.parquet"))
            n = table.num_rows
            if n != stop - start:
                raise StoreError(f"{where}: file has {n} rows, manifest says {stop - start}")
            xcol = table.column("X").combine_chunks()
            X = np.asarray(xcol.values.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(n, n_features)
            y = table.column("y").to_numpy().astype(np.int8, copy=False)
            names = table.column_names
            group = table.column("group").to_numpy() if "group" in names else None
            weight = table.column("weight").to_numpy() if "weight" in names else None
        else:
            raise StoreError(f"{path}: unknown store format {format!r}")
    except StoreError:
        raise
    except Exception as exc:  # zarr / arrow errors: name the shard
        raise StoreError(f"{where}: cannot read ({type(exc).__name__}: {exc})") from exc
    if X.shape != (stop - start, n_features):
        raise StoreError(f"{where}: X has shape {X.shape}, manifest says ({stop - start}, {n_features})")
    return Shard(X=X, y=y, group=group, weight=weight, index=index)


class Store:
    """A dataset store opened for reading.

    Parameters
    ----------
    path : str
        Directory of the store.

    Attributes
    ----------
    path : str
    manifest : Manifest
    """

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.manifest: Manifest = read_manifest(self.path)
        m = self.manifest
        if m.format == "zarr":
            try:
                root = zarr.open_group(self.path, mode="r")
                shape = root["X"].shape
            except Exception as exc:
                raise StoreError(f"{self.path}: not a readable Zarr store ({type(exc).__name__}: {exc})") from exc
            if tuple(shape) != (m.n_rows, m.n_features):
                raise StoreError(f"{self.path}: X has shape {tuple(shape)}, manifest says ({m.n_rows}, {m.n_features})")
        elif m.format == "parquet":
            for i in range(m.n_shards):
                fn = os.path.join(self.path, f"part-{i:05d}.parquet")
                if not os.path.exists(fn):
                    raise StoreError(f"{self.path}: shard {i} is missing ({os.path.basename(fn)})")
        else:
            raise StoreError(f"{self.path}: unknown store format {m.format!r}")

    def __repr__(self) -> str:
        m = self.manifest
        return f"Store({self.path!r}, format={m.format!r}, rows={m.n_rows}, features={m.n_features}, shards={m.n_shards})"

    @property
    def n_shards(self) -> int:
        """Number of shards."""
        return self.manifest.n_shards

    @property
    def format(self) -> str:
        """Storage format, "zarr" or "parquet"."""
        return self.manifest.format

    def shard_args(self, index: int) -> tuple:
        """Arguments of :func:`read_shard` for shard ``index``."""
        start, stop = self.manifest.shard_bounds[index]
        return (self.path, self.format, index, start, stop, self.manifest.n_features)

    def read_shard(self, index: int) -> Shard:
        """Read one shard in this process."""
        return read_shard(*self.shard_args(index))

    def iter_shards(self):
        """Yield every shard in order, in this process."""
        for i in range(self.n_shards):
            yield self.read_shard(i)

    def read_all(self) -> Shard:
        """Read the whole store into memory (for small stores and tests)."""
        shards = list(self.iter_shards())
        cat = lambda key: None if getattr(shards[0], key, None) is None else np.concatenate([getattr(s, key) for s in shards])  # noqa: E731
        if not shards:
            return Shard(X=np.zeros((0, self.manifest.n_features), np.float32), y=np.zeros(0, np.int8))
        return Shard(X=np.concatenate([s.X for s in shards]), y=np.concatenate([s.y for s in shards]), group=cat("group"), weight=cat("weight"), index=-1)

    @property
    def nbytes(self) -> int:
        """Uncompressed bytes of all shards in memory."""
        m = self.manifest
        per_row = 4 * m.n_features + 1 + (2 if m.groups is not None else 0) + (4 if m.has_weight else 0)
        return m.n_rows * per_row


def open_store(path: str | os.PathLike) -> Store:
    """Open the dataset store at ``path`` (Zarr or Parquet, told by its manifest).

    Raises
    ------
    StoreError
        The path is not a store, or its arrays disagree with its manifest.
    """
    return Store(os.fspath(path))
