"""The cutting-plane solver: master QP, agreement with the n-slack QP and the smoothed objective, parity."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize as so

from dpipe.engine import LocalDataset, RankPasses, ShardedDataset
from dpipe.exceptions import ConvergenceWarning
from dpipe.fit import StructuralRisk as _StructuralRisk
from dpipe.fit import smoothed_objective
from dpipe.io import Shard
from dpipe.objectives import StructuralLoss
from dpipe.solvers import fit_smooth
from dpipe.solvers._cutting_plane import fit_cutting_plane
from dpipe.solvers._master_qp import solve_simplex_qp
from dpipe.testing import classification_data, write_store


def StructuralRisk(ds, loss, n_pos=None, n_neg=None, k=None, *, bias=0.0, scale=None):  # noqa: N802
    """The cutting plane's risk assembled as the fit layer does: the engine's passes around a pure oracle."""
    return _StructuralRisk(RankPasses(ds), StructuralLoss(loss, k), bias, scale)


def SmoothedAUCObjective(ds, lam, t, n_pos=None, n_neg=None):  # noqa: N802
    return smoothed_objective(RankPasses(ds), "auc-smooth", t, lam)


def _slsqp_simplex(H, c, rng, starts=3):
    f = lambda z: 0.5 * z @ H @ z - c @ z  # noqa: E731
    cons = ({"type": "eq", "fun": lambda z: z.sum() - 1.0},)
    best = np.inf
    for _ in range(starts):
        r = so.minimize(f, rng.dirichlet(np.ones(c.size)), jac=lambda z: H @ z - c, bounds=[(0, None)] * c.size, constraints=cons,
                        method="SLSQP", options={"ftol": 1e-15, "maxiter": 1000})
        best = min(best, f(r.x))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_master_qp_matches_a_generic_solver(seed):
    rng = np.random.default_rng(seed)
    T, d = int(rng.integers(1, 20)), int(rng.integers(1, 8))
    A = rng.normal(size=(T, d)) * rng.choice([1e-3, 1.0, 100.0])
    if T > 2 and seed % 3 == 0:
        A[1] = A[0]  # a repeated plane: singular Gram matrix
    lam = float(rng.choice([1e-4, 1e-2, 1.0]))
    b = rng.normal(size=T)
    H = A @ A.T / lam
    x = solve_simplex_qp(H, b)
    assert x.min() >= 0 and x.sum() == pytest.approx(1.0, abs=1e-12)
    ours = 0.5 * x @ H @ x - b @ x
    assert ours <= _slsqp_simplex(H, b, rng) + 1e-9 * max(1.0, abs(ours))


def _nslack_rocarea(X, y, lam):
    """The n-slack primal, min lam/2 ||w||^2 + mean_ij xi_ij, xi_ij >= 1 - w.(x_i - x_j), xi >= 0, by SLSQP."""
    P, N = X[y > 0], X[y < 0]
    D = (P[:, None, :] - N[None, :, :]).reshape(-1, X.shape[1])
    m, d = D.shape

    def f(z):
        return 0.5 * lam * z[:d] @ z[:d] + z[d:].mean()

    def jac(z):
        return np.concatenate([lam * z[:d], np.full(m, 1.0 / m)])

    cons = ({"type": "ineq", "fun": lambda z: z[d:] - 1.0 + D @ z[:d], "jac": lambda z: np.hstack([D, np.eye(m)])},)
    z0 = np.concatenate([np.zeros(d), np.ones(m)])
    r = so.minimize(f, z0, jac=jac, bounds=[(None, None)] * d + [(0, None)] * m, constraints=cons, method="SLSQP",
                    options={"ftol": 1e-14, "maxiter": 2000})
    return r.fun


def _nslack_error(X, y, lam):
    """min lam/2 ||w||^2 + mean_i max(0, 1 - y_i w.x_i) (the error-rate risk, no bias), by SLSQP."""
    n, d = X.shape
    Y = y[:, None] * X
    cons = ({"type": "ineq", "fun": lambda z: z[d:] - 1.0 + Y @ z[:d], "jac": lambda z: np.hstack([Y, np.eye(n)])},)
    r = so.minimize(lambda z: 0.5 * lam * z[:d] @ z[:d] + z[d:].mean(), np.concatenate([np.zeros(d), np.ones(n)]),
                    jac=lambda z: np.concatenate([lam * z[:d], np.full(n, 1.0 / n)]), bounds=[(None, None)] * d + [(0, None)] * n,
                    constraints=cons, method="SLSQP", options={"ftol": 1e-14, "maxiter": 2000})
    return r.fun


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_full_solver_equals_the_n_slack_qp(seed):
    X, y = classification_data(24, 4, seed=seed, scales=False)
    X = X.astype(np.float64)
    ds = LocalDataset([Shard(X=X[:10].astype(np.float32), y=y[:10]), Shard(X=X[10:].astype(np.float32), y=y[10:])])
    Xf = np.concatenate([s.X for s in ds._shards]).astype(np.float64)
    n_pos, n_neg = int((y > 0).sum()), int((y < 0).sum())
    lam = 0.05
    roc = fit_cutting_plane(StructuralRisk(ds, "rocarea", n_pos, n_neg), 4, lam, eps=1e-9, max_iter=500)
    assert roc.success and roc.fun == pytest.approx(_nslack_rocarea(Xf, y, lam), rel=1e-6, abs=1e-8)
    err = fit_cutting_plane(StructuralRisk(ds, "error", n_pos, n_neg), 4, lam, eps=1e-9, max_iter=500)
    assert err.success and err.fun == pytest.approx(_nslack_error(Xf, y, lam), rel=1e-6, abs=1e-8)
    for fit in (roc, err):  # the bound closes from below, the best J from above
        h = fit.history
        assert all(a["lower_bound"] <= b["lower_bound"] + 1e-12 for a, b in zip(h, h[1:]))
        assert all(r["lower_bound"] <= fit.fun + 1e-12 for r in h)


def test_rocarea_objective_is_the_small_width_limit_of_the_smoothed_one():
    X, y = classification_data(400, 5, seed=1, scales=False)
    ds = LocalDataset([Shard(X=X[:150], y=y[:150]), Shard(X=X[150:], y=y[150:])])
    n_pos, n_neg = int((y > 0).sum()), int((y < 0).sum())
    lam = 1e-2
    cp = fit_cutting_plane(StructuralRisk(ds, "rocarea", n_pos, n_neg), 5, lam, eps=1e-8, max_iter=500)
    smooth = fit_smooth(lambda t: SmoothedAUCObjective(ds, lam, t, n_pos, n_neg), np.zeros(5), 1e-5, tol=1e-12, max_iter=5000, continuation=True)
    j_smooth = min(h["J"] for h in smooth.history)  # the exact, non-smooth J along the smoothed run
    assert cp.success
    assert abs(cp.fun - j_smooth) <= 1e-6 * cp.fun  # both within their tolerances of the same minimum
    s = X.astype(np.float64) @ cp.x
    brute = lam / 2 * cp.x @ cp.x + np.maximum(0.0, 1.0 - s[y > 0][:, None] + s[y < 0][None, :]).mean()
    assert cp.fun == pytest.approx(brute, rel=1e-12)


def test_distributed_and_local_cutting_plane_agree(tmp_path, client):
    X, y = classification_data(1200, 6, seed=3)
    path = write_store(tmp_path / "s.zarr", X, y, [500, 0, 300, 400])
    n_pos, n_neg = int((y > 0).sum()), int((y < 0).sum())
    losses = (("rocarea", None), ("prbep", None), ("f1", None), ("prec@k", 100), ("rec@k", 100), ("error", None))
    probes = np.random.default_rng(0).normal(size=(3, 6)) * 0.3
    planes, fits = [], []
    for ds in (LocalDataset([Shard(X=X, y=y)]), ShardedDataset(path, client)):
        with ds:
            for loss, k in losses:
                risk = StructuralRisk(ds, loss, n_pos, n_neg, k=k)
                planes.append([risk.plane(w) for w in probes])
                fits.append(fit_cutting_plane(risk, 6, 1e-3, eps=1e-5, max_iter=300))
    half = len(losses)
    for local, dist in zip(planes[:half], planes[half:]):  # the same planes, up to summation order
        for (r1, l1, a1), (r2, l2, a2) in zip(local, dist):
            assert r2 == pytest.approx(r1, rel=1e-9, abs=1e-12) and l2 == l1
            np.testing.assert_allclose(a2, a1, rtol=1e-9, atol=1e-12 * np.abs(a1).max())
    for a, b in zip(fits[:half], fits[half:]):  # both within eps of the same minimum
        assert a.success and b.success
        assert abs(a.fun - b.fun) <= 1e-5
        assert max(a.info["lower_bound"], b.info["lower_bound"]) <= min(a.fun, b.fun) + 1e-12


def test_iteration_limit_warns_and_history_has_the_gap():
    X, y = classification_data(300, 4, seed=5)
    ds = LocalDataset([Shard(X=X, y=y)])
    with pytest.warns(ConvergenceWarning, match="iteration limit"):
        fit = fit_cutting_plane(StructuralRisk(ds, "f1", int((y > 0).sum()), int((y < 0).sum())), 4, 1e-4, eps=1e-12, max_iter=3)
    assert fit.nit == 3 and fit.status == 1
    assert {"J", "lower_bound", "gap", "loss", "seconds_oracle"} <= set(fit.history[-1])


def test_an_iteration_limit_with_every_weight_zero_says_the_model_is_empty():
    """Stopped after its first plane, the best iterate is the start w = 0: the warning says the model is empty (issue 41)."""
    X, y = classification_data(300, 4, seed=5)
    ds = LocalDataset([Shard(X=X, y=y)])
    with pytest.warns(ConvergenceWarning, match="every weight 0: the model is empty") as caught:
        fit = fit_cutting_plane(StructuralRisk(ds, "f1", int((y > 0).sum()), int((y < 0).sum())), 4, 1e-4, eps=1e-12, max_iter=1)
    assert not np.any(fit.x) and len(caught) == 1
    with pytest.warns(ConvergenceWarning) as caught:  # a model with weights: no such words
        fit = fit_cutting_plane(StructuralRisk(ds, "rocarea", int((y > 0).sum()), int((y < 0).sum())), 4, 1e-4, eps=1e-12, max_iter=10)
    assert np.any(fit.x) and "empty" not in str(caught[0].message)


def _contingency_loss(loss, a, b, c, n, n_pos, k):
    """Delta of a labeling with a true positives, b false positives and c false negatives (a fraction)."""
    return {
        "error": (b + c) / n,
        "f1": 1.0 if a == 0 else 1.0 - 2 * a / (2 * a + b + c),
        "prbep": 1.0 - a / n_pos,
        "prec@k": 1.0 - a / (k or 1),
        "rec@k": 1.0 - a / n_pos,
    }[loss]


def _enumerated_structural_svm(X, y, loss, lam, k=None):
    """The structural SVM with every admissible labeling as a constraint (n <= 10), by SLSQP in (w, xi)."""
    n, d = X.shape
    n_pos = int((y > 0).sum())
    rows = [(0.0, np.zeros(d))]  # xi >= 0 (the true labeling, where admissible; always in SVM-perf's problem)
    for bits in range(2 ** n):
        yp = np.where((bits >> np.arange(n)) & 1, 1, -1)
        npred = int((yp > 0).sum())
        if (loss == "prbep" and npred != n_pos) or (loss in ("prec@k", "rec@k") and npred != k):
            continue
        a, b, c = int(((yp > 0) & (y > 0)).sum()), int(((yp > 0) & (y < 0)).sum()), int(((yp < 0) & (y > 0)).sum())
        delta = _contingency_loss(loss, a, b, c, n, n_pos, k)
        rows.append((delta, ((yp - y) / (2 * n)) @ X))
    deltas, psi = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    cons = ({"type": "ineq", "fun": lambda z: z[d] - deltas - psi @ z[:d], "jac": lambda z: np.hstack([-psi, np.ones((len(rows), 1))])},)
    best = np.inf
    for start in (np.zeros(d + 1), np.concatenate([np.zeros(d), [1.0]])):
        r = so.minimize(lambda z: 0.5 * lam * z[:d] @ z[:d] + z[d], start, jac=lambda z: np.concatenate([lam * z[:d], [1.0]]),
                        constraints=cons, method="SLSQP", options={"ftol": 1e-14, "maxiter": 1000})
        if r.success:
            best = min(best, r.fun)
    return best


@pytest.mark.parametrize("loss,k", [("error", None), ("f1", None), ("prbep", None), ("prec@k", 3), ("rec@k", 4)])
@pytest.mark.parametrize("seed", [0, 1])
def test_full_solver_equals_the_structural_svm_over_all_labelings(loss, k, seed):
    """On n = 10 every admissible labeling is a constraint: the exact structural SVM, bias feature included."""
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.array([1] * 4 + [-1] * 6, dtype=np.int8))
    X = (rng.normal(size=(10, 3)) + 0.7 * y[:, None]).astype(np.float32)
    ds = LocalDataset([Shard(X=X[:4], y=y[:4]), Shard(X=X[4:], y=y[4:])])
    lam = 0.05
    bias = 1.0 if loss in ("error", "f1") else 0.0
    risk = StructuralRisk(ds, loss, int((y > 0).sum()), int((y < 0).sum()), k=k, bias=bias)
    fit = fit_cutting_plane(risk, risk.n_features, lam, eps=1e-10, max_iter=500)
    Xb = np.hstack([X.astype(np.float64), np.ones((10, 1))]) if bias else X.astype(np.float64)
    assert fit.success and fit.fun == pytest.approx(_enumerated_structural_svm(Xb, y, loss, lam, k), rel=1e-6, abs=1e-8)


def test_bias_feature_and_standardized_coordinates_map_back_to_the_raw_model():
    X, y = classification_data(300, 4, seed=2, scales=True)
    ds = LocalDataset([Shard(X=X, y=y)])
    scale = X.astype(np.float64).std(axis=0)
    risk = StructuralRisk(ds, "error", int((y > 0).sum()), int((y < 0).sum()), bias=2.0, scale=scale)
    v = np.array([0.3, -1.0, 0.5, 2.0, 0.25])
    coef, intercept = risk.split(v)
    np.testing.assert_allclose(coef, v[:4] / scale)
    assert intercept == 0.5
    R, _, a = risk.plane(v)
    s = X.astype(np.float64) @ coef + intercept  # the error-rate risk is the mean hinge of the raw model
    assert R == pytest.approx(np.maximum(0.0, 1.0 - y * s).mean(), rel=1e-12)
    eps = 1e-6  # and the plane's slope is its subgradient in v (the hinge is linear near a generic v)
    for j in range(5):
        e = np.zeros(5)
        e[j] = eps
        assert (risk.plane(v + e)[0] - risk.plane(v - e)[0]) / (2 * eps) == pytest.approx(a[j], rel=1e-5, abs=1e-9)
