"""Ingest's byte sources: a source file's compression told by its magic bytes, its bytes counted and hashed as stored,
read in blocks of whole lines (a bounded number of lines and bytes) in a helper thread ahead of their use, and its
format told from its name and first lines (:func:`detect_source_format`)."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import os
import queue
import threading
import zlib
from collections.abc import Generator, Iterable, Iterator
from typing import Any

import numpy as np

from .._progress import advance
from ..exceptions import InputError
from ._svmlight import looks_like_svmlight

__all__ = ["SourceFile", "detect_source_format", "TextSource", "CountingRaw", "iter_blocks", "prefetch", "peek_lines", "hash_file", "READ_ERRORS",
           "CHUNK_BYTES", "SVM_BLOCK_BYTES", "CSV_BLOCK_BYTES"]

_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz")
_SVM_SUFFIXES = (".svm", ".svmlight", ".libsvm")
_PARQUET_SUFFIXES = (".parquet", ".pq")
# suffixes that only hint at a format: the first lines decide, the hint breaks ties
_HINT_SUFFIXES = {".t": "svmlight", ".data": "csv", ".test": "csv", ".txt": "csv"}

CHUNK_BYTES = 1 << 22  # decompressed bytes per read
#: the UTF-8 byte order mark some editors write at the start of a text file: skipped
UTF8_BOM = b"\xef\xbb\xbf"
SVM_BLOCK_BYTES = 16 << 20  # most bytes of one svmlight block
CSV_BLOCK_BYTES = 64 << 20  # most bytes of one CSV block
READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)


# ---------------------------------------------------------------------------------
# reading text sources
# ---------------------------------------------------------------------------------
class CountingRaw(io.RawIOBase):
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


class TextSource:
    """A text source opened for reading, decompressed by its magic bytes."""

    def __init__(self, path: str, hash: bool = False) -> None:
        self.path = path
        try:
            f = open(path, "rb", buffering=0)
        except OSError as exc:
            raise InputError(f"cannot open ({exc.strerror or exc})", path=path) from None
        self.raw = CountingRaw(f, hashlib.sha256() if hash else None)
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

    def __enter__(self) -> TextSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def iter_blocks(stream, path: str, max_lines: int, max_bytes: int, skip: int = 0) -> Iterator[tuple[bytes, np.ndarray, int]]:
    """Yield (bytes of whole lines, newline offsets, 1-based first line) from a binary stream.

    A block holds at most ``max_lines`` lines and, unless one line is longer, at
    most ``max_bytes`` bytes. The first ``skip`` lines are dropped. A final line
    without a newline gets one. A UTF-8 byte order mark opening the stream is skipped
    (as Python's ``utf-8-sig`` and Arrow's CSV reader do).
    """
    buf = bytearray()
    first = True
    pending: list[np.ndarray] = []
    n_nl = 0
    line = 1
    eof = False
    while True:
        if not eof:
            try:
                data = stream.read(CHUNK_BYTES)
            except READ_ERRORS as exc:
                raise InputError(f"cannot read ({type(exc).__name__}: {exc})", path=path) from None
            if first and data:
                first = False
                if data.startswith(UTF8_BOM):
                    data = data[len(UTF8_BOM):]
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


def prefetch(items: Iterable[Any], depth: int = 1) -> Generator[Any, None, None]:
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


def peek_lines(path: str, skip: int, want: int, skip_comments: bool = False) -> list[tuple[int, bytes]]:
    """The first ``want`` non-blank lines after ``skip`` lines, as (1-based line, bytes)."""
    out: list[tuple[int, bytes]] = []
    with TextSource(path) as src:
        line = 0
        budget = 4 << 20
        try:
            while len(out) < want and budget > 0:
                text = src.stream.readline(1 << 20)
                if not text:
                    break
                budget -= len(text)
                line += 1
                if line == 1 and text.startswith(UTF8_BOM):
                    text = text[len(UTF8_BOM):]
                if line <= skip:
                    continue
                body = text.split(b"#", 1)[0] if skip_comments else text
                if body.strip():
                    out.append((line, text.rstrip(b"\r\n")))
        except READ_ERRORS as exc:
            raise InputError(f"cannot read ({type(exc).__name__}: {exc})", path=path) from None
    return out


def hash_file(path: str) -> tuple[str, int]:
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
    for _, line in peek_lines(path, skip_rows, 20):
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


class SourceFile:
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
        with TextSource(self.path, hash=hash) as src:
            gen = prefetch(parse(d, nl, ln) for d, nl, ln in iter_blocks(src.stream, self.path, max_lines, max_bytes, self.skip))
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
