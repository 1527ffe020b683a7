"""The rate family's solver (dpipe.solvers._rate_*): the inner problem's Hessian-vector products, the inner solvers, the
stopping rules of the three loops, weighted = repeated rows and local = dask for the new paths."""

from __future__ import annotations

import dataclasses
import uuid

import numpy as np
import pytest

from dpipe import rates
from dpipe.engine import LocalDataset, RankPasses, ShardedDataset, column_scales
from dpipe.exceptions import ConvergenceWarning
from dpipe.fit import resolve
from dpipe.fit._newton import PairwiseNewtonObjective
from dpipe.fit._rates import fit_rates
from dpipe.objectives import SmoothedAUCRisk
from dpipe.rates._cells import DataInfo, compile_rows, plan_stores
from dpipe.reduce._rates import cell_weights
from dpipe.solvers import InnerObjective, RateProblem, minimize_tron, solve_rates
from dpipe.testing import write_store

T = 0.05
CONSTRAINTS = ["positive_rate(group=A) >= 0.8 * positive_rate(group=B)", "recall >= 0.8"]


def _data(n: int = 600, seed: int = 4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3)) * [1.0, 4.0, 0.3]
    group = (rng.random(n) < 0.4).astype(np.int16)
    X[:, 2] += group
    y = np.where(X @ np.array([1.0, 0.2, 1.5]) + 0.6 * rng.standard_normal(n) > 0.4, 1, -1).astype(np.int8)
    v = rng.integers(0, 4, n)
    return X.astype(np.float32), y, group, v


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The weighted store (weights in 0..3, an empty shard) and the same rows repeated (other shard boundaries)."""
    root = tmp_path_factory.mktemp("rate-solver")
    X, y, group, v = _data()
    weighted = write_store(root / "weighted.zarr", X, y, [250, 0, 350], group=group, weight=v.astype(np.float64), groups=["A", "B"])
    Xr, yr, gr = np.repeat(X, v, axis=0), np.repeat(y, v), np.repeat(group, v)
    nr = Xr.shape[0]
    repeated = write_store(root / "repeated.zarr", Xr, yr, [nr // 3, nr - nr // 3], group=gr, groups=["A", "B"])
    return {"weighted": weighted, "repeated": repeated, "X": X.astype(np.float64), "y": y, "group": group, "v": v.astype(np.float64)}


def _problem(ds, ranking: bool = False, standardize: bool = False, memo: bool = True, lam: float = 1e-3) -> RateProblem:
    constraints = [rates.parse_constraint(c) for c in CONSTRAINTS]
    objective = None if ranking else rates.error_rate()
    plans = plan_stores(objective, constraints, {"train": DataInfo.of(ds)}, None)
    if memo:
        fit = uuid.uuid4().hex
        plans = {a: dataclasses.replace(p, layout=dataclasses.replace(p.layout, memo=(fit, a))) for a, p in plans.items()}
    rows = compile_rows(objective, constraints, plans, {"train": ds.map_reduce(cell_weights, np.add, plans["train"].layout)})
    term = PairwiseNewtonObjective(RankPasses(ds), SmoothedAUCRisk(T), 0.0) if ranking else None
    return RateProblem({"train": ds}, plans, rows, lam, T, term, column_scales(ds) if standardize else None, curvature=True)


#: an anchor, a point and multipliers where every kind of row occurs (both bounds hinges or constants, Huber zones)
ANCHOR = np.array([0.6, 0.05, 0.9, 0.3])
THETA = np.array([0.3, -0.01, 0.45, 0.1])
V_FULL = np.array([1.0, 0.7, 0.4])


def _brute_force_rate_hessian(problem: RateProblem, X, y, group, v, theta, anchor, v_full):
    """``S [X, -1]^T D [X, -1] S + lam I`` from every row (NumPy), ``D`` the Huberized bounds' second derivatives."""
    d = problem.n_features
    inv = problem.inv_scale
    z = X @ (theta[:d] * inv) - theta[d]
    za = X @ (anchor[:d] * inv) - anchor[d]
    cells = (y > 0).astype(int) + 2 * group.astype(int)
    cp, cn = problem.lagrangian.split["train"]
    P, N = (v_full @ cp)[cells], (v_full @ cn)[cells]
    up, un = 0.5 + z, 0.5 - z
    D = v / T * (P * ((za <= 0.5) & (up > 0) & (up < T)) + N * ((za >= -0.5) & (un > 0) & (un < T)))
    A = np.hstack([X * inv, -np.ones((X.shape[0], 1))])
    return A.T @ (D[:, None] * A) + problem.lam * np.eye(d + 1), D


def _brute_force_ranking_hessian(X, y, v, w):
    """``(1/(W+ W-)) sum_ij v_i v_j [0 < 1 - s_i + s_j < t] / t (x_i - x_j)(x_i - x_j)^T``: every pair."""
    s = X @ w
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y != 1)
    H = np.zeros((X.shape[1], X.shape[1]))
    for i in pos:
        m = 1.0 - s[i] + s[neg]
        on = (m > 0) & (m < T)
        diff = X[i] - X[neg[on]]
        H += v[i] * (diff * (v[neg[on]] / T)[:, None]).T @ diff
    return H / (v[pos].sum() * v[neg].sum())


def _fd_hessian_column(problem, theta, direction, h=1e-7):
    gp = problem.smoothed(theta + h * direction, ANCHOR, V_FULL)[1]
    gm = problem.smoothed(theta - h * direction, ANCHOR, V_FULL)[1]
    return (gp - gm) / (2 * h)


# ---------------------------------------------------------------------------------
# Hessian-vector products
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("standardize", [False, True])
def test_the_hessian_product_is_the_brute_force_hessian_and_the_gradient_s_derivative(stores, standardize):
    problem = _problem(LocalDataset(stores["weighted"]), standardize=standardize)
    problem.smoothed(THETA, ANCHOR, V_FULL)  # the pass that leaves the curvature rows on the workers
    H, D = _brute_force_rate_hessian(problem, stores["X"], stores["y"], stores["group"], stores["v"], THETA, ANCHOR, V_FULL)
    assert 10 < np.count_nonzero(D) < 0.5 * D.size  # some rows, not all, in a Huber zone
    rng = np.random.default_rng(1)
    for direction in [*np.eye(4), *rng.standard_normal((3, 4))]:
        got = problem.hess_vec(THETA, ANCHOR, V_FULL, direction)
        np.testing.assert_allclose(got, H @ direction, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got, _fd_hessian_column(problem, THETA, direction), rtol=1e-5, atol=1e-7)


def test_the_ranking_term_s_hessian_product_is_the_pairs_brute_force(stores):
    """auc-rate: the rates' part plus the ranking's, at the point of the last value_and_grad (Newton's point)."""
    problem = _problem(LocalDataset(stores["weighted"]), ranking=True)
    problem.smoothed(THETA, ANCHOR, V_FULL)
    X, y, v = stores["X"], stores["y"], stores["v"]
    H_rates, _ = _brute_force_rate_hessian(problem, X, y, stores["group"], v, THETA, ANCHOR, V_FULL)
    H = H_rates.copy()
    H[:3, :3] += _brute_force_ranking_hessian(X, y, v, THETA[:3])
    assert np.abs(H - H_rates).max() > 1e-3  # the ranking's curvature is there
    for direction in np.eye(4):
        np.testing.assert_allclose(problem.hess_vec(THETA, ANCHOR, V_FULL, direction), H @ direction, rtol=1e-9, atol=1e-12)
    problem.smoothed(THETA, ANCHOR, V_FULL)  # the FD points move the ranking's point: take it back (a fresh pass)
    direction = np.array([0.3, -0.1, 0.5, 0.2])
    problem.forget()
    problem.smoothed(THETA, ANCHOR, V_FULL)
    want = problem.hess_vec(THETA, ANCHOR, V_FULL, direction)
    np.testing.assert_allclose(want, _fd_hessian_column(problem, THETA, direction), rtol=1e-5, atol=1e-7)


def test_weighted_rows_give_the_repeated_rows_hessian(stores):
    pw, pr = _problem(LocalDataset(stores["weighted"])), _problem(LocalDataset(stores["repeated"]))
    assert np.allclose(pw.rows.constant, pr.rows.constant)
    for p in (pw, pr):
        p.smoothed(THETA, ANCHOR, V_FULL)
    for direction in np.eye(4):
        np.testing.assert_allclose(pw.hess_vec(THETA, ANCHOR, V_FULL, direction), pr.hess_vec(THETA, ANCHOR, V_FULL, direction), rtol=1e-10)


def test_the_hessian_product_without_the_memo_and_on_a_dask_cluster_is_the_same(stores, client):
    """The curvature rows kept by the evaluation, recomputed without a memo (or after a forgotten one), and computed on
    two worker processes: the same product."""
    direction = np.array([0.2, 0.1, -0.4, 0.3])
    local = _problem(LocalDataset(stores["weighted"]))
    local.smoothed(THETA, ANCHOR, V_FULL)
    want = local.hess_vec(THETA, ANCHOR, V_FULL, direction)
    no_memo = _problem(LocalDataset(stores["weighted"]), memo=False)
    np.testing.assert_array_equal(no_memo.hess_vec(THETA, ANCHOR, V_FULL, direction), want)  # no evaluation first: recomputed
    with ShardedDataset(stores["weighted"], client, cache="memory") as ds:
        remote = _problem(ds)
        remote.smoothed(THETA, ANCHOR, V_FULL)
        np.testing.assert_allclose(remote.hess_vec(THETA, ANCHOR, V_FULL, direction), want, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------------------------
# the inner problem: Newton and L-BFGS reach the same minimum
# ---------------------------------------------------------------------------------
def test_tron_and_lbfgs_reach_the_same_inner_minimum(stores):
    from scipy.optimize import minimize

    problem = _problem(LocalDataset(stores["weighted"]), lam=1e-2)
    fg = lambda t: problem.smoothed(t, ANCHOR, V_FULL)[:2]  # noqa: E731
    lbfgs = minimize(fg, np.zeros(4), jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 5000})
    tron = minimize_tron(InnerObjective(problem, ANCHOR, V_FULL, np.ones(4)), np.zeros(4), eps=1e-10, max_iter=500)
    assert tron.success and tron.info["cg_steps"] > 0
    assert tron.fun == pytest.approx(lbfgs.fun, rel=1e-9)
    np.testing.assert_allclose(tron.x, lbfgs.x, rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------------------------
# the fit: stopping rules, weighted = repeated, local = dask, both inner solvers
# ---------------------------------------------------------------------------------
def _params(constraints, objective="error-rate", **options):
    """The resolved parameters of a rate fit (the record fit_rates takes)."""
    return resolve(objective, {"constraints": constraints, **options}, "test")


def _constraints():
    return [rates.parse_constraint(c) for c in CONSTRAINTS]


def test_majorization_stops_on_its_relative_rule(stores):
    problem = _problem(LocalDataset(stores["weighted"]), memo=False)
    pre = np.r_[1.0 / column_scales(LocalDataset(stores["weighted"])), 1.0]
    eps = 1e-3
    sol = solve_rates(problem, mm_steps=30, eps=eps, tol=1e-3, max_iter=200, multiplier_bound=100.0, feasibility_tol=1e-6,
                      threshold="exact", preconditioner=pre)
    assert sol.settled and 2 <= sol.mm_steps < 30 and len(sol.dual) == sol.mm_steps
    D = np.array(sol.dual)
    assert D[-2] - D[-1] <= eps * abs(D[-1])  # the step that stopped it lowered the dual estimate by at most eps
    assert np.all(D[:-2] - D[1:-1] > eps * np.abs(D[1:-1]))  # every earlier one by more
    assert sol.inner_at_limit == 0 and sol.cuts_at_limit == 0


@pytest.mark.parametrize("limit, match", [
    (dict(mm_steps=1), r"did not settle in 1 steps .* raise 'mm_steps' or loosen 'eps'"),
    (dict(max_cuts=1), r"cutting plane stopped at its limit of 1 cuts .* loosen 'eps'"),
    (dict(max_iter=1), r"stopped at max_iter = 1 .* raise 'max_iter' or loosen 'tol'"),
])
def test_each_loop_at_its_limit_warns_with_the_remedy(stores, limit, match):
    own = {k: v for k, v in limit.items() if k == "max_cuts"}  # fit_rates' own keyword (not a hyper-parameter)
    with pytest.warns(ConvergenceWarning, match=match):
        fit_rates({"train": LocalDataset(stores["weighted"])}, _params(_constraints(), **{k: v for k, v in limit.items() if k not in own}),
                  load_model=None, **own)


@pytest.mark.parametrize("inner_solver", ["lbfgs", "newton"])
def test_weighted_store_fits_as_the_repeated_rows(stores, inner_solver):
    p = _params(_constraints(), tol=1e-10, max_iter=5000)
    a = fit_rates({"train": LocalDataset(stores["weighted"])}, p, load_model=None, inner_solver=inner_solver)
    b = fit_rates({"train": LocalDataset(stores["repeated"])}, p, load_model=None, inner_solver=inner_solver)
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-6, atol=1e-9)
    assert a.bias == pytest.approx(b.bias, rel=1e-6, abs=1e-9)
    assert [r.value for r in a.reports] == pytest.approx([r.value for r in b.reports], abs=1e-12)
    assert all(r.satisfied for r in a.reports) and a.settled and a.mm_steps == b.mm_steps
    if inner_solver == "newton":
        assert a.hess_products > 0


@pytest.mark.parametrize("inner_solver", ["lbfgs", "newton"])
def test_a_dask_cluster_gives_the_local_engine_s_fit(stores, client, inner_solver):
    kw = dict(load_model=None, inner_solver=inner_solver)
    local = fit_rates({"train": LocalDataset(stores["weighted"])}, _params(_constraints()), **kw)
    with ShardedDataset(stores["weighted"], client, cache="memory") as ds:
        remote = fit_rates({"train": ds}, _params(_constraints()), **kw)
    np.testing.assert_allclose(remote.coef, local.coef, rtol=1e-8, atol=1e-10)
    assert remote.bias == pytest.approx(local.bias, rel=1e-8, abs=1e-10)
    assert (remote.mm_steps, remote.cuts, remote.evaluations) == (local.mm_steps, local.cuts, local.evaluations)


def test_newton_and_lbfgs_fits_meet_the_constraints_at_close_objectives(stores):
    """Both inner solvers solve the same problems: the exact constraints hold, and the training error is within a
    percentage point (their MM paths differ by the inner solvers' stopping points)."""
    fits = {s: fit_rates({"train": LocalDataset(stores["weighted"])}, _params(_constraints()), load_model=None, inner_solver=s)
            for s in ("lbfgs", "newton")}
    for f in fits.values():
        assert all(r.satisfied for r in f.reports)
    assert fits["newton"].reports[0].value == pytest.approx(fits["lbfgs"].reports[0].value, abs=0.01)


def test_auc_rate_by_newton_meets_its_constraints(stores):
    """auc-rate's inner problems by TRON: the ranking's Hessian products join the rates'; every constraint holds."""
    cs = [rates.parse_constraint(c) for c in ("positive_rate(group=A) >= 0.8 * positive_rate(group=B)", "recall >= 0.6",
                                              "false_positive_rate <= 0.3")]  # no threshold of the ranking alone meets all three
    fit = fit_rates({"train": LocalDataset(stores["weighted"])}, _params(cs, "auc-rate"), load_model=None, inner_solver="newton")
    assert all(r.satisfied for r in fit.reports) and fit.hess_products > 0 and fit.mm_steps > 0
