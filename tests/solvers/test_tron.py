"""TRON (trust-region Newton-CG) against scipy's trust-region Newton methods on small problems."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.optimize

from dpipe.engine import LocalDataset, RankPasses
from dpipe.exceptions import ConvergenceWarning
from dpipe.fit._newton import PairwiseNewtonObjective
from dpipe.io import Shard
from dpipe.objectives._pairwise_l2 import SquaredPairwiseHinge
from dpipe.solvers._tron import minimize_tron
from dpipe.testing import squared_hinge_reference


class _Quadratic:
    """``1/2 w.A w - b.w`` (plus a smooth quartic term): value, gradient, Hessian products."""

    def __init__(self, A: np.ndarray, b: np.ndarray, quartic: float = 0.0) -> None:
        self.A, self.b, self.q = A, b, quartic
        self.point = None

    def fun(self, w):
        return 0.5 * w @ self.A @ w - self.b @ w + 0.25 * self.q * float((w**4).sum())

    def grad(self, w):
        return self.A @ w - self.b + self.q * w**3

    def hess(self, w):
        return self.A + np.diag(3.0 * self.q * w**2)

    def value(self, w):
        return self.fun(w)

    def value_and_grad(self, w):
        self.point = np.array(w)
        return self.fun(w), self.grad(w)

    def hess_vec(self, d):
        return self.hess(self.point) @ d


@pytest.mark.parametrize("method", ["trust-ncg", "trust-krylov"])
@pytest.mark.parametrize("seed", [0, 1])
def test_tron_finds_scipys_minimum(seed, method):
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(8, 8))
    problem = _Quadratic(Q @ Q.T + 0.1 * np.eye(8), rng.normal(size=8), quartic=0.5)
    ours = minimize_tron(problem, np.zeros(8), eps=1e-7, max_iter=200)
    ref = scipy.optimize.minimize(problem.fun, np.zeros(8), jac=problem.grad, hess=problem.hess, method=method, options={"gtol": 1e-12})
    assert ours.success and ours.status == 0
    assert ours.fun == pytest.approx(ref.fun, rel=1e-12, abs=1e-12)
    # ||x - x*|| <= ||g|| / (smallest eigenvalue 0.1): eps 1e-7 of ||g(0)|| ~ 2 is 2e-7 / 0.1
    np.testing.assert_allclose(ours.x, ref.x, rtol=0, atol=3e-6)


def test_tron_on_the_squared_pairwise_hinge_matches_trust_ncg():
    rng = np.random.default_rng(4)
    n, d = 250, 6
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(X @ rng.normal(size=d) + rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    ds = LocalDataset([Shard(X=X[:120], y=y[:120], index=0), Shard(X=X[120:], y=y[120:], index=1)])
    lam = 1e-3
    obj = PairwiseNewtonObjective(RankPasses(ds), SquaredPairwiseHinge(), lam)
    ours = minimize_tron(obj, np.zeros(d), eps=1e-7)
    brute = squared_hinge_reference(X, y, lam)
    ref = scipy.optimize.minimize(brute.fun, np.zeros(d), jac=brute.grad, hessp=brute.hessp, method="trust-ncg", options={"gtol": 1e-11})
    assert ours.status == 0 and ours.nit <= 20
    assert ours.fun == pytest.approx(ref.fun, rel=1e-11)
    np.testing.assert_allclose(ours.x, ref.x, rtol=0, atol=1e-5)
    assert ours.info["cg_steps"] == obj.hess_products  # one Hessian-vector product per CG step
    assert ours.nfev >= ours.nit + 1  # one evaluation per trial point, and the start


def test_the_iteration_limit_warns_and_says_what_to_do():
    rng = np.random.default_rng(2)
    Q = rng.normal(size=(6, 6))
    problem = _Quadratic(Q @ Q.T + 1e-3 * np.eye(6), rng.normal(size=6), quartic=2.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = minimize_tron(problem, 10.0 * np.ones(6), eps=1e-14, max_iter=2)
    assert result.status == 1 and not result.success
    assert any(issubclass(w.category, ConvergenceWarning) and "raise 'max_iter'" in str(w.message) for w in caught)


def test_already_converged_start_stops_at_once():
    problem = _Quadratic(np.eye(3), np.zeros(3))
    result = minimize_tron(problem, np.zeros(3))
    assert result.nit == 0 and result.nfev == 1 and result.success


class _PreconditionedQuadratic(_Quadratic):
    """:class:`_Quadratic` that offers TRON the Hessian's diagonal."""

    def preconditioner(self):
        return np.diag(self.hess(self.point)).copy()


@pytest.mark.parametrize("seed", [0, 1])
def test_preconditioned_tron_finds_scipys_minimum_in_fewer_cg_steps_on_a_badly_scaled_problem(seed):
    rng = np.random.default_rng(seed)
    scales = np.logspace(0, 3, 12)  # columns on scales three decades apart: what a diagonal fixes
    Q = rng.normal(size=(12, 12))
    A = np.diag(scales) @ (Q @ Q.T / 12 + np.eye(12)) @ np.diag(scales)
    b = rng.normal(size=12) * scales
    plain = minimize_tron(_Quadratic(A, b, quartic=0.1), np.zeros(12), eps=1e-9, max_iter=500)
    pre = minimize_tron(_PreconditionedQuadratic(A, b, quartic=0.1), np.zeros(12), eps=1e-9, max_iter=500)
    problem = _Quadratic(A, b, quartic=0.1)
    ref = scipy.optimize.minimize(problem.fun, np.zeros(12), jac=problem.grad, hess=problem.hess, method="trust-exact", options={"gtol": 1e-12})
    assert pre.success and pre.info["preconditioned"] and not plain.info["preconditioned"]
    assert pre.fun == pytest.approx(ref.fun, rel=1e-10)
    # both stop at a small gradient; the Hessian's smallest eigenvalue bounds the distance: ||x - x*|| <= ||g|| / lambda_min
    lambda_min = float(np.linalg.eigvalsh(A).min())
    assert np.linalg.norm(pre.x - ref.x) <= (1e-9 * np.linalg.norm(b) + np.linalg.norm(problem.grad(ref.x))) / lambda_min
    assert pre.info["cg_steps"] < plain.info["cg_steps"]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("surrogate", ["squared-hinge", "huber-hinge"])
def test_newtons_jacobi_diagonal_is_the_pairs_row_curvature_and_the_minimum_does_not_move(surrogate, weighted):
    from dpipe.objectives import auc_risk
    from dpipe.testing import huber_hinge_reference

    rng = np.random.default_rng(7)
    n, d = 160, 5
    X = (rng.normal(size=(n, d)) * np.array([1.0, 3.0, 0.3, 1.0, 10.0])).astype(np.float32)
    X[rng.random((n, d)) < 0.3] = 0.0
    y = np.where(X @ rng.normal(size=d) + rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    v = rng.uniform(0.5, 2.0, size=n).astype(np.float32) if weighted else None
    shards = [Shard(X=X[a:b], y=y[a:b], weight=None if v is None else v[a:b], index=i) for i, (a, b) in enumerate([(0, 70), (70, n)])]
    lam, t = 1e-3, 0.2
    width = None if surrogate == "squared-hinge" else t
    ref = squared_hinge_reference(X, y, lam, v) if width is None else huber_hinge_reference(X, y, lam, t, v)
    fits = {}
    for jacobi in (False, True):
        obj = PairwiseNewtonObjective(RankPasses(LocalDataset(shards)), auc_risk(width), lam, jacobi=jacobi)
        w = rng.normal(size=d) * 0.3
        obj.value_and_grad(w)
        if jacobi:
            np.testing.assert_allclose(obj._diagonal, ref.row_diagonal(w), rtol=1e-10)
            M = obj.preconditioner()
            assert M.shape == (d,) and np.all(M > 0)
        else:
            assert obj.preconditioner() is None
        fits[jacobi] = minimize_tron(obj, np.zeros(d), eps=1e-8, max_iter=200)
    assert fits[True].info["preconditioned"] and not fits[False].info["preconditioned"]
    assert fits[True].fun == pytest.approx(fits[False].fun, rel=1e-10)
    # both stop at ||g|| <= 1e-8 ||g(0)||; the objective is lam-strongly convex: ||x - x*|| <= ||g|| / lam
    np.testing.assert_allclose(fits[True].x, fits[False].x, rtol=0, atol=2e-8 * np.linalg.norm(ref.grad(np.zeros(d))) / lam)
