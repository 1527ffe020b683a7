"""The squared pairwise hinge: value, gradient and Hessian-vector products against O(n^2) brute force, finite
differences, weights as repeated rows, and through the engine's passes (kept order, trial points, several shards)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from dpipe._runs import MergedScores
from dpipe.engine import LocalDataset, RankPasses
from dpipe.exceptions import DPipeError
from dpipe.fit._newton import PairwiseNewtonObjective
from dpipe.io import Shard
from dpipe.objectives._pairwise_l2 import SquaredPairwiseHinge, liblinear_lam
from dpipe.testing import squared_hinge_reference


def _pairs(sp, sn, vp, vn):
    """Brute force: the pair margins' hinge and the pair weights over P = W+ W-."""
    m = np.maximum(0.0, 1.0 - sp[:, None] + sn[None, :])
    return m, vp[:, None] * vn[None, :] / (vp.sum() * vn.sum())


def _scores(seed: int, weighted: bool):
    rng = np.random.default_rng(seed)
    sp, sn = rng.normal(size=60), rng.normal(size=80) - 0.4
    sp[3] = sp[4]  # tied positives
    sn[10] = sp[20] - 1.0  # a pair exactly at the hinge's kink
    sn[11] = sn[12]
    sp, sn = np.sort(sp), np.sort(sn)
    vp = rng.integers(0, 4, sp.size).astype(float) if weighted else None
    vn = rng.integers(0, 4, sn.size).astype(float) if weighted else None
    return MergedScores(sp, sn, vp, vn)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_value_gradient_and_hessian_match_the_pairwise_brute_force(seed, weighted):
    s = _scores(seed, weighted)
    vp = np.ones(s.pos.size) if s.pos_weight is None else s.pos_weight
    vn = np.ones(s.neg.size) if s.neg_weight is None else s.neg_weight
    m, W = _pairs(s.pos, s.neg, vp, vn)
    risk = SquaredPairwiseHinge()
    at = risk.at(s)
    assert at.value == pytest.approx(float((W * m * m).sum()), rel=1e-13, abs=1e-15)
    assert at.exact == pytest.approx(float((W * m).sum()), rel=1e-13, abs=1e-15)
    np.testing.assert_allclose(at.g_pos, -2.0 * (W * m).sum(axis=1), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(at.g_neg, 2.0 * (W * m).sum(axis=0), rtol=1e-12, atol=1e-15)
    active = 2.0 * W * (m > 0)
    rng = np.random.default_rng(seed + 10)
    u_pos, u_neg = rng.normal(size=s.pos.size), rng.normal(size=s.neg.size)
    m_pos, m_neg = risk.curvature(s).apply(u_pos, u_neg)
    np.testing.assert_allclose(m_pos, active.sum(axis=1) * u_pos - active @ u_neg, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(m_neg, active.sum(axis=0) * u_neg - active.T @ u_pos, rtol=1e-12, atol=1e-15)


def test_integer_weights_are_repeated_rows():
    s = _scores(4, True)
    rep = MergedScores(np.repeat(s.pos, s.pos_weight.astype(int)), np.repeat(s.neg, s.neg_weight.astype(int)))
    risk = SquaredPairwiseHinge()
    a, b = risk.at(s), risk.at(rep)
    assert a.value == pytest.approx(b.value, rel=1e-12) and a.exact == pytest.approx(b.exact, rel=1e-12)
    # a row's derivative is the sum of its copies' (a row of weight 0 has none, and derivative 0)
    for scores, weights, got, copies in ((s.pos, s.pos_weight, a.g_pos, b.g_pos), (s.neg, s.neg_weight, a.g_neg, b.g_neg)):
        rows = np.repeat(np.arange(scores.size), weights.astype(int))
        np.testing.assert_allclose(got, np.bincount(rows, weights=copies, minlength=scores.size), rtol=1e-12, atol=1e-15)


def test_one_class_is_an_error_naming_the_missing_class():
    with pytest.raises(DPipeError, match="no negative rows"):
        SquaredPairwiseHinge().at(MergedScores(np.array([0.1, 0.2]), np.zeros(0)))


def test_liblinear_c_maps_to_lam_with_the_same_minimizer_objective():
    """liblinear-ranksvm's 0.5 ||w||^2 + C sum_ij max(0, 1 - w.(x_i - x_j))^2 equals C n+ n- times dpipe's J at lam = 1/(C n+ n-)."""
    rng = np.random.default_rng(3)
    Xp, Xn = rng.normal(size=(7, 3)) + 0.5, rng.normal(size=(9, 3))
    w, C = rng.normal(size=3), 0.37
    liblinear = 0.5 * w @ w + C * float((np.maximum(0.0, 1.0 - (Xp @ w)[:, None] + (Xn @ w)[None, :]) ** 2).sum())
    lam = liblinear_lam(C, 7, 9)
    ours = 0.5 * lam * w @ w + SquaredPairwiseHinge().at(MergedScores(np.sort(Xp @ w), np.sort(Xn @ w))).value
    assert liblinear == pytest.approx(C * 7 * 9 * ours, rel=1e-13)


def _dataset(seed: int = 1, n: int = 300, d: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(X @ np.arange(1.0, d + 1) + rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    v = rng.integers(0, 3, n).astype(np.float32)
    cuts = [0, 70, 70, 190, n]  # an empty shard among them
    shards = [Shard(X=X[a:b], y=y[a:b], weight=v[a:b], index=i) for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))]
    return LocalDataset(shards), X.astype(np.float64), y, v.astype(np.float64)


def test_the_engine_objective_matches_brute_force_and_finite_differences():
    ds, X, y, v = _dataset()
    lam = 1e-2
    obj = PairwiseNewtonObjective(RankPasses(ds), SquaredPairwiseHinge(), lam)
    brute = squared_hinge_reference(X, y, lam, v)
    value = brute.fun
    rng = np.random.default_rng(7)
    w = 0.3 * rng.normal(size=X.shape[1])
    f, g = obj.value_and_grad(w)
    assert f == pytest.approx(value(w), rel=1e-12)
    # X^T g sums float64 products of float32 features: the finite difference agrees to its own accuracy
    np.testing.assert_allclose(g, approx_fprime(w, value, 1e-7), rtol=1e-5, atol=1e-6)
    for _ in range(3):
        d = rng.normal(size=X.shape[1])
        np.testing.assert_allclose(obj.hess_vec(d), brute.hessp(w, d), rtol=1e-6, atol=1e-8)
    # a trial point scored in between (a rejected Newton step) does not change where the Hessian is taken
    obj.value(w + 1.0)
    d = rng.normal(size=X.shape[1])
    np.testing.assert_allclose(obj.hess_vec(d), brute.hessp(w, d), rtol=1e-6, atol=1e-8)
    # the generalized Hessian is the gradient's derivative wherever no pair sits at a kink
    fd = (obj.value_and_grad(w + 1e-6 * d)[1] - obj.value_and_grad(w - 1e-6 * d)[1]) / 2e-6
    np.testing.assert_allclose(fd, brute.hessp(w, d), rtol=1e-4, atol=1e-6)


def test_products_after_a_forgotten_order_are_recomputed_not_wrong():
    """A worker that forgot the kept order (a restart) recomputes it from w: the products do not change."""
    from dpipe.reduce import _sorted

    ds, X, y, v = _dataset(2)
    obj = PairwiseNewtonObjective(RankPasses(ds), SquaredPairwiseHinge(), 1e-2)
    w = np.linspace(-0.5, 0.5, X.shape[1])
    obj.value_and_grad(w)
    d = np.ones(X.shape[1])
    before = obj.hess_vec(d)
    _sorted._MEMO.clear()
    np.testing.assert_array_equal(obj.hess_vec(d), before)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("t", [0.05, 0.5])
def test_the_huber_hinges_hessian_matches_brute_force_and_its_gradient(weighted, t):
    """auc-smooth's risk: M u from the pairs in the quadratic piece (0 < margin < t), against O(n^2), and the generalized
    Hessian as the derivative of the kernel's gradient where no pair sits at a kink."""
    from dpipe.objectives import SmoothedAUCRisk

    rng = np.random.default_rng(5)  # no pair at a kink: there the two sides of a comparison may round apart
    s = MergedScores(np.sort(rng.normal(size=60)), np.sort(rng.normal(size=80) - 0.4),
                     rng.integers(0, 4, 60).astype(float) if weighted else None, rng.integers(0, 4, 80).astype(float) if weighted else None)
    vp = np.ones(s.pos.size) if s.pos_weight is None else s.pos_weight
    vn = np.ones(s.neg.size) if s.neg_weight is None else s.neg_weight
    margin = 1.0 - s.pos[:, None] + s.neg[None, :]
    quad = (margin > 0) & (margin < t)
    c = quad * vp[:, None] * vn[None, :] / (t * vp.sum() * vn.sum())
    rng = np.random.default_rng(6)
    u_pos, u_neg = rng.normal(size=s.pos.size), rng.normal(size=s.neg.size)
    risk = SmoothedAUCRisk(t)
    m_pos, m_neg = risk.curvature(s).apply(u_pos, u_neg)
    np.testing.assert_allclose(m_pos, c.sum(axis=1) * u_pos - c @ u_neg, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(m_neg, c.sum(axis=0) * u_neg - c.T @ u_pos, rtol=1e-12, atol=1e-14)
    h = 1e-7  # a step that moves no margin across 0 or t (checked): the gradient is linear there
    moved = 1.0 - (s.pos + h * u_pos)[:, None] + (s.neg + h * u_neg)[None, :]
    assert np.array_equal(moved > 0, margin > 0) and np.array_equal(moved < t, margin < t)
    ahead = risk.at(MergedScores(s.pos + h * u_pos, s.neg + h * u_neg, s.pos_weight, s.neg_weight))
    behind = risk.at(MergedScores(s.pos - h * u_pos, s.neg - h * u_neg, s.pos_weight, s.neg_weight))
    np.testing.assert_allclose((ahead.g_pos - behind.g_pos) / (2 * h), m_pos, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose((ahead.g_neg - behind.g_neg) / (2 * h), m_neg, rtol=1e-5, atol=1e-8)
