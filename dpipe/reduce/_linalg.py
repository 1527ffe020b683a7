"""Float64-accumulating products of a shard's feature block, dense or CSR (numba, nopython, nogil).

A feature block (:mod:`._block`) is a C-contiguous float32 ``(n, d)`` array or a
``scipy.sparse.csr_array`` with float32 values; every product here takes either and
costs O(n d) or O(nnz). Stores keep features in float32. ``X @ w`` and ``X.T @ g`` are accumulated in
float64 without making a float64 copy of the shard (which NumPy would do, costing
twice the shard's memory and bandwidth every pass). The row sums of ``X @ w`` are
vectorized (reassociated) by the compiler: deterministic for a given build, equal to
the NumPy reference up to float64 rounding. On 395,000 x 118 float32 rows, one
thread: ``X @ w`` 27 ms (75 ms without vectorization, 16 ms for float32 BLAS),
``X.T @ g`` 27 ms.
Each kernel has a plain NumPy reference in :mod:`dpipe.testing`.
"""

from __future__ import annotations

import numba
import numpy as np

from ._block import is_csr

__all__ = ["matvec", "matvec_pair", "rmatvec", "rmatvec_squares", "rows_product"]


@numba.njit(nogil=True, cache=True, fastmath=True)  # lets LLVM vectorize the row sums (about 3x here)
def _matvec(X, w, out):
    n, d = X.shape
    for r in range(n):
        acc = 0.0
        for k in range(d):
            acc += np.float64(X[r, k]) * w[k]
        out[r] = acc
    return out


@numba.njit(nogil=True, cache=True, fastmath=True)
def _matvec_pair(X, u, w, out_u, out_w):
    n, d = X.shape
    for r in range(n):
        acc_u = 0.0
        acc_w = 0.0
        for k in range(d):
            x = np.float64(X[r, k])
            acc_u += x * u[k]
            acc_w += x * w[k]
        out_u[r] = acc_u
        out_w[r] = acc_w


@numba.njit(nogil=True, cache=True, fastmath=False)
def _rmatvec(X, g, out):
    n, d = X.shape
    for r in range(n):
        gr = g[r]
        if gr != 0.0:
            for k in range(d):
                out[k] += gr * np.float64(X[r, k])
    return out


@numba.njit(nogil=True, cache=True, fastmath=False)
def _rmatvec_squares(X, g, c, out, out_sq):
    """``out += X^T g`` (the same sums, in the same order, as :func:`_rmatvec`) and ``out_sq += (X * X)^T c``."""
    n, d = X.shape
    for r in range(n):
        gr = g[r]
        cr = c[r]
        if gr != 0.0 or cr != 0.0:
            for k in range(d):
                x = np.float64(X[r, k])
                out[k] += gr * x
                out_sq[k] += cr * (x * x)


@numba.njit(nogil=True, cache=True, fastmath=True)
def _csr_matvec(indptr, indices, data, w, out):
    for r in range(out.size):
        acc = 0.0
        for p in range(indptr[r], indptr[r + 1]):
            acc += np.float64(data[p]) * w[indices[p]]
        out[r] = acc
    return out


@numba.njit(nogil=True, cache=True, fastmath=True)
def _csr_matvec_pair(indptr, indices, data, u, w, out_u, out_w):
    for r in range(out_u.size):
        acc_u = 0.0
        acc_w = 0.0
        for p in range(indptr[r], indptr[r + 1]):
            x = np.float64(data[p])
            acc_u += x * u[indices[p]]
            acc_w += x * w[indices[p]]
        out_u[r] = acc_u
        out_w[r] = acc_w


@numba.njit(nogil=True, cache=True, fastmath=False)
def _csr_rmatvec(indptr, indices, data, g, out):
    for r in range(indptr.size - 1):
        gr = g[r]
        if gr != 0.0:
            for p in range(indptr[r], indptr[r + 1]):
                out[indices[p]] += gr * np.float64(data[p])
    return out


@numba.njit(nogil=True, cache=True, fastmath=False)
def _csr_rmatvec_squares(indptr, indices, data, g, c, out, out_sq):
    for r in range(indptr.size - 1):
        gr = g[r]
        cr = c[r]
        if gr != 0.0 or cr != 0.0:
            for p in range(indptr[r], indptr[r + 1]):
                x = np.float64(data[p])
                out[indices[p]] += gr * x
                out_sq[indices[p]] += cr * (x * x)


@numba.njit(nogil=True, cache=True)
def _rows_product(X, rows, D, dw, db, out):
    """``out[:d] += X_A^T (D (X_A dw - db))``, ``out[d] -= sum D (X_A dw - db)`` over the rows ``A`` only."""
    d = X.shape[1]
    for k in range(rows.size):
        r = rows[k]
        u = -db
        for j in range(d):
            u += np.float64(X[r, j]) * dw[j]
        q = D[k] * u
        for j in range(d):
            out[j] += q * np.float64(X[r, j])
        out[d] -= q
    return out


@numba.njit(nogil=True, cache=True)
def _csr_rows_product(indptr, indices, data, rows, D, dw, db, out):
    d = out.size - 1
    for k in range(rows.size):
        r = rows[k]
        u = -db
        for p in range(indptr[r], indptr[r + 1]):
            u += np.float64(data[p]) * dw[indices[p]]
        q = D[k] * u
        for p in range(indptr[r], indptr[r + 1]):
            out[indices[p]] += q * np.float64(data[p])
        out[d] -= q
    return out


def matvec(X, w: np.ndarray) -> np.ndarray:
    """``X @ w`` in float64 for a dense (C-contiguous float32 or float64) or CSR block ``X``; shape (n,)."""
    w = np.ascontiguousarray(w, dtype=np.float64)
    if is_csr(X):
        return _csr_matvec(X.indptr, X.indices, X.data, w, np.empty(X.shape[0]))
    X = np.ascontiguousarray(X)
    return _matvec(X, w, np.empty(X.shape[0]))


def matvec_pair(X, u: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(X @ u, X @ w)`` in float64, reading ``X`` once (a pass over a shard is bound by reading it)."""
    u, w = np.ascontiguousarray(u, dtype=np.float64), np.ascontiguousarray(w, dtype=np.float64)
    out_u, out_w = np.empty(X.shape[0]), np.empty(X.shape[0])
    if is_csr(X):
        _csr_matvec_pair(X.indptr, X.indices, X.data, u, w, out_u, out_w)
    else:
        _matvec_pair(np.ascontiguousarray(X), u, w, out_u, out_w)
    return out_u, out_w


def rmatvec(X, g: np.ndarray) -> np.ndarray:
    """``X.T @ g`` in float64; shape (d,)."""
    g = np.ascontiguousarray(g, dtype=np.float64)
    if is_csr(X):
        return _csr_rmatvec(X.indptr, X.indices, X.data, g, np.zeros(X.shape[1]))
    return _rmatvec(np.ascontiguousarray(X), g, np.zeros(X.shape[1]))


def rmatvec_squares(X, g: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``[X.T @ g, (X * X).T @ c]`` in float64 (shape ``(2, d)``), reading ``X`` once; the first row equals :func:`rmatvec`'s.

    The second is a weighted column sum of squares: the diagonal of ``X^T diag(c) X``, which
    Newton's Jacobi preconditioner takes from the curvature ``c`` of every row. The kernel
    writes both rows of the one result (no stacked copy: 16 MB a shard at 2^20 features).
    """
    g = np.ascontiguousarray(g, dtype=np.float64)
    c = np.ascontiguousarray(c, dtype=np.float64)
    out = np.zeros((2, X.shape[1]))
    if is_csr(X):
        _csr_rmatvec_squares(X.indptr, X.indices, X.data, g, c, out[0], out[1])
    else:
        _rmatvec_squares(np.ascontiguousarray(X), g, c, out[0], out[1])
    return out


def rows_product(X, rows: np.ndarray, D: np.ndarray, dw: np.ndarray, db: float) -> np.ndarray:
    """``[X_A, -1]^T D [X_A, -1] [dw, db]`` over the rows ``A = rows`` only (shape ``d + 1``): a Hessian-vector
    product whose curvature ``D`` is non-zero on a few rows."""
    out = np.zeros(X.shape[1] + 1)
    dw = np.ascontiguousarray(dw, dtype=np.float64)
    if is_csr(X):
        return _csr_rows_product(X.indptr, X.indices, X.data, rows, D, dw, float(db), out)
    return _rows_product(np.ascontiguousarray(X), rows, D, dw, float(db), out)
