"""Sample weights in the rank kernels: numba vs reference, brute force, repeated rows, unit weights."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from dpipe.objectives._rank_kernels import auc_gamma, prbep_beta, prbep_risk_exact, sorted_auc
from dpipe.testing import auc_gamma_reference, prbep_beta_reference, sorted_auc_reference

EPS = np.finfo(np.float64).eps


def huber(u, t):
    return np.where(u <= 0, 0.0, np.where(u < t, u * u / (2 * t), u - t / 2))


def draw_scores(rng, k, ties):
    """Sorted scores: continuous, or on a grid of quarters (many ties), or a mix."""
    if ties == "none":
        s = rng.standard_normal(k)
    elif ties == "grid":
        s = rng.integers(-6, 7, k) / 4.0
    else:
        s = np.where(rng.random(k) < 0.5, rng.integers(-6, 7, k) / 4.0, rng.uniform(-2, 2, k))
    return np.sort(s)


def draw_weights(rng, k, kind):
    """Non-negative weights with zeros (one row keeps a positive weight); ints in 0..4 for kind 'int'."""
    if k == 0:
        return np.zeros(0)
    if kind == "int":
        v = rng.integers(0, 5, k).astype(np.float64)
    else:
        v = np.where(rng.random(k) < 0.25, 0.0, rng.exponential(1.0, k))
    v[rng.integers(k)] = max(1.0, v.max())
    return v


def case(seed, ties, kind, max_pos=40, max_neg=40):
    rng = np.random.default_rng(seed)
    n_pos, n_neg = int(rng.integers(1, max_pos + 1)), int(rng.integers(1, max_neg + 1))
    sp, sn = draw_scores(rng, n_pos, ties) + 0.25, draw_scores(rng, n_neg, ties)  # a grid step: ties across classes
    return sp, sn, draw_weights(rng, n_pos, kind), draw_weights(rng, n_neg, kind)


def prbep_c(sp, sn, vp, vn):
    w = vp.sum() + vn.sum()
    return 1.0 / vp.sum() - 2.0 * sp / w, 2.0 * sn / w, w


CASES = [(seed, ties) for seed in range(12) for ties in ("none", "grid", "mixed")]


# ---------------------------------------------------------------- auc_gamma


@pytest.mark.parametrize("seed, ties", CASES)
@pytest.mark.parametrize("t", [1e-3, 0.25, 1.0, 3.0])
def test_weighted_auc_gamma_matches_reference_and_pairwise_brute_force(seed, ties, t):
    sp, sn, vp, vn = case(seed, ties, "real")
    gp, gn, value, hinge = auc_gamma(sp, sn, t, vp, vn)
    u = 1 - sp[:, None] + sn[None, :]
    c = np.clip(u / t, 0, 1)
    pair = vp[:, None] * vn[None, :]
    scale_p, scale_n = vn.sum() * (1 + 1 / t), vp.sum() * (1 + 1 / t)
    np.testing.assert_allclose(gp, c @ vn, rtol=1e-9, atol=1e-12 * scale_p)  # not multiplied by vp_i
    np.testing.assert_allclose(gn, vp @ c, rtol=1e-9, atol=1e-12 * scale_n)
    assert value == pytest.approx((pair * huber(u, t)).sum(), rel=1e-9, abs=1e-12)
    assert hinge == pytest.approx((pair * np.maximum(u, 0)).sum(), rel=1e-9, abs=1e-12)
    rp, rn, rvalue, rhinge = auc_gamma_reference(sp, sn, t, vp, vn)
    np.testing.assert_allclose(gp, rp, rtol=1e-12, atol=1e-13 * scale_p)
    np.testing.assert_allclose(gn, rn, rtol=1e-12, atol=1e-13 * scale_n)
    assert value == pytest.approx(rvalue, rel=1e-12, abs=1e-13)
    assert hinge == pytest.approx(rhinge, rel=1e-12, abs=1e-13)


# ---------------------------------------------------------------- prbep_beta


def check_prbep_against_reference(sp, sn, vp, vn, mu):
    cp, cn, w = prbep_c(sp, sn, vp, vn)
    bp, bn, value, theta = prbep_beta(sp, sn, w, mu, vp, vn)
    rp, rn, rvalue, rtheta = prbep_beta_reference(sp, sn, w, mu, vp, vn)
    assert bp.shape == sp.shape and bn.shape == sn.shape
    assert np.all((bp >= 0) & (bp <= 1)) and np.all((bn >= 0) & (bn <= 1))
    # beta = (c -+ theta) / mu: the rounding of c and theta (a few eps of their size) grows by 1 / mu (hypothesis found
    # mu = 1e-5 with beta 1 - 4.6e-12 against the reference's 1, within this bound)
    slack = 8 * EPS * (np.abs(cp).max() + np.abs(cn).max(initial=0.0) + abs(theta)) / mu
    np.testing.assert_allclose(bp, rp, rtol=0, atol=max(1e-12, slack))
    np.testing.assert_allclose(bn, rn, rtol=0, atol=max(1e-12, slack))
    # beta keeps its per-unit form at the returned multiplier (up to the rounding of c, of 1 / Wp and W here)
    np.testing.assert_allclose(bp, np.clip((cp - theta) / mu, 0, 1), rtol=0, atol=slack)
    np.testing.assert_allclose(bn, np.clip((cn + theta) / mu, 0, 1), rtol=0, atol=slack)
    scale = np.abs(vp * cp) @ rp + np.abs(vn * cn) @ rn + 0.5 * mu * ((vp * rp) @ rp + (vn * rn) @ rn)
    beta_error = (np.abs(vp * cp).sum() + np.abs(vn * cn).sum()) * slack  # the value moves with beta's rounding, c beta
    assert abs(value - rvalue) <= 1e-12 * scale + beta_error + 1e-300
    direct = (vp * cp) @ bp + (vn * cn) @ bn - 0.5 * mu * ((vp * bp) @ bp + (vn * bn) @ bn)
    assert abs(value - direct) <= 1e-12 * scale + 1e-300
    # KKT: theta balances the weighted sums (to the rounding floor of f, as in test_prbep_kernel)
    floor = 4 * EPS * (np.abs(vp * cp).sum() + np.abs(vn * cn).sum() + w * abs(theta)) / mu
    assert abs(vp @ bp - vn @ bn) <= 1e-9 * max(vp @ bp, vn @ bn) + floor + 1e-12
    return theta, rtheta


@pytest.mark.parametrize("seed, ties", CASES)
@pytest.mark.parametrize("mu", [1e-9, 1e-4, 0.05, 10.0])
def test_weighted_prbep_beta_matches_reference(seed, ties, mu):
    sp, sn, vp, vn = case(100 + seed, ties, "real", 60, 60)
    theta, rtheta = check_prbep_against_reference(sp, sn, vp, vn, mu)
    if ties == "none":  # real weights, continuous scores: no zero plateau, the same breakpoint values
        assert theta == rtheta


@pytest.mark.parametrize(("n_pos", "n_neg"), [(3000, 40), (25, 4000), (1500, 1800)])
@pytest.mark.parametrize("mu", [1e-8, 1e-3, 1.0])
def test_weighted_prbep_beta_matches_reference_on_larger_inputs(n_pos, n_neg, mu):
    rng = np.random.default_rng(n_pos + n_neg)
    for ties in ("none", "grid"):
        sp, sn = draw_scores(rng, n_pos, ties) + 0.5, draw_scores(rng, n_neg, ties)
        check_prbep_against_reference(sp, sn, draw_weights(rng, n_pos, "real"), draw_weights(rng, n_neg, "real"), mu)


weights = st.floats(1e-3, 5) | st.just(0.0) | st.integers(1, 3).map(float)  # weight scales far below 1 / n make 1 / Wp overflow
rows = st.lists(st.tuples(st.integers(-6, 6).map(lambda v: v / 4) | st.floats(-3, 3, allow_nan=False), weights), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(rows, rows, st.sampled_from([1e-10, 1e-5, 1e-3, 0.05, 1.0, 1e4]))
@example(pos=[(0.0, 0.0)], neg=[(0.0, 0.0), (1.0, 1.0), (4.460383524754643e-124, 0.8504157861634725)], mu=1e-5)  # found by CI: beta's rounding / mu
def test_weighted_prbep_property_matches_reference(pos, neg, mu):
    sp, vp = (np.array(a, np.float64) for a in zip(*sorted(pos)))
    sn, vn = (np.array(a, np.float64) for a in zip(*sorted(neg)))
    if vp.sum() == 0:
        vp[0] = 1.0
    check_prbep_against_reference(sp, sn, vp, vn, mu)


def test_weighted_prbep_without_negatives_matches_reference():
    sp, vp, sn, vn = np.array([-1.0, 0.0, 2.0]), np.array([1.0, 0.0, 2.0]), np.zeros(0), np.zeros(0)
    check_prbep_against_reference(sp, sn, vp, vn, 0.1)
    bp, bn, value, _ = prbep_beta(sp, sn, 3.0, 0.1, vp, vn)
    assert bn.size == 0 and np.all(bp == 0) and value == 0.0
    assert prbep_risk_exact(sp, sn, 3.0, vp, vn) == 0.0


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("mu", [1e-3, 0.05])
def test_weighted_prbep_value_is_the_constrained_maximum(seed, mu):
    sp, sn, vp, vn = case(200 + seed, ("none", "grid")[seed % 2], "real", 12, 12)
    cp, cn, w = prbep_c(sp, sn, vp, vn)
    value = prbep_beta(sp, sn, w, mu, vp, vn)[2]
    c, v, k = np.concatenate([cp, cn]), np.concatenate([vp, vn]), sp.size + sn.size
    a = np.concatenate([vp, -vn])
    res = scipy.optimize.minimize(
        lambda b: -(v * c) @ b + mu / 2 * (v * b) @ b, np.full(k, 0.5), jac=lambda b: -(v * c) + mu * v * b, method="SLSQP",
        bounds=[(0, 1)] * k, constraints=[{"type": "eq", "fun": lambda b: a @ b, "jac": lambda b: a}],
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    assert res.success
    assert value >= -res.fun - 1e-9  # no feasible point is better
    assert value <= -res.fun + 1e-6 * max(1.0, abs(res.fun))  # and the solver's point is as good


# ---------------------------------------------------------------- prbep_risk_exact


@pytest.mark.parametrize("seed, ties", CASES)
def test_weighted_prbep_risk_is_the_linear_program_and_the_small_mu_limit(seed, ties):
    sp, sn, vp, vn = case(300 + seed, ties, "real", 30, 30)
    cp, cn, w = prbep_c(sp, sn, vp, vn)
    lp = scipy.optimize.linprog(
        -np.concatenate([vp * cp, vn * cn]), A_eq=np.concatenate([vp, -vn])[None, :], b_eq=[0.0], bounds=(0, 1), method="highs"
    )
    assert lp.status == 0
    exact = prbep_risk_exact(sp, sn, w, vp, vn)
    scale = np.abs(vp * cp).sum() + np.abs(vn * cn).sum()
    assert exact == pytest.approx(-lp.fun, abs=1e-9 * scale)
    mu = 1e-7
    value = prbep_beta(sp, sn, w, mu, vp, vn)[2]
    assert exact - mu * w / 2 - 1e-12 * scale <= value <= exact + 1e-12 * scale  # uniform bound mu D, D = W / 2


# ---------------------------------------------------------------- sorted_auc


@pytest.mark.parametrize("seed, ties", CASES)
def test_weighted_sorted_auc_matches_reference_pairs_and_scikit_learn(seed, ties):
    sp, sn, vp, vn = case(400 + seed, ties, "real", 60, 60)
    auc = sorted_auc(sp, sn, vp, vn)
    pair = vp[:, None] * vn[None, :]
    brute = (pair * ((sp[:, None] > sn[None, :]) + 0.5 * (sp[:, None] == sn[None, :]))).sum() / (vp.sum() * vn.sum())
    assert auc == pytest.approx(brute, abs=1e-12)
    assert auc == pytest.approx(sorted_auc_reference(sp, sn, vp, vn), abs=1e-13)
    y = np.r_[np.ones(sp.size), np.zeros(sn.size)]
    assert auc == pytest.approx(roc_auc_score(y, np.r_[sp, sn], sample_weight=np.r_[vp, vn]), abs=1e-12)


# ---------------------------------------------------------------- repeated rows


@pytest.mark.parametrize("seed, ties", CASES)
def test_integer_weights_equal_the_rows_repeated(seed, ties):
    sp, sn, vp, vn = case(500 + seed, ties, "int", 50, 50)
    kp, kn = vp.astype(int), vn.astype(int)
    rp, rn = np.repeat(sp, kp), np.repeat(sn, kn)
    for t in (1e-3, 0.3, 2.0):
        gp, gn, value, hinge = auc_gamma(sp, sn, t, vp, vn)
        ep, en, evalue, ehinge = auc_gamma(rp, rn, t)
        # the gamma of a row is the gamma of each of its copies
        np.testing.assert_allclose(np.repeat(gp, kp), ep, rtol=1e-10, atol=1e-10 * vn.sum())
        np.testing.assert_allclose(np.repeat(gn, kn), en, rtol=1e-10, atol=1e-10 * vp.sum())
        assert value == pytest.approx(evalue, rel=1e-10, abs=1e-12)
        assert hinge == pytest.approx(ehinge, rel=1e-10, abs=1e-12)
    cp, cn, w = prbep_c(sp, sn, vp, vn)
    n = rp.size + rn.size
    assert w == n
    scale = np.abs(vp * cp).sum() + np.abs(vn * cn).sum()
    for mu in (1e-3, 0.05, 1.0):
        bp, bn, value, _ = prbep_beta(sp, sn, w, mu, vp, vn)
        ebp, ebn, evalue, _ = prbep_beta(rp, rn, n, mu)
        np.testing.assert_allclose(np.repeat(bp, kp), ebp, rtol=0, atol=1e-10)
        np.testing.assert_allclose(np.repeat(bn, kn), ebn, rtol=0, atol=1e-10)
        assert value == pytest.approx(evalue, rel=1e-10, abs=1e-12 * scale)
    assert prbep_risk_exact(sp, sn, w, vp, vn) == pytest.approx(prbep_risk_exact(rp, rn, n), rel=1e-10, abs=1e-12 * scale)
    assert sorted_auc(sp, sn, vp, vn) == pytest.approx(sorted_auc(rp, rn), rel=1e-10)
    assert sorted_auc_reference(sp, sn, vp, vn) == pytest.approx(sorted_auc_reference(rp, rn), rel=1e-10)


# ---------------------------------------------------------------- unit weights, validation


@pytest.mark.parametrize("seed, ties", CASES[::2])
def test_unit_weights_equal_no_weights(seed, ties):
    sp, sn, _, _ = case(600 + seed, ties, "real", 60, 60)
    op, on = np.ones(sp.size), np.ones(sn.size)
    n = sp.size + sn.size

    def same(a, b):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)

    for weights in ((op, on), (op, None), (None, on)):  # a missing weight array is all ones
        for t in (1e-3, 0.5):
            same(auc_gamma(sp, sn, t, *weights), auc_gamma(sp, sn, t))
            same(auc_gamma_reference(sp, sn, t, *weights), auc_gamma_reference(sp, sn, t))
        for mu in (1e-6, 0.05):
            wb, ub = prbep_beta(sp, sn, float(n), mu, *weights), prbep_beta(sp, sn, n, mu)
            same(wb[:3], ub[:3])
            same(prbep_beta_reference(sp, sn, float(n), mu, *weights)[:3], prbep_beta_reference(sp, sn, n, mu)[:3])
        same([prbep_risk_exact(sp, sn, float(n), *weights)], [prbep_risk_exact(sp, sn, n)])
        same([sorted_auc(sp, sn, *weights), sorted_auc_reference(sp, sn, *weights)], [sorted_auc(sp, sn), sorted_auc_reference(sp, sn)])


def test_weights_of_the_wrong_length_are_a_value_error():
    sp, sn = np.array([0.0, 1.0, 2.0]), np.array([-1.0, 0.5])
    good_p, good_n = np.ones(3), np.ones(2)
    calls = [
        lambda vp, vn: auc_gamma(sp, sn, 0.5, vp, vn),
        lambda vp, vn: auc_gamma_reference(sp, sn, 0.5, vp, vn),
        lambda vp, vn: prbep_beta(sp, sn, 5.0, 0.1, vp, vn),
        lambda vp, vn: prbep_beta_reference(sp, sn, 5.0, 0.1, vp, vn),
        lambda vp, vn: prbep_risk_exact(sp, sn, 5.0, vp, vn),
        lambda vp, vn: sorted_auc(sp, sn, vp, vn),
        lambda vp, vn: sorted_auc_reference(sp, sn, vp, vn),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"the weights vp must be one per score of sp: got shape \(2,\) for 3 scores"):
            call(np.ones(2), good_n)
        with pytest.raises(ValueError, match=r"the weights vn must be one per score of sn: got shape \(3,\) for 2 scores"):
            call(good_p, np.ones(3))
        with pytest.raises(ValueError, match=r"the weights vn must be one per score of sn: got shape \(2, 1\)"):
            call(None, np.ones((2, 1)))
        call(good_p, good_n)  # the right lengths pass
