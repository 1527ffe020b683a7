"""Moment objectives: finite-difference gradients, closed form vs L-BFGS, error objective vs brute force."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.stats import norm
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from dpipe.exceptions import DPipeError
from dpipe.objectives import AUCMomentObjective, ErrorMomentObjective, StandardizedMoments
from dpipe.reduce import shard_moments
from dpipe.solvers import fit_auc_moment, fit_error_moment
from dpipe.testing import classification_data, moments_reference


@pytest.fixture(scope="module")
def std():
    X, y = classification_data(4000, 6)
    return StandardizedMoments(shard_moments(X, y))


def _fd_check(obj, x, eps=1e-7, rtol=1e-5):
    f = lambda v: obj.value_and_grad(v)[0]  # noqa: E731
    g = obj.value_and_grad(x)[1]
    fd = approx_fprime(x, f, eps)
    np.testing.assert_allclose(g, fd, rtol=rtol, atol=1e-6 * max(1.0, np.abs(fd).max()))


def test_auc_objective_gradient_matches_finite_differences(std):
    rng = np.random.default_rng(0)
    for lam in (0.0, 1e-3, 0.5):
        obj = AUCMomentObjective(std, lam=lam)
        for _ in range(3):
            _fd_check(obj, rng.standard_normal(std.n_features))


def test_error_objective_gradient_matches_finite_differences(std):
    rng = np.random.default_rng(1)
    for lam in (0.0, 1e-3, 0.5):
        obj = ErrorMomentObjective(std, lam=lam)
        for _ in range(3):
            _fd_check(obj, rng.standard_normal(std.n_features + 1))


def test_rank_loss_is_normal_probability_of_misordered_pair(std):
    w = np.random.default_rng(2).standard_normal(std.n_features)
    obj = AUCMomentObjective(std)
    a = std.mu[1] - std.mu[0]
    s2 = w @ (std.cov[0] + std.cov[1]) @ w
    # P(w.X+ < w.X-) for independent normal scores: Phi(-w.a / sqrt(s2)).
    assert obj.rank_loss(w) == pytest.approx(norm.cdf(-(w @ a) / np.sqrt(s2)), rel=1e-12)
    assert obj.rank_loss(2.5 * w) == pytest.approx(obj.rank_loss(w), rel=1e-12)  # scale invariant


def test_error_objective_equals_direct_formula(std):
    v = np.random.default_rng(3).standard_normal(std.n_features + 1)
    w, b = v[:-1], v[-1]
    pn, pp = std.prior
    sp, sn = np.sqrt(w @ std.cov[1] @ w), np.sqrt(w @ std.cov[0] @ w)
    expected = pp * (1 - norm.cdf((w @ std.mu[1] + b) / sp)) + pn * norm.cdf((w @ std.mu[0] + b) / sn)
    assert ErrorMomentObjective(std).error(v) == pytest.approx(expected, rel=1e-12)


def test_error_along_a_direction_equals_the_error_one_intercept_at_a_time(std):
    obj = ErrorMomentObjective(std, lam=0.0)
    w = np.random.default_rng(3).standard_normal(std.mu.shape[1])
    grid = np.linspace(-4.0, 4.0, 101)
    np.testing.assert_array_equal(obj.log_error_along(w, grid), [obj.log_error(np.append(w, b)) for b in grid])


def test_closed_form_and_lbfgs_reach_same_direction_and_test_auc():
    X, y = classification_data(6000, 8, seed=5)
    Xt, yt = classification_data(6000, 8, seed=6)
    m = shard_moments(X, y)
    c1, _, r1 = fit_auc_moment(m, solver="closed-form")
    c2, _, r2 = fit_auc_moment(m, solver="lbfgs")
    cos = c1 @ c2 / (np.linalg.norm(c1) * np.linalg.norm(c2))
    assert cos > 0.999
    assert abs(roc_auc_score(yt, Xt @ c1) - roc_auc_score(yt, Xt @ c2)) <= 1e-3
    assert r2.nit > 0 and r2.history and r2.history[-1]["iteration"] == r2.nit
    assert r1.info["rank_loss"] <= r2.info["rank_loss"] + 1e-6


def test_error_moment_is_close_to_logistic_regression():
    X, y = classification_data(8000, 8, seed=7, scales=False)
    Xt, yt = classification_data(8000, 8, seed=8, scales=False)
    coef, b, res, _ = fit_error_moment(shard_moments(X, y))
    acc = np.mean(np.where(Xt @ coef + b > 0, 1, -1) == yt)
    lr = LogisticRegression().fit(X, y)
    assert acc >= lr.score(Xt, yt) - 0.01
    assert set(res.info["starts"]) == {"paper", "auc-moment"}
    assert res.info["error"] == min(s["error"] for s in res.info["starts"].values())


def test_error_moment_intercept_threshold_is_optimal_under_model():
    """On truly Gaussian classes the modelled error equals the true error, so the fit is Bayes-optimal-ish."""
    rng = np.random.default_rng(9)
    n = 40000
    y = np.where(rng.random(n) < 0.25, 1, -1).astype(np.int8)
    X = rng.standard_normal((n, 3)) + np.where(y[:, None] > 0, 1.0, 0.0) * np.array([1.5, 0.5, 0.0])
    coef, b, res, _ = fit_error_moment(shard_moments(X.astype(np.float32), y))
    acc = np.mean(np.where(X @ coef + b > 0, 1, -1) == y)
    assert abs((1 - acc) - res.info["error"]) < 0.01


def test_missing_class_is_a_clear_error():
    X, y = classification_data(100, 5)
    y[:] = -1
    with pytest.raises(DPipeError, match="no positive rows"):
        StandardizedMoments(moments_reference(X, y))


def test_constant_features_get_zero_weight():
    X, y = classification_data(3000, 6)
    X[:, 4] = 7.0
    coef, _, _ = fit_auc_moment(shard_moments(X, y))
    assert coef[4] == 0.0 and np.all(np.isfinite(coef))


def test_error_gradient_norm_is_the_gradient_of_the_modelled_error(std):
    obj = ErrorMomentObjective(std, lam=1e-2)
    v = np.random.default_rng(4).standard_normal(std.n_features + 1)
    fd = approx_fprime(v, obj.error, 1e-7)
    assert obj.error_gradient_norm(v) == pytest.approx(np.linalg.norm(fd), rel=1e-5)
