"""Parquet sources (a file or a folder of parts): their columns and kinds, and batches of Arrow columns for a tabular
ingest. Typing and encoding of the columns: :mod:`._tabular`."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..exceptions import InputError
from ._tabular import Rows, arrow_kind, as_strings

__all__ = ["parquet_files", "parquet_columns", "iter_parquet"]


def parquet_files(path: str) -> list[str]:
    """The Parquet file ``path``, or the ``*.parquet`` files under directory ``path`` (sorted)."""
    if os.path.isdir(path):
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "_")))
            out.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".parquet") and not f.startswith((".", "_")))
        if not out:
            raise InputError("directory holds no .parquet files", path=path)
        return sorted(out)
    return [path]


def parquet_columns(path: str) -> tuple[list[str], list[str | None]]:
    """Column names and kinds ("numeric", "categorical" or None = unsupported) of a Parquet file."""
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", path=path) from None
    return list(schema.names), [arrow_kind(schema.field(i).type) for i in range(len(schema.names))]


def iter_parquet(path: str, names: list[str], batch_rows: int, order: int = 0) -> Iterator[tuple[list[pa.Array], Rows]]:
    """Record batches of ``names`` from a Parquet file; string columns stripped, nulls -> ``"?"``."""
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", path=path) from None
    try:
        missing = [n for n in names if n not in pf.schema_arrow.names]
        if missing:
            raise InputError(f"Parquet file lacks the column(s) {missing}", path=path)
        offset = 0
        for batch in pf.iter_batches(batch_size=batch_rows, columns=names):
            arrays = []
            for name in names:
                a = batch.column(name)
                if arrow_kind(a.type) == "categorical":
                    a = pc.utf8_trim_whitespace(as_strings(a))
                arrays.append(a)
            yield arrays, Rows(path, batch.num_rows, None, offset, order)
            offset += batch.num_rows
    finally:
        pf.close()
