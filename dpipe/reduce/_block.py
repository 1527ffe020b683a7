"""A shard's feature block: a dense float32 ``(n, d)`` array or a CSR matrix, behind one small interface.

Dense stores hold a C-contiguous float32 ``ndarray``; sparse stores a
``scipy.sparse.csr_array`` with float32 ``data`` and int32 ``indices`` (int64 where ``d``
needs them). Everything above :mod:`dpipe.reduce` uses these functions (and the products
of :mod:`._linalg`) instead of asking which layout it has. ``scipy.sparse`` is imported
only where a CSR block is built: a dense fit never loads it.

Each function costs O(n d) on a dense block and O(nnz) on a CSR one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["LAYOUTS", "is_csr", "layout_of", "csr_block", "empty_block", "block_nbytes", "block_nnz", "take_rows", "slice_rows",
           "concat_rows", "dense_rows", "first_nonfinite", "value_at", "to_float32"]

#: the feature layouts of a store (its manifest's ``layout``)
LAYOUTS = ("dense", "csr")


def is_csr(X: Any) -> bool:
    """Whether ``X`` is a CSR block (a ``scipy.sparse`` CSR array or matrix), without importing scipy."""
    return not isinstance(X, np.ndarray) and getattr(X, "format", None) == "csr"


def layout_of(X: Any) -> str:
    """``"csr"`` or ``"dense"``."""
    return "csr" if is_csr(X) else "dense"


def _index_dtype(n_features: int, nnz: int = 0) -> type:
    return np.int32 if max(n_features, nnz) < 2**31 else np.int64


def csr_block(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, n_features: int) -> Any:
    """A CSR block of ``len(indptr) - 1`` rows from its three arrays (float32 values; no copy where the dtypes already fit)."""
    from scipy.sparse import csr_array

    n = len(indptr) - 1
    idx = _index_dtype(n_features, int(indptr[-1]) if n >= 0 and len(indptr) else 0)
    return csr_array((np.asarray(data, dtype=np.float32), np.asarray(indices, dtype=idx), np.asarray(indptr, dtype=idx)),
                     shape=(n, int(n_features)), copy=False)


def empty_block(n_features: int, layout: str = "dense") -> Any:
    """A block of no rows."""
    if layout == "csr":
        return csr_block(np.zeros(0, np.float32), np.zeros(0, np.int32), np.zeros(1, np.int64), n_features)
    return np.zeros((0, n_features), dtype=np.float32)


def to_float32(X: Any) -> Any:
    """``X`` with float32 values (dense: C-contiguous; CSR: canonical, sorted indices and no duplicates)."""
    if is_csr(X):
        if X.dtype != np.float32:
            X = X.astype(np.float32)
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()  # also sorts the indices
        return X
    return np.ascontiguousarray(X, dtype=np.float32)


def block_nbytes(X: Any) -> int:
    """Bytes held by the block's arrays."""
    if is_csr(X):
        return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)
    return int(X.nbytes)


def block_nnz(X: Any) -> int:
    """Stored values (every entry of a dense block)."""
    return int(X.nnz) if is_csr(X) else int(X.size)


def take_rows(X: Any, rows: np.ndarray) -> Any:
    """The rows ``rows`` (an integer or boolean index), in the block's layout."""
    return X[np.asarray(rows)] if is_csr(X) else np.ascontiguousarray(X[rows])


def slice_rows(X: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` (a view of a dense block)."""
    return X[start:stop]


def concat_rows(blocks: list[Any], n_features: int) -> Any:
    """The blocks one under the other, in the first block's layout (every block must share it)."""
    if not blocks:
        return empty_block(n_features)
    if is_csr(blocks[0]):
        from scipy.sparse import vstack

        return to_float32(vstack(blocks, format="csr"))
    return np.concatenate(blocks)


def dense_rows(X: Any, rows: np.ndarray | slice, out: np.ndarray | None = None) -> np.ndarray:
    """The rows ``rows`` as a dense array (into ``out`` when given): for O(rows x d) work such as moment blocks."""
    if is_csr(X):
        B = X[rows].toarray()
        if out is None:
            return B
        out[...] = B
        return out
    if isinstance(rows, slice):
        B = X[rows]
        if out is None:
            return B
        out[...] = B
        return out
    if out is None:
        return np.take(X, rows, axis=0)
    np.take(X, rows, axis=0, out=out)
    return out


#: rows scanned at a time when locating a bad value (bounds the temporary boolean array)
_SCAN_ROWS = 65536


def first_nonfinite(X: Any) -> tuple[int, int] | None:
    """(row, column) of the first non-finite value, or None."""
    if is_csr(X):
        bad = np.flatnonzero(~np.isfinite(X.data))
        if bad.size == 0:
            return None
        p = int(bad[0])
        return int(np.searchsorted(X.indptr, p, side="right") - 1), int(X.indices[p])
    for start in range(0, X.shape[0], _SCAN_ROWS):
        bad = ~np.isfinite(X[start : start + _SCAN_ROWS])
        if bad.any():
            r, c = np.unravel_index(int(np.argmax(bad)), bad.shape)
            return start + int(r), int(c)
    return None


def value_at(X: Any, row: int, col: int) -> float:
    """The value at ``(row, col)`` (0.0 where a CSR block stores nothing)."""
    if is_csr(X):
        lo, hi = int(X.indptr[row]), int(X.indptr[row + 1])
        hit = np.flatnonzero(X.indices[lo:hi] == col)
        return float(X.data[lo + hit[0]]) if hit.size else 0.0
    return float(X[row, col])
