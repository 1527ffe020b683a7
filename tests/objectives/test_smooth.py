"""Smoothed ROCArea / PRBEP: kernels vs brute force, enumeration, gradients, shard parity."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import approx_fprime

import dpipe
from dpipe._runs import merge_runs as merge_class_runs
from dpipe.engine import LocalDataset, RankPasses, ShardedDataset
from dpipe.exceptions import DPipeError
from dpipe.fit import smoothed_objective
from dpipe.fit._smooth import SmoothedObjective
from dpipe.io import Shard
from dpipe.objectives import PreconditionedObjective, SmoothedAUCRisk, SmoothedPRBEPRisk, ray_minimum
from dpipe.objectives._rank_kernels import auc_gamma, prbep_beta, prbep_risk_exact, sorted_auc
from dpipe.testing import auc_gamma_reference, classification_data, sorted_auc_reference, write_store


def _objective(risk, ds, lam, transform=None, penalty=None):
    """``lam/2 sum p w^2 + R(T u)`` through the engine's passes (the fit layer's own assembly)."""
    T = np.ones(ds.n_features) if transform is None else transform
    return PreconditionedObjective(SmoothedObjective(RankPasses(ds), risk), T, lam, penalty)


def SmoothedAUCObjective(ds, lam, t, n_pos=None, n_neg=None):  # noqa: N802
    return smoothed_objective(RankPasses(ds), "auc-smooth", t, lam)


def SmoothedPRBEPObjective(ds, lam, mu, n_pos=None, n_neg=None):  # noqa: N802
    return smoothed_objective(RankPasses(ds), "prbep-smooth", mu, lam)


def line_minimum(ds, risk, u, quad):
    return ray_minimum(risk, RankPasses(ds).scores(u, remember=False), quad)


def huber(u, t):
    return np.where(u <= 0, 0.0, np.where(u < t, u * u / (2 * t), u - t / 2))


def brute_auc(X, y, w, t, lam):
    s = X.astype(np.float64) @ w
    P, N = np.flatnonzero(y > 0), np.flatnonzero(y < 0)
    u = 1 - s[P][:, None] + s[N][None, :]
    m = P.size * N.size
    c = np.clip(u / t, 0, 1)
    grad = (X[N].astype(np.float64).T @ c.sum(0) - X[P].astype(np.float64).T @ c.sum(1)) / m + lam * w
    return huber(u, t).sum() / m + lam / 2 * w @ w, grad, np.maximum(u, 0).sum() / m + lam / 2 * w @ w


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(1e-300, np.max(np.abs(b)))


scores = st.lists(st.integers(-6, 6).map(lambda v: v / 4) | st.floats(-3, 3, allow_nan=False), min_size=1, max_size=40)


@settings(max_examples=80, deadline=None)
@given(scores, scores, st.sampled_from([1e-3, 0.25, 1.0, 3.0]))
def test_auc_kernel_equals_pairwise_brute_force(sp, sn, t):
    sp, sn = np.sort(sp), np.sort(sn)
    gp, gn, value, hinge = auc_gamma(sp, sn, t)
    u = 1 - sp[:, None] + sn[None, :]
    c = np.clip(u / t, 0, 1)
    np.testing.assert_allclose(gp, c.sum(1), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gn, c.sum(0), rtol=1e-9, atol=1e-9)
    assert value == pytest.approx(huber(u, t).sum(), rel=1e-9, abs=1e-9)
    assert hinge == pytest.approx(np.maximum(u, 0).sum(), rel=1e-9, abs=1e-9)
    ref = auc_gamma_reference(sp, sn, t)
    np.testing.assert_allclose(ref[0], gp, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(ref[1], gn, rtol=1e-12, atol=1e-9)


@settings(max_examples=80, deadline=None)
@given(scores, scores)
def test_sorted_auc_equals_pairwise_count_and_scikit_learn(sp, sn):
    from sklearn.metrics import roc_auc_score

    sp, sn = np.sort(sp), np.sort(sn)
    pairs = (sp[:, None] > sn[None, :]).mean() + 0.5 * (sp[:, None] == sn[None, :]).mean()
    assert sorted_auc(sp, sn) == pytest.approx(pairs, abs=1e-12)
    assert sorted_auc_reference(sp, sn) == pytest.approx(pairs, abs=1e-12)
    y = np.r_[np.ones(sp.size), np.zeros(sn.size)]
    assert sorted_auc(sp, sn) == pytest.approx(roc_auc_score(y, np.r_[sp, sn]), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(-5, 5, allow_nan=False), max_size=20), min_size=1, max_size=6))
def test_merge_of_sorted_runs_is_a_sort(runs):
    runs = [np.sort(np.asarray(r, dtype=float)) for r in runs]
    merged, order, lengths = merge_class_runs(runs)
    cat = np.concatenate(runs)
    np.testing.assert_array_equal(merged, np.sort(cat))
    np.testing.assert_array_equal(cat[order], merged)
    assert lengths == [r.size for r in runs]


def enumerate_prbep_risk(sp, sn, n):
    """max over labelings with #FN = #FP of sum c (brute force over all subsets)."""
    cp, cn = 1 / sp.size - 2 * sp / n, 2 * sn / n
    best = 0.0
    for k in range(min(sp.size, sn.size) + 1):
        for a in itertools.combinations(range(sp.size), k):
            for b in itertools.combinations(range(sn.size), k):
                best = max(best, cp[list(a)].sum() + cn[list(b)].sum())
    return best


@pytest.mark.parametrize("seed", range(8))
def test_prbep_risk_equals_enumeration_and_is_the_small_mu_limit(seed):
    rng = np.random.default_rng(seed)
    n_pos = int(rng.integers(1, 7))
    n_neg = int(rng.integers(1, 13 - n_pos))
    sp = np.sort(rng.integers(-3, 4, n_pos) / 2 if seed % 2 else rng.standard_normal(n_pos))
    sn = np.sort(rng.integers(-3, 4, n_neg) / 2 if seed % 2 else rng.standard_normal(n_neg))
    n = n_pos + n_neg
    exact = enumerate_prbep_risk(sp, sn, n)
    assert prbep_risk_exact(sp, sn, n) == pytest.approx(exact, abs=1e-12)
    mu = 1e-6
    bp, bn, value, theta = prbep_beta(sp, sn, n, mu)
    assert exact - mu * n / 2 - 1e-12 <= value <= exact + 1e-12  # uniform bound mu D, D = n / 2
    assert bp.sum() == pytest.approx(bn.sum(), abs=1e-8)


@settings(max_examples=60, deadline=None)
@given(scores, scores, st.sampled_from([1e-3, 0.05, 0.5]))
def test_prbep_beta_is_the_smoothed_maximizer(sp, sn, mu):
    sp, sn = np.sort(sp), np.sort(sn)
    n = sp.size + sn.size
    bp, bn, value, theta = prbep_beta(sp, sn, n, mu)
    assert np.all((bp >= 0) & (bp <= 1)) and np.all((bn >= 0) & (bn <= 1))
    assert bp.sum() == pytest.approx(bn.sum(), abs=1e-8)
    cp, cn = 1 / sp.size - 2 * sp / n, 2 * sn / n
    # optimality: no feasible move that keeps the balance improves the concave objective
    import scipy.optimize

    k = sp.size + sn.size
    res = scipy.optimize.minimize(
        lambda b: -(np.concatenate([cp, cn]) @ b - mu / 2 * b @ b),
        np.full(k, 0.5), jac=lambda b: -(np.concatenate([cp, cn]) - mu * b), method="SLSQP",
        bounds=[(0, 1)] * k, constraints=[{"type": "eq", "fun": lambda b: b[: sp.size].sum() - b[sp.size :].sum()}],
        options={"ftol": 1e-12, "maxiter": 500},
    )
    assert value >= -res.fun - 1e-7


@pytest.fixture(scope="module")
def small():
    X, y = classification_data(1500, 6, seed=3, scales=False)
    X[::7] = X[0]  # ties in scores
    return X, y


def _local(X, y, sizes):
    bounds = np.cumsum([0, *sizes])
    return LocalDataset([Shard(X=X[a:b], y=y[a:b], index=i) for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))])


def test_auc_value_and_gradient_equal_brute_force(small):
    X, y = small
    w = np.random.default_rng(0).standard_normal(6) * 0.3
    for t in (1e-3, 0.3, 2.0):
        obj = SmoothedAUCObjective(_local(X, y, [400, 0, 1100]), 1e-3, t, int((y > 0).sum()), int((y < 0).sum()))
        f, g = obj.value_and_grad(w)
        bf, bg, bj = brute_auc(X, y, w, t, 1e-3)
        assert abs(f - bf) <= 1e-9 * abs(bf)
        assert rel(g, bg) <= 1e-9
        assert abs(obj.last["J"] - bj) <= 1e-9 * abs(bj)


@pytest.mark.parametrize("cls", ["auc", "prbep"])
def test_gradients_match_finite_differences(small, cls):
    X, y = small
    n_pos, n_neg = int((y > 0).sum()), int((y < 0).sum())
    ds = _local(X, y, [1500])
    obj = SmoothedAUCObjective(ds, 1e-2, 0.5, n_pos, n_neg) if cls == "auc" else SmoothedPRBEPObjective(ds, 1e-2, 0.05, n_pos, n_neg)
    w = np.random.default_rng(1).standard_normal(6) * 0.2
    g = obj.value_and_grad(w)[1]
    fd = approx_fprime(w, lambda v: obj.value_and_grad(v)[0], 1e-7)
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-6)


def test_shard_parity_local_and_cluster(tmp_path, small, client):
    X, y = small
    n_pos, n_neg = int((y > 0).sum()), int((y < 0).sum())
    order = np.argsort(y, kind="stable")
    Xs, ys = X[order], y[order]  # single-class shards, an empty shard
    path = write_store(tmp_path / "s.zarr", Xs, ys, [n_neg, 0, 300, n_pos - 300])
    w = np.random.default_rng(2).standard_normal(6) * 0.3
    results = []
    for ds in (_local(Xs, ys, [X.shape[0]]), LocalDataset(path), ShardedDataset(path, client), ShardedDataset(path, client, cache="stream")):
        with ds:
            for make in (lambda d: SmoothedAUCObjective(d, 1e-3, 0.1, n_pos, n_neg), lambda d: SmoothedPRBEPObjective(d, 1e-3, 1e-3, n_pos, n_neg)):
                results.append(make(ds).value_and_grad(w))
    for k in range(2, len(results)):
        ref = results[k % 2]
        assert abs(results[k][0] - ref[0]) <= 1e-9 * abs(ref[0])
        assert rel(results[k][1], ref[1]) <= 1e-9


def test_one_class_store_is_a_clear_error(tmp_path):
    X, y = classification_data(200, 5)
    y[:] = -1
    path = write_store(tmp_path / "s.zarr", X, y)
    with pytest.raises(DPipeError, match="no positive rows.*auc-smooth"):
        dpipe.train(path, "auc-smooth", engine="local")


def test_train_smooth_with_validation_and_continuation(tmp_path):
    X, y = classification_data(3000, 6, seed=4, scales=False)
    train = write_store(tmp_path / "tr.zarr", X[:2000], y[:2000], [700, 1300])
    valid = write_store(tmp_path / "va.zarr", X[2000:], y[2000:])
    model = dpipe.train(train, "auc-smooth", engine="local", validation=valid, continuation=True)
    hist = model.fit["history"]
    assert hist and all("validation_auc" in h and "J" in h and "train_auc" in h for h in hist)
    assert [h["iteration"] for h in hist] == list(range(1, len(hist) + 1))
    assert model.fit["info"]["stages"] == pytest.approx([2.0, 0.2, 0.02, 0.002])
    for key in ("seconds", "seconds_monitor"):  # the clocks run on across the stages
        clock = [h[key] for h in hist]
        assert clock == sorted(clock)
    assert hist[-1]["validation_auc"] == pytest.approx(dpipe.evaluate(model, valid, engine="local")["roc_auc"], abs=1e-12)
    pr = dpipe.train(train, "prbep-smooth", engine="local", mu_scale=100)
    assert pr.params["mu_scale"] == 100 and pr.fit["info"]["smoothing"] == pytest.approx(2e-3 / 2000 * 100)


def test_standardized_objective_equals_the_objective_on_standardized_features(small):
    X, y = small
    X = X * np.array([1e-3, 1, 10, 1e3, 1e5, 1], dtype=np.float32)
    m, s = X.astype(np.float64).mean(0), X.astype(np.float64).std(0)
    Z = ((X - m) / s).astype(np.float64)
    v = np.random.default_rng(5).standard_normal(6) * 0.3
    # standardize: w = v / s on the raw shards, the ridge on v (penalty s^2 on w)
    wrapped = _objective(SmoothedAUCRisk(0.2), _local(X, y, [700, 800]), 1e-3, 1.0 / s, s**2)
    f, g = wrapped.value_and_grad(v)
    bf, bg, bj = brute_auc(Z, y, v, 0.2, 1e-3)
    assert abs(f - bf) <= 1e-7 * abs(bf)
    assert rel(g, bg) <= 1e-6
    assert abs(wrapped.last["J"] - bj) <= 1e-7 * abs(bj)


def test_column_moments_merge_equals_numpy():
    from dpipe.reduce import column_moments_of_shard, merge_column_moments

    X, y = classification_data(3000, 6, seed=7)
    parts = [column_moments_of_shard(Shard(X=X[a:b], y=y[a:b])) for a, b in ((0, 1000), (1000, 1000), (1000, 3000))]
    cm = merge_column_moments(merge_column_moments(parts[0], parts[1]), parts[2])
    X64 = X.astype(np.float64)
    np.testing.assert_allclose(cm.mean, X64.mean(0), rtol=1e-12)
    np.testing.assert_allclose(cm.std, X64.std(0), rtol=1e-10)


def test_train_standardize_keeps_raw_feature_weights(tmp_path):
    X, y = classification_data(2000, 6, seed=8)  # scales over six orders of magnitude
    path = write_store(tmp_path / "s.zarr", X, y, [1000, 1000])
    model = dpipe.train(path, "auc-smooth", engine="local", standardize=True, mu_scale=100)
    assert model.params["standardize"] is True and model.fit["info"]["standardized"] is True
    s = X.astype(np.float64) @ model.coef
    from sklearn.metrics import roc_auc_score

    assert model.metrics["train"]["roc_auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert model.fit["history"][-1]["train_auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-3)


def test_in_memory_shards_without_numbers_are_renumbered(small):
    X, y = small
    n_pos, n_neg = int((y > 0).sum()), int((y < 0).sum())
    w = np.random.default_rng(6).standard_normal(6) * 0.3
    unnumbered = LocalDataset([Shard(X=X[:600], y=y[:600]), Shard(X=X[600:], y=y[600:])])  # both index 0
    f, g = SmoothedAUCObjective(unnumbered, 1e-3, 0.3, n_pos, n_neg).value_and_grad(w)
    bf, bg, _ = brute_auc(X, y, w, 0.3, 1e-3)
    assert abs(f - bf) <= 1e-9 * abs(bf) and rel(g, bg) <= 1e-9


@pytest.mark.parametrize(
    "objective, options",
    [
        ("auc-smooth", {"precondition": True}),
        ("auc-smooth", {"precondition": "moments"}),
        ("auc-smooth", {"precondition": "moments", "standardize": True}),
        ("prbep-smooth", {"precondition": "moments"}),
        ("auc-smooth", {"precondition": "moments", "init": "auc-moment"}),
    ],
)
def test_precondition_keeps_the_objective_and_its_minimizer(tmp_path, objective, options):
    X, y = classification_data(1500, 5, seed=9, scales=False)
    X = X * np.array([1.0, 30.0, 0.05, 1.0, 4.0], dtype=np.float32)
    X[:, 4] += 0.5 * X[:, 1]  # correlated columns: what a diagonal scaling cannot undo
    path = write_store(tmp_path / "s.zarr", X, y, [700, 800])
    kw = dict(engine="local", mu_scale=100, lam=1e-2, tol=1e-10, max_iter=3000, calibrate=False, standardize=options.get("standardize", False),
              precondition="none", init="zeros")
    plain = dpipe.train(path, objective, **kw)
    pre = dpipe.train(path, objective, **dict(kw, **options))
    expected = "diagonal" if options["precondition"] is True else options["precondition"]
    assert pre.fit["info"]["preconditioner"] == expected and pre.params["precondition"] == expected
    assert plain.fit["info"]["preconditioner"] == "none" and plain.params["precondition"] == "none"
    # the same strongly convex objective: the same minimizer and value
    assert pre.fit["fun"] == pytest.approx(plain.fit["fun"], rel=1e-9)
    np.testing.assert_allclose(pre.coef, plain.coef, rtol=1e-4, atol=1e-5 * np.abs(plain.coef).max())
    assert plain.fit["info"]["setup_passes"] == (["column scales"] if kw["standardize"] else [])
    if expected == "moments":
        assert pre.fit["info"]["precondition_curvature"] > 0
        # one moments pass gives the scales too (no column pass), then one score pass along the moment direction
        assert pre.fit["info"]["setup_passes"] == ["class moments", "ray scores"]
    else:
        assert pre.fit["info"]["setup_passes"] == ["column scales"]


def test_precondition_is_checked(tmp_path, monkeypatch):
    X, y = classification_data(400, 4, seed=16)
    path = write_store(tmp_path / "s.zarr", X, y, [400])
    ParameterError = dpipe.exceptions.ParameterError
    with pytest.raises(ParameterError, match="'standardize' and 'precondition=\"diagonal\"'"):
        dpipe.train(path, "auc-smooth", engine="local", standardize=True, precondition=True)
    with pytest.raises(ParameterError, match="'precondition' parameter of train must be one of 'auto', 'none', 'diagonal', 'moments'. Got 'full'"):
        dpipe.train(path, "auc-smooth", engine="local", precondition="full")
    with pytest.raises(ParameterError, match="'precondition' parameter of train must be one of 'auto', 'none', 'diagonal', 'moments'. Got 1 "):
        dpipe.train(path, "auc-smooth", engine="local", precondition=1)
    with pytest.raises(ParameterError, match="'precondition' parameter of train does not apply to objective 'auc-moment': it applies to auc, auc-smooth, prbep-smooth; the cutting"):
        dpipe.train(path, "auc-moment", engine="local", precondition="moments")
    from dpipe.fit import _smooth as smooth_module

    monkeypatch.setattr(smooth_module, "MOMENT_PRECONDITION_MAX_FEATURES", 3)
    with pytest.raises(ParameterError, match="precondition='moments' factors a d x d matrix on the driver; this store has 4 features, more than 3"):
        dpipe.train(path, "auc-smooth", engine="local", precondition="moments")
    X[:, :] = 1.0
    same = write_store(tmp_path / "same.zarr", X, y, [400])
    monkeypatch.undo()
    with pytest.raises(DPipeError, match="precondition='moments': the class means coincide in every feature.*use .*precondition='diagonal'"):
        dpipe.train(same, "auc-smooth", engine="local", precondition="moments")


def test_preconditioned_objective_with_a_full_matrix(small):
    X, y = small
    rng = np.random.default_rng(17)
    T = np.triu(rng.standard_normal((6, 6))) + 3 * np.eye(6)
    penalty = rng.uniform(0.5, 2.0, 6)
    obj = _objective(SmoothedAUCRisk(0.3), _local(X, y, [700, 800]), 1e-2, T, penalty)
    u = rng.standard_normal(6) * 0.05
    f, g = obj.value_and_grad(u)
    w = T @ u
    bf, _, bj = brute_auc(X, y, w, 0.3, 0.0)
    reg = 0.5 * 1e-2 * float(w @ (penalty * w))
    assert abs(f - (bf + reg)) <= 1e-9 * abs(bf + reg)
    assert abs(obj.last["J"] - (bj + reg)) <= 1e-9 * abs(bj + reg)
    np.testing.assert_allclose(g, approx_fprime(u, lambda v: obj.value_and_grad(v)[0], 1e-7), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(obj.from_raw(obj.to_raw(u)), u, rtol=1e-12)


def test_moment_preconditioner_whitens_the_modelled_hessian():
    from dpipe.reduce import shard_moments
    from dpipe.solvers import moment_preconditioner, pairwise_second_moment

    X, y = classification_data(300, 5, seed=18)
    X[:, 3] = 2.0 * X[:, 0] - X[:, 1]  # collinear: M is singular, the ridge (or the jitter) makes it definite
    moments = shard_moments(X, y)
    Xp, Xn = X[y > 0].astype(np.float64), X[y < 0].astype(np.float64)
    diffs = (Xp[:, None, :] - Xn[None, :, :]).reshape(-1, 5)  # every positive-negative pair
    M = pairwise_second_moment(moments)
    np.testing.assert_allclose(M, diffs.T @ diffs / len(diffs), rtol=1e-9, atol=1e-12 * np.abs(M).max())
    scale, penalty = X.astype(np.float64).std(0), np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    T = moment_preconditioner(moments, scale, penalty, 1e-3, 0.7)
    np.testing.assert_allclose(T.T @ (0.7 * M + 1e-3 * np.diag(penalty)) @ T, np.eye(5), atol=1e-6)
    T0 = moment_preconditioner(moments, scale, penalty, 0.0, 0.7)  # singular without the ridge: factored with jitter
    assert np.all(np.isfinite(T0)) and abs(np.linalg.det(T0)) > 0
    # whitened on the range of M, the one null direction (column 3) stays null
    np.testing.assert_allclose(np.linalg.eigvalsh(T0.T @ (0.7 * M) @ T0), [0, 1, 1, 1, 1], atol=1e-4)


def test_ray_minimum_curvature_is_the_second_derivative_along_the_ray(small):
    X, y = small
    u = X[y > 0].mean(0) - X[y < 0].mean(0)
    u /= np.linalg.norm(u)
    ray = line_minimum(_local(X, y, [700, 800]), SmoothedAUCRisk(0.3), u, 1e-2)
    risk = lambda a: brute_auc(X, y, a * u, 0.3, 0.0)[0]  # noqa: E731
    h = 0.05 * ray.alpha
    expected = (risk(ray.alpha + h) - 2 * risk(ray.alpha) + risk(ray.alpha - h)) / h**2
    assert ray.curvature > 0 and ray.curvature == pytest.approx(expected, rel=1e-4)  # second differences of float32 scores


@pytest.mark.parametrize("risk", [SmoothedAUCRisk(0.3), SmoothedPRBEPRisk(1e-3)], ids=["auc", "prbep"])
def test_ray_minimum_is_the_minimum_along_the_ray(small, risk):
    X, y = small
    ds = LocalDataset([Shard(X=X[:700], y=y[:700]), Shard(X=X[700:], y=y[700:])])
    obj = _objective(risk, ds, 1e-2)
    u = X[y > 0].mean(0) - X[y < 0].mean(0) + 0.3 * np.random.default_rng(11).standard_normal(6)  # a ray that ranks
    u /= np.linalg.norm(u)
    alpha = line_minimum(ds, risk, u, 1e-2 * float(u @ u)).alpha
    grid = np.geomspace(alpha / 50, alpha * 50, 401)
    values = np.array([obj.value_and_grad(a * u)[0] for a in grid])
    best = grid[np.argmin(values)]
    assert abs(np.log(alpha / best)) <= 0.03  # the grid's step is 2 %, the search's tolerance 1 %
    assert obj.value_and_grad(alpha * u)[0] <= values.min() * (1 + 1e-4)


def test_ray_minimum_of_the_standardized_objective_includes_its_ridge(small):
    X, y = small
    scale = np.array([1.0, 2.0, 0.5, 4.0, 1.0, 3.0])
    ds = LocalDataset([Shard(X=X, y=y)])
    obj = _objective(SmoothedAUCRisk(0.3), ds, 5e-2, 1.0 / scale, scale**2)
    u = (X[y > 0].mean(0) - X[y < 0].mean(0)) * scale
    w = u / scale
    alpha = line_minimum(ds, SmoothedAUCRisk(0.3), w, 5e-2 * float(w @ (scale**2 * w))).alpha
    f = lambda a: obj.value_and_grad(a * u)[0]  # noqa: E731
    assert f(alpha) <= min(f(alpha * 0.9), f(alpha * 1.1))
    # the derivative along the ray vanishes at the minimum (to the search's 1 % in alpha)
    assert abs(obj.value_and_grad(alpha * u)[1] @ u) * alpha <= 0.02 * f(alpha)


def test_ray_minimum_rejects_a_direction_that_scores_every_row_alike():
    X = np.zeros((20, 3), np.float32)
    X[:, 0] = 1.0
    y = np.where(np.arange(20) % 2 == 0, 1, -1)
    with pytest.raises(DPipeError, match="scores the same"):
        line_minimum(LocalDataset([Shard(X=X, y=y)]), SmoothedAUCRisk(0.3), np.array([1.0, 0.0, 0.0]), 0.0)


@pytest.mark.parametrize("objective, options", [("auc-smooth", {"standardize": True}), ("prbep-smooth", {"precondition": True}), ("auc-smooth", {})])
def test_auc_moment_start_reaches_the_same_minimizer(tmp_path, objective, options):
    X, y = classification_data(1500, 5, seed=13, scales=False)
    X = X * np.array([1.0, 30.0, 0.05, 1.0, 4.0], dtype=np.float32)
    path = write_store(tmp_path / "s.zarr", X, y, [700, 800])
    kw = dict(engine="local", mu_scale=100, lam=1e-2, tol=1e-10, max_iter=3000, calibrate=False, **{"precondition": "none", **options})
    zero = dpipe.train(path, objective, init="zeros", **kw)
    moment = dpipe.train(path, objective, init="auc-moment", **kw)
    info = moment.fit["info"]
    assert info["init"] == "auc-moment" and info["init_scale"] > 0 and moment.params["init"] == "auc-moment"
    assert zero.fit["info"]["init"] == "zeros" and zero.fit["info"]["init_scale"] is None
    # the start's passes (the moments also give the scales: no column pass), recorded in the fit
    assert info["setup_passes"] == ["class moments", "ray scores"]
    assert zero.fit["info"]["setup_passes"] == (["column scales"] if options else [])
    # a strongly convex objective: the same minimizer from either start
    assert moment.fit["fun"] == pytest.approx(zero.fit["fun"], rel=1e-8)
    np.testing.assert_allclose(moment.coef, zero.coef, rtol=1e-3, atol=1e-4 * np.abs(zero.coef).max())
    # the start is the objective's minimum along the moment direction: already below J at w = 0's first step
    assert moment.fit["history"][0]["J_mu"] < zero.fit["history"][0]["J_mu"]


def test_pooled_scales_equal_the_column_pass():
    from dpipe.io import Shard as _Shard
    from dpipe.reduce import column_moments_of_shard, shard_moments

    X, y = classification_data(3000, 6, seed=14)
    X[:, 2] = 7.0  # a constant column gets scale 1
    expected = X.astype(np.float64).std(0)
    expected[2] = 1.0
    np.testing.assert_allclose(shard_moments(X, y).scales(), expected, rtol=1e-9)
    np.testing.assert_allclose(column_moments_of_shard(_Shard(X=X, y=y)).scales(), expected, rtol=1e-9)


def test_init_is_checked(tmp_path):
    X, y = classification_data(400, 4, seed=15)
    path = write_store(tmp_path / "s.zarr", X, y, [400])
    with pytest.raises(dpipe.exceptions.ParameterError, match="'init' parameter of train must be one of 'auto', 'zeros', 'auc-moment'"):
        dpipe.train(path, "auc-smooth", engine="local", init="ones")
    with pytest.raises(dpipe.exceptions.ParameterError, match="'init' parameter of train does not apply to objective 'rocarea': it applies to auc \\(solver lbfgs\\), auc-smooth, prbep-smooth"):
        dpipe.train(path, "rocarea", engine="local", init="auc-moment")
    X[:, :] = 1.0
    same = write_store(tmp_path / "same.zarr", X, y, [400])
    with pytest.raises(DPipeError, match="init='auc-moment': the class means coincide in every feature.*use init='zeros'$"):
        dpipe.train(same, "auc-smooth", engine="local", init="auc-moment", precondition="none")
    # the defaults fall back to what needs no moment direction (and say so)
    fallback = dpipe.train(same, "auc-smooth", engine="local", max_iter=5)
    assert fallback.fit["info"]["preconditioner"] == "diagonal" and fallback.fit["info"]["init"] == "zeros"


def test_moment_preconditioned_fit_on_the_cluster_equals_the_local_one(tmp_path, client):
    X, y = classification_data(3000, 6, seed=19)  # scales over six orders of magnitude
    path = write_store(tmp_path / "s.zarr", X, y, [1000, 700, 1300])
    kw = dict(precondition="moments", init="auc-moment", mu_scale=10, max_iter=8, tol=1e-9, calibrate=False)
    with pytest.warns(dpipe.exceptions.ConvergenceWarning, match="iteration limit"):  # stopped early on purpose
        local = dpipe.train(path, "auc-smooth", engine="local", **kw)
    with pytest.warns(dpipe.exceptions.ConvergenceWarning, match="iteration limit"):
        dist = dpipe.train(path, "auc-smooth", client=client, **kw)
    for key in ("init_scale", "precondition_curvature"):
        assert dist.fit["info"][key] == pytest.approx(local.fit["info"][key], rel=1e-9)
    np.testing.assert_allclose([h["J"] for h in dist.fit["history"]], [h["J"] for h in local.fit["history"]], rtol=1e-8)
    np.testing.assert_allclose(dist.coef, local.coef, rtol=1e-6, atol=1e-9 * np.abs(local.coef).max())
