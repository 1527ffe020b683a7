"""In-memory tables (pandas DataFrames, pyarrow Tables, raw records) through ingest's tabular encoder.

``dpipe ingest`` reads a CSV or Parquet file as Arrow columns, types and scans them
(:class:`~dpipe.io._tabular.TabularScanner`) and one-hot encodes them
(:class:`~dpipe.io._tabular.TabularEncoder`). The estimator's tables and a model's raw
records go through the same two classes, after the same normalisation as a Parquet
source: string columns stripped of surrounding whitespace, a missing string (null,
NaN in an object column) the category ``"?"``, a missing number an error naming the
row and the column. So one vocabulary, one feature order and one set of values serve
a store ingested from a file and a DataFrame of the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._tabular import HASHED_ONLY, Column, Rows, TabularEncoder, TabularScanner, TabularSchema, arrow_kind, as_strings

__all__ = ["TABLE_SOURCE", "UNSEEN", "TABLE_UNSEEN", "encode_table", "is_frame", "is_table", "record_arrays", "scan_table", "table_arrays", "table_encoding"]

#: ``encoding["source_format"]`` of a model fitted on an in-memory table
TABLE_SOURCE = "table"

#: what an unseen category does when a fitted vocabulary encodes new rows (as ``ingest(unseen=)``)
UNSEEN = ("error", "ignore")
#: ... when the estimator scores a table: also ``"warn"``, all-zero one-hot features and one :class:`~dpipe.exceptions.DataWarning`
#: a call naming the columns and values (the estimator's default: scikit-learn's model selection deals rare categories to one
#: side of a split, as ``HistGradientBoostingClassifier`` and ``OneHotEncoder(handle_unknown="ignore")`` score them)
TABLE_UNSEEN = ("warn", "error", "ignore")


def _is_pandas(X: Any) -> bool:
    return type(X).__module__.startswith("pandas") and hasattr(X, "dtypes") and hasattr(X, "columns")


def is_frame(X: Any) -> bool:
    """Whether ``X`` is a pandas DataFrame or a pyarrow Table / RecordBatch, whatever its columns hold."""
    return isinstance(X, (pa.Table, pa.RecordBatch)) or _is_pandas(X)


def is_table(X: Any) -> bool:
    """Whether ``X`` is a table the tabular encoder reads: a pyarrow Table / RecordBatch, or a
    pandas DataFrame with a column that is not numeric (strings, categories, objects).

    An all-numeric DataFrame is not: it is a matrix whose column names are kept, as
    scikit-learn keeps them.
    """
    if isinstance(X, (pa.Table, pa.RecordBatch)):
        return True
    if not _is_pandas(X):
        return False
    from pandas.api.types import is_numeric_dtype

    return any(not is_numeric_dtype(dtype) for dtype in X.dtypes)


def _normalised(name: str, a: Any, kind: str | None, where: str) -> pa.Array:
    """One column as ingest reads a Parquet column: one chunk; strings stripped, nulls ``"?"``."""
    if kind is None:
        raise ValueError(f"{where}: column {name!r} has type {a.type}, which dpipe cannot encode (numbers, booleans, strings and categories)")
    if kind in HASHED_ONLY:
        raise ValueError(f"{where}: column {name!r} holds {'lists of tokens' if kind == 'tokens' else 'maps of token -> number'}, "
                         "which only feature hashing encodes: ingest the table with hash_features (dpipe ingest --hash-features)")
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    return pc.utf8_trim_whitespace(as_strings(a)) if kind == "categorical" else a


def table_arrays(X: Any, where: str = "X") -> tuple[list[str], list[pa.Array]]:
    """Column names (as strings) and normalised Arrow columns of a pandas DataFrame or pyarrow table.

    Raises
    ------
    ValueError
        Duplicate column names, or a column of a type that cannot be encoded, named.
    """
    if _is_pandas(X):
        try:
            X = pa.Table.from_pandas(X, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:  # e.g. an object column mixing numbers and strings
            raise ValueError(f"{where}: a column cannot be read as one type ({' '.join(str(exc).split())}); "
                             "give it one dtype (numbers, or strings with astype(str))") from None
    names = [str(n) for n in X.schema.names]
    seen: set[str] = set()
    dup = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
    if dup:
        raise ValueError(f"{where}: duplicate column name(s) {dup}")
    return names, [_normalised(n, X.column(i), arrow_kind(X.schema.field(i).type), where) for i, n in enumerate(names)]


def _rows(where: str, n: int, first_row: int = 0) -> Rows:
    """A table's rows for error messages, numbered from ``first_row`` (0 as pandas positions are)."""
    return Rows(where, n, offset=first_row - 1)


def scan_table(names: Sequence[str], arrays: Sequence[pa.Array], where: str = "X") -> TabularSchema:
    """The columns (all features) and sorted vocabularies of a table, as ingest's first pass sets them."""
    columns = [Column(name, "feature", arrow_kind(a.type)) for name, a in zip(names, arrays)]
    scanner = TabularScanner(columns)
    scanner.scan(list(arrays), _rows(where, len(arrays[0]) if arrays else 0))
    return scanner.schema()


def encode_table(schema: TabularSchema, names: Sequence[str], arrays: Sequence[pa.Array], unseen: str = "error", where: str = "X",
                 first_row: int = 0) -> np.ndarray:
    """Rows of a table encoded with a fitted schema: float32, ``(n, schema.n_features)``.

    Parameters
    ----------
    schema : TabularSchema
        From :func:`scan_table` (or a store's encoding): the feature columns and their vocabularies.
    names, arrays : sequences
        The table's columns (:func:`table_arrays`); columns the schema does not name are an
        error, and its columns may come in any order.
    unseen : {"error", "ignore", "warn"}
        A category the vocabulary lacks: an error naming the row, column and value, or
        all-zero one-hot features (as ``ingest(unseen=)``); ``"warn"``: all-zero features
        and one :class:`~dpipe.exceptions.DataWarning` naming the columns, values and rows.
    where : str
        What the rows are, in error messages (``"X"``, ``"X partition 2 (rows 20-29)"``).
    first_row : int
        The number of the table's first row in error messages: a partition's offset in its whole collection, so that
        an error names the global row.
    """
    features = [c for c in schema.columns if c.is_feature]
    index = {n: i for i, n in enumerate(names)}
    missing = [c.name for c in features if c.name not in index]
    extra = [n for n in names if n not in {c.name for c in features}]
    if missing or extra:
        parts = ([f"lacks the column(s) {missing}"] if missing else []) + ([f"has column(s) {extra} that fit did not see"] if extra else [])
        raise ValueError(f"{where}: {' and '.join(parts)}; expected the columns {[c.name for c in features]}")
    ordered = [arrays[index[c.name]] for c in features]
    n = len(ordered[0]) if ordered else 0
    fixed = TabularSchema([Column(c.name, "feature", c.type, c.categories) for c in features], schema.hashing)
    rows = _rows(where, n, first_row)
    scanner = TabularScanner(fixed.columns, unseen="ignore" if unseen == "warn" else unseen, hashing=schema.hashing)
    scanner.scan(ordered, rows)  # numbers parse, categories known
    if unseen == "warn" and scanner.unseen_counts:
        _warn_unseen(scanner.unseen_counts, where, n)
    return TabularEncoder(fixed, {}).encode(ordered, rows)[0]


def _warn_unseen(counts: Mapping[str, Mapping[str, int]], where: str, n: int) -> None:
    """One :class:`DataWarning` for the categories a fitted vocabulary lacks: ``{column: {value: rows}}``."""
    import warnings

    from ..exceptions import DataWarning

    def column(name: str, values: Mapping[str, int]) -> str:
        top = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{v!r} ({c} row{'s' if c != 1 else ''})" for v, c in top[:3])
        return f"{name!r}: {shown}{f' and {len(top) - 3} more' if len(top) > 3 else ''}"

    cells = sum(sum(v.values()) for v in counts.values())
    warnings.warn(f"{where}: {cells} value{'s' if cells != 1 else ''} in {n} rows {'are categories' if cells != 1 else 'is a category'} fit did not see, scored as no category (all-zero one-hot "
                  f"features): {'; '.join(column(k, v) for k, v in counts.items())}. unseen='error' refuses them, unseen='ignore' "
                  "scores them so without this warning.", DataWarning, stacklevel=4)


def table_encoding(schema: TabularSchema, unseen: str) -> dict[str, Any]:
    """A model's ``encoding`` for a table: the fields ingest records for a tabular store that
    :meth:`~dpipe.model.LinearModel.encode_records` reads (``label`` is set once the classes are known)."""
    return {
        "kind": "tabular",
        "source_format": TABLE_SOURCE,
        "header": None,
        "delimiter": None,
        "missing": ["?"],
        "columns": schema.to_list(),
        "label": None,
        "n_features": schema.n_features,
        "zero_based": None,
        "unseen": unseen,
        "hashing": None if schema.hashing is None else schema.hashing.to_dict(),
    }


def record_arrays(records: Iterable[Mapping[str, Any]], columns: Sequence[Column], where: str = "records") -> list[pa.Array]:
    """Arrow columns of raw records (``{column: value}``) for the tabular encoder.

    Numeric columns take numbers or numeric strings, categorical ones any value (its text,
    stripped; None is ``"?"``), token columns a list of strings, map columns a mapping of
    string to number.

    Raises
    ------
    ValueError
        A record that lacks a column, or a value of the wrong type: one line naming the
        record (0-based) and the column.
    """
    by_name = []  # keys as column names, which are strings: {0: ...} (a headerless CSV's column "0", a DataFrame's column 0) too
    for i, rec in enumerate(records):
        if not all(isinstance(k, str) for k in rec):
            rec = {str(k): v for k, v in rec.items()}
        lacking = [c.name for c in columns if c.name not in rec]
        if lacking:
            raise ValueError(f"{where}: record {i} lacks the column(s) {lacking[:8]} (it has {sorted(rec)[:8]})")
        by_name.append(rec)
    return [_column_array(col, [rec[col.name] for rec in by_name], where) for col in columns]


def _column_array(col: Column, values: list[Any], where: str) -> pa.Array:
    """One column of records as Arrow, typed as the column's type; a wrong value named."""
    def bad(i: int, expected: str) -> ValueError:
        return ValueError(f"{where}: record {i}, column {col.name!r}: {values[i]!r} is not {expected}")

    if col.type == "numeric":
        out = np.empty(len(values))
        for i, v in enumerate(values):
            try:
                out[i] = float(v)
            except (TypeError, ValueError):
                raise bad(i, "a number") from None
        return pa.array(out)
    if col.type == "tokens":
        for i, v in enumerate(values):
            if v is not None and (isinstance(v, (str, bytes)) or not isinstance(v, Iterable)):
                raise bad(i, "a list of tokens")
        return pa.array([None if v is None else [str(t) for t in v] for v in values], pa.list_(pa.string()))
    if col.type == "map":
        items = []
        for i, v in enumerate(values):
            if v is not None and not isinstance(v, Mapping):
                raise bad(i, "a mapping of token -> number")
            try:
                items.append(None if v is None else [(str(k), float(x)) for k, x in v.items()])
            except (TypeError, ValueError):
                raise bad(i, "a mapping of token -> number") from None
        return pa.array(items, pa.map_(pa.string(), pa.float64()))
    missing = lambda v: v is None or (isinstance(v, float) and v != v)  # noqa: E731 - None or NaN: the category "?", as in a table
    return pa.array([None if missing(v) else str(v).strip() for v in values], pa.string())
