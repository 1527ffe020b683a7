"""CSV sources: reading a block of lines into Arrow string columns (pass 1 and 2 of a tabular ingest), the header test,
and errors that name the file, line and column. Typing and encoding of the columns: :mod:`._tabular`."""

from __future__ import annotations

import csv
import re
from collections.abc import Collection

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from ..exceptions import InputError
from ._tabular import _POOL, MISSING_VALUES, Rows, is_number

__all__ = ["split_csv_line", "detect_header", "read_csv_block"]


def split_csv_line(line: bytes) -> list[str]:
    """Fields of one CSV line (quotes honoured), stripped of whitespace."""
    text = line.decode("utf-8", "replace").rstrip("\r\n").lstrip("\ufeff")
    try:
        fields = next(csv.reader([text]))
    except (StopIteration, csv.Error):
        fields = text.split(",")
    return [f.strip() for f in fields]


def detect_header(first: list[str], second: list[str] | None) -> bool:
    """Header test: a first-row field is text (not a number, not missing) where the second row has a number."""
    if second is None or len(first) != len(second):
        return False
    return any(a not in MISSING_VALUES and not is_number(a) and is_number(b) for a, b in zip(first, second))


_WS_BYTES = np.array([32, 9, 13, 11, 12], dtype=np.uint8)


def _blank_lines(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(blank mask, mask of blank lines Arrow would not skip by itself) of the lines."""
    lengths = ends - starts
    blank = lengths == 0
    arrow_empty = blank | ((lengths == 1) & (buf[np.minimum(starts, max(len(buf) - 1, 0))] == 13))
    short = np.flatnonzero((lengths >= 1) & (lengths <= 16))
    if short.size:
        idx = starts[short, None] + np.arange(16)
        inside = idx < ends[short, None]
        vals = buf[np.minimum(idx, len(buf) - 1)]
        ws = np.isin(vals, _WS_BYTES) | ~inside
        blank[short] = ws.all(axis=1)
    return blank, blank & ~arrow_empty


def _csv_options(n_cols: int, threads: bool, block_size: int | None = None, handler=None, numeric: Collection[int] = ()):
    names = [f"c{i}" for i in range(n_cols)]
    ro = pcsv.ReadOptions(column_names=names, use_threads=threads, **({"block_size": block_size} if block_size else {}))
    po = pcsv.ParseOptions(delimiter=",", newlines_in_values=False, ignore_empty_lines=True, invalid_row_handler=handler)
    co = pcsv.ConvertOptions(
        column_types={c: (pa.float64() if i in numeric else pa.string()) for i, c in enumerate(names)},
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
        null_values=[],
        check_utf8=True,
    )
    return ro, po, co


def _locate_csv_error(data: bytes, n_cols: int, row_lines: np.ndarray, path: str, exc: Exception) -> InputError:
    bad = []

    def handler(row):
        bad.append(row)
        return "skip"

    ro, po, co = _csv_options(n_cols, False, len(data) + 1, handler)
    msg = str(exc)
    try:
        pcsv.read_csv(pa.py_buffer(data), read_options=ro, parse_options=po, convert_options=co)
    except pa.ArrowInvalid as exc2:
        msg = str(exc2)
    if bad:
        r = bad[0]
        k = (r.number - 1) if r.number is not None else None
        line = int(row_lines[k]) if k is not None and 0 <= k < len(row_lines) else None
        text = r.text if len(r.text) <= 80 else r.text[:77] + "..."
        return InputError(f"wrong number of columns: expected {r.expected_columns}, got {r.actual_columns}: {text!r}", path=path, line=line)
    m = re.search(r"Row #(\d+)", msg)
    line = None
    if m and 0 < int(m.group(1)) <= len(row_lines):
        line = int(row_lines[int(m.group(1)) - 1])
    if "UTF8" in msg or "UTF-8" in msg:
        return InputError("text is not valid UTF-8", path=path, line=line)
    clean = re.sub(r"^(CSV parse error: |In CSV column #\d+: )", "", msg)
    if line is None and len(row_lines):
        clean += f" (between lines {int(row_lines[0])} and {int(row_lines[-1])})"
    return InputError(f"cannot parse CSV: {clean}", path=path, line=line)


def read_csv_block(
    data: bytes, newlines: np.ndarray, first_line: int, n_cols: int, path: str, order: int = 0, numeric: Collection[int] = ()
) -> tuple[list[pa.Array], Rows]:
    """Parse a block of whole CSV lines into columns.

    Parameters
    ----------
    data : bytes
        Whole lines, ending with a newline.
    newlines : ndarray of int64
        Offsets of the newline characters in ``data``.
    first_line : int
        1-based line of the first line of ``data`` in the file.
    n_cols : int
        Expected number of columns.
    path : str
        File name for errors.
    order : int
        Index of the file among the sources.
    numeric : collection of int
        Columns known to be numeric: Arrow's CSV reader parses them straight to
        float64 (it strips whitespace and accepts what the string-to-float64 cast
        accepts). If any value there does not parse, the whole block is returned as
        strings instead, so that the caller's checks name the line and value.

    Returns
    -------
    (arrays, rows)
        One array per column: float64 for ``numeric`` columns, else stripped
        ``pa.string()``; :class:`Rows` with the line of every row. Blank
        (whitespace-only) lines are skipped.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.asarray(newlines, dtype=np.int64)
    starts = np.empty_like(nl)
    if nl.size:
        starts[0] = 0
        starts[1:] = nl[:-1] + 1
    blank, rebuild = _blank_lines(buf, starts, nl)
    keep = np.flatnonzero(~blank)
    row_lines = keep + first_line
    if rebuild.any():
        data = b"".join(data[starts[k] : nl[k] + 1] for k in keep)
    if keep.size == 0:
        return [pa.array([], pa.string()) for _ in range(n_cols)], Rows(path, 0, row_lines, order=order)
    numeric = frozenset(numeric)
    table = None
    if numeric:
        ro, po, co = _csv_options(n_cols, True, numeric=numeric)
        try:
            table = pcsv.read_csv(pa.py_buffer(data), read_options=ro, parse_options=po, convert_options=co, memory_pool=_POOL)
        except pa.ArrowInvalid:
            table, numeric = None, frozenset()
    if table is None:
        ro, po, co = _csv_options(n_cols, True)
        try:
            table = pcsv.read_csv(pa.py_buffer(data), read_options=ro, parse_options=po, convert_options=co, memory_pool=_POOL)
        except pa.ArrowInvalid as exc:
            raise _locate_csv_error(data, n_cols, row_lines, path, exc) from None
    if table.num_rows != keep.size:
        raise InputError(
            f"found {table.num_rows} rows in lines {int(row_lines[0])}..{int(row_lines[-1])}, which hold {keep.size} non-blank lines: "
            "line breaks inside quoted fields and bare carriage returns are not supported",
            path=path,
        )
    arrays = []
    for i in range(n_cols):
        col = table.column(i).combine_chunks(memory_pool=_POOL)
        arrays.append(col if i in numeric else pc.utf8_trim_whitespace(col, memory_pool=_POOL))
    return arrays, Rows(path, keep.size, row_lines, order=order)
