"""A shard's feature block: one type (:class:`FeatureBlock`), one class per store layout.

A store's ``layout`` (its manifest's) names a block class in :data:`LAYOUTS`: :class:`DenseBlock`
wraps a C-contiguous float32 ``ndarray`` of shape ``(n, d)``, :class:`CSRBlock` a
``scipy.sparse.csr_array`` with float32 ``data`` and int32 ``indices`` (int64 where ``d`` needs
them). A block holds its native array (:attr:`~FeatureBlock.array`: what the store formats read
and write, and what users see as ``Shard.X``) and offers the products, sums and selections every
pass and check is made of; a shard's ``block`` is its ``X`` wrapped (no copy). Only this module,
the store formats' readers and writers and their checks know a block's layout: everything else
calls methods, so a new layout is a class here (registered in :data:`LAYOUTS`) and its
reader / writer.

The products call the numba kernels of :mod:`._linalg` (and the column sums those of
:mod:`._moment_kernels`), imported on first use: reading a store loads no numba, and a dense
fit never loads ``scipy.sparse``. A method call costs a few microseconds above its kernel (one
call per shard and pass); each product is O(n d) on a dense block and O(nnz) on a CSR one, and
a dense and a CSR block of the same rows give bitwise the same results (see :mod:`._linalg`).

The free functions at the end (:func:`matvec`, :func:`take_rows`, ...) take a native array or
a block and call the block's method: for tests, benchmarks and user-facing inputs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Protocol

import numpy as np

from .._registries import Registry

__all__ = ["FeatureBlock", "DenseBlock", "CSRBlock", "Layout", "LAYOUTS", "as_block", "block_of_input", "is_csr", "layout_of", "csr_block",
           "empty_block", "block_nbytes", "block_nnz", "take_rows", "slice_rows", "concat_rows", "dense_rows", "first_nonfinite",
           "value_at", "to_float32", "matvec", "matvec_pair", "rmatvec", "rmatvec_squares", "rows_product"]


class FeatureBlock(Protocol):
    """The feature rows of a shard, whatever their layout: the one interface every consumer calls.

    The class methods build blocks of the class's layout; the products take and return float64
    arrays, accumulated in float64 without a float64 copy of the block.
    """

    #: the store layout this class holds (its manifest's ``layout``, its key in :data:`LAYOUTS`)
    layout: ClassVar[str]
    #: whether the layout stores the non-zero values only (its size and its passes go with ``nnz``, not ``n d``)
    sparse: ClassVar[bool]

    @classmethod
    def feature_bytes(cls, n_rows: int, n_features: int, nnz: int) -> int:
        """Bytes a block of ``n_rows`` rows, ``n_features`` columns and ``nnz`` stored values holds in memory (from a manifest's counts)."""
        ...

    @classmethod
    def holds(cls, X: Any) -> bool:
        """Whether ``X`` is a native array of this layout."""
        ...

    @classmethod
    def of(cls, X: Any) -> FeatureBlock:
        """The block of ``X`` (a native array of this layout, or an array the layout converts) with float32 values, canonical."""
        ...

    @classmethod
    def empty(cls, n_features: int) -> FeatureBlock:
        """A block of no rows."""
        ...

    @classmethod
    def concat(cls, blocks: list[FeatureBlock]) -> FeatureBlock:
        """The blocks (of this layout, at least one) one under the other."""
        ...

    @property
    def array(self) -> Any:
        """The native array (what the store formats write)."""
        ...

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_rows, n_features)``."""
        ...

    @property
    def dtype(self) -> np.dtype[Any]:
        """The values' dtype (float32 in a store)."""
        ...

    @property
    def nbytes(self) -> int:
        """Bytes held by the block's arrays."""
        ...

    @property
    def nnz(self) -> int:
        """Stored values (every entry of a dense block)."""
        ...

    def take_rows(self, rows: np.ndarray) -> FeatureBlock:
        """The rows ``rows`` (an integer or boolean index), in the block's layout."""
        ...

    def slice_rows(self, start: int, stop: int) -> FeatureBlock:
        """Rows ``start:stop`` (a view where the layout allows)."""
        ...

    def dense_rows(self, rows: np.ndarray | slice, out: np.ndarray | None = None) -> np.ndarray:
        """The rows ``rows`` as a dense array (into ``out`` when given): for O(rows x d) work such as moment blocks."""
        ...

    def first_nonfinite(self) -> tuple[int, int] | None:
        """(row, column) of the first non-finite value, or None."""
        ...

    def check_stored(self, n_features: int, nnz: int | None) -> str | None:
        """What is wrong with a block read from a store (``nnz``: the manifest's stored values, None where it has none), or None.

        The checks the kernels rely on (a CSR block's offsets rise, its indices lie in ``[0, d)``): O(nnz) at most.
        """
        ...

    def value_at(self, row: int, col: int) -> float:
        """The value at ``(row, col)`` (0.0 where the layout stores nothing)."""
        ...

    def matvec(self, w: np.ndarray) -> np.ndarray:
        """``X @ w`` in float64; shape (n,)."""
        ...

    def matvec_pair(self, u: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(X @ u, X @ w)`` in float64, reading the block once (a pass over a shard is bound by reading it)."""
        ...

    def rmatvec(self, g: np.ndarray) -> np.ndarray:
        """``X.T @ g`` in float64; shape (d,)."""
        ...

    def rmatvec_squares(self, g: np.ndarray, c: np.ndarray) -> np.ndarray:
        """``[X.T @ g, (X * X).T @ c]`` in float64 (shape ``(2, d)``), reading the block once; the first row equals :meth:`rmatvec`'s.

        The second is a weighted column sum of squares: the diagonal of ``X^T diag(c) X``, which
        Newton's Jacobi preconditioner takes from the curvature ``c`` of every row.
        """
        ...

    def rows_product(self, rows: np.ndarray, D: np.ndarray, dw: np.ndarray, db: float) -> np.ndarray:
        """``[X_A, -1]^T D [X_A, -1] [dw, db]`` over the rows ``A = rows`` only (shape ``d + 1``): a Hessian-vector
        product whose curvature ``D`` is non-zero on a few rows."""
        ...

    def column_sums(self, v: np.ndarray, total: float, mean: np.ndarray, m2: np.ndarray) -> None:
        """Fill ``mean`` and ``m2`` (zeros on entry) with every column's weighted mean and centred sum of squares, weights ``v``
        summing to ``total`` (:func:`dpipe.reduce._moments.column_weighted_moments`: its sums, in its order)."""
        ...


@dataclasses.dataclass(frozen=True)
class Layout:
    """One store layout: its name (a manifest's ``layout``) and the block class that holds it."""

    name: str
    block: type[FeatureBlock]


def _index_dtype(n_features: int, nnz: int = 0) -> type:
    return np.int32 if max(n_features, nnz) < 2**31 else np.int64


#: rows scanned at a time when locating a bad value (bounds the temporary boolean array)
_SCAN_ROWS = 65536


class DenseBlock:
    """A dense block: a C-contiguous ``(n, d)`` array (float32 in a store; float64 accepted by the products)."""

    layout: ClassVar[str] = "dense"
    sparse: ClassVar[bool] = False
    __slots__ = ("X",)

    def __init__(self, X: np.ndarray) -> None:
        self.X = X

    def __repr__(self) -> str:
        return f"DenseBlock(shape={self.X.shape}, dtype={self.X.dtype})"

    @classmethod
    def holds(cls, X: Any) -> bool:
        return isinstance(X, np.ndarray)

    @classmethod
    def of(cls, X: Any) -> DenseBlock:
        if not isinstance(X, np.ndarray) and hasattr(X, "toarray"):  # a sparse block: densified
            X = X.toarray()
        return cls(np.ascontiguousarray(X, dtype=np.float32))

    @classmethod
    def feature_bytes(cls, n_rows: int, n_features: int, nnz: int) -> int:
        return 4 * n_rows * n_features

    @classmethod
    def empty(cls, n_features: int) -> DenseBlock:
        return cls(np.zeros((0, n_features), dtype=np.float32))

    @classmethod
    def concat(cls, blocks: list[FeatureBlock]) -> DenseBlock:
        return cls(np.concatenate([b.array for b in blocks]))

    @property
    def array(self) -> np.ndarray:
        return self.X

    @property
    def shape(self) -> tuple[int, int]:
        n, d = self.X.shape
        return int(n), int(d)

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.X.dtype

    @property
    def nbytes(self) -> int:
        return int(self.X.nbytes)

    @property
    def nnz(self) -> int:
        return int(self.X.size)

    def take_rows(self, rows: np.ndarray) -> DenseBlock:
        return DenseBlock(np.ascontiguousarray(self.X[rows]))

    def slice_rows(self, start: int, stop: int) -> DenseBlock:
        return DenseBlock(self.X[start:stop])

    def dense_rows(self, rows: np.ndarray | slice, out: np.ndarray | None = None) -> np.ndarray:
        X = self.X
        if isinstance(rows, slice):
            B: np.ndarray = X[rows]
            if out is None:
                return B
            out[...] = B
            return out
        if out is None:
            return np.take(X, rows, axis=0)
        np.take(X, rows, axis=0, out=out)
        return out

    def first_nonfinite(self) -> tuple[int, int] | None:
        X = self.X
        for start in range(0, X.shape[0], _SCAN_ROWS):
            bad = ~np.isfinite(X[start : start + _SCAN_ROWS])
            if bad.any():
                r, c = np.unravel_index(int(np.argmax(bad)), bad.shape)
                return start + int(r), int(c)
        return None

    def value_at(self, row: int, col: int) -> float:
        return float(self.X[row, col])

    def check_stored(self, n_features: int, nnz: int | None) -> str | None:
        return None

    def matvec(self, w: np.ndarray) -> np.ndarray:
        from ._linalg import _matvec

        w = np.ascontiguousarray(w, dtype=np.float64)
        X = np.ascontiguousarray(self.X)
        out = np.empty(X.shape[0])
        _matvec(X, w, out)
        return out

    def matvec_pair(self, u: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from ._linalg import _matvec_pair

        u, w = np.ascontiguousarray(u, dtype=np.float64), np.ascontiguousarray(w, dtype=np.float64)
        out_u, out_w = np.empty(self.X.shape[0]), np.empty(self.X.shape[0])
        _matvec_pair(np.ascontiguousarray(self.X), u, w, out_u, out_w)
        return out_u, out_w

    def rmatvec(self, g: np.ndarray) -> np.ndarray:
        from ._linalg import _rmatvec

        g = np.ascontiguousarray(g, dtype=np.float64)
        out = np.zeros(self.X.shape[1])
        _rmatvec(np.ascontiguousarray(self.X), g, out)
        return out

    def rmatvec_squares(self, g: np.ndarray, c: np.ndarray) -> np.ndarray:
        from ._linalg import _rmatvec_squares

        g, c = np.ascontiguousarray(g, dtype=np.float64), np.ascontiguousarray(c, dtype=np.float64)
        out = np.zeros((2, self.X.shape[1]))  # the kernel writes both rows of the one result (no stacked copy)
        _rmatvec_squares(np.ascontiguousarray(self.X), g, c, out[0], out[1])
        return out

    def rows_product(self, rows: np.ndarray, D: np.ndarray, dw: np.ndarray, db: float) -> np.ndarray:
        from ._linalg import _rows_product

        out = np.zeros(self.X.shape[1] + 1)
        _rows_product(np.ascontiguousarray(self.X), rows, D, np.ascontiguousarray(dw, dtype=np.float64), float(db), out)
        return out

    def column_sums(self, v: np.ndarray, total: float, mean: np.ndarray, m2: np.ndarray) -> None:
        from ._moment_kernels import _moments

        _moments(np.ascontiguousarray(self.X), v, total, mean, m2)


class CSRBlock:
    """A CSR block: a ``scipy.sparse.csr_array`` with float32 values, canonical (sorted indices, no duplicates)."""

    layout: ClassVar[str] = "csr"
    sparse: ClassVar[bool] = True
    __slots__ = ("X",)

    def __init__(self, X: Any) -> None:
        self.X = X

    def __repr__(self) -> str:
        return f"CSRBlock(shape={self.X.shape}, nnz={self.X.nnz})"

    @classmethod
    def holds(cls, X: Any) -> bool:
        return not isinstance(X, np.ndarray) and getattr(X, "format", None) == "csr"

    @classmethod
    def of(cls, X: Any) -> CSRBlock:
        if not cls.holds(X):  # a dense array, another sparse format
            from scipy.sparse import csr_array

            X = csr_array(X.tocsr() if hasattr(X, "tocsr") else np.asarray(X, dtype=np.float32))
        if X.dtype != np.float32:
            X = X.astype(np.float32)
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()  # also sorts the indices
        return cls(X)

    @classmethod
    def from_arrays(cls, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, n_features: int) -> CSRBlock:
        """The block of ``len(indptr) - 1`` rows from its three arrays (float32 values; no copy where the dtypes already fit)."""
        from scipy.sparse import csr_array

        n = len(indptr) - 1
        idx = _index_dtype(n_features, int(indptr[-1]) if n >= 0 and len(indptr) else 0)
        return cls(csr_array((np.asarray(data, dtype=np.float32), np.asarray(indices, dtype=idx), np.asarray(indptr, dtype=idx)),
                             shape=(n, int(n_features)), copy=False))

    @classmethod
    def feature_bytes(cls, n_rows: int, n_features: int, nnz: int) -> int:
        return 8 * nnz + 4 * n_rows  # float32 values and int32 indices, int32 row offsets

    @classmethod
    def empty(cls, n_features: int) -> CSRBlock:
        return cls.from_arrays(np.zeros(0, np.float32), np.zeros(0, np.int32), np.zeros(1, np.int64), n_features)

    @classmethod
    def concat(cls, blocks: list[FeatureBlock]) -> CSRBlock:
        from scipy.sparse import vstack

        return cls.of(vstack([b.array for b in blocks], format="csr"))

    @property
    def array(self) -> Any:
        return self.X

    @property
    def shape(self) -> tuple[int, int]:
        n, d = self.X.shape
        return int(n), int(d)

    @property
    def dtype(self) -> np.dtype[Any]:
        dt: np.dtype[Any] = np.dtype(self.X.dtype)
        return dt

    @property
    def nbytes(self) -> int:
        return int(self.X.data.nbytes + self.X.indices.nbytes + self.X.indptr.nbytes)

    @property
    def nnz(self) -> int:
        return int(self.X.nnz)

    def take_rows(self, rows: np.ndarray) -> CSRBlock:
        return CSRBlock(self.X[np.asarray(rows)])

    def slice_rows(self, start: int, stop: int) -> CSRBlock:
        return CSRBlock(self.X[start:stop])

    def dense_rows(self, rows: np.ndarray | slice, out: np.ndarray | None = None) -> np.ndarray:
        B: np.ndarray = self.X[rows].toarray()
        if out is None:
            return B
        out[...] = B
        return out

    def first_nonfinite(self) -> tuple[int, int] | None:
        X = self.X
        bad = np.flatnonzero(~np.isfinite(X.data))
        if bad.size == 0:
            return None
        p = int(bad[0])
        return int(np.searchsorted(X.indptr, p, side="right") - 1), int(X.indices[p])

    def value_at(self, row: int, col: int) -> float:
        X = self.X
        lo, hi = int(X.indptr[row]), int(X.indptr[row + 1])
        hit = np.flatnonzero(X.indices[lo:hi] == col)
        return float(X.data[lo + hit[0]]) if hit.size else 0.0

    def check_stored(self, n_features: int, nnz: int | None) -> str | None:
        X = self.X
        ip = X.indptr
        if ip.size and (ip[0] != 0 or (ip.size > 1 and np.any(ip[1:] < ip[:-1]))):
            return "X's row offsets (indptr) are not increasing from 0"
        if X.indices.size and (int(X.indices.min()) < 0 or int(X.indices.max()) >= n_features):
            bad = int(np.argmax((X.indices < 0) | (X.indices >= n_features)))
            row = int(np.searchsorted(ip, bad, side="right") - 1)
            return f"feature index {int(X.indices[bad])} at row {row} of the shard is outside [0, {n_features})"
        if nnz is not None and X.nnz != nnz:
            return f"X holds {X.nnz} stored values, the manifest says {nnz}"
        return None

    def matvec(self, w: np.ndarray) -> np.ndarray:
        from ._linalg import _csr_matvec

        X = self.X
        out = np.empty(X.shape[0])
        _csr_matvec(X.indptr, X.indices, X.data, np.ascontiguousarray(w, dtype=np.float64), out)
        return out

    def matvec_pair(self, u: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from ._linalg import _csr_matvec_pair

        X = self.X
        u, w = np.ascontiguousarray(u, dtype=np.float64), np.ascontiguousarray(w, dtype=np.float64)
        out_u, out_w = np.empty(X.shape[0]), np.empty(X.shape[0])
        _csr_matvec_pair(X.indptr, X.indices, X.data, u, w, out_u, out_w)
        return out_u, out_w

    def rmatvec(self, g: np.ndarray) -> np.ndarray:
        from ._linalg import _csr_rmatvec

        X = self.X
        out = np.zeros(X.shape[1])
        _csr_rmatvec(X.indptr, X.indices, X.data, np.ascontiguousarray(g, dtype=np.float64), out)
        return out

    def rmatvec_squares(self, g: np.ndarray, c: np.ndarray) -> np.ndarray:
        from ._linalg import _csr_rmatvec_squares

        X = self.X
        g, c = np.ascontiguousarray(g, dtype=np.float64), np.ascontiguousarray(c, dtype=np.float64)
        out = np.zeros((2, X.shape[1]))
        _csr_rmatvec_squares(X.indptr, X.indices, X.data, g, c, out[0], out[1])
        return out

    def rows_product(self, rows: np.ndarray, D: np.ndarray, dw: np.ndarray, db: float) -> np.ndarray:
        from ._linalg import _csr_rows_product

        X = self.X
        out = np.zeros(X.shape[1] + 1)
        _csr_rows_product(X.indptr, X.indices, X.data, rows, D, np.ascontiguousarray(dw, dtype=np.float64), float(db), out)
        return out

    def column_sums(self, v: np.ndarray, total: float, mean: np.ndarray, m2: np.ndarray) -> None:
        from ._moment_kernels import _csr_moments

        X = self.X
        _csr_moments(X.indptr, X.indices, X.data, v, total, mean, m2)


#: the store layouts (a manifest's ``layout``) and their block classes, in the order a native array is recognized
LAYOUTS: Registry[Layout] = Registry("store layout", (Layout("dense", DenseBlock), Layout("csr", CSRBlock)))


def as_block(X: Any) -> FeatureBlock:
    """The block of ``X``: ``X`` itself if it is a block, else the native array wrapped (no copy) by the layout that holds it.

    Raises
    ------
    TypeError
        No registered layout holds ``X``.
    """
    for entry in LAYOUTS.values():
        if isinstance(X, entry.block):
            return X
        if entry.block.holds(X):
            return entry.block(X)  # type: ignore[call-arg]  # every block class wraps its native array
    raise TypeError(f"not a feature block of any store layout ({', '.join(LAYOUTS)}): {type(X).__name__}")


def block_of_input(X: Any) -> FeatureBlock:
    """The float32 block of a user's rows: CSR for any ``scipy.sparse`` matrix (never densified), else dense."""
    if hasattr(X, "tocsr"):
        return CSRBlock.of(X.tocsr())
    for entry in LAYOUTS.values():
        if entry.block.holds(X):
            return entry.block.of(X)
    return DenseBlock.of(X)


# -- free functions over native arrays or blocks: each calls the block's method ------------------------------------------
def is_csr(X: Any) -> bool:
    """Whether ``X`` is a CSR block (a ``scipy.sparse`` CSR array or matrix), without importing scipy."""
    return CSRBlock.holds(X) or isinstance(X, CSRBlock)


def layout_of(X: Any) -> str:
    """The store layout of ``X`` (``"dense"``, ``"csr"``, ...)."""
    return as_block(X).layout


def csr_block(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, n_features: int) -> Any:
    """A CSR array of ``len(indptr) - 1`` rows from its three arrays (:meth:`CSRBlock.from_arrays`'s native array)."""
    return CSRBlock.from_arrays(data, indices, indptr, n_features).array


def empty_block(n_features: int, layout: str = "dense") -> Any:
    """A native array of no rows."""
    return LAYOUTS[layout].block.empty(n_features).array


def to_float32(X: Any) -> Any:
    """``X`` with float32 values, in its layout's canonical form (dense: C-contiguous; CSR: sorted indices and no duplicates)."""
    for entry in LAYOUTS.values():
        if entry.block.holds(X):
            return entry.block.of(X).array
    return DenseBlock.of(X).array


def block_nbytes(X: Any) -> int:
    """Bytes held by the block's arrays."""
    return as_block(X).nbytes


def block_nnz(X: Any) -> int:
    """Stored values (every entry of a dense block)."""
    return as_block(X).nnz


def take_rows(X: Any, rows: np.ndarray) -> Any:
    """The rows ``rows`` (an integer or boolean index), in the block's layout (a native array)."""
    return as_block(X).take_rows(rows).array


def slice_rows(X: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` (a view of a dense block; a native array)."""
    return as_block(X).slice_rows(start, stop).array


def concat_rows(blocks: list[Any], n_features: int, layout: str = "dense") -> Any:
    """The blocks one under the other, in the first block's layout (every block must share it; none: an empty ``layout`` block)."""
    if not blocks:
        return empty_block(n_features, layout)
    bs = [as_block(b) for b in blocks]
    return type(bs[0]).concat(bs).array


def dense_rows(X: Any, rows: np.ndarray | slice, out: np.ndarray | None = None) -> np.ndarray:
    """The rows ``rows`` as a dense array (into ``out`` when given)."""
    return as_block(X).dense_rows(rows, out)


def first_nonfinite(X: Any) -> tuple[int, int] | None:
    """(row, column) of the first non-finite value, or None."""
    return as_block(X).first_nonfinite()


def value_at(X: Any, row: int, col: int) -> float:
    """The value at ``(row, col)`` (0.0 where a CSR block stores nothing)."""
    return as_block(X).value_at(row, col)


def matvec(X: Any, w: np.ndarray) -> np.ndarray:
    """``X @ w`` in float64 (:meth:`FeatureBlock.matvec`)."""
    return as_block(X).matvec(w)


def matvec_pair(X: Any, u: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(X @ u, X @ w)`` in float64 (:meth:`FeatureBlock.matvec_pair`)."""
    return as_block(X).matvec_pair(u, w)


def rmatvec(X: Any, g: np.ndarray) -> np.ndarray:
    """``X.T @ g`` in float64 (:meth:`FeatureBlock.rmatvec`)."""
    return as_block(X).rmatvec(g)


def rmatvec_squares(X: Any, g: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``[X.T @ g, (X * X).T @ c]`` in float64 (:meth:`FeatureBlock.rmatvec_squares`)."""
    return as_block(X).rmatvec_squares(g, c)


def rows_product(X: Any, rows: np.ndarray, D: np.ndarray, dw: np.ndarray, db: float) -> np.ndarray:
    """:meth:`FeatureBlock.rows_product`."""
    return as_block(X).rows_product(rows, D, dw, db)
