"""Stream a source file (svmlight, CSV or Parquet) into a sharded store.

:func:`ingest` reads its source twice, each time in pieces of at most ``read_rows``
lines (``dpipe.read-rows``, default 65,536) and a bounded number of bytes, so memory
does not grow with the size of the source:

pass 1 (scan)
    counts rows, checks every line, finds the feature count and zero/one-based
    indexing (svmlight) or the column types and categorical vocabularies (tabular),
    collects the label values and maps them to -1 / +1, and computes the sha256 of
    the source bytes as stored (for a ``.gz`` file, of the compressed bytes);
pass 2 (encode)
    encodes every piece as dense float32 rows straight into one shard-sized buffer
    and hands each full shard to :meth:`~dpipe.io.ShardWriter.write_shard`; the
    writer builds the store in a temporary sibling of ``dest`` and renames it into
    place at the end. On any error nothing is left at ``dest`` and no temporary
    directory is left behind. Peak memory is about one shard (``dpipe.shard-bytes``,
    64 MB by default) plus a few pieces, whatever the size of the source.

Text sources may be plain, gzip (``.gz``), bzip2 (``.bz2``) or xz compressed (told
by their magic bytes). Reading and parsing run in a helper thread, overlapped with
the encoding and writing of the previous piece.

Manifest fields written by ingest
---------------------------------
``source``
    ``{"path", "format", "sha256", "bytes", "files", "options"}``: absolute path,
    source format (``"svmlight"``, ``"csv"``, ``"parquet"``), sha256 and size of the
    file (for a Parquet directory: the sha256 of the lines ``"<relative path>
    <sha256>"`` of its files and their total size), ``files`` (one
    ``{"path", "sha256", "bytes"}`` per file read) and every ingest option. When
    ``src`` is a list, ``path``, ``sha256`` and ``bytes`` are lists too.
``encoding``
    Everything needed to encode more rows the same way (``like=``) or to score
    raw rows later:

    * ``kind``: ``"svmlight"`` or ``"tabular"``;
    * ``label``: the :class:`~dpipe.io._labels.LabelRule` (``{"kind", "values"}``)
      plus ``"column"`` (tabular) and ``"classes"`` (every observed label value ->
      -1 / +1);
    * ``n_features``, ``zero_based`` (svmlight; None for tabular);
    * tabular only: ``source_format``, ``header`` (whether the first file had a
      header line), ``delimiter``, ``missing`` (values read as missing),
      ``columns`` (one ``{"name", "role", "type", "categories"}`` per source
      column, see :mod:`dpipe.io._tabular`), ``unseen`` and ``unseen_counts``
      (``{column: {value: count}}`` of categories absent from the ``like`` store,
      ``unseen="ignore"`` only).
``groups`` / ``group_column``
    Sorted vocabulary of ``group_col`` (group code = position) and its name.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import logging
import lzma
import os
import queue
import threading
import warnings
import zlib
from collections import Counter
from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .._config import get_setting
from .._log import VERBOSE
from .._progress import Progress, advance
from .._transform import SCALES, FeatureTransform
from .._validation import check_choice, check_int
from ..exceptions import DataWarning, InputError, ParameterError, StoreError
from ..reduce._block import csr_block
from ._csv_source import detect_header, read_csv_block, split_csv_line
from ._fit_transform import check_log1p, ingest_transformed, stored_transform
from ._hashing import COLLISION_WARNING, FeatureHashing, check_hash_features
from ._ingest_options import INGEST_LAYOUTS, SOURCE_FORMATS, UNSEEN
from ._labels import LabelCounter, LabelRule, Where, class_absent_message
from ._manifest import Manifest
from ._parquet_source import iter_parquet, parquet_columns, parquet_files
from ._store import open_store
from ._svmlight import MAX_INDEX, looks_like_svmlight, parse_block
from ._tabular import (
    HASHED_ONLY,
    MISSING_VALUES,
    Column,
    TabularEncoder,
    TabularScanner,
    TabularSchema,
    resolve_column,
)
from ._writer import STORE_FORMATS, ShardWriter, prepare_destination, shard_rows_for, store_lock

__all__ = ["ingest", "SOURCE_FORMATS", "INGEST_LAYOUTS", "SPARSE_MAX_DENSITY", "detect_source_format"]

OWNER = "ingest"
#: ``layout="auto"`` stores an svmlight source as CSR up to this fraction of non-zero entries. Measured here
#: (numba kernels, one thread, 200,000 rows of uniformly placed non-zeros): CSR's ``X w`` and ``X^T g`` take
#: 0.4-0.6x the dense time at 5 %, 0.5-0.8x at 10 % and 1.1-1.5x at 20 %.
SPARSE_MAX_DENSITY = 0.1

log = logging.getLogger("dpipe.ingest")

_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz")
_SVM_SUFFIXES = (".svm", ".svmlight", ".libsvm")
_PARQUET_SUFFIXES = (".parquet", ".pq")
# suffixes that only hint at a format: the first lines decide, the hint breaks ties
_HINT_SUFFIXES = {".t": "svmlight", ".data": "csv", ".test": "csv", ".txt": "csv"}

_CHUNK_BYTES = 1 << 22  # decompressed bytes per read
_SVM_BLOCK_BYTES = 16 << 20  # most bytes of one svmlight block
_CSV_BLOCK_BYTES = 64 << 20  # most bytes of one CSV block
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)


# ---------------------------------------------------------------------------------
# reading text sources
# ---------------------------------------------------------------------------------
class _CountingRaw(io.RawIOBase):
    """Raw reader that feeds every byte read to a hash and counts them."""

    def __init__(self, f, hasher=None) -> None:
        self._f = f
        self.hasher = hasher
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self._f.readinto(b)
        if n:
            self.count += n
            if self.hasher is not None:
                self.hasher.update(memoryview(b)[:n])
        return n

    def close(self) -> None:
        try:
            self._f.close()
        finally:
            super().close()


class _TextSource:
    """A text source opened for reading, decompressed by its magic bytes."""

    def __init__(self, path: str, hash: bool = False) -> None:
        self.path = path
        try:
            f = open(path, "rb", buffering=0)
        except OSError as exc:
            raise InputError(f"cannot open ({exc.strerror or exc})", path=path) from None
        self.raw = _CountingRaw(f, hashlib.sha256() if hash else None)
        self.buffered = io.BufferedReader(self.raw, 1 << 20)
        try:
            magic = self.buffered.peek(6)[:6]
        except OSError as exc:
            self.close()
            raise InputError(f"cannot read ({exc})", path=path) from None
        if magic[:2] == b"\x1f\x8b":
            self.stream: Any = gzip.GzipFile(fileobj=self.buffered, mode="rb")
        elif magic[:3] == b"BZh":
            self.stream = bz2.BZ2File(self.buffered, mode="rb")
        elif magic[:6] == b"\xfd7zXZ\x00":
            self.stream = lzma.LZMAFile(self.buffered, mode="rb")
        else:
            self.stream = self.buffered

    def finish(self) -> tuple[str, int]:
        """Read the rest of the raw bytes; return (sha256, bytes read)."""
        try:
            while self.buffered.read(1 << 20):
                pass
        except OSError as exc:
            raise InputError(f"cannot read ({exc})", path=self.path) from None
        return self.raw.hasher.hexdigest(), self.raw.count

    def close(self) -> None:
        for obj in (getattr(self, "stream", None), self.buffered):
            try:
                if obj is not None:
                    obj.close()
            except Exception:  # noqa: BLE001 - closing after an error
                pass

    def __enter__(self) -> _TextSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _iter_blocks(stream, path: str, max_lines: int, max_bytes: int, skip: int = 0) -> Iterator[tuple[bytes, np.ndarray, int]]:
    """Yield (bytes of whole lines, newline offsets, 1-based first line) from a binary stream.

    A block holds at most ``max_lines`` lines and, unless one line is longer, at
    most ``max_bytes`` bytes. The first ``skip`` lines are dropped. A final line
    without a newline gets one.
    """
    buf = bytearray()
    pending: list[np.ndarray] = []
    n_nl = 0
    line = 1
    eof = False
    while True:
        if not eof:
            try:
                data = stream.read(_CHUNK_BYTES)
            except _READ_ERRORS as exc:
                raise InputError(f"cannot read ({type(exc).__name__}: {exc})", path=path) from None
            if data:
                pending.append(np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + len(buf))
                n_nl += pending[-1].size
                buf += data
            else:
                eof = True
                if buf and buf[-1] != 10:
                    buf += b"\n"
                    pending.append(np.array([len(buf) - 1], dtype=np.int64))
                    n_nl += 1
        while n_nl and (eof or skip or n_nl >= max_lines or len(buf) >= max_bytes):
            nls = np.concatenate(pending) if len(pending) != 1 else pending[0]
            if skip:
                k = min(skip, n_nl)
            else:
                k = min(max_lines, n_nl)
                if nls[k - 1] + 1 > max_bytes:
                    k = max(1, int(np.searchsorted(nls, max_bytes, side="left")))
            cut = int(nls[k - 1]) + 1
            if skip:
                skip -= k
            else:
                yield bytes(memoryview(buf)[:cut]), nls[:k].copy(), line
            line += k
            del buf[:cut]
            pending = [nls[k:] - cut]
            n_nl -= k
        if eof:
            return


def _prefetch(items: Iterable[Any], depth: int = 1) -> Generator[Any, None, None]:
    """Iterate ``items`` in a helper thread, ``depth`` items ahead of the consumer."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(msg) -> bool:
        while not stop.is_set():
            try:
                q.put(msg, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in items:
                if not put(("item", item)):
                    return
            put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            put(("error", exc))

    t = threading.Thread(target=run, name="dpipe-ingest-reader", daemon=True)
    t.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "item":
                yield item
            elif kind == "end":
                return
            else:
                raise item
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        t.join()


def _peek_lines(path: str, skip: int, want: int, skip_comments: bool = False) -> list[tuple[int, bytes]]:
    """The first ``want`` non-blank lines after ``skip`` lines, as (1-based line, bytes)."""
    out: list[tuple[int, bytes]] = []
    with _TextSource(path) as src:
        line = 0
        budget = 4 << 20
        try:
            while len(out) < want and budget > 0:
                text = src.stream.readline(1 << 20)
                if not text:
                    break
                budget -= len(text)
                line += 1
                if line <= skip:
                    continue
                body = text.split(b"#", 1)[0] if skip_comments else text
                if body.strip():
                    out.append((line, text.rstrip(b"\r\n")))
        except _READ_ERRORS as exc:
            raise InputError(f"cannot read ({type(exc).__name__}: {exc})", path=path) from None
    return out


def _hash_file(path: str) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
                n += len(chunk)
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path=path) from None
    return h.hexdigest(), n


def detect_source_format(path: str, skip_rows: int = 0) -> str:
    """Source format of ``path``: ``"svmlight"``, ``"csv"`` or ``"parquet"``.

    A directory is Parquet. Compression suffixes (.gz .bz2 .xz) are stripped, then
    ``.svm .svmlight .libsvm`` mean svmlight, ``.csv`` CSV and ``.parquet``
    Parquet; otherwise the first non-blank lines after ``skip_rows`` decide
    (``index:value`` tokens -> svmlight, commas -> CSV), and a suffix ``.t``
    (svmlight) or ``.data .test .txt`` (CSV) breaks ties.

    Raises
    ------
    InputError
        The format cannot be told; pass ``source_format=``.
    """
    if os.path.isdir(path):
        return "parquet"
    name = os.path.basename(path).lower()
    while name.endswith(_COMPRESSION_SUFFIXES):
        name = name.rsplit(".", 1)[0]
    ext = os.path.splitext(name)[1]
    if ext in _PARQUET_SUFFIXES:
        return "parquet"
    if ext in _SVM_SUFFIXES:
        return "svmlight"
    if ext == ".csv":
        return "csv"
    try:
        with open(path, "rb") as f:
            if f.read(4) == b"PAR1":
                return "parquet"
    except OSError as exc:
        raise InputError(f"cannot open ({exc.strerror or exc})", path=path) from None
    for _, line in _peek_lines(path, skip_rows, 20):
        verdict = looks_like_svmlight(line)
        if verdict:
            return "svmlight"
        if b"," in line:
            return "csv"
    if ext in _HINT_SUFFIXES:
        return _HINT_SUFFIXES[ext]
    raise InputError("cannot tell the source format from the name or the first lines; pass source_format='svmlight', 'csv' or 'parquet'", path=path)


# ---------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------
def _check_tristate(value: Any, name: str) -> bool | str:
    if value is True or value is False or value == "auto":
        return value
    raise ParameterError(f"The {name!r} parameter of {OWNER} must be True, False or 'auto'. Got {value!r} instead.")


def _check_column_spec(value: Any, name: str) -> str | int | None:
    if value is None or (isinstance(value, str) and value != ""):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise ParameterError(f"The {name!r} parameter of {OWNER} must be a column name (str), a column index (int) or None. Got {value!r} instead.")


def _check_src(src: Any) -> list[str]:
    items = [src] if isinstance(src, (str, os.PathLike)) else src
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(p, (str, os.PathLike)) for p in items):
        raise ParameterError(f"The 'src' parameter of {OWNER} must be a path or a non-empty list of paths. Got {src!r} instead.")
    paths = [os.path.abspath(os.fspath(p)) for p in items]
    for p in paths:
        if not os.path.exists(p):
            raise InputError("no such file or directory", path=p)
    return paths


class _File:
    """One source file and what pass 1 learnt about it."""

    def __init__(self, path: str, order: int, src_index: int) -> None:
        self.path = path
        self.order = order
        self.src_index = src_index
        self.sha256 = ""
        self.bytes = 0
        self.skip = 0
        self.header = False
        try:
            st = os.stat(path)
        except OSError as exc:
            raise InputError(f"cannot open ({exc.strerror or exc})", path=path) from None
        self.stamp = (st.st_size, st.st_mtime_ns)

    def check_unchanged(self) -> None:
        st = os.stat(self.path)
        if (st.st_size, st.st_mtime_ns) != self.stamp:
            raise InputError("the file changed while it was being ingested", path=self.path)

    def blocks(self, max_lines: int, max_bytes: int, hash: bool, parse) -> Iterator[Any]:
        """Parsed blocks of the file (``parse(data, newlines, first_line)``), read ahead in a thread."""
        with _TextSource(self.path, hash=hash) as src:
            gen = _prefetch(parse(d, nl, ln) for d, nl, ln in _iter_blocks(src.stream, self.path, max_lines, max_bytes, self.skip))
            counted = 0
            try:
                for block in gen:
                    yield block
                    if hash:  # pass 1's progress: the file's bytes read (as stored: compressed for a .gz)
                        advance(nbytes=src.raw.count - counted)
                        counted = src.raw.count
            finally:
                gen.close()
            if hash:
                self.sha256, self.bytes = src.finish()
                advance(nbytes=self.bytes - counted)


# ---------------------------------------------------------------------------------
# svmlight
# ---------------------------------------------------------------------------------
class _SvmlightJob:
    kind = "svmlight"

    def __init__(self, files: list[_File], read_rows: int, rule: LabelRule | None, n_features: int | None, zero_based, like: Manifest | None,
                 unlabeled: bool = False) -> None:
        self.files = files
        self.unlabeled = unlabeled
        self.read_rows = read_rows
        self.zero_based_opt = zero_based
        self.n_features_opt = n_features
        if like is not None:
            enc = like.encoding
            ln, lz = int(enc["n_features"]), bool(enc["zero_based"])
            if n_features is not None and n_features != ln:
                raise ParameterError(f"The 'n_features' parameter of {OWNER} is {n_features}, but the like= store has {ln} features.")
            if zero_based != "auto" and zero_based != lz:
                raise ParameterError(f"The 'zero_based' parameter of {OWNER} is {zero_based}, but the like= store is {'zero' if lz else 'one'}-based.")
            self.n_features_opt, self.zero_based_opt = ln, lz
            if rule is None and not unlabeled:
                rule = LabelRule.from_dict(_like_label(like))
        self.rule = rule or LabelRule()
        self.rule.check_numeric()
        self.warnings: list[str] = []

    def _parse(self, f: _File):
        return lambda data, nl, first_line: parse_block(data, first_line, f.path, float32=True)

    def scan(self) -> None:
        labels = LabelCounter()
        n_rows = nnz = 0
        max_idx = -1
        first_zero: Where | None = None
        over: dict[int, tuple[Where, int]] = {}
        nf = self.n_features_opt
        limits = [] if nf is None else [nf - 1, nf]
        for f in self.files:
            for blk in f.blocks(self.read_rows, _SVM_BLOCK_BYTES, True, self._parse(f)):
                if blk.n_rows == 0:
                    continue
                n_rows += blk.n_rows
                nnz += int(blk.indices.size)
                vals, first, counts = np.unique(blk.labels, return_index=True, return_counts=True)
                labels.add([float(v) for v in vals], counts, [Where(f.path, line=int(blk.lines[r]), order=f.order) for r in first])
                if blk.indices.size == 0:
                    continue
                idx = blk.indices
                max_idx = max(max_idx, int(idx.max()))
                if first_zero is None and int(idx.min()) == 0:
                    k = int(np.argmax(idx == 0))
                    first_zero = self._where(f, blk, k)
                for lim in limits:
                    if lim not in over:
                        bad = np.flatnonzero(idx > lim)
                        if bad.size:
                            over[lim] = (self._where(f, blk, int(bad[0])), int(idx[bad[0]]))
        if n_rows == 0:
            raise InputError("empty input (no rows)", path=self.files[0].path)
        if self.zero_based_opt == "auto":
            zb = first_zero is not None
        else:
            zb = bool(self.zero_based_opt)
            if not zb and first_zero is not None:
                raise first_zero.error("feature index 0 found, but zero_based=False (one-based indices start at 1)")
        if nf is not None:
            lim = nf - 1 if zb else nf
            if lim in over:
                where, i = over[lim]
                raise where.error(f"feature index {i} is beyond n_features={nf} ({'zero' if zb else 'one'}-based indices)")
            d = nf
        else:
            d = max_idx + 1 if zb else max_idx
            if d <= 0:
                raise InputError("no feature index in the input (every line holds only a label); pass n_features=", path=self.files[0].path)
        self.zero_based, self.n_features, self.n_rows, self.nnz = zb, d, n_rows, nnz
        self.base = 0 if zb else 1
        self.feature_names = [f"f{j + self.base}" for j in range(d)]
        self.encoding = {"kind": "svmlight", "zero_based": zb, "n_features": d, "label": None}
        if self.unlabeled:  # the lines' label tokens are read and dropped
            self.label_map, self.n_neg, self.n_pos = {}, 0, 0
            return
        self.label_map = self.rule.resolve(labels.first)
        self.n_neg, self.n_pos = labels.class_counts(self.label_map)
        keys = np.array(sorted(self.label_map), dtype=np.float64)
        self._keys, self._lut = keys, np.array([self.label_map[k] for k in keys.tolist()], dtype=np.int8)
        self.encoding["label"] = {**self.rule.to_dict(), "classes": labels.classes(self.label_map)}
        msg = class_absent_message(self.n_neg, self.n_pos, self.rule, self.files[0].path)
        if msg:
            self.warnings.append(msg)

    @staticmethod
    def _where(f: _File, blk, k: int) -> Where:
        r = int(np.searchsorted(blk.indptr, k, side="right") - 1)
        return Where(f.path, line=int(blk.lines[r]), order=f.order)

    def parts(self) -> Iterator[tuple[int, Any]]:
        """Pass 2: (rows, encode) per block; ``encode(a, b, out)`` writes rows a..b into ``out``
        (``out=None``: returns them as a CSR block, with their labels)."""
        d = self.n_features
        for f in self.files:
            f.check_unchanged()
            for blk in f.blocks(self.read_rows, _SVM_BLOCK_BYTES, False, self._parse(f)):
                if blk.n_rows == 0:
                    continue
                if self.unlabeled:
                    y = np.zeros(blk.n_rows, dtype=np.int8)
                else:
                    pos = np.minimum(np.searchsorted(self._keys, blk.labels), len(self._keys) - 1)
                    if not np.array_equal(self._keys[pos], blk.labels):
                        raise InputError("labels differ from the first pass (did the file change?)", path=f.path)
                    y = self._lut[pos]
                cols = blk.indices.astype(np.int64) - self.base
                if cols.size and (cols.max() >= d or cols.min() < 0):
                    raise InputError("feature indices differ from the first pass (did the file change?)", path=f.path)

                def encode(a: int, b: int, out: np.ndarray | None, blk=blk, y=y, cols=cols):
                    lo, hi = int(blk.indptr[a]), int(blk.indptr[b])
                    if out is None:  # a CSR store: the rows as they were parsed
                        return csr_block(blk.values[lo:hi], cols[lo:hi], blk.indptr[a : b + 1] - lo, d), y[a:b]
                    out[...] = 0.0
                    rows = np.repeat(np.arange(b - a), np.diff(blk.indptr[a : b + 1]))
                    out[rows, cols[lo:hi]] = blk.values[lo:hi]
                    return y[a:b], None, None

                yield blk.n_rows, encode


# ---------------------------------------------------------------------------------
# CSV and Parquet
# ---------------------------------------------------------------------------------
    def csr_pieces(self) -> Iterator[tuple[Any, np.ndarray, None, None]]:
        """Pass 2 as the parsed CSR blocks ``(X, y, None, None)``, never dense."""
        for n, encode in self.parts():
            X, y = encode(0, n, None)
            yield X, y, None, None

    def hashing_used(self) -> None:
        """svmlight features are not hashed."""
        return None


class _TabularJob:
    kind = "tabular"
    header: bool | None  # whether the CSV files have a header line (None: Parquet)

    def __init__(
        self,
        files: list[_File],
        source_format: str,
        read_rows: int,
        rule: LabelRule | None,
        label,
        group_col,
        weight_col,
        header,
        skip_rows: int,
        unseen: str,
        like: Manifest | None,
        unlabeled: bool = False,
        hash_features: int | None = None,
    ) -> None:
        self.files = files
        self.unlabeled = unlabeled
        self.hashing: FeatureHashing | None = None
        if hash_features is not None:
            self.hashing = FeatureHashing(hash_features)
        elif like is not None and like.encoding.get("hashing") is not None:
            self.hashing = FeatureHashing.from_dict(like.encoding["hashing"], f"{like.source.get('path')}: manifest encoding")
            self.hashing = FeatureHashing(self.hashing.n_features)  # the slots in use are this store's own
        self.source_format = source_format
        self.read_rows = read_rows
        self.label_opt, self.group_opt, self.weight_opt = label, group_col, weight_col
        self.header_opt = header
        self.skip_rows = skip_rows
        self.unseen = unseen
        self.like = like
        if like is not None and rule is None and not unlabeled:
            rule = LabelRule.from_dict(_like_label(like))
        self.rule = rule or LabelRule()
        self.warnings: list[str] = []

    # -- layout ------------------------------------------------------------------
    def _sniff_csv(self) -> list[str]:
        names: list[str] | None = None
        ref: _File | None = None
        for f in self.files:
            lines = _peek_lines(f.path, self.skip_rows, 2)
            f.skip = self.skip_rows
            if not lines:
                continue
            first = split_csv_line(lines[0][1])
            second = split_csv_line(lines[1][1]) if len(lines) > 1 else None
            if second is not None and len(first) != len(second):
                raise InputError(
                    f"wrong number of columns: {len(second)}, but line {lines[0][0]} has {len(first)}; "
                    "if the file starts with preamble lines, skip them with skip_rows=",
                    path=f.path,
                    line=lines[1][0],
                )
            has_header = self.header_opt if isinstance(self.header_opt, bool) else detect_header(first, second)
            f.header = has_header
            if has_header:
                f.skip = lines[0][0]
                these = [c if c else str(i) for i, c in enumerate(first)]
                dup = sorted(c for c, k in Counter(these).items() if k > 1)
                if dup:
                    raise InputError(f"duplicate column name(s) {dup} in the header", path=f.path, line=lines[0][0])
            else:
                these = [str(i) for i in range(len(first))]
            if names is None:
                names, ref = these, f
                continue
            assert ref is not None  # set with names
            if len(these) != len(names):
                raise InputError(f"{len(these)} columns, but {ref.path} has {len(names)}", path=f.path, line=lines[0][0])
            if has_header and ref.header and these != names:
                raise InputError(f"header {these} differs from the header of {ref.path}", path=f.path, line=lines[0][0])
        if names is None:
            raise InputError("empty input (no rows)", path=self.files[0].path)
        if self.like is not None:
            like_names = [c.name for c in self._like_columns()]
            for f in self.files:
                if f.header and names != like_names:
                    raise InputError(f"header {names} differs from the columns of the like= store {like_names}", path=f.path, line=max(1, f.skip))
            if len(names) != len(like_names):
                assert ref is not None  # names came from a file
                raise InputError(f"{len(names)} columns, but the like= store was ingested from {len(like_names)}", path=ref.path, line=ref.skip + 1)
            names = like_names
        self.header = bool(self.files[0].header)
        return names

    def _like_columns(self) -> list[Column]:
        """The like= store's source columns; without its label column when this source is unlabelled."""
        assert self.like is not None  # called only with a like= store
        cols = TabularSchema.from_list(self.like.encoding["columns"]).columns
        return [c for c in cols if c.role != "label"] if self.unlabeled else cols

    def _parquet_layout(self) -> tuple[list[str], list[str | None]]:
        names, kinds = parquet_columns(self.files[0].path)
        for f in self.files[1:]:
            n2, k2 = parquet_columns(f.path)
            if n2 != names:
                raise InputError(f"columns {n2} differ from those of {self.files[0].path} ({names})", path=f.path)
        self.header = None
        return names, kinds

    def _columns(self) -> list[Column]:
        path = self.files[0].path
        if self.source_format == "csv":
            names = self._sniff_csv()
            kinds: list[str | None] = [None] * len(names)
        else:
            names, kinds = self._parquet_layout()
        if self.like is not None:
            cols = self._like_columns()
            if self.source_format == "parquet":
                missing = [c.name for c in cols if c.name not in names]
                if missing:
                    raise InputError(f"lacks the column(s) {missing} of the like= store", path=path)
            like_names = [c.name for c in cols]
            for spec, role, param in ((self.label_opt, "label", "label"), (self.group_opt, "group", "group_col"), (self.weight_opt, "weight", "weight_col")):
                if spec is None:
                    continue
                j = resolve_column(spec, like_names, param, path)
                if cols[j].role != role:
                    have = [c.name for c in cols if c.role == role]
                    raise ParameterError(f"The {param!r} parameter of {OWNER} is {spec!r}, but the like= store's {role} column is {have[0] if have else None!r}.")
            self.names = like_names
            return cols
        n = len(names)
        if self.unlabeled:
            li = None
        elif self.label_opt is not None:
            li = resolve_column(self.label_opt, names, "label", path)
        else:
            li = names.index("label") if "label" in names else n - 1
        gi = resolve_column(self.group_opt, names, "group_col", path)
        wi = resolve_column(self.weight_opt, names, "weight_col", path)
        used = [j for j in (li, gi, wi) if j is not None]
        if len(set(used)) != len(used):
            raise ParameterError(f"The 'label', 'group_col' and 'weight_col' parameters of {OWNER} must name different columns.")
        if n - (li is not None) - (wi is not None) < 1:  # a group column stays a feature
            raise InputError(f"{n} column(s): nothing is left as a feature", path=path)
        cols = []
        for j, name in enumerate(names):
            role = "label" if j == li else "group" if j == gi else "weight" if j == wi else "feature"
            kind = kinds[j]
            if self.source_format == "parquet":
                if kind is None:
                    raise InputError(f"column {name!r} has a type that cannot be ingested (numbers, booleans, strings; with hash_features also "
                                     "lists of strings and maps of string to number)", path=path)
                if role == "weight" and kind != "numeric":
                    raise InputError(f"weight column {name!r} is not numeric", path=path)
                if kind in HASHED_ONLY and role != "feature":
                    raise InputError(f"{role} column {name!r} holds {kind} ({kind} columns can only be hashed features)", path=path)
                if kind in HASHED_ONLY and self.hashing is None:
                    raise ParameterError(f"The {name!r} column of {path} holds {'lists of tokens' if kind == 'tokens' else 'maps of token -> number'}, "
                                         f"which only feature hashing encodes: give the 'hash_features' parameter of {OWNER}.")
            cols.append(Column(name, role, kind if role in ("feature", "group") else None))
        self.names = names
        return cols

    def _batches(self, first_pass: bool) -> Iterator[tuple[list, Any]]:
        n_cols = len(self.names)
        for f in self.files:
            if not first_pass:
                f.check_unchanged()
            if self.source_format == "csv":

                def parse(data, nl, first_line, f=f):
                    return read_csv_block(data, nl, first_line, n_cols, f.path, f.order, self._numeric)

                yield from f.blocks(self.read_rows, _CSV_BLOCK_BYTES, first_pass, parse)
            else:
                if first_pass:
                    f.sha256, f.bytes = _hash_file(f.path)
                yield from _prefetch(iter_parquet(f.path, self.names, self.read_rows, f.order))
                if first_pass:
                    advance(nbytes=f.stamp[0])  # pass 1's progress: one more file read

    # -- passes ------------------------------------------------------------------
    def scan(self) -> None:
        cols = self._columns()
        groups = list(self.like.groups) if self.like is not None and self.like.groups is not None else None
        scanner = TabularScanner(cols, unseen=self.unseen, groups=groups, hashing=self.hashing)
        self._numeric = scanner.numeric_columns()
        for arrays, rows in self._batches(True):
            scanner.scan(arrays, rows)
            self._numeric = scanner.numeric_columns()
        if scanner.n_rows == 0:
            raise InputError("empty input (no rows)", path=self.files[0].path)
        schema = scanner.schema()
        if self.like is not None and schema.feature_names != list(self.like.feature_names):  # pragma: no cover - by construction
            raise StoreError(f"{self.like.source.get('path')}: the like= store's encoding does not reproduce its feature names")
        self.schema = schema
        self.n_rows = scanner.n_rows
        self.n_features = schema.n_features
        self.feature_names = schema.feature_names
        if self.unlabeled:
            self.label_map, self.n_neg, self.n_pos = {}, 0, 0
        else:
            self.label_map = self.rule.resolve(scanner.labels.first)
            self.n_neg, self.n_pos = scanner.labels.class_counts(self.label_map)
        gi = schema.index("group")
        self.group_column = None if gi is None else schema.columns[gi].name
        self.groups = scanner.groups() if gi is not None else None
        self.has_weight = schema.index("weight") is not None
        self.nnz = self.n_rows * sum(c.is_feature for c in schema.columns)  # at most one value a feature column (shard sizing)
        self.encoder = TabularEncoder(schema, self.label_map, self.groups)
        self._numeric = schema.numeric_columns()
        li = schema.index("label")
        self.encoding = {
            "kind": "tabular",
            "source_format": self.source_format,
            "header": self.header,
            "delimiter": "," if self.source_format == "csv" else None,
            "missing": list(MISSING_VALUES),
            "columns": schema.to_list(),
            "label": None if li is None else {**self.rule.to_dict(), "column": schema.columns[li].name, "classes": scanner.labels.classes(self.label_map)},
            "n_features": self.n_features,
            "zero_based": None,
            "unseen": self.unseen,
            "unseen_counts": scanner.unseen_counts,
            "hashing": None if self.hashing is None else self.hashing.to_dict(),
        }
        self._occupied = None if self.hashing is None else np.zeros(self.hashing.n_features, dtype=bool)
        msg = None if self.unlabeled else class_absent_message(self.n_neg, self.n_pos, self.rule, self.files[0].path)
        if msg:
            self.warnings.append(msg)
        if scanner.unseen_counts:
            total = sum(sum(c.values()) for c in scanner.unseen_counts.values())
            parts = []
            for col, counts in scanner.unseen_counts.items():
                top = sorted(counts.items(), key=lambda kv: -kv[1])[:5]
                parts.append(f"{col!r}: " + ", ".join(f"{v!r} x{c}" for v, c in top) + (" ..." if len(counts) > 5 else ""))
            self.warnings.append(
                f"{self.files[0].path}: {total} value(s) unseen in the like= store were encoded as all-zero one-hot rows "
                f"({'; '.join(parts)}); counts are in the manifest encoding['unseen_counts']"
            )

    def parts(self) -> Iterator[tuple[int, Any]]:
        """Pass 2: (rows, encode) per piece; ``encode(a, b, out)`` writes rows a..b into ``out``."""
        for arrays, rows in self._batches(False):

            def encode(a: int, b: int, out: np.ndarray, arrays=arrays, rows=rows):
                if a == 0 and b == rows.n:
                    X, y, g, w = self.encoder.encode(arrays, rows, out)
                else:
                    X, y, g, w = self.encoder.encode([x.slice(a, b - a) for x in arrays], rows.slice(a, b), out)
                return y, g, w

            yield rows.n, encode

    def csr_pieces(self) -> Iterator[tuple[Any, np.ndarray, np.ndarray | None, np.ndarray | None]]:
        """Pass 2 as CSR blocks ``(X, y, group, weight)`` per piece, never dense; with hashing, counts the slots in use."""
        for arrays, rows in self._batches(False):
            X, y, g, w = self.encoder.encode_csr(arrays, rows)
            if self._occupied is not None:
                self._occupied[X.indices] = True
            yield X, y, g, w

    def hashing_used(self) -> FeatureHashing | None:
        """The hashing with the slots pass 2 filled (after :meth:`csr_pieces`), or None."""
        if self.hashing is None:
            return None
        assert self._occupied is not None  # made with the hashing
        return FeatureHashing(self.hashing.n_features, int(np.count_nonzero(self._occupied)))


# ---------------------------------------------------------------------------------
# public entry point
# ---------------------------------------------------------------------------------
def _like_label(like: Manifest) -> dict[str, Any]:
    """The like= store's label rule; an unlabelled like= store gives none to a labelled source."""
    if like.encoding.get("label") is None:
        raise ParameterError(f"The 'like' parameter of {OWNER} names an unlabelled store; give the labelled source the training store "
                             "as like= (or pass unlabeled=True)")
    return like.encoding["label"]


def _open_like(like: Any) -> Manifest | None:
    if like is None:
        return None
    if not isinstance(like, (str, os.PathLike)):
        raise ParameterError(f"The 'like' parameter of {OWNER} must be the path of a store. Got {like!r} instead.")
    m = open_store(like).manifest
    if not m.encoding or m.encoding.get("kind") not in ("svmlight", "tabular"):
        raise ParameterError(f"The 'like' parameter of {OWNER} names {os.fspath(like)}, whose manifest has no ingest encoding (it was not written by ingest).")
    return m


def ingest(
    src: str | list[str],
    dest: str,
    *,
    format: str = "zarr",
    source_format: str | None = None,
    label: str | int | None = None,
    positive: Sequence[str] | str | None = None,
    negative: Sequence[str] | str | None = None,
    n_features: int | None = None,
    zero_based: bool | str = "auto",
    header: bool | str = "auto",
    skip_rows: int = 0,
    group_col: str | int | None = None,
    weight_col: str | int | None = None,
    like: str | None = None,
    unseen: str = "error",
    unlabeled: bool = False,
    log1p: str | Sequence[str | int] | None = None,
    scale: str = "none",
    shard_rows: int | None = None,
    read_rows: int | None = None,
    overwrite: bool = False,
    layout: str = "auto",
    hash_features: int | str | None = None,
) -> Manifest:
    """Stream a source file into a sharded dataset store.

    Parameters
    ----------
    src : str or list of str
        Source file (svmlight, CSV, or Parquet file / directory of ``.parquet``
        files); text files may be gzip, bzip2 or xz compressed. A list is read as
        the concatenation of its files, which must share one format and layout.
    dest : str
        Path of the store to create.
    format : {"zarr", "parquet"}
        Storage format of the store.
    source_format : {"svmlight", "csv", "parquet"}, optional
        Format of ``src``; told from its name and first lines when omitted (see
        :func:`detect_source_format`).
    label : str or int, optional
        Tabular sources: label column (name or 0-based index, negative counts from
        the end). Default: the column named ``label``, else the last column.
    positive, negative : str or sequence of str, optional
        Label values that are +1 (``positive``) or -1 (``negative``), all others
        being the other class. Comma-separated strings are split. Neither: the
        labels must be {-1, +1} or {0, 1}.
    n_features : int, optional
        svmlight: number of features (an index beyond it is an error). Default: the
        largest index seen.
    zero_based : bool or "auto"
        svmlight: whether indices start at 0. "auto": zero-based iff an index 0
        occurs (as scikit-learn does).
    header : bool or "auto"
        CSV: whether the first line (after ``skip_rows``) is a header. "auto": yes
        when a field of the first row is not a number where the second row's is.
    skip_rows : int
        Text sources: leading lines to skip (``adult.test`` needs 1).
    group_col : str or int, optional
        Tabular: column whose values become the store's int16 group codes (sorted
        vocabulary in the manifest ``groups``); it stays a feature too.
    weight_col : str or int, optional
        Tabular: column of finite, non-negative row weights (not a feature).
    like : str, optional
        Path of a store whose encoding is reused exactly: feature layout,
        vocabularies, ``n_features``, zero-basedness, label rule (unless
        ``positive``/``negative`` are given) and group vocabulary.
    unseen : {"error", "ignore"}
        With ``like``: a category absent from the ``like`` store is an error, or
        ("ignore") encoded as an all-zero one-hot block, counted in the manifest
        ``encoding["unseen_counts"]`` and reported by one :class:`DataWarning`.
        Unseen group values are always errors.
    unlabeled : bool
        The source has no labels (a pool to score, or for churn and coverage
        constraints): a tabular source has no label column (with ``like``, the
        ``like`` store's columns without its label), an svmlight source's label
        tokens are dropped. The store's ``y`` is all 0 and its manifest says
        ``labelled: false``; training and ``evaluate`` refuse it, rates that need
        labels (recall, error, ...) refuse it by name.
    log1p : "auto", "all" or list of feature names / indices, optional
        Features stored as ``log1p(x)``: the named ones, every numeric feature ("all"), or
        the heavy-tailed ones ("auto": never negative, maximum at least about 128 times
        the median on ``1 + x``; see :mod:`dpipe.io._fit_transform`, every feature's figures
        are kept in the manifest). One-hot indicators are never logged.
    scale : {"none", "minmax", "standard", "maxabs"}
        Affine map of every numeric feature (after ``log1p``), fitted on this source (a row of
        ``weight_col`` weight ``v`` counting as ``v`` repeated rows): to
        [0, 1] by minimum and maximum, to zero mean and unit variance, or divided by the
        largest absolute value (``maxabs``: zeros stay zeros, so a sparse store stays sparse). The fitted
        transform is kept in the manifest (``encoding["transform"]``); ``like=`` ingests
        re-apply it (their values may fall outside [0, 1]) and models trained on the store
        carry it, so raw rows score as stored rows do. Fitting costs one more read and
        write of the new store.
    shard_rows : int, optional
        Rows per shard. Default: about ``dpipe.shard-bytes`` of float32 features, and
        at least ``dpipe.min-shards`` shards (of at least 8192 rows each).
    read_rows : int, optional
        Rows per piece read from the source (``dpipe.read-rows``).
    overwrite : bool
        Replace an existing ``dest``.
    layout : {"auto", "dense", "sparse"}
        How the features are stored: dense float32 rows, or CSR (``sparse``: only the
        non-zero values, read and multiplied in O(nnz); see :mod:`dpipe.io._store`).
        ``auto``: the ``like`` store's layout; else an svmlight source is stored sparse
        when at most :data:`SPARSE_MAX_DENSITY` of its entries are non-zero (the choice
        is logged), a tabular source dense. A sparse store takes ``log1p`` and
        ``scale="maxabs"``, which keep zeros; ``minmax`` and ``standard`` make ``auto``
        dense and are refused with ``sparse``.
    hash_features : int or str, optional
        Tabular sources: hash every feature column into this many slots (an int, or
        ``"2^k"``) instead of one-hot encoding, as scikit-learn's ``FeatureHasher`` and
        Vowpal Wabbit do (signed MurmurHash3, :mod:`dpipe.io._hashing`): a numeric column
        ``c`` is the token ``"c"`` with its value, a categorical one the token ``"c=v"``
        with 1, so a column of any number of categories (identifiers, words) costs no
        vocabulary. The store is sparse; its features are ``hash0 ..``; the manifest and
        every model trained on it record the hashing (``encoding["hashing"]``, with the
        slots in use and the collision rate; a :class:`DataWarning` from
        :data:`~dpipe.io._hashing.COLLISION_WARNING` on), so that
        :meth:`~dpipe.LinearModel.score_records` hashes raw records the same way.
        ``like=`` stores reuse the ``like`` store's hashing.

    Returns
    -------
    Manifest
        The manifest of the new store (see the module docstring for ``source`` and
        ``encoding``).

    Raises
    ------
    InputError
        The source is malformed; the message names the file and line (or row and
        column).
    ParameterError
        An invalid parameter.
    StoreError
        ``dest`` exists and ``overwrite`` is False, or ``like`` is not a store.

    Warns
    -----
    DataWarning
        One class is absent, or (``unseen="ignore"``) unseen categories were met.

    Examples
    --------
    >>> ingest("kddcup.data_10_percent.gz", "kdd.zarr", negative="normal.")  # doctest: +SKIP
    """
    paths = _check_src(src)
    if not isinstance(dest, (str, os.PathLike)):
        raise ParameterError(f"The 'dest' parameter of {OWNER} must be a path. Got {dest!r} instead.")
    dest = os.path.abspath(os.fspath(dest))
    check_choice(format, "format", OWNER, STORE_FORMATS)
    check_choice(layout, "layout", OWNER, INGEST_LAYOUTS)
    if source_format is not None:
        check_choice(source_format, "source_format", OWNER, SOURCE_FORMATS)
    check_choice(unseen, "unseen", OWNER, UNSEEN)
    zero_based = _check_tristate(zero_based, "zero_based")
    header = _check_tristate(header, "header")
    skip_rows = check_int(skip_rows, "skip_rows", OWNER, 0)
    if n_features is not None:
        n_features = check_int(n_features, "n_features", OWNER, 1, MAX_INDEX + 1)
    if shard_rows is not None:
        shard_rows = check_int(shard_rows, "shard_rows", OWNER, 1)
    read_rows = check_int(get_setting("read-rows", read_rows), "read_rows", OWNER, 1)
    if not isinstance(overwrite, bool):
        raise ParameterError(f"The 'overwrite' parameter of {OWNER} must be a bool. Got {overwrite!r} instead.")
    if not isinstance(unlabeled, bool):
        raise ParameterError(f"The 'unlabeled' parameter of {OWNER} must be a bool. Got {unlabeled!r} instead.")
    if unlabeled:
        for value, name in ((label, "label"), (positive, "positive"), (negative, "negative")):
            if value is not None:
                raise ParameterError(f"The {name!r} parameter of {OWNER} names labels; unlabeled=True says the source has none.")
    label = _check_column_spec(label, "label")
    group_col = _check_column_spec(group_col, "group_col")
    weight_col = _check_column_spec(weight_col, "weight_col")
    rule = LabelRule.from_args(positive, negative, OWNER)
    like_manifest = _open_like(like)
    log1p = check_log1p(log1p, OWNER)
    check_choice(scale, "scale", OWNER, SCALES)
    hash_features = check_hash_features(hash_features, OWNER)
    if hash_features is not None:
        if like_manifest is not None:
            assert like is not None  # like_manifest is like's manifest
            raise ParameterError(f"The 'hash_features' parameter of {OWNER} hashes a training source; a like= store reuses its store's hashing "
                                 f"({os.fspath(like)}): drop hash_features.")
        if layout == "dense":
            raise ParameterError(f"The 'hash_features' parameter of {OWNER} writes a sparse store (one value a column in {hash_features} slots); "
                                 "drop layout='dense'.")
        if log1p is not None:
            raise ParameterError(f"The 'log1p' parameter of {OWNER} names features, and hashed features have no names of their own: drop log1p "
                                 "or hash_features (scale='maxabs' applies to hashed features).")
    transform = None
    if like_manifest is not None and (log1p is not None or scale != "none"):
        has = like_manifest.encoding.get("transform") is not None
        assert like is not None
        raise ParameterError(f"The 'log1p' and 'scale' parameters of {OWNER} fit a transform on this source, but like= stores must share the "
                             f"training store's features: {os.fspath(like)} {'has a transform, which is re-applied' if has else 'has none'}; "
                             "drop log1p= and scale= (a transform is fitted on the training store and re-applied by like=).")
    if like_manifest is not None and like_manifest.encoding.get("transform") is not None:
        assert like is not None
        transform = stored_transform(like_manifest, os.fspath(like))
    shifting = scale in ("minmax", "standard") or (transform is not None and not transform.keeps_zeros)
    if layout == "sparse" and shifting:
        raise ParameterError(f"The 'layout' parameter of {OWNER} is 'sparse', but scale={scale if transform is None else transform.scale!r} would "
                             "shift every zero; use scale='maxabs' (it keeps zeros, as log1p does) or layout='dense'.")
    if layout == "auto" and shifting:
        layout = "dense"
    with store_lock(dest):  # one writer of dest from the check to the rename (the ShardWriter re-enters it)
        prepare_destination(dest, overwrite)
        if log1p is not None or scale != "none":
            raw_args: dict[str, Any] = dict(format=format, source_format=source_format, label=label, positive=positive, negative=negative, n_features=n_features,
                            zero_based=zero_based, header=header, skip_rows=skip_rows, group_col=group_col, weight_col=weight_col, like=like,
                            unseen=unseen, unlabeled=unlabeled, shard_rows=shard_rows, read_rows=read_rows, layout=layout,
                            hash_features=hash_features)

            def source_of(raw: Manifest) -> dict[str, Any]:
                return {**raw.source, "options": {**raw.source["options"], "log1p": log1p, "scale": scale, "overwrite": overwrite}}

            return ingest_transformed(lambda path: ingest(src, path, **raw_args), dest, overwrite, log1p, scale, source_of,
                                      fitted_on=paths[0] if len(paths) == 1 else ", ".join(paths))

        kinds = [source_format or detect_source_format(p, skip_rows) for p in paths]
        if len(set(kinds)) > 1:
            raise InputError(f"sources of different formats ({', '.join(sorted(set(kinds)))}); ingest them separately", path=paths[0])
        kind = kinds[0]
        for p in paths:
            if os.path.isdir(p) and kind != "parquet":
                raise InputError(f"is a directory, but source_format={kind!r}", path=p)
        if like_manifest is not None:
            want = "svmlight" if kind == "svmlight" else "tabular"
            if like_manifest.encoding["kind"] != want:
                raise ParameterError(f"The 'like' parameter of {OWNER} names a store ingested from a {like_manifest.encoding['kind']} source; this source is {kind}.")

        files: list[_File] = []
        for i, p in enumerate(paths):
            for fp in parquet_files(p) if kind == "parquet" else [p]:
                files.append(_File(fp, len(files), i))

        if kind == "svmlight":
            for value, name in ((label, "label"), (group_col, "group_col"), (weight_col, "weight_col")):
                if value is not None:
                    raise ParameterError(f"The {name!r} parameter of {OWNER} applies to CSV and Parquet sources, not to svmlight.")
            if header is True:
                raise ParameterError(f"The 'header' parameter of {OWNER} applies to CSV sources; svmlight files have no header.")
            if hash_features is not None:
                raise ParameterError(f"The 'hash_features' parameter of {OWNER} applies to CSV and Parquet sources; an svmlight source's "
                                     "features are indices already (n_features= bounds them).")
            job: _SvmlightJob | _TabularJob = _SvmlightJob(files, read_rows, rule, n_features, zero_based, like_manifest, unlabeled)
        else:
            if n_features is not None:
                raise ParameterError(f"The 'n_features' parameter of {OWNER} applies to svmlight sources; tabular sources get their features from the columns.")
            if zero_based != "auto":
                raise ParameterError(f"The 'zero_based' parameter of {OWNER} applies to svmlight sources only.")
            if kind == "parquet" and (header is True or skip_rows):
                raise ParameterError(f"The 'header' and 'skip_rows' parameters of {OWNER} apply to text sources, not to Parquet.")
            job = _TabularJob(files, kind, read_rows, rule, label, group_col, weight_col, header, skip_rows, unseen, like_manifest, unlabeled,
                              hash_features)

        with Progress(f"ingest: reading {', '.join(paths)} (pass 1 of 2)", total_bytes=sum(f.stamp[0] for f in files), bytes_label="read"):
            job.scan()
        pa.default_memory_pool().release_unused()  # give back what pass 1's Arrow buffers held
        for msg in job.warnings:
            warnings.warn(msg, DataWarning, stacklevel=2)

        d = job.n_features
        store_layout = _choose_layout(layout, job, like_manifest)
        nnz_per_row = job.nnz / max(1, job.n_rows) if store_layout == "csr" and hasattr(job, "nnz") else None
        # a source smaller than one default shard becomes one shard of exactly its rows
        rows_per_shard = shard_rows or shard_rows_for(job.n_rows, d, nnz_per_row=nnz_per_row)
        groups = getattr(job, "groups", None)
        with_group = groups is not None
        options = {
            "format": format,
            "source_format": source_format,
            "label": label,
            "positive": None if positive is None else list(LabelRule.from_args(positive, None).values),
            "negative": None if negative is None else list(LabelRule.from_args(None, negative).values),
            "n_features": n_features,
            "zero_based": zero_based,
            "header": header,
            "skip_rows": skip_rows,
            "group_col": group_col,
            "weight_col": weight_col,
            "like": None if like is None else os.path.abspath(os.fspath(like)),
            "unseen": unseen,
            "unlabeled": unlabeled,
            "log1p": None,
            "scale": "none",
            "shard_rows": rows_per_shard,
            "read_rows": read_rows,
            "overwrite": overwrite,
            "layout": layout,
            "hash_features": hash_features,
        }
        source = _source_dict(paths, files, kind, options, isinstance(src, (str, os.PathLike)))
        with ShardWriter(dest, d, job.feature_names, rows_per_shard, format=format, with_group=with_group, with_weight=getattr(job, "has_weight", False),
                         overwrite=overwrite, labelled=not unlabeled, layout=store_layout) as writer:
            with Progress(f"ingest: writing {dest} (pass 2 of 2)", total_rows=job.n_rows, bytes_label="of features"):
                if store_layout == "csr":
                    written = _write_csr_shards(job, writer, transform, ", ".join(paths))
                else:
                    written = _write_shards(job, writer, rows_per_shard, d, transform, ", ".join(paths))
            if written != job.n_rows:
                raise InputError(f"pass 2 read {written} rows, pass 1 counted {job.n_rows} (did the file change?)", path=files[0].path)
            encoding = job.encoding
            if transform is not None:
                assert like_manifest is not None  # a transform here is the like= store's
                encoding = {**job.encoding, "transform": like_manifest.encoding["transform"]}
            hashing = job.hashing_used()
            if hashing is not None:
                encoding = {**encoding, "hashing": hashing.to_dict()}
                if hashing.collision_rate >= COLLISION_WARNING:
                    warnings.warn(f"{', '.join(paths)}: {100 * hashing.collision_rate:.1f} % of the {hashing.n_features} hash slots are in use, so "
                                  f"about that share of the tokens (some {hashing.tokens_estimate:.0f}) shares a slot with another; "
                                  f"hash_features={hashing.slots_for()} would keep it under 5 %.", DataWarning, stacklevel=2)
            manifest = writer.commit(source=source, encoding=encoding, groups=groups, group_column=getattr(job, "group_column", None))
        return manifest


def _choose_layout(layout: str, job: _SvmlightJob | _TabularJob, like: Manifest | None = None) -> str:
    """The store's layout (``"dense"`` or ``"csr"``) for the ingest option ``layout``; ``auto`` is logged with its reason
    (with a ``like`` store: that store's layout, so that a test store is read as its training store is)."""
    if layout != "auto":
        return "csr" if layout == "sparse" else "dense"
    if like is not None:
        log.log(VERBOSE, "layout auto: %s (the like= store's)", "sparse" if like.layout == "csr" else "dense")
        return like.layout
    if getattr(job, "hashing", None) is not None:
        log.log(VERBOSE, "layout auto: sparse (hashed features)")
        return "csr"
    if not isinstance(job, _SvmlightJob):
        log.log(VERBOSE, "layout auto: dense (a tabular source; --layout sparse stores its one-hot columns as CSR)")
        return "dense"
    density = job.nnz / max(1, job.n_rows * job.n_features)
    chosen = "csr" if density <= SPARSE_MAX_DENSITY else "dense"
    log.log(VERBOSE, "layout auto: %s (%.2f %% of the entries are non-zero; sparse up to %.0f %%)", "sparse" if chosen == "csr" else "dense",
             100 * density, 100 * SPARSE_MAX_DENSITY)
    return chosen


def _write_csr_shards(job: _SvmlightJob | _TabularJob, writer: ShardWriter, transform: FeatureTransform | None = None, where: str = "") -> int:
    """Pass 2 into a CSR store: the source's rows go to the writer as CSR blocks (never dense; svmlight's parsed rows,
    a tabular source's one-hot or hashed columns), transformed by the like= store's ``transform`` (one that keeps zeros)."""
    total = 0
    for X, y, g, w in job.csr_pieces():
        if transform is not None:
            try:
                X = transform.apply(X, first_row=total, where=where)
            except ValueError as exc:
                raise InputError(f"{exc} (a row of the source, counted from 0; the transform is the like= store's)") from None
        writer.append(X, y, g, w)
        total += X.shape[0]
        advance(rows=X.shape[0], nbytes=8 * X.nnz)
    return total


def _write_shards(job: _SvmlightJob | _TabularJob, writer: ShardWriter, shard_rows: int, d: int,
                  transform: FeatureTransform | None = None, where: str = "") -> int:
    """Encode pass 2 straight into one shard-sized buffer and write every full shard (transformed in place
    by the like= store's ``transform``)."""

    def write(rows: int) -> None:
        if transform is not None:
            try:
                view = X[:rows]
                transform.apply(view, out=view, first_row=total, where=where)
            except ValueError as exc:
                raise InputError(f"{exc} (a row of the source, counted from 0; the transform is the like= store's)") from None
        writer.write_shard(X[:rows], y[:rows], None if g is None else g[:rows], None if w is None else w[:rows])
        advance(rows=rows, nbytes=4 * rows * d)  # pass 2's progress: rows written

    X = np.zeros((shard_rows, d), dtype=np.float32)
    y = np.zeros(shard_rows, dtype=np.int8)
    g = np.zeros(shard_rows, dtype=np.int16) if writer.with_group else None
    w = np.zeros(shard_rows, dtype=np.float32) if writer.with_weight else None
    pos = total = 0
    for n, encode in job.parts():
        a = 0
        while a < n:
            take = min(n - a, shard_rows - pos)
            yy, gg, ww = encode(a, a + take, X[pos : pos + take])
            y[pos : pos + take] = yy
            if g is not None:
                g[pos : pos + take] = gg
            if w is not None:
                w[pos : pos + take] = ww
            pos += take
            a += take
            if pos == shard_rows:
                write(pos)
                total += pos
                pos = 0
    if pos:
        write(pos)
        total += pos
    return total


def _source_dict(paths: list[str], files: list[_File], kind: str, options: dict[str, Any], single: bool) -> dict[str, Any]:
    per_src = []
    for i, p in enumerate(paths):
        mine = [f for f in files if f.src_index == i]
        if os.path.isdir(p):
            h = hashlib.sha256()
            for f in mine:
                h.update(f"{os.path.relpath(f.path, p)} {f.sha256}\n".encode())
            per_src.append((p, h.hexdigest(), sum(f.bytes for f in mine)))
        else:
            per_src.append((p, mine[0].sha256, mine[0].bytes))
    out: dict[str, Any] = {"format": kind}
    if single:
        out.update(path=per_src[0][0], sha256=per_src[0][1], bytes=per_src[0][2])
    else:
        out.update(path=[s[0] for s in per_src], sha256=[s[1] for s in per_src], bytes=[s[2] for s in per_src])
    out["files"] = [{"path": f.path, "sha256": f.sha256, "bytes": f.bytes} for f in files]
    out["options"] = options
    return out
