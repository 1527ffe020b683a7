"""Tabular columns (of CSV and Parquet sources, and of in-memory tables): their typing and their one-hot (or hashed) encoding.

The readers that turn a source into Arrow columns are :mod:`._csv_source` and :mod:`._parquet_source`.

Column roles and types
----------------------
Every source column has a *role*: ``"label"`` (one column), ``"weight"`` (optional,
stored as the store's ``weight`` and not a feature), ``"group"`` (optional; its
values become the store's int16 ``group`` codes *and* the column is also encoded as
a feature) or ``"feature"``.

Feature columns have a *type*:

``numeric``
    one float feature named like the column. Every value must parse as a finite
    float (Arrow's string-to-float64 cast: ``12``, ``-0.5``, ``1e3``, ``.5``; never
    ``nan`` / ``inf``). A missing value (``""`` or ``"?"``; null in Parquet) is an
    error.
``categorical``
    one-hot features named ``column=value``, one per category; the sorted vocabulary
    is kept in the manifest. Every string is a category, ``"?"`` included.

CSV: fields are stripped of surrounding whitespace. Pass 1 scans every value; a
column's type is set by its first non-missing value (a number -> numeric, anything
else -> categorical). A numeric column holding a non-numeric value further down is
an :class:`~dpipe.exceptions.InputError` naming file, line, column and value, so in
pass 2 the numeric casts cannot fail. Parquet: the schema decides (integer, float,
boolean and decimal columns are numeric; string and dictionary columns are
categorical, nulls there become ``"?"``).

Features are laid out in source-column order; a categorical column contributes
``len(categories)`` adjacent features. :class:`TabularSchema` round-trips through
the manifest ``encoding["columns"]`` list (``{"name", "role", "type",
"categories"}``) so that ``like=`` ingests rebuild exactly the same features.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import ParameterError
from ._hashing import FeatureHashing
from ._labels import MISSING_LABELS, LabelCounter, Where
from ._values import float32_problem

__all__ = [
    "MISSING_VALUES",
    "MAX_CATEGORIES",
    "MAX_GROUPS",
    "Column",
    "TabularSchema",
    "Rows",
    "TabularScanner",
    "TabularEncoder",
    "is_number",
    "arrow_kind",
    "resolve_column",
]

#: Values that mean "missing" in a CSV field.
MISSING_VALUES = ("", "?")
#: Most categories of one categorical column (one-hot width guard).
MAX_CATEGORIES = 32768
#: Most distinct values of the group column (codes are int16).
MAX_GROUPS = 32767

#: the column types that only hashing can encode (no vocabulary is collected for them): a list of tokens, a map token -> number
HASHED_ONLY = ("tokens", "map")

_MISSING_SET = pa.array(list(MISSING_VALUES), pa.string())

#: Pool of the large per-piece Arrow buffers. The system allocator hands freed
#: pieces back to the OS at once; Arrow's default pool (mimalloc / jemalloc) keeps
#: them cached, which nearly doubled the resident size of an ingest.
_POOL = pa.system_memory_pool()
_MISSING_LABEL_SET = pa.array(list(MISSING_LABELS), pa.string())


# ---------------------------------------------------------------------------------
# schema
# ---------------------------------------------------------------------------------
@dataclasses.dataclass
class Column:
    """One source column.

    Attributes
    ----------
    name : str
    role : {"feature", "label", "group", "weight"}
    type : {"numeric", "categorical", "tokens", "map"} or None
        None until the reader has seen the column's values (a CSV column), and for the label and weight columns.
    categories : list of str or None
        Sorted vocabulary of a categorical feature column.
    """

    name: str
    role: str
    type: str | None = "numeric"
    categories: list[str] | None = None

    @property
    def is_feature(self) -> bool:
        """Whether the column contributes features (features and the group column do)."""
        return self.role in ("feature", "group")

    @property
    def width(self) -> int:
        """Number of features this column contributes."""
        if not self.is_feature:
            return 0
        return len(self.categories or ()) if self.type == "categorical" else 1

    def feature_names(self) -> list[str]:
        """Names of the features this column contributes."""
        if not self.is_feature:
            return []
        if self.type == "categorical":
            return [f"{self.name}={c}" for c in self.categories or ()]
        return [self.name]

    def to_dict(self) -> dict[str, Any]:
        """Manifest form."""
        d: dict[str, Any] = {"name": self.name, "role": self.role, "type": self.type}
        if self.type == "categorical" and self.role in ("feature", "group"):
            d["categories"] = list(self.categories or ())
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Column:
        """Inverse of :meth:`to_dict`."""
        cats = d.get("categories")
        return cls(str(d["name"]), str(d["role"]), str(d.get("type", "numeric")), None if cats is None else [str(c) for c in cats])


@dataclasses.dataclass
class TabularSchema:
    """Columns of a tabular source and the features they produce (one-hot, or hashed into ``hashing``'s slots)."""

    columns: list[Column]
    hashing: FeatureHashing | None = None

    def index(self, role: str) -> int | None:
        """Position of the (first) column with ``role``, or None."""
        for j, c in enumerate(self.columns):
            if c.role == role:
                return j
        return None

    @property
    def names(self) -> list[str]:
        """Column names."""
        return [c.name for c in self.columns]

    @property
    def n_features(self) -> int:
        """Total number of features."""
        return self.hashing.n_features if self.hashing is not None else sum(c.width for c in self.columns)

    @property
    def feature_names(self) -> Sequence[str]:
        """Names of all features, in order (hashed slots: a :class:`~dpipe._wide.NamePattern`)."""
        return self.hashing.feature_names if self.hashing is not None else [n for c in self.columns for n in c.feature_names()]

    def offsets(self) -> list[int]:
        """First feature of every column (columns without features get the running offset)."""
        out, off = [], 0
        for c in self.columns:
            out.append(off)
            off += c.width
        return out

    def numeric_columns(self) -> frozenset[int]:
        """Columns a CSV reader may parse straight to float64 (numeric features and the weight)."""
        return frozenset(j for j, c in enumerate(self.columns) if (c.role == "feature" and c.type == "numeric") or c.role == "weight")

    def to_list(self) -> list[dict[str, Any]]:
        """Manifest ``encoding["columns"]``."""
        return [c.to_dict() for c in self.columns]

    @classmethod
    def from_list(cls, items: Sequence[dict[str, Any]], hashing: FeatureHashing | None = None) -> TabularSchema:
        """Inverse of :meth:`to_list`."""
        return cls([Column.from_dict(d) for d in items], hashing)


@overload
def resolve_column(spec: None, names: Sequence[str], param: str, path: str, owner: str = ...) -> None: ...
@overload
def resolve_column(spec: str | int, names: Sequence[str], param: str, path: str, owner: str = ...) -> int: ...
@overload
def resolve_column(spec: str | int | None, names: Sequence[str], param: str, path: str, owner: str = ...) -> int | None: ...
def resolve_column(spec: str | int | None, names: Sequence[str], param: str, path: str, owner: str = "ingest") -> int | None:
    """Position of the column named or numbered by ``spec`` (negative ints count from the end)."""
    if spec is None:
        return None
    n = len(names)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        j = int(spec)
        if -n <= j < n:
            return j % n
        raise ParameterError(f"The {param!r} parameter of {owner} is column {j}, but {path} has {n} columns.")
    spec = str(spec)
    if spec in names:
        return list(names).index(spec)
    raise ParameterError(f"The {param!r} parameter of {owner} names no column of {path}: {spec!r} is not one of {list(names)[:50]}.")


# ---------------------------------------------------------------------------------
# rows of a piece and value helpers
# ---------------------------------------------------------------------------------
class Rows:
    """Where the rows of one piece come from (for error messages).

    Parameters
    ----------
    path : str
        Source file.
    n : int
        Number of rows.
    lines : ndarray of int64, optional
        1-based line of every row (text sources).
    offset : int
        Rows of the file before this piece (Parquet sources).
    order : int
        Index of the file in the list of sources.
    """

    __slots__ = ("path", "n", "lines", "offset", "order")

    def __init__(self, path: str, n: int, lines: np.ndarray | None = None, offset: int = 0, order: int = 0) -> None:
        self.path = path
        self.n = int(n)
        self.lines = lines
        self.offset = int(offset)
        self.order = order

    def where(self, i: int) -> Where:
        """Place of row ``i`` of the piece."""
        if self.lines is not None:
            return Where(self.path, line=int(self.lines[i]), order=self.order)
        return Where(self.path, row=self.offset + int(i) + 1, order=self.order)

    def slice(self, start: int, stop: int) -> Rows:
        """Rows ``start:stop`` of the piece."""
        lines = None if self.lines is None else self.lines[start:stop]
        return Rows(self.path, stop - start, lines, self.offset + start, self.order)


def _is_string(arr: pa.Array) -> bool:
    return pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)


def is_number(s: str) -> bool:
    """Whether ``s`` is a finite number by the same rule as numeric columns (Arrow's cast)."""
    try:
        v = pc.cast(pa.array([s], pa.string()), pa.float64())[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return v is not None and math.isfinite(v)


def _first_failing(arr: pa.Array, fn) -> int:
    """Index of the first element on which ``fn(slice)`` raises (``fn(arr)`` raises)."""
    lo, n = 0, len(arr)
    while n > 1:
        half = n // 2
        try:
            fn(arr.slice(lo, half))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            n = half
            continue
        lo, n = lo + half, n - half
    return lo


def _value(arr: pa.Array, i: int) -> Any:
    """Element ``i`` as text, as it would read in the source (numbers without a needless ``.0``)."""
    v = arr[int(i)].as_py()
    if isinstance(v, float):
        return repr(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
    return v if v is None or isinstance(v, str) else str(v)


def to_float(arr: pa.Array, name: str, rows: Rows, why: str = "") -> np.ndarray:
    """Values of a numeric column as float64, or an :class:`InputError` at the first bad one.

    Parameters
    ----------
    arr : pyarrow.Array
        Strings (CSV, already stripped) or a numeric Arrow type (Parquet).
    name : str
        Column name, for messages.
    rows : Rows
        Where the values come from.
    why : str
        Explanation appended to a "non-numeric value" message.
    """
    if _is_string(arr):
        cast = lambda a: pc.cast(a, pa.float64())  # noqa: E731
        try:
            out = cast(arr)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            i = _first_failing(arr, cast)
            v = _value(arr, i)
            if v in MISSING_VALUES:
                raise rows.where(i).error(f"missing value {v!r} in numeric column {name!r}") from None
            raise rows.where(i).error(f"non-numeric value {v!r} in numeric column {name!r}{why}") from None
    else:
        if arr.null_count:
            i = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
            raise rows.where(i).error(f"missing value (null) in numeric column {name!r}")
        if pa.types.is_boolean(arr.type):
            arr = pc.cast(arr, pa.int8())
        try:
            out = pc.cast(arr, pa.float64(), safe=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise rows.where(0).error(f"column {name!r} of type {arr.type} cannot be read as numbers ({exc})") from None
    vals = np.asarray(out.to_numpy(zero_copy_only=False), dtype=np.float64)
    bad = ~np.isfinite(vals)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise rows.where(i).error(f"non-finite value {_value(arr, i)!r} in numeric column {name!r}")
    problem = float32_problem(vals)
    if problem is not None:
        i, reason = problem
        raise rows.where(i).error(f"value {_value(arr, i)} in numeric column {name!r} {reason}")
    return vals


def as_strings(arr: pa.Array, null: str | None = "?") -> pa.Array:
    """String form of a column: Parquet numbers are formatted, nulls become ``null``."""
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    if not _is_string(arr):
        arr = pc.cast(arr, pa.string())
    elif pa.types.is_large_string(arr.type):
        arr = pc.cast(arr, pa.string())
    if null is not None and arr.null_count:
        arr = pc.fill_null(arr, null)
    return arr


def _first_index(codes: np.ndarray) -> np.ndarray:
    """First position of every code ``0..k-1`` in ``codes`` (all must occur)."""
    _, first = np.unique(codes, return_index=True)
    return first


def _distinct(arr: pa.Array) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(distinct values, their counts, their first positions) of a string array."""
    de = pc.dictionary_encode(arr)
    values = de.dictionary.to_pylist()
    codes = de.indices.to_numpy(zero_copy_only=False)
    counts = np.bincount(codes, minlength=len(values))
    return values, counts, _first_index(codes)


def _sort_values(values) -> list[str]:
    """Sorted vocabulary: numerically when every value is a number, else as strings."""
    values = list(values)
    if values and all(is_number(v) for v in values):
        return sorted(values, key=lambda v: (float(v), v))
    return sorted(values)


# ---------------------------------------------------------------------------------
# pass 1
# ---------------------------------------------------------------------------------
class TabularScanner:
    """Pass 1 over a tabular source: types, vocabularies, labels, groups, validation.

    Parameters
    ----------
    columns : list of Column
        Names and roles; ``type`` None means "decide from the data" (CSV without
        ``like``). Categorical columns with ``categories`` set (``like``) are checked
        against them instead of collecting a vocabulary.
    unseen : {"error", "ignore"}
        What an unseen category of a fixed vocabulary does.
    groups : list of str, optional
        Fixed group vocabulary (``like``); unseen group values are always errors.
    """

    def __init__(self, columns: list[Column], unseen: str = "error", groups: list[str] | None = None, hashing: FeatureHashing | None = None) -> None:
        self.columns = columns
        self.hashing = hashing
        self.unseen = unseen
        self.fixed_groups = groups
        self._fixed = [c.type == "categorical" and c.categories is not None for c in columns]
        self._fixed_arr = [pa.array(c.categories, pa.string()) if f else None for c, f in zip(columns, self._fixed)]
        self._cats: list[set[str]] = [set() for _ in columns]
        self._first_missing: list[tuple[Where, str] | None] = [None] * len(columns)
        self._numeric_since: list[tuple[Where, str] | None] = [None] * len(columns)
        self.labels = LabelCounter()
        self.group_first: dict[str, Where] = {}
        self.unseen_counts: dict[str, dict[str, int]] = {}
        self.n_rows = 0
        #: non-zero values of the numeric feature columns scanned (a one-hot column holds one a row): ingest's layout choice
        self.numeric_nonzeros = 0

    def scan(self, arrays: Sequence[pa.Array], rows: Rows) -> None:
        """Scan one piece (one array per column, in column order)."""
        if rows.n == 0:
            return
        for j, (col, arr) in enumerate(zip(self.columns, arrays)):
            if col.role == "label":
                self._scan_label(col, arr, rows)
            elif col.role == "weight":
                self._scan_weight(col, arr, rows)
            else:
                if col.role == "group":
                    self._scan_group(col, arr, rows)
                self._scan_feature(j, col, arr, rows)
        self.n_rows += rows.n

    def _scan_label(self, col: Column, arr: pa.Array, rows: Rows) -> None:
        if arr.null_count:
            i = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
            raise rows.where(i).error(f"missing label (null) in column {col.name!r}")
        s = as_strings(arr, null=None)
        miss = pc.is_in(s, value_set=_MISSING_LABEL_SET).to_numpy(zero_copy_only=False)
        if miss.any():
            i = int(np.flatnonzero(miss)[0])
            raise rows.where(i).error(f"missing label {_value(s, i)!r} in column {col.name!r}")
        values, counts, first = _distinct(s)
        self.labels.add(values, counts, [rows.where(i) for i in first])

    def _scan_weight(self, col: Column, arr: pa.Array, rows: Rows) -> None:
        w = to_float(arr, col.name, rows)
        neg = w < 0
        if neg.any():
            i = int(np.flatnonzero(neg)[0])
            raise rows.where(i).error(f"negative weight {_value(arr, i)!r} in column {col.name!r} (weights must be finite and >= 0)")

    def _scan_group(self, col: Column, arr: pa.Array, rows: Rows) -> None:
        s = as_strings(arr)
        if self.fixed_groups is not None:
            codes = pc.index_in(s, value_set=pa.array(self.fixed_groups, pa.string()))
            if codes.null_count:
                i = int(np.flatnonzero(codes.is_null().to_numpy(zero_copy_only=False))[0])
                raise rows.where(i).error(
                    f"unseen group {_value(s, i)!r} in column {col.name!r}: the training store's groups are {self.fixed_groups}"
                )
            return
        values, _, first = _distinct(s)
        for v, i in zip(values, first):
            if v not in self.group_first:
                if len(self.group_first) >= MAX_GROUPS:
                    raise rows.where(i).error(f"group column {col.name!r} has more than {MAX_GROUPS} distinct values")
                self.group_first[v] = rows.where(i)

    def _scan_feature(self, j: int, col: Column, arr: pa.Array, rows: Rows) -> None:
        if col.type in HASHED_ONLY:  # read as tokens at pass 2 (ingest refuses them without hashing)
            return
        if col.type is None and not self._infer_type(j, col, arr, rows):
            return
        if col.type == "numeric":
            why = ""
            since = self._numeric_since[j]
            if since is not None:
                w, v0 = since
                why = f" (the column is numeric: its first value {v0!r}, {w.describe()}, is a number)"
            self.numeric_nonzeros += int(np.count_nonzero(to_float(arr, col.name, rows, why)))
            return
        if self.hashing is not None:  # hashed: any value has a slot, no vocabulary to collect (nor to outgrow)
            return
        s = as_strings(arr)
        if self._fixed[j]:
            self._scan_fixed_categories(col, s, self._fixed_arr[j], rows)
            return
        cats = self._cats[j]
        cats.update(pc.unique(s).to_pylist())
        if len(cats) > MAX_CATEGORIES:
            raise rows.where(rows.n - 1).error(
                f"categorical column {col.name!r} has more than {MAX_CATEGORIES} distinct values by this line; "
                "one-hot encoding it would be too wide (is it an identifier or a numeric column with text in it?)"
            )

    def _infer_type(self, j: int, col: Column, arr: pa.Array, rows: Rows) -> bool:
        """Type a column from its first present value (a number: numeric, and a missing value before it is an error);
        False when every value of ``arr`` is missing (the column stays untyped, its values kept as categories)."""
        miss = pc.is_in(arr, value_set=_MISSING_SET).to_numpy(zero_copy_only=False)
        present = np.flatnonzero(~miss)
        if present.size == 0:
            if self._first_missing[j] is None:
                self._first_missing[j] = (rows.where(0), _value(arr, 0))
            self._cats[j].update(pc.unique(arr).to_pylist())
            return False
        k = int(present[0])
        v = _value(arr, k)
        if not is_number(v):
            col.type = "categorical"
            return True
        col.type = "numeric"
        self._numeric_since[j] = (rows.where(k), v)
        self._cats[j] = set()
        first = self._first_missing[j]
        if first is None and k > 0:
            first = (rows.where(0), _value(arr, 0))
        if first is not None:
            raise first[0].error(f"missing value {first[1]!r} in numeric column {col.name!r}")
        return True

    def _scan_fixed_categories(self, col: Column, s: pa.Array, known: pa.Array, rows: Rows) -> None:
        """A categorical column of a ``like`` store (``known``: its categories): a value it has not seen is an error, or
        (``unseen="ignore"``) counted."""
        codes = pc.index_in(s, value_set=known)
        if not codes.null_count:
            return
        unseen = codes.is_null().to_numpy(zero_copy_only=False)
        if self.unseen == "error":
            i = int(np.flatnonzero(unseen)[0])
            raise rows.where(i).error(
                f"unseen category {_value(s, i)!r} in column {col.name!r} (not among the {len(col.categories or ())} "
                f"categories of the training store); pass unseen='ignore' to encode it as all zeros"
            )
        counts = self.unseen_counts.setdefault(col.name, {})
        vc = pc.value_counts(s.filter(pa.array(unseen)))
        for item in vc.to_pylist():
            v, c = item["values"], int(item["counts"])
            if v in counts or len(counts) < 1000:
                counts[v] = counts.get(v, 0) + c
            else:
                counts["<other>"] = counts.get("<other>", 0) + c

    def numeric_columns(self) -> frozenset[int]:
        """Columns known to be numeric so far (see :meth:`TabularSchema.numeric_columns`)."""
        return TabularSchema(self.columns).numeric_columns()

    def schema(self) -> TabularSchema:
        """Columns with their final types and sorted vocabularies (after the whole source)."""
        out = []
        for j, c in enumerate(self.columns):
            c = dataclasses.replace(c)
            if c.role in ("feature", "group"):
                if c.type is None:
                    c.type = "categorical"
                if c.type == "categorical" and not self._fixed[j]:
                    c.categories = None if self.hashing is not None else sorted(self._cats[j])
            elif c.role == "label":
                c.type = "categorical"
                c.categories = None
            elif c.role == "weight":
                c.type = "numeric"
            out.append(c)
        return TabularSchema(out, self.hashing)

    def groups(self) -> list[str] | None:
        """Sorted group vocabulary (or the fixed one)."""
        if self.fixed_groups is not None:
            return list(self.fixed_groups)
        return _sort_values(self.group_first) if self.group_first else []


# ---------------------------------------------------------------------------------
# pass 2
# ---------------------------------------------------------------------------------
class TabularEncoder:
    """Pass 2: turn pieces of a tabular source into rows, dense (:meth:`encode`) or CSR (:meth:`encode_csr`).

    Parameters
    ----------
    schema : TabularSchema
        Final columns (from :meth:`TabularScanner.schema` or a ``like`` store); with
        ``schema.hashing`` the feature columns are hashed (:mod:`._hashing`), CSR only.
    label_map : dict
        Label string -> -1 / +1, covering every label of the source.
    groups : list of str, optional
        Group vocabulary (code = position).
    """

    def __init__(self, schema: TabularSchema, label_map: dict[str, int], groups: list[str] | None = None) -> None:
        self.schema = schema
        self.offsets = schema.offsets()
        self.n_features = schema.n_features
        self.hashing = schema.hashing
        self._cats = [pa.array(c.categories, pa.string()) if c.is_feature and c.type == "categorical" and c.categories is not None else None
                      for c in schema.columns]
        # hashed numeric columns: one token each, its slot and sign fixed
        self._name_slots = None if self.hashing is None else dict(zip(
            [c.name for c in schema.columns if c.is_feature], zip(*self.hashing.slots([c.name for c in schema.columns if c.is_feature]))))
        keys = list(label_map)
        self._label_keys = pa.array(keys, pa.string())
        self._label_lut = np.array([label_map[k] for k in keys], dtype=np.int8)
        self._groups = None if groups is None else pa.array(groups, pa.string())

    def _targets(self, arrays: Sequence[pa.Array], rows: Rows) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """(y int8, group int16 or None, weight float32 or None) of one piece."""
        y = group = weight = None
        for col, arr in zip(self.schema.columns, arrays):
            if col.role == "label":
                codes = pc.index_in(as_strings(arr, null=None), value_set=self._label_keys)
                if codes.null_count:  # pragma: no cover - pass 1 saw every label
                    i = int(np.flatnonzero(codes.is_null().to_numpy(zero_copy_only=False))[0])
                    raise rows.where(i).error(f"label {_value(arr, i)!r} was not seen in the first pass (did the file change?)")
                y = self._label_lut[codes.to_numpy(zero_copy_only=False)]
            elif col.role == "weight":
                weight = to_float(arr, col.name, rows).astype(np.float32)
            elif col.role == "group" and self._groups is not None:
                codes = pc.index_in(as_strings(arr), value_set=self._groups)
                if codes.null_count:  # pragma: no cover - pass 1 checked
                    i = int(np.flatnonzero(codes.is_null().to_numpy(zero_copy_only=False))[0])
                    raise rows.where(i).error(f"group {_value(arr, i)!r} was not seen in the first pass (did the file change?)")
                group = codes.to_numpy(zero_copy_only=False).astype(np.int16)
        if y is None:  # an unlabelled source (no label column): y is all 0
            y = np.zeros(rows.n, dtype=np.int8)
        return y, group, weight

    def _column_entries(self, j: int, col: Column, arr: pa.Array, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
        """Every row's (feature index, value) from feature column ``j``; index -1: nothing (an unseen category)."""
        if col.type == "numeric":
            values = to_float(arr, col.name, rows)
            if self.hashing is None:
                return np.full(rows.n, self.offsets[j], dtype=np.int64), values
            assert self._name_slots is not None  # made with the hashing
            slot, sign = self._name_slots[col.name]
            return np.full(rows.n, slot, dtype=np.int64), values * float(sign)
        strings = as_strings(arr)
        if self.hashing is None:
            codes = pc.fill_null(pc.index_in(strings, value_set=self._cats[j]), -1).to_numpy(zero_copy_only=False).astype(np.int64)
            return np.where(codes >= 0, self.offsets[j] + codes, -1), np.ones(rows.n)
        encoded = pc.dictionary_encode(strings).combine_chunks() if isinstance(strings, pa.ChunkedArray) else pc.dictionary_encode(strings)
        slot, sign = self.hashing.slots(f"{col.name}={v}" for v in encoded.dictionary.to_pylist())
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        return slot[codes].astype(np.int64), sign[codes].astype(np.float64)

    def encode(
        self, arrays: Sequence[pa.Array], rows: Rows, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """(X float32, y int8, group int16 or None, weight float32 or None) of one piece, dense (one-hot only).

        ``out``, an (n, n_features) float32 array (e.g. a slice of a shard buffer),
        receives the features and is returned as ``X``.
        """
        if self.hashing is not None:  # pragma: no cover - ingest routes hashing to encode_csr
            raise RuntimeError("hashed features are encoded as CSR (encode_csr)")
        X = np.zeros((rows.n, self.n_features), dtype=np.float32) if out is None else out
        X[...] = 0.0
        every = np.arange(rows.n)
        for j, (col, arr) in enumerate(zip(self.schema.columns, arrays)):
            if col.is_feature:
                index, values = self._column_entries(j, col, arr, rows)
                ok = index >= 0
                X[every[ok], index[ok]] = values[ok]
        return (X, *self._targets(arrays, rows))

    def _column_coo(self, j: int, col: Column, arr: Any, rows: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Feature column ``j`` as (row, feature index, value) triplets; a row may have none (an unseen category, an empty
        list) or several (a token list or map column, hashed: token ``"c=t"`` with 1, or ``"c=k"`` with the map's value)."""
        if col.type not in HASHED_ONLY:
            index, values = self._column_entries(j, col, arr, rows)
            ok = np.flatnonzero(index >= 0)
            return ok, index[ok], values[ok]
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        # the rows' entries in the child arrays: offsets are absolute (a slice keeps them), a null row has none
        offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        lengths = np.diff(offsets) * ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        row = np.repeat(np.arange(rows.n, dtype=np.int64), lengths)
        ends = np.cumsum(lengths)
        take = pa.array(np.arange(int(ends[-1]) if ends.size else 0) - np.repeat(ends - lengths - offsets[:-1], lengths))
        if col.type == "map":
            keys = arr.keys.take(take)
            weights = to_float(arr.items.take(take), col.name, rows, " (a value of the map column)")
        else:
            keys, weights = arr.values.take(take), np.ones(len(take))
        encoded = pc.dictionary_encode(pc.utf8_trim_whitespace(as_strings(keys)))
        assert self.hashing is not None  # token and map columns are read only with hashing (ingest refuses them without)
        slot, sign = self.hashing.slots(f"{col.name}={v}" for v in encoded.dictionary.to_pylist())
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        return row, slot[codes].astype(np.int64), weights * sign[codes]

    def encode_csr(self, arrays: Sequence[pa.Array], rows: Rows) -> tuple[Any, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """:meth:`encode` as a CSR block (float32 values, sorted column indices, no stored zeros), without a dense
        buffer; hashed tokens that share a slot in a row are summed."""
        from ..reduce._block import csr_block

        parts = [self._column_coo(j, col, arr, rows) for j, (col, arr) in enumerate(zip(self.schema.columns, arrays)) if col.is_feature]
        row = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
        key = row * self.n_features + (np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64))
        vals = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0)
        if self.hashing is not None or len(parts) > 1:  # rows in order, columns sorted within; a row's repeated slots add up
            order = np.argsort(key, kind="stable")
            key, vals = key[order], vals[order]
        if key.size and self.hashing is not None:  # FeatureHasher's sum_duplicates
            starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
            key, vals = key[starts], np.add.reduceat(vals, starts)
        vals32 = vals.astype(np.float32)
        stored = vals32 != 0
        key, vals32 = key[stored], vals32[stored]
        indptr = np.zeros(rows.n + 1, dtype=np.int64)
        np.cumsum(np.bincount(key // self.n_features, minlength=rows.n), out=indptr[1:])
        X = csr_block(vals32, key % self.n_features, indptr, self.n_features)
        return (X, *self._targets(arrays, rows))


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or (pa.types.is_dictionary(t) and _is_text(t.value_type))


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t)


def arrow_kind(t: pa.DataType) -> str | None:
    if pa.types.is_map(t):
        return "map" if _is_text(t.key_type) and _is_number(t.item_type) else None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "tokens" if _is_text(t.value_type) else None
    if _is_number(t):
        return "numeric"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "categorical"
    if pa.types.is_dictionary(t) and (pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)):
        return "categorical"
    return None
