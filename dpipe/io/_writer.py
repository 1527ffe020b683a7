"""Write a sharded dataset store (Zarr v3 group or Parquet dataset) safely.

The store is written into a temporary sibling of its destination and renamed into
place by :meth:`ShardWriter.commit`; a failure at any point removes the temporary
directory, so a half-written store is never left behind. The writer holds the
destination's lock (:func:`dpipe._output.destination_lock`) throughout: one writer per
destination, and only a holder removes what a killed writer left.

Every shard's row count, class counts and a content hash of each array's decoded
values (:mod:`dpipe.io._checksum`) go into the manifest (schema 2). Zarr arrays are
written with ``write_empty_chunks`` so that every chunk has a file (a missing chunk
file is then damage, never "all zeros"); every Parquet part carries its shard index
and row range in its key-value metadata (``dpipe.shard``), so a part swapped with or
copied over another is caught without hashing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import zarr
from zarr.codecs import ZstdCodec

from .._config import get_setting
from .._output import check_not_inside, destination_lock, is_dpipe_store
from ..exceptions import DPipeError, ParameterError, StoreError
from ..reduce._block import LAYOUTS, block_nnz, concat_rows, is_csr, to_float32
from ._checksum import CHECKSUM_ALGORITHM, shard_digests
from ._ingest_options import STORE_FORMATS
from ._manifest import SCHEMA_VERSION, Manifest, ShardRecord, stored_feature_names, write_manifest

if TYPE_CHECKING:
    from zarr.core.array_spec import ArrayConfigParams

__all__ = ["ShardWriter", "STORE_FORMATS", "STORE_CODECS", "choose_codec", "default_shard_rows", "shard_rows_for", "prepare_destination",
           "store_lock"]

#: values per Zarr chunk of a CSR store's ``X/indices`` and ``X/data``: 4 MB of each, so that reading a shard decodes at most two
#: chunks beyond its own values (a streamed worker's memory; a 32 MB chunk restarted workers capped at 500 MB)
CSR_CHUNK_VALUES = 1 << 20


def default_shard_rows(n_features: int, target_bytes: int, nnz_per_row: float | None = None) -> int:
    """Rows per shard so that a shard of float32 features is about ``target_bytes``: ``4 d`` bytes a
    dense row, ``8 nnz + 8`` a CSR row (``nnz_per_row``: its mean stored values)."""
    per_row = 8 * nnz_per_row + 8 if nnz_per_row is not None else 4 * n_features
    return max(1024, int(target_bytes // max(1, per_row)))


#: Splitting a small store for ``dpipe.min-shards`` never makes shards below this many rows.
MIN_SPREAD_ROWS = 8192


def shard_rows_for(n_rows: int, n_features: int, balance: bool = True, nnz_per_row: float | None = None) -> int:
    """Default rows per shard for a store of ``n_rows``: about ``dpipe.shard-bytes`` per
    shard, and at least ``dpipe.min-shards`` shards when every shard keeps at least
    8192 rows, so that a small store still gives every worker of a small cluster work.
    With ``balance`` (``n_rows`` is exact) the shards are of (nearly) equal size: the last
    one is shorter by fewer rows than there are shards. A CSR store (``nnz_per_row``) is
    sized by the bytes of its stored values.
    """
    by_bytes = default_shard_rows(n_features, int(get_setting("shard-bytes")), nnz_per_row)
    spread = max(MIN_SPREAD_ROWS, -(-n_rows // max(1, int(get_setting("min-shards")))))
    rows = max(1, min(by_bytes, spread, n_rows))
    # as many shards as that takes, of equal size: 2e6 rows at 133,333 a shard are 16 shards of
    # 125,000, not 15 full ones and a last shard of 5 rows
    return max(1, -(-n_rows // -(-n_rows // rows))) if balance and n_rows > 0 else rows


#: ``store-codec: auto`` compresses the features with zstd when it at least shrinks them by this factor
CODEC_MIN_RATIO = 2.0
#: bytes of the first shard's features that ``auto`` compresses to decide
CODEC_SAMPLE_BYTES = 4 << 20
STORE_CODECS = ("auto", "zstd", "none")


def choose_codec(X: np.ndarray, setting: str) -> str:
    """The zarr codec of a store's features: ``"zstd"`` or ``"none"`` (``dpipe.store-codec``).

    ``auto`` compresses up to 4 MB of the first shard with zstd (level 0) and keeps zstd when it
    shrinks them at least 2x. Measured here (one thread, reading a shard from the page cache):
    kdd99's one-hot and count columns shrink 85x and read at 1.9 GB/s with zstd against 0.9 GB/s
    raw; 10^6 x 120 Gaussian features shrink only 1.3x and read at 0.40 GB/s with zstd against
    1.23 GB/s raw (decompression, not the disk, bounds a streamed pass).
    """
    if setting not in STORE_CODECS:
        raise ParameterError(f"The dpipe.store-codec setting must be one of {STORE_CODECS}. Got {setting!r} instead.")
    if setting != "auto":
        return setting
    rows = max(1, CODEC_SAMPLE_BYTES // max(1, 4 * X.shape[1]))
    sample = np.ascontiguousarray(X[:rows], dtype=np.float32).tobytes()
    if not sample:
        return "zstd"
    from numcodecs import Zstd

    return "zstd" if len(sample) >= CODEC_MIN_RATIO * len(Zstd(level=0).encode(sample)) else "none"


def store_lock(dest: str | os.PathLike) -> contextlib.AbstractContextManager[str]:
    """:func:`dpipe._output.destination_lock` on the store ``dest`` (a missing parent directory is a :class:`StoreError`;
    a ``dest`` inside a dpipe store or a dpipe model registry is refused before anything is created).

    Hold it from :func:`prepare_destination` to :meth:`ShardWriter.commit`; a :class:`ShardWriter`
    created inside re-enters it.
    """
    dest = os.path.abspath(os.fspath(dest))
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        raise StoreError(f"{dest}: parent directory {parent} does not exist")
    check_not_inside(dest, "store")  # before the lock file is created next to dest
    return destination_lock(dest, "store")


def prepare_destination(dest: str, overwrite: bool) -> None:
    """Refuse an existing destination unless ``overwrite`` and it is a dpipe store; check the parent exists and
    that ``dest`` lies neither inside a dpipe store nor inside a dpipe model registry.

    Takes :func:`dpipe._output.destination_lock` on ``dest`` for a moment unless this thread
    holds it (a writer holds it from this check to its final rename), which removes the
    ``.DEST.tmp-*`` / ``.DEST.old-*`` siblings a killed run left behind and fails at once
    when another process is writing ``dest``.
    """
    dest = os.path.abspath(dest)
    with store_lock(dest):  # the parent exists, dest is inside no store and no registry
        if os.path.lexists(dest):
            if not overwrite:
                raise StoreError(f"{dest}: destination exists; pass overwrite=True to replace it")
            if not is_dpipe_store(dest):
                raise StoreError(f"{dest}: exists and is not a dpipe store (no dpipe manifest.json); refusing to replace it, even with overwrite=True")


class ShardWriter:
    """Accumulate rows and write them as fixed-size shards.

    Parameters
    ----------
    dest : str
        Path of the store to create.
    n_features : int
        Number of feature columns.
    feature_names : list of str
        Names of the feature columns.
    shard_rows : int
        Rows per shard (the last shard may be shorter).
    format : {"zarr", "parquet"}
        Storage format.
    with_group, with_weight : bool
        Whether ``group`` (int16 codes) and ``weight`` (float32) columns are written.
    overwrite : bool
        Replace an existing ``dest`` on commit.
    labelled : bool
        False: an unlabelled store (every ``y`` must be 0; the manifest says ``labelled: false``).
    layout : {"dense", "csr"}
        How the features are stored (:mod:`dpipe.io._store`); rows of either layout are
        accepted and converted.

    Notes
    -----
    Use as a context manager; leaving the block with an exception discards everything.
    The writer holds :func:`dpipe._output.destination_lock` on ``dest`` from its creation
    (before :func:`prepare_destination`) until :meth:`commit` has renamed the store into
    place or :meth:`abort` has removed the temporary: a second writer of ``dest`` fails at
    once. An OS error while writing (a full disk, a file-size limit) is a
    :class:`~dpipe.exceptions.StoreError` naming ``dest``, the temporary removed.
    """

    def __init__(
        self,
        dest: str,
        n_features: int,
        feature_names: list[str],
        shard_rows: int,
        format: str = "zarr",
        with_group: bool = False,
        with_weight: bool = False,
        overwrite: bool = False,
        labelled: bool = True,
        layout: str = "dense",
    ) -> None:
        if layout not in LAYOUTS:
            raise ParameterError(f"The 'layout' parameter of ShardWriter must be one of {LAYOUTS}. Got {layout!r} instead.")
        if format not in STORE_FORMATS:
            raise ParameterError(f"The 'format' parameter of ShardWriter must be one of {STORE_FORMATS}. Got {format!r} instead.")
        if shard_rows < 1:
            raise ParameterError(f"The 'shard_rows' parameter of ShardWriter must be an int in the range [1, inf]. Got {shard_rows!r} instead.")
        self.dest = os.path.abspath(dest)
        self.tmp: str | None = None
        self._lock = contextlib.ExitStack()
        self._done = False
        try:
            self._lock.enter_context(store_lock(self.dest))  # free when the caller holds it already
            prepare_destination(self.dest, overwrite)
            self.overwrite = overwrite
            self.format = cast(Literal["zarr", "parquet"], format)  # checked against STORE_FORMATS above
            self.n_features = int(n_features)
            self.feature_names = list(feature_names)
            self.shard_rows = int(shard_rows)
            self.with_group = with_group
            self.with_weight = with_weight
            self.labelled = bool(labelled)
            self.layout = cast(Literal["dense", "csr"], layout)  # checked against LAYOUTS above
            parent = os.path.dirname(self.dest)
            with self._writing():
                self.tmp = self._tmp = tempfile.mkdtemp(  # _tmp: the same path, typed str for the writing methods
                    prefix="." + os.path.basename(self.dest) + ".tmp-", dir=parent)
                self._start(format, with_group, with_weight)
        except BaseException:  # an interruption before the ``with`` block: nothing left behind
            self.abort()
            raise

    def _start(self, format: str, with_group: bool, with_weight: bool) -> None:
        self._buf: list[tuple[np.ndarray, ...]] = []
        self._buf_rows = 0
        self.n_rows = 0
        self.shard_bounds: list[list[int]] = []
        self.class_counts: list[list[int]] = []
        self.group_counts: list[np.ndarray] = []
        self.shard_records: list[ShardRecord] = []
        self.shard_nnz: list[int] = []
        self.nnz = 0
        if format == "zarr":
            root = zarr.open_group(self._tmp, mode="w")
            chunks = (self.shard_rows, max(1, self.n_features))
            cfg: ArrayConfigParams = {"write_empty_chunks": True}  # every chunk gets a file: a missing one is damage
            self._x: zarr.Array | None = None  # created at the first shard, whose features choose the codec (:func:`choose_codec`)
            self._x_args: dict[str, Any] = dict(name="X", shape=(0, self.n_features), chunks=chunks, dtype="float32", config=cfg)
            self._y = root.create_array("y", shape=(0,), chunks=(self.shard_rows,), dtype="int8", config=cfg)
            self._g = root.create_array("group", shape=(0,), chunks=(self.shard_rows,), dtype="int16", config=cfg) if with_group else None
            self._w = root.create_array("weight", shape=(0,), chunks=(self.shard_rows,), dtype="float32", config=cfg) if with_weight else None
            self._root = root
            if self.layout == "csr":
                self._create_csr(root, cfg)

    def _create_csr(self, root: Any, cfg: ArrayConfigParams) -> None:
        """The ``X`` group of a CSR store (AnnData's csr_matrix encoding); values and indices zstd-compressed unless
        ``dpipe.store-codec`` is ``none``."""
        self.codec = "none" if str(get_setting("store-codec")) == "none" else "zstd"
        compressors = [ZstdCodec(level=0)] if self.codec == "zstd" else None
        x = root.create_group("X")
        x.attrs.update({"encoding-type": "csr_matrix", "encoding-version": "0.1.0", "shape": [0, self.n_features]})
        chunk = min(CSR_CHUNK_VALUES, max(1 << 16, int(get_setting("shard-bytes")) // 8))
        self._indptr = x.create_array("indptr", shape=(1,), chunks=(self.shard_rows,), dtype="int64", config=cfg, compressors=compressors)
        self._indptr[0:1] = np.zeros(1, np.int64)
        idx = "int32" if self.n_features < 2**31 else "int64"
        self._indices = x.create_array("indices", shape=(0,), chunks=(chunk,), dtype=idx, config=cfg, compressors=compressors)
        self._data = x.create_array("data", shape=(0,), chunks=(chunk,), dtype="float32", config=cfg, compressors=compressors)
        self._xgroup = x

    # -- context manager ---------------------------------------------------------
    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None or not self._done:
            self.abort()

    def abort(self) -> None:
        """Remove the temporary directory and release ``dest``; nothing is left at ``dest``."""
        try:
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)
                if os.path.lexists(self.tmp):  # a file was still being added: once more
                    shutil.rmtree(self.tmp, ignore_errors=True)
        finally:
            self._done = True
            self._unlock()

    def _unlock(self) -> None:
        self._lock.close()  # idempotent

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """An OS error while writing (a full disk, a file-size limit, an I/O error): the temporary removed, one line naming ``dest``."""
        try:
            yield
        except OSError as exc:
            if isinstance(exc, DPipeError):
                raise
            self.abort()
            raise StoreError(f"{self.dest}: cannot write the store: {exc.strerror or exc or type(exc).__name__}") from exc

    def _create_x(self, X: np.ndarray) -> zarr.Array:
        """Create the zarr ``X`` array with the codec the first non-empty shard's features choose (at commit: no rows)."""
        if self._x is not None:
            return self._x
        self.codec = choose_codec(X, str(get_setting("store-codec")))
        self._x = self._root.create_array(**self._x_args, compressors=[ZstdCodec(level=0)] if self.codec == "zstd" else None)
        return self._x

    # -- writing -----------------------------------------------------------------
    def _as_layout(self, X: Any) -> Any:
        """Rows in this store's layout, float32."""
        if self.layout == "csr":
            if not is_csr(X):
                from scipy.sparse import csr_array

                X = csr_array(np.asarray(X, dtype=np.float32))
            return to_float32(X)
        if is_csr(X):
            X = X.toarray()
        return np.ascontiguousarray(X, dtype=np.float32)

    def append(self, X: Any, y: np.ndarray, group: np.ndarray | None = None, weight: np.ndarray | None = None) -> None:
        """Add rows (dense or CSR); full shards are written as soon as they are complete."""
        X = self._as_layout(X)
        y = np.asarray(y, dtype=np.int8)
        if len(X.shape) != 2 or X.shape[1] != self.n_features or X.shape[0] != y.shape[0]:
            raise StoreError(f"{self.dest}: rows of shape {X.shape} / labels {y.shape} do not match {self.n_features} features")
        parts: tuple[np.ndarray, ...] = (X, y)
        if self.with_group:
            parts += (np.asarray(group, dtype=np.int16),)
        if self.with_weight:
            parts += (np.asarray(weight, dtype=np.float32),)
        self._buf.append(parts)
        self._buf_rows += X.shape[0]
        while self._buf_rows >= self.shard_rows:
            self._flush(self.shard_rows)

    def _take(self, rows: int) -> list[Any]:
        cols = [concat_rows([b[0] for b in self._buf], self.n_features)]
        cols += [np.concatenate([b[k] for b in self._buf]) for k in range(1, len(self._buf[0]))]
        head = [c[:rows] for c in cols]
        tail = tuple(c[rows:] for c in cols)
        self._buf = [tail] if tail[0].shape[0] else []
        self._buf_rows -= rows
        return head

    def _flush(self, rows: int) -> None:
        cols = self._take(rows)
        self.write_shard(*cols)

    def write_shard(self, X: Any, y: np.ndarray, group: np.ndarray | None = None, weight: np.ndarray | None = None) -> None:
        """Write exactly one shard (it may be empty or of any size; dense or CSR rows)."""
        with self._writing():
            self._write_shard(X, y, group, weight)

    def _write_shard(self, X: Any, y: np.ndarray, group: np.ndarray | None, weight: np.ndarray | None) -> None:
        X = self._as_layout(X)
        y = np.asarray(y, dtype=np.int8)
        if X.shape[0] != y.shape[0] or X.shape[1] != self.n_features:
            raise StoreError(f"{self.dest}: rows of shape {X.shape} / labels {y.shape} do not match {self.n_features} features")
        bad = ~np.isin(y, (-1, 1)) if self.labelled else y != 0
        if bad.any():
            row = self.n_rows + int(np.argmax(bad))
            raise StoreError(f"{self.dest}: label {int(y[bad][0])} at row {row} is not -1 or +1" if self.labelled
                             else f"{self.dest}: label {int(y[bad][0])} at row {row} in an unlabelled store (expected 0)")
        start, stop = self.n_rows, self.n_rows + X.shape[0]
        index = len(self.shard_bounds)
        group = np.asarray(group, dtype=np.int16) if self.with_group else None
        weight = np.asarray(weight, dtype=np.float32) if self.with_weight else None
        digests = shard_digests(index, start, stop, X, y, group, weight)
        nnz = block_nnz(X)
        if self.format == "zarr":
            if self.layout == "csr":
                self._write_csr_zarr(X, start, stop)
            elif self._x is not None or stop > start:  # the first rows choose the codec; an empty shard before them changes nothing
                x = self._create_x(X)
                x.resize((stop, self.n_features))
                if stop > start:
                    x[start:stop] = X
            self._y.resize((stop,))
            if stop > start:
                self._y[start:stop] = y
            if self._g is not None:
                assert group is not None  # with_group: the column was created and every shard has one
                self._g.resize((stop,))
                if stop > start:
                    self._g[start:stop] = group
            if self._w is not None:
                assert weight is not None  # with_weight, likewise
                self._w.resize((stop,))
                if stop > start:
                    self._w[start:stop] = weight
        else:
            if self.layout == "csr":
                offsets = pa.array(np.asarray(X.indptr, dtype=np.int32))
                cols = {"indices": pa.ListArray.from_arrays(offsets, pa.array(np.asarray(X.indices, dtype=np.int32))),
                        "values": pa.ListArray.from_arrays(offsets, pa.array(X.data, type=pa.float32())), "y": pa.array(y, type=pa.int8())}
            else:
                flat = pa.array(X.reshape(-1), type=pa.float32())
                cols = {"X": pa.FixedSizeListArray.from_arrays(flat, self.n_features), "y": pa.array(y, type=pa.int8())}
            if self.with_group:
                cols["group"] = pa.array(np.asarray(group, dtype=np.int16), type=pa.int16())
            if self.with_weight:
                cols["weight"] = pa.array(np.asarray(weight, dtype=np.float32), type=pa.float32())
            position = json.dumps({"index": index, "start": start, "stop": stop})
            table = pa.table(cols).replace_schema_metadata({"dpipe.shard": position})
            pq.write_table(table, os.path.join(self._tmp, f"part-{index:05d}.parquet"))
        counts = [int((y == -1).sum()), int((y == 1).sum())]
        self.shard_bounds.append([start, stop])
        self.class_counts.append(counts)
        self.shard_records.append(ShardRecord(rows=stop - start, class_counts=list(counts), digests=digests))
        self.shard_nnz.append(nnz)
        self.nnz += nnz
        if self.with_group:
            self.group_counts.append(np.bincount(np.asarray(group, dtype=np.int64), minlength=0))
        self.n_rows = stop

    def _write_csr_zarr(self, X: Any, start: int, stop: int) -> None:
        """Append one shard's rows to the ``X`` group: offsets into the whole store, then its indices and values."""
        a, b = self.nnz, self.nnz + X.nnz
        self._indptr.resize((stop + 1,))
        if stop > start:
            self._indptr[start + 1 : stop + 1] = a + np.asarray(X.indptr[1:], dtype=np.int64)
        if b > a:
            self._indices.resize((b,))
            self._data.resize((b,))
            self._indices[a:b] = X.indices
            self._data[a:b] = X.data

    def commit(self, **manifest_fields: Any) -> Manifest:
        """Write the last partial shard and the manifest, then rename into place.

        Keyword arguments become manifest fields (``source``, ``encoding``,
        ``groups``, ``group_column``).
        """
        with self._writing():
            return self._commit(manifest_fields)

    def _commit(self, manifest_fields: dict[str, Any]) -> Manifest:
        from .. import __version__

        if self._buf_rows:
            self._flush(self._buf_rows)
        if self.format == "zarr" and self.layout == "dense":
            self._create_x(np.zeros((0, self.n_features), dtype=np.float32))
        if self.format == "zarr" and self.layout == "csr":
            self._xgroup.attrs["shape"] = [self.n_rows, self.n_features]
        groups = manifest_fields.pop("groups", None)
        group_counts = None
        if self.with_group:
            k = len(groups) if groups is not None else max((len(c) for c in self.group_counts), default=0)
            group_counts = [np.pad(c, (0, max(0, k - len(c))))[:k].astype(int).tolist() for c in self.group_counts]
        manifest = Manifest(
            format=self.format,
            n_rows=self.n_rows,
            n_features=self.n_features,
            feature_names=self.feature_names,
            shard_bounds=self.shard_bounds,
            class_counts=self.class_counts,
            labelled=self.labelled,
            groups=groups,
            group_counts=group_counts,
            has_weight=self.with_weight,
            created=Manifest.now(),
            dpipe_version=__version__,
            schema_version=SCHEMA_VERSION,
            shards=self.shard_records,
            checksum_algorithm=CHECKSUM_ALGORITHM,
            layout=self.layout,
            shard_nnz=self.shard_nnz if self.layout == "csr" else None,
            feature_names_stored=stored_feature_names(self.feature_names),
            **manifest_fields,
        )
        if self.format == "zarr":
            self._root.attrs["dpipe_manifest"] = manifest.to_dict()
        write_manifest(self._tmp, manifest)
        from .._modes import set_default_mode

        set_default_mode(self._tmp)  # mkdtemp / mkstemp made it 0700 / 0600: give it the user's umask
        self._replace_destination()
        return manifest

    def _replace_destination(self) -> None:
        """Rename the temporary into place; an existing ``dest`` must be a dpipe store (renamed to
        ``.DEST.old-*`` and removed; a symlink is removed, never what it points to)."""
        old = None
        try:
            if os.path.lexists(self.dest):
                if not self.overwrite:
                    raise StoreError(f"{self.dest}: destination appeared while writing; pass overwrite=True to replace it")
                if not is_dpipe_store(self.dest):
                    raise StoreError(f"{self.dest}: exists and is not a dpipe store (no dpipe manifest.json); refusing to replace it, even with overwrite=True")
                old = os.path.join(os.path.dirname(self.dest), "." + os.path.basename(self.dest) + ".old-" + self._tmp[-8:])
                os.rename(self.dest, old)
            os.rename(self._tmp, self.dest)
            self._done = True
        except BaseException:
            if old is not None and not os.path.lexists(self.dest) and os.path.lexists(old):
                os.rename(old, self.dest)  # put the previous store back
                old = None
            self.abort()
            raise
        finally:
            if old is not None:
                if os.path.islink(old) or not os.path.isdir(old):
                    os.unlink(old)
                else:
                    shutil.rmtree(old, ignore_errors=True)
            self._unlock()


