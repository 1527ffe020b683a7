"""The feature-block seam: every kernel on a CSR block equals its dense counterpart (and NumPy's float64 reference)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dpipe.io import Shard
from dpipe.reduce._block import concat_rows, csr_block, dense_rows, first_nonfinite, is_csr, matvec, matvec_pair, rmatvec, rows_product, take_rows, to_float32, value_at
from dpipe.reduce._moments import column_moments_of_shard, column_weighted_moments, shard_moments


def _blocks(n=400, d=37, density=0.1, seed=0):
    rng = np.random.default_rng(seed)
    D = sp.random_array((n, d), density=density, format="csr", dtype=np.float32, rng=rng).toarray()
    D[D != 0] = rng.normal(size=int((D != 0).sum())).astype(np.float32) * 3
    D[5] = 0  # an all-zero row
    X = to_float32(sp.csr_array(D))
    return X, D


def test_products_on_csr_equal_dense_and_float64_reference():
    X, D = _blocks()
    rng = np.random.default_rng(1)
    w, u, g = rng.normal(size=D.shape[1]), rng.normal(size=D.shape[1]), rng.normal(size=D.shape[0])
    ref = D.astype(np.float64)
    assert is_csr(X) and not is_csr(D)
    np.testing.assert_allclose(matvec(X, w), ref @ w, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(matvec(X, w), matvec(D, w))  # the same lanes, the same order: bitwise
    np.testing.assert_array_equal(rmatvec(X, g), rmatvec(D, g))  # the same order of additions: bitwise
    np.testing.assert_allclose(rmatvec(X, g), ref.T @ g, rtol=1e-12, atol=1e-12)
    pu, pw = matvec_pair(X, u, w)
    np.testing.assert_allclose(pu, ref @ u, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(pw, matvec(D, w))
    rows = np.array([0, 5, 17, 399])
    Dk = rng.uniform(0.1, 2, rows.size)
    want = np.concatenate([ref[rows].T @ (Dk * (ref[rows] @ w - 0.3)), [-(Dk * (ref[rows] @ w - 0.3)).sum()]])
    np.testing.assert_allclose(rows_product(X, rows, Dk, w, 0.3), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rows_product(D, rows, Dk, w, 0.3), want, rtol=1e-12, atol=1e-12)


def test_wide_csr_block_never_densified_by_the_products():
    n, d = 50, 2_000_000  # a dense block would be 400 MB
    X = csr_block(np.ones(n, np.float32), np.arange(n) * 39_999, np.arange(n + 1), d)
    w = np.zeros(d)
    w[::39_999] = 2.0
    np.testing.assert_array_equal(matvec(X, w), np.full(n, 2.0))
    assert rmatvec(X, np.ones(n)).sum() == n


def test_row_selection_concat_and_dense_rows():
    X, D = _blocks()
    rows = np.array([3, 0, 399, 5])
    np.testing.assert_array_equal(take_rows(X, rows).toarray(), D[rows])
    mask = np.arange(D.shape[0]) % 3 == 0
    np.testing.assert_array_equal(take_rows(X, mask).toarray(), D[mask])
    np.testing.assert_array_equal(concat_rows([X[:10], X[10:]], D.shape[1]).toarray(), D)
    np.testing.assert_array_equal(dense_rows(X, rows), D[rows])
    out = np.empty((4, D.shape[1]), np.float32)
    dense_rows(X, rows, out=out)
    np.testing.assert_array_equal(out, D[rows])


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_first_nonfinite_names_the_same_cell_in_both_layouts(bad):
    X, D = _blocks()
    r, c = 123, int(X.indices[X.indptr[123]])
    X.data[X.indptr[123]] = bad
    D[r, c] = bad
    assert first_nonfinite(X) == first_nonfinite(D) == (r, c)
    assert np.isnan(value_at(X, r, c)) or np.isinf(value_at(X, r, c))
    assert value_at(X, 5, 0) == 0.0
    X2, _ = _blocks()
    assert first_nonfinite(X2) is None


@pytest.mark.parametrize("weighted", [False, True])
def test_column_and_class_moments_match_dense(weighted):
    X, D = _blocks(seed=3)
    rng = np.random.default_rng(4)
    y = np.where(rng.random(D.shape[0]) < 0.3, 1, -1).astype(np.int8)
    v = rng.integers(0, 4, D.shape[0]).astype(np.float32) if weighted else None
    a = column_moments_of_shard(Shard(X=X, y=y, weight=v))
    b = column_moments_of_shard(Shard(X=D, y=y, weight=v))
    assert a.count == b.count  # the same sums in the same order: bitwise
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_array_equal(a.m2, b.m2)
    total, mean, m2 = column_weighted_moments(X, v)
    vv = np.ones(D.shape[0]) if v is None else v.astype(np.float64)
    ref_mean = vv @ D / vv.sum()
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(m2, vv @ (D - ref_mean) ** 2, rtol=1e-10, atol=1e-10)
    ma, mb = shard_moments(X, y, v), shard_moments(D, y, v)
    np.testing.assert_allclose(ma.mean, mb.mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ma.m2, mb.m2, rtol=1e-10, atol=1e-10)


def test_column_moments_count_a_stored_zero_as_a_zero():
    X, D = _blocks(seed=5)
    rng = np.random.default_rng(6)
    v = rng.random(D.shape[0])
    keep = D != 0
    keep[::3] = True  # every value of every third row stored, zeros included
    D[1, 2] = -0.0
    keep[1, 2] = True
    rows, cols = np.nonzero(keep)
    stored = sp.csr_array((D[rows, cols], (rows, cols)), shape=D.shape)
    assert stored.nnz > X.nnz
    for weight in (None, v):
        want = column_weighted_moments(D, weight)
        for block in (X, stored):
            got = column_weighted_moments(block, weight)
            assert got[0] == want[0]
            np.testing.assert_array_equal(got[1], want[1])
            np.testing.assert_array_equal(got[2], want[2])
