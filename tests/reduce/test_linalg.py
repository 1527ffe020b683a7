"""The float64-accumulating shard products against their NumPy references."""

from __future__ import annotations

import numpy as np
import pytest

from dpipe.reduce._block import matvec, matvec_pair, rmatvec
from dpipe.reduce._linalg import LANES
from dpipe.testing import matvec_reference, rmatvec_reference


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (37, 5), (1000, 118)])
def test_products_match_references(shape):
    rng = np.random.default_rng(shape[0])
    X = (rng.standard_normal(shape) * np.logspace(-3, 3, shape[1])).astype(np.float32)
    w, g = rng.standard_normal(shape[1]), rng.standard_normal(shape[0])
    ref_s, ref_g = matvec_reference(X, w), rmatvec_reference(X, g)
    np.testing.assert_array_equal(matvec(X, w), ref_s)  # the reference adds in the kernel's order
    exact = X.astype(np.float64) @ w
    np.testing.assert_allclose(ref_s, exact, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(exact).max(initial=0)))
    np.testing.assert_allclose(rmatvec(X, g), ref_g, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(ref_g).max(initial=0)))
    u = rng.standard_normal(shape[1])
    pair = matvec_pair(X, w, u)
    np.testing.assert_array_equal(pair[0], ref_s)
    np.testing.assert_array_equal(pair[1], matvec_reference(X, u))


@pytest.mark.parametrize("d", [*range(0, 2 * LANES + 2), 117, 300])
def test_dense_and_csr_row_sums_are_bitwise_equal(d):
    """Every width (whole groups of lanes and every remainder): the two layouts, float32 and float64 values, int32 and
    int64 indices, stored zeros, an all-zero row and the pair product all give the reference's bits."""
    import scipy.sparse

    rng = np.random.default_rng(d)
    X = (rng.standard_normal((60, d)) * np.logspace(-4, 4, d)).astype(np.float32)
    X[rng.random(X.shape) < 0.5] = 0.0
    X[7] = 0.0
    X[8, ::2] = -0.0
    w, u = rng.standard_normal(d), rng.standard_normal(d)
    w[::3] *= -1e6
    want = matvec_reference(X, w)
    S = scipy.sparse.csr_array(X)
    keep = X != 0
    keep[::2] = True  # every value of every other row stored, zeros included (a CSR source may store zeros)
    rows, cols = np.nonzero(keep)
    stored = scipy.sparse.csr_array((X[rows, cols], (rows, cols)), shape=X.shape)
    assert stored.nnz > S.nnz or d == 0
    S64 = scipy.sparse.csr_array(X.astype(np.float64))
    S64.indices, S64.indptr = S64.indices.astype(np.int64), S64.indptr.astype(np.int64)
    for block in (X, X.astype(np.float64), S, stored, S64):
        np.testing.assert_array_equal(matvec(block, w), want)
        got_u, got_w = matvec_pair(block, u, w)
        np.testing.assert_array_equal(got_w, want)
        np.testing.assert_array_equal(got_u, matvec_reference(X, u))
    assert matvec(X, w)[7] == 0.0 and not np.signbit(matvec(X, w)[7])


def test_split_rows_sum_to_the_whole():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((500, 7)).astype(np.float32)
    g = rng.standard_normal(500)
    whole = rmatvec(X, g)
    parts = rmatvec(X[:123], g[:123]) + rmatvec(X[123:], g[123:])
    np.testing.assert_allclose(parts, whole, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.concatenate([matvec(X[:123], np.ones(7)), matvec(X[123:], np.ones(7))]), matvec(X, np.ones(7)))


@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (37, 5), (1000, 118)])
def test_rmatvec_squares_is_rmatvec_bitwise_and_the_weighted_column_squares(shape, layout):
    import scipy.sparse

    from dpipe.reduce._block import rmatvec_squares

    rng = np.random.default_rng(shape[0] + 5)
    X = (rng.standard_normal(shape) * np.logspace(-3, 3, shape[1])).astype(np.float32)
    X[rng.random(shape) < 0.6] = 0.0
    g, c = rng.standard_normal(shape[0]), rng.uniform(0, 2, shape[0])
    g[::3] = 0.0  # rows with no gradient weight still carry curvature (and the other way round)
    c[1::4] = 0.0
    block = scipy.sparse.csr_array(X) if layout == "csr" else X
    got, got_sq = rmatvec_squares(block, g, c)
    np.testing.assert_array_equal(got, rmatvec(block, g))
    ref = (X.astype(np.float64) ** 2).T @ c
    np.testing.assert_allclose(got_sq, ref, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(ref).max(initial=0)))
