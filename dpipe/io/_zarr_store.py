"""The Zarr v3 store format: a group of arrays chunked by shard.

Arrays: ``X`` (n x d float32, one chunk a shard, one chunk wide), ``y`` (n int8), and
optionally ``group`` (int16 codes) and ``weight`` (float32). A CSR store's ``X`` is a group in
AnnData's ``csr_matrix`` encoding: ``X/indptr`` (n + 1 int64 row offsets into the whole store,
chunked with the shards), ``X/indices`` (int32 column indices) and ``X/data`` (float32
values), chunked by :data:`CSR_CHUNK_VALUES`, the group's attributes holding
``encoding-type: csr_matrix`` and ``shape``. The group's attributes keep a copy of the
manifest (:data:`ZARR_MANIFEST_KEY`), compared with ``manifest.json`` at open.

Every array is written with ``write_empty_chunks``, so a missing chunk file is damage and
never "all zeros"; every shard read checks that its chunk files exist and are not empty.
"""

from __future__ import annotations

import functools
import json
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

from .._config import get_setting
from ..exceptions import ParameterError, StoreError
from ..reduce._block import csr_block
from ._manifest import MANIFEST_NAME, Manifest, canonical_json, write_json_atomic
from ._store_format import ShardCheck, ShardColumns, ShardSink, StoreFormat

if TYPE_CHECKING:
    from zarr.core.array_spec import ArrayConfigParams


__all__ = ["ZarrFormat", "ZARR_MANIFEST_KEY", "STORE_CODECS", "choose_codec"]

#: key of the manifest in the Zarr group's attributes
ZARR_MANIFEST_KEY = "dpipe_manifest"

#: the arrays of a CSR store's ``X`` group (AnnData's csr_matrix encoding)
_CSR_ARRAYS = ("indptr", "indices", "data")

#: values per Zarr chunk of a CSR store's ``X/indices`` and ``X/data``: 4 MB of each, so that reading a shard decodes at most two
#: chunks beyond its own values (a streamed worker's memory; a 32 MB chunk restarted workers capped at 500 MB)
CSR_CHUNK_VALUES = 1 << 20

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


# -- reading ---------------------------------------------------------------------------------------------------------------


def _check_chunk_files(path: str, root: Any, name: str, start: int, stop: int, where: str) -> None:
    """Every chunk file of array ``name`` holding rows ``start:stop`` exists and is not empty."""
    arr = root[name]
    if stop <= start or any(s == 0 for s in arr.shape):
        return
    rows = arr.chunks[0]
    tail = (0,) * (len(arr.shape) - 1)  # X is one chunk wide
    for c in range(start // rows, (stop - 1) // rows + 1):
        key = arr.metadata.encode_chunk_key((c, *tail))
        fn = os.path.join(path, name, *key.split("/"))
        try:
            size = os.stat(fn).st_size
        except FileNotFoundError:
            raise StoreError(f"{where}: chunk file {name}/{key} (rows {c * rows}..{min((c + 1) * rows, arr.shape[0])}) is missing") from None
        if size == 0:
            raise StoreError(f"{where}: chunk file {name}/{key} is empty")


@functools.lru_cache(maxsize=16)
def _open_group_cached(path: str, identity: tuple[int, int, int]) -> dict[str, Any]:
    root = zarr.open_group(path, mode="r")
    out = {name: root[name] for name in ("y", "group", "weight") if name in root}
    if "X" in root:
        x = root["X"]
        if isinstance(x, zarr.Group):  # a CSR store: its three arrays, keyed by their paths
            out.update({f"X/{k}": x[k] for k in _CSR_ARRAYS if k in x})
        else:
            out["X"] = x
    return out


def _open_group(path: str) -> dict[str, Any]:
    """The store's zarr arrays by name, opened once per process while its ``zarr.json`` is the same file.

    Opening a group and its arrays costs about 5 ms of metadata reads; a streamed pass
    reads every shard on every pass. A store replaced by a writer (a rename: a new
    inode) is opened again.
    """
    st = os.stat(os.path.join(path, "zarr.json"))
    return _open_group_cached(path, (st.st_ino, st.st_mtime_ns, st.st_size))


def _plain_codec(arr: Any) -> str | None:
    """``"raw"`` (codecs: ``bytes``, little-endian: a chunk file is its C-order values) or ``"zstd"`` (``bytes`` then
    ``zstd``: a chunk file is one zstd frame of them) when dpipe can decode ``arr``'s chunk files itself, else None."""
    codecs = arr.metadata.codecs
    if not codecs or type(codecs[0]).__name__ != "BytesCodec" or str(getattr(codecs[0].endian, "value", codecs[0].endian)) not in ("little", "None"):
        return None
    if arr.dtype.byteorder not in ("<", "=", "|"):
        return None
    return "raw" if len(codecs) == 1 else "zstd" if len(codecs) == 2 and type(codecs[1]).__name__ == "ZstdCodec" else None


def _shard_chunk(path: str, arr: Any, start: int, stop: int) -> tuple[str, str] | None:
    """``(file, codec)`` of the one chunk of a 2-d array that holds exactly rows ``start:stop``, else None.

    ``codec`` is :func:`_plain_codec`'s; zarr v3 writes a chunk at the array's edge at full chunk
    size. Other codecs: None (zarr reads it).
    """
    kind = _plain_codec(arr)
    rows, width = arr.chunks
    one_chunk = start % rows == 0 and (stop - start == rows or (stop == arr.shape[0] and stop - start < rows))
    if kind is None or stop <= start or width != arr.shape[1] or not one_chunk:
        return None
    fn = os.path.join(path, "X", *arr.metadata.encode_chunk_key((start // rows, 0)).split("/"))
    try:
        size = os.stat(fn).st_size
    except FileNotFoundError:
        return None
    return (fn, kind) if kind == "zstd" or size == rows * width * 4 else None


def _read_x(path: str, arr: Any, start: int, stop: int, mmap: bool) -> np.ndarray:
    """Rows ``start:stop`` of ``X``: straight from the shard's chunk file when it is one raw or zstd chunk.

    Zarr's own read path costs 45-130 ms for a 47 MB kdd99 chunk whose zstd frame decodes in
    10 ms (numcodecs, which zarr's codec calls too, and which releases the GIL: the local
    engine's threads then load shards in parallel); a raw chunk is memory-mapped (``mmap``)
    or copied once.
    """
    chunk = _shard_chunk(path, arr, start, stop)
    if chunk is None:
        return np.asarray(arr[start:stop], dtype=np.float32)
    fn, kind = chunk
    shape = tuple(arr.chunks)
    if kind == "raw":
        X = np.memmap(fn, dtype="<f4", mode="r", shape=shape)[: stop - start]
        return X if mmap else np.array(X)
    out = np.empty(shape, dtype="<f4")
    _decode_chunk(fn, kind, out)
    return out[: stop - start]


def _read_csr(path: str, root: dict[str, Any], start: int, stop: int, n_features: int, check: ShardCheck | None, where: str) -> Any:
    """Rows ``start:stop`` of the ``X`` group of a CSR store."""
    ip = np.asarray(root["X/indptr"][start : stop + 1], dtype=np.int64)
    if ip.size != stop - start + 1:
        raise StoreError(f"{where}: X/indptr has {ip.size} offsets for the shard's {stop - start} rows (expected {stop - start + 1})")
    a, b = int(ip[0]), int(ip[-1])
    if check is not None and check.chunk_files:
        _check_chunk_files(path, root, "X/indptr", start, stop + 1, where)
        _check_chunk_files(path, root, "X/indices", a, b, where)
        _check_chunk_files(path, root, "X/data", a, b, where)
    if b < a:
        raise StoreError(f"{where}: X's row offsets (indptr) are not increasing")
    return csr_block(_read_range(path, "X/data", root["X/data"], a, b), _read_range(path, "X/indices", root["X/indices"], a, b), ip - a, n_features)


def _read_range(path: str, name: str, arr: Any, start: int, stop: int) -> np.ndarray:
    """``arr[start:stop]`` of the 1-d array ``name``, decoded chunk by chunk into one array.

    Zarr decodes the chunks of one read concurrently, each beside its compressed bytes: a
    CSR shard's 28 MB of values, 7 chunks, peaked at 63 MB. One chunk at a time peaks at the
    values and one chunk (a streamed worker's memory, :mod:`dpipe.engine._memory`); a raw or
    zstd chunk is decoded straight from its file as :func:`_read_x` does. Alone, a 58 MB shard
    then reads in 64 ms against zarr's 51 (medians, a shared machine); in a streamed pass the
    two workers keep both cores busy anyway (10^6 x 2^20 rows at 500 MB a worker: 32.7 s,
    against 47.8 s at 600 MB before).
    """
    out = np.empty(max(0, stop - start), dtype=arr.dtype)
    step = int(arr.chunks[0])
    kind = _plain_codec(arr)
    buf = np.empty(step if kind is not None and (start % step or stop % step) else 0, dtype=arr.dtype)  # for partly read chunks
    at = start
    while at < stop:
        c = at // step
        end = min(stop, (c + 1) * step)
        if kind is None:
            out[at - start : end - start] = arr[at:end]
        else:
            fn = os.path.join(path, *name.split("/"), *arr.metadata.encode_chunk_key((c,)).split("/"))
            whole = at == c * step and end == (c + 1) * step
            target = out[at - start : end - start] if whole else buf
            _decode_chunk(fn, kind, target)
            if not whole:
                out[at - start : end - start] = buf[at - c * step : end - c * step]
        at = end
    return out


def _decode_chunk(fn: str, kind: str, target: np.ndarray) -> None:
    """One raw or zstd chunk file's values into ``target`` (a full chunk)."""
    with open(fn, "rb") as f:
        if kind == "raw":
            if f.readinto(target.view(np.uint8).data) != target.nbytes:
                raise OSError(f"{fn}: a short chunk file")
            return
        frame = f.read()
    from numcodecs import Zstd

    Zstd().decode(frame, out=target)


def _array_shape(node: zarr.Array | zarr.Group) -> tuple[int, ...]:
    """The shape of a Zarr array; a group where an array belongs is a damaged store (a TypeError, reported as unreadable)."""
    if not isinstance(node, zarr.Array):
        raise TypeError(f"{node.path!r} is a group, not an array")
    return tuple(node.shape)


def _attrs_manifest(path: str, root: Any) -> Any:
    attrs = dict(root.attrs)
    if ZARR_MANIFEST_KEY not in attrs:
        raise StoreError(f"{path}: the Zarr group's attributes ({os.path.join(path, 'zarr.json')}) hold no {ZARR_MANIFEST_KEY}; "
                         f"{MANIFEST_NAME} cannot be checked against them")
    return attrs[ZARR_MANIFEST_KEY]


def _compare_manifests(path: str, attrs_manifest: Any, file_manifest: Any) -> None:
    """Refuse the store when its two copies of the manifest differ (canonical forms)."""
    if canonical_json(attrs_manifest) == canonical_json(file_manifest):
        return
    if isinstance(attrs_manifest, dict) and isinstance(file_manifest, dict):
        keys = sorted(k for k in set(attrs_manifest) | set(file_manifest) if canonical_json(attrs_manifest.get(k)) != canonical_json(file_manifest.get(k)))
        what = f" (field(s) {', '.join(keys)})"
    else:
        what = ""
    raise StoreError(f"{path}: the manifest in the Zarr attributes ({os.path.join(path, 'zarr.json')}) and "
                     f"{os.path.join(path, MANIFEST_NAME)} disagree{what}; the store is refused")


# -- writing ---------------------------------------------------------------------------------------------------------------


class _ZarrSink(ShardSink):
    """Creates the group in ``tmp`` and appends each shard to its arrays (resized shard by shard)."""

    def __init__(self, tmp: str, n_features: int, shard_rows: int, layout: str, with_group: bool, with_weight: bool) -> None:
        self.n_features = n_features
        self.layout = layout
        self.nnz = 0
        self._path = tmp
        root = zarr.open_group(tmp, mode="w")
        cfg: ArrayConfigParams = {"write_empty_chunks": True}  # every chunk gets a file: a missing one is damage
        self._x: zarr.Array | None = None  # dense: created at the first shard, whose features choose the codec (:func:`choose_codec`)
        self._x_args: dict[str, Any] = dict(name="X", shape=(0, n_features), chunks=(shard_rows, max(1, n_features)), dtype="float32", config=cfg)
        self._y = root.create_array("y", shape=(0,), chunks=(shard_rows,), dtype="int8", config=cfg)
        self._g = root.create_array("group", shape=(0,), chunks=(shard_rows,), dtype="int16", config=cfg) if with_group else None
        self._w = root.create_array("weight", shape=(0,), chunks=(shard_rows,), dtype="float32", config=cfg) if with_weight else None
        self._root = root
        if layout == "csr":
            self._create_csr(root, cfg, shard_rows)

    def _create_csr(self, root: Any, cfg: ArrayConfigParams, shard_rows: int) -> None:
        """The ``X`` group of a CSR store (AnnData's csr_matrix encoding); values and indices zstd-compressed unless
        ``dpipe.store-codec`` is ``none``."""
        codec = "none" if str(get_setting("store-codec")) == "none" else "zstd"
        compressors = [ZstdCodec(level=0)] if codec == "zstd" else None
        x = root.create_group("X")
        x.attrs.update({"encoding-type": "csr_matrix", "encoding-version": "0.1.0", "shape": [0, self.n_features]})
        chunk = min(CSR_CHUNK_VALUES, max(1 << 16, int(get_setting("shard-bytes")) // 8))
        self._indptr = x.create_array("indptr", shape=(1,), chunks=(shard_rows,), dtype="int64", config=cfg, compressors=compressors)
        self._indptr[0:1] = np.zeros(1, np.int64)
        idx = "int32" if self.n_features < 2**31 else "int64"
        self._indices = x.create_array("indices", shape=(0,), chunks=(chunk,), dtype=idx, config=cfg, compressors=compressors)
        self._data = x.create_array("data", shape=(0,), chunks=(chunk,), dtype="float32", config=cfg, compressors=compressors)
        self._xgroup = x

    def _create_x(self, X: np.ndarray) -> zarr.Array:
        """The dense ``X`` array, with the codec the first non-empty shard's features choose (at the end: no rows)."""
        if self._x is None:
            codec = choose_codec(X, str(get_setting("store-codec")))
            self._x = self._root.create_array(**self._x_args, compressors=[ZstdCodec(level=0)] if codec == "zstd" else None)
        return self._x

    def write(self, index: int, start: int, stop: int, X: Any, y: np.ndarray, group: np.ndarray | None, weight: np.ndarray | None) -> None:
        if self.layout == "csr":
            self._write_csr(X, start, stop)
        elif self._x is not None or stop > start:  # the first rows choose the codec; an empty shard before them changes nothing
            x = self._create_x(X)
            x.resize((stop, self.n_features))
            if stop > start:
                x[start:stop] = X
        columns: list[tuple[zarr.Array | None, np.ndarray | None]] = [(self._y, y), (self._g, group), (self._w, weight)]
        for arr, values in columns:
            if arr is not None:
                assert values is not None  # the writer passes a column for every array it asked for
                arr.resize((stop,))
                if stop > start:
                    arr[start:stop] = values

    def _write_csr(self, X: Any, start: int, stop: int) -> None:
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
        self.nnz = b

    def finish(self, manifest: Manifest) -> None:
        if self.layout == "csr":
            self._xgroup.attrs["shape"] = [manifest.n_rows, self.n_features]
        else:
            self._create_x(np.zeros((0, self.n_features), dtype=np.float32))
        self._root.attrs[ZARR_MANIFEST_KEY] = manifest.to_dict()

    def check_written(self, n_rows: int, nnz: int, where: str) -> None:
        """Every chunk file of every array is still in the temporary (a file per chunk: ``write_empty_chunks``)."""
        root = self._root
        names = ["y"] + [n for n, a in (("group", self._g), ("weight", self._w)) if a is not None]
        spans = [(n, 0, n_rows) for n in names]
        if self.layout == "csr":
            spans += [("X/indptr", 0, n_rows + 1), ("X/indices", 0, nnz), ("X/data", 0, nnz)]
        elif self._x is not None:
            spans.append(("X", 0, n_rows))
        for name, start, stop in spans:
            _check_chunk_files(self._path, root, name, start, stop, where)


# -- the format --------------------------------------------------------------------------------------------------------------


class ZarrFormat(StoreFormat):
    """The Zarr v3 store format (module docstring)."""

    name = "zarr"

    def check_open(self, path: str, manifest: Manifest, raw_manifest: bytes, recording: bool) -> None:
        m = manifest
        try:
            root = zarr.open_group(path, mode="r")
            arrays = {name: _array_shape(root[name]) for name in ("y", "group", "weight") if name in root}
            x = root["X"] if "X" in root else None
            if isinstance(x, zarr.Group):
                shape: Any = x.attrs.get("shape", ())  # JSON as written: compared below
                arrays["X"] = tuple(shape)
                arrays.update({f"X/{k}": _array_shape(x[k]) for k in _CSR_ARRAYS if k in x})
            elif x is not None:
                arrays["X"] = tuple(x.shape)
        except Exception as exc:
            raise StoreError(f"{path}: not a readable Zarr store ({type(exc).__name__}: {exc})") from exc
        if not recording:
            _compare_manifests(path, _attrs_manifest(path, root), json.loads(raw_manifest))
        if arrays.get("X") != (m.n_rows, m.n_features):
            raise StoreError(f"{path}: X has shape {arrays.get('X')}, manifest says ({m.n_rows}, {m.n_features})")
        if (m.layout == "csr") != ("X/indptr" in arrays):
            raise StoreError(f"{path}: X is {'CSR' if 'X/indptr' in arrays else 'dense'}, the manifest says layout {m.layout}")
        if m.layout == "csr":
            for name, want in (("X/indptr", (m.n_rows + 1,)), ("X/indices", (m.nnz,)), ("X/data", (m.nnz,))):
                if arrays.get(name) != want:
                    raise StoreError(f"{path}: {name} has shape {arrays.get(name)}, the manifest says {want}")
        for name, needed in (("y", True), ("group", m.group_counts is not None), ("weight", m.has_weight)):
            if needed and arrays.get(name) != (m.n_rows,):
                raise StoreError(f"{path}: {name} has shape {arrays.get(name)}, manifest says ({m.n_rows},)")

    def read(self, path: str, index: int, start: int, stop: int, n_features: int, check: ShardCheck | None, where: str,
             mmap: bool) -> ShardColumns:
        """A Zarr shard whose features are one chunk, raw or zstd (``dpipe.store-codec``), is read from its chunk
        file without zarr's read path (:func:`_read_x`): a zstd frame is decoded straight into the array; a raw
        chunk, with ``mmap``, is a read-only memory map of the file."""
        root = _open_group(path)
        csr = "X/indptr" in root
        if check is not None and check.chunk_files:
            if not csr:
                _check_chunk_files(path, root, "X", start, stop, where)
            _check_chunk_files(path, root, "y", start, stop, where)
        X = _read_csr(path, root, start, stop, n_features, check, where) if csr else _read_x(path, root["X"], start, stop, mmap)
        y = np.asarray(root["y"][start:stop], dtype=np.int8)
        group = np.asarray(root["group"][start:stop]) if "group" in root else None
        weight = np.asarray(root["weight"][start:stop]) if "weight" in root else None
        return X, y, group, weight

    def sink(self, tmp: str, n_features: int, shard_rows: int, layout: str, with_group: bool, with_weight: bool) -> ShardSink:
        return _ZarrSink(tmp, n_features, shard_rows, layout, with_group, with_weight)

    def record_manifest(self, path: str, manifest: Manifest) -> None:
        """Rewrite the group's attributes with ``manifest`` (through a temporary file and a rename)."""
        zjson = os.path.join(path, "zarr.json")
        with open(zjson) as f:
            meta = json.load(f)
        meta.setdefault("attributes", {})[ZARR_MANIFEST_KEY] = manifest.to_dict()
        write_json_atomic(zjson, meta, indent=2)
