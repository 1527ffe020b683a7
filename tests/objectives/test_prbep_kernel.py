"""PRBEP maximizer: numba merge sweep vs the NumPy reference, balance (KKT), exact risk."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpipe.objectives._rank_kernels import prbep_beta, prbep_risk_exact
from dpipe.testing import prbep_beta_reference

EPS = np.finfo(np.float64).eps


def check_against_reference(sp, sn, mu):
    sp, sn = np.sort(np.asarray(sp, np.float64)), np.sort(np.asarray(sn, np.float64))
    n = sp.size + sn.size
    bp, bn, value, theta = prbep_beta(sp, sn, n, mu)
    rp, rn, rvalue, rtheta = prbep_beta_reference(sp, sn, n, mu)
    assert bp.shape == sp.shape and bn.shape == sn.shape
    assert np.all((bp >= 0) & (bp <= 1)) and np.all((bn >= 0) & (bn <= 1))
    cp, cn = 1.0 / sp.size - 2.0 * sp / n, 2.0 * sn / n
    # beta lies in [0, 1]: absolute error; theta may differ on a zero plateau of f only. beta is (c - theta) / mu clipped,
    # so a few ulps of the c's give a few ulps / mu of beta: found by hypothesis, mu = 1e-5 and a negative scored 2.2e-16
    # among zeros gave 0 against the reference's 4.9e-12 (= eps x 0.22 / mu), at d410c85 as after
    atol = 1e-12 + 8 * EPS * max(np.abs(cp).max(), np.abs(cn).max(initial=0.0)) / mu
    np.testing.assert_allclose(bp, rp, rtol=0, atol=atol)
    np.testing.assert_allclose(bn, rn, rtol=0, atol=atol)
    scale = np.abs(cp) @ rp + np.abs(cn) @ rn + 0.5 * mu * (rp @ rp + rn @ rn)
    assert abs(value - rvalue) <= 1e-12 * scale + 1e-300
    # KKT: the multiplier balances the two classes, to 1e-9 relative plus the rounding
    # floor of f at the breakpoints (prefix-sum differences divided by mu), which only
    # matters when mu is many orders below the spread of the c (the reference shares it)
    floor = 4 * EPS * (np.abs(cp).sum() + np.abs(cn).sum() + n * abs(theta)) / mu
    assert abs(bp.sum() - bn.sum()) <= 1e-9 * max(bp.sum(), bn.sum()) + floor + 1e-12
    return bp, bn, value, theta, rtheta


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("n_pos", "n_neg"), [(50, 70), (1000, 1300), (3000, 40), (25, 4000)])
@pytest.mark.parametrize("mu", [1e-9, 1e-4, 0.1, 10.0])
def test_random_scores_match_reference(seed, n_pos, n_neg, mu):
    rng = np.random.default_rng(seed)
    sp = rng.standard_normal(n_pos) + 0.5
    sn = rng.standard_normal(n_neg)
    bp, bn, value, theta, rtheta = check_against_reference(sp, sn, mu)
    # continuous scores: no zero plateau, the breakpoint values agree bit for bit
    assert theta == rtheta
    if mu >= 1e-4:
        assert bp.sum() == pytest.approx(bn.sum(), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("n_pos", "n_neg"), [(40, 60), (800, 900), (2000, 7), (9, 2500)])
@pytest.mark.parametrize("mu", [1e-8, 1e-3, 0.5, 1e3])
def test_heavy_ties_match_reference(seed, n_pos, n_neg, mu):
    rng = np.random.default_rng(100 + seed)
    sp = rng.integers(-3, 4, n_pos).astype(np.float64)
    sn = rng.integers(-4, 3, n_neg).astype(np.float64)
    check_against_reference(sp, sn, mu)


@pytest.mark.parametrize("mu", [1e-12, 1e-3, 1.0, 1e6])
@pytest.mark.parametrize(("sp", "sn"), [([0.3], [-0.2]), ([0.0], [0.0]), ([2.0], [-1.0, 0.5, 3.0]), ([-1.0, 0.0, 0.5], [1.0])])
def test_one_element_classes(sp, sn, mu):
    check_against_reference(sp, sn, mu)


@pytest.mark.parametrize(("n_pos", "n_neg"), [(20_000, 30), (30, 20_000), (1, 5000), (5000, 1)])
def test_unbalanced_classes(n_pos, n_neg):
    rng = np.random.default_rng(n_pos + 7 * n_neg)
    for mu in (1e-7, 1e-2, 5.0):
        check_against_reference(rng.standard_normal(n_pos), rng.standard_normal(n_neg) - 0.3, mu)


@pytest.mark.parametrize("mu", [1e-14, 1e-11, 1e8, 1e12])
def test_tiny_and_huge_mu(mu):
    rng = np.random.default_rng(5)
    check_against_reference(rng.standard_normal(300), rng.standard_normal(500), mu)
    check_against_reference(rng.integers(-2, 3, 300), rng.integers(-2, 3, 500), mu)


def test_zero_plateau_takes_its_left_end():
    # c = (1,) and (0,): f = clip((1 - theta) / mu) - clip(theta / mu) is 0 on [mu, 1 - mu]
    for fn in (prbep_beta, prbep_beta_reference):
        bp, bn, value, theta = fn(np.array([0.0]), np.array([0.0]), 2, 0.125)
        assert theta == 0.125 and bp.tolist() == [1.0] and bn.tolist() == [1.0]
        assert value == pytest.approx(1.0 - 0.125)


def test_no_negatives_matches_reference():
    bp, bn, value, theta, _ = check_against_reference([-1.0, 0.0, 2.0], [], 0.1)
    assert bn.size == 0 and np.all(bp == 0) and value == 0.0


def test_dtype_and_strides_are_normalized():
    rng = np.random.default_rng(1)
    sp = np.sort(rng.standard_normal(800)).astype(np.float32)[::2]  # float32, strided
    sn = (-np.sort(rng.standard_normal(200)))[::-1]  # increasing, negative stride
    n = sp.size + sn.size
    a = prbep_beta(sp, sn, n, 0.01)
    b = prbep_beta_reference(sp, sn, n, 0.01)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[3] == b[3]


scores = st.lists(st.integers(-6, 6).map(lambda v: v / 4) | st.floats(-3, 3, allow_nan=False), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(scores, st.lists(st.integers(-6, 6).map(lambda v: v / 4) | st.floats(-3, 3, allow_nan=False), max_size=60),
       st.sampled_from([1e-10, 1e-5, 1e-3, 0.05, 1.0, 1e4]))
@example([0.0, 0.0, 0.0], [0.0, 0.0, 0.25, 0.5, 1.5, 2.220446049250313e-16], 1e-5)  # beta's rounding divided by mu
def test_property_matches_reference(sp, sn, mu):
    check_against_reference(sp, sn, mu)


def prbep_risk_exact_sorting(sp, sn, n):
    """The former implementation of :func:`prbep_risk_exact` (two full sorts)."""
    cp = np.sort(1.0 / sp.size - 2.0 * sp / n)[::-1]
    cn = np.sort(2.0 * sn / n)[::-1]
    k = min(cp.size, cn.size)
    totals = np.concatenate([[0.0], np.cumsum(cp[:k]) + np.cumsum(cn[:k])])
    return float(totals.max())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("n_pos", "n_neg"), [(1, 1), (30, 500), (500, 30), (2000, 2000), (7, 0)])
def test_risk_exact_without_sorts_is_identical(seed, n_pos, n_neg):
    rng = np.random.default_rng(seed)
    draw = (lambda k: rng.integers(-3, 4, k) / 2.0) if seed % 2 else rng.standard_normal
    sp, sn = np.sort(draw(n_pos)), np.sort(draw(n_neg))
    n = n_pos + n_neg
    assert prbep_risk_exact(sp, sn, n) == prbep_risk_exact_sorting(sp, sn, n)
