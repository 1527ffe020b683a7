"""``auc`` through dpipe.train, both surrogates (the Huber hinge, the default, and the squared hinge): TRON's minimum
against brute force, L-BFGS's, the dask engine's and the repeated rows'; auto-standardizing; options that do not apply
are refused."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

import dpipe
from dpipe.exceptions import ParameterError
from dpipe.testing import classification_data, huber_hinge_reference, squared_hinge_reference, write_store

LAM = 1e-3


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    X, y = classification_data(400, 5, seed=11, scales=False)  # columns of one scale: the minimum is resolvable to 1e-7
    v = np.random.default_rng(11).integers(0, 3, y.size)
    root = tmp_path_factory.mktemp("squared-hinge")
    plain = write_store(root / "plain.zarr", X, y, [130, 0, 130, 140])
    weighted = write_store(root / "weighted.zarr", X, y, [90, 90, 220], weight=v.astype(np.float32))
    n = int(v.sum())
    repeated = write_store(root / "repeated.zarr", np.repeat(X, v, axis=0), np.repeat(y, v), [170, n - 170])
    return {"X": X.astype(np.float64), "y": y, "plain": str(plain), "weighted": str(weighted), "repeated": str(repeated)}


#: surrogate -> its train options and its O(n^2) reference objective
SURROGATES = {
    "squared-hinge": ({"surrogate": "squared-hinge"}, lambda X, y, lam: squared_hinge_reference(X, y, lam)),
    "huber-hinge": ({"smoothing": 0.2}, lambda X, y, lam: huber_hinge_reference(X, y, lam, 0.2)),
}


def _brute_minimum(X, y, surrogate="squared-hinge"):
    ref = SURROGATES[surrogate][1](X, y, LAM)
    return scipy.optimize.minimize(ref.fun, np.zeros(X.shape[1]), jac=ref.grad, method="BFGS", options={"gtol": 1e-12})


@pytest.mark.parametrize("surrogate", SURROGATES)
def test_newton_reaches_the_brute_force_minimum_and_lbfgs_agrees(data, surrogate):
    opts = SURROGATES[surrogate][0]
    ref = _brute_minimum(data["X"], data["y"], surrogate)
    newton = dpipe.train(data["plain"], "auc", lam=LAM, eps=1e-7, standardize=False, engine="local", **opts)
    assert newton.fit["nit"] <= 15 and newton.fit["info"]["solver"] == "newton"
    assert newton.fit["fun"] == pytest.approx(ref.fun, rel=1e-9)
    np.testing.assert_allclose(newton.coef, ref.x, rtol=0, atol=1e-4 * np.abs(ref.x).max())
    lbfgs = dpipe.train(data["plain"], "auc", solver="lbfgs", lam=LAM, tol=1e-9, max_iter=2000, engine="local", **opts)
    assert lbfgs.fit["fun"] == pytest.approx(ref.fun, rel=1e-9)
    # the defaults: LIBLINEAR's eps 1e-3 gives the converged test ranking
    default = dpipe.train(data["plain"], "auc", lam=LAM, standardize=False, engine="local", **opts)
    assert dpipe.evaluate(default, data["plain"], engine="local")["roc_auc"] == pytest.approx(
        dpipe.evaluate(newton, data["plain"], engine="local")["roc_auc"], abs=1e-3)


def _scaled(X):
    """dpipe's column scales (the population standard deviation)."""
    return X.std(axis=0)


def test_standardized_newton_is_the_scaled_problems_minimum(data):
    """standardize=True: lam/2 ||u||^2 + R(X w) with w = u / scale, the minimum of the problem on X / scale."""
    X = data["X"]
    scale = _scaled(X)
    ref = _brute_minimum(X / scale, data["y"], "huber-hinge")
    model = dpipe.train(data["plain"], "auc", lam=LAM, eps=1e-8, standardize=True, engine="local")
    assert model.fit["info"]["standardized"] is True
    assert model.fit["fun"] == pytest.approx(ref.fun, rel=1e-9)
    np.testing.assert_allclose(model.coef * scale, ref.x, rtol=0, atol=1e-4 * np.abs(ref.x).max())


def test_auto_standardizes_columns_off_the_unit_scale(tmp_path, data):
    """The default (auto) standardizes a store with a column of amounts and keeps binary / unit columns raw; standardized,
    rescaling a column rescales its weight and nothing else."""
    X, y = data["X"], data["y"]
    unit = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))  # min-max scaled: root mean square <= 1
    amounts = unit * np.array([1.0, 1.0, 1000.0, 1.0, 1.0])
    a = dpipe.train(str(write_store(tmp_path / "unit.zarr", unit, y, [400])), "auc", engine="local")
    b = dpipe.train(str(write_store(tmp_path / "amounts.zarr", amounts, y, [400])), "auc", engine="local")
    assert a.fit["info"]["standardized"] is False and b.fit["info"]["standardized"] is True
    c = dpipe.train(str(tmp_path / "unit.zarr"), "auc", standardize=True, engine="local")
    np.testing.assert_allclose(b.coef * np.array([1.0, 1.0, 1000.0, 1.0, 1.0]), c.coef, rtol=1e-6, atol=1e-9 * np.abs(c.coef).max())


@pytest.mark.parametrize("surrogate", SURROGATES)
def test_weights_are_repeated_rows(data, surrogate):
    w = dpipe.train(data["weighted"], "auc", lam=LAM, eps=1e-8, engine="local", **SURROGATES[surrogate][0])
    r = dpipe.train(data["repeated"], "auc", lam=LAM, eps=1e-8, engine="local", **SURROGATES[surrogate][0])
    assert w.fit["fun"] == pytest.approx(r.fit["fun"], rel=1e-9)
    np.testing.assert_allclose(w.coef, r.coef, rtol=0, atol=1e-5 * np.abs(r.coef).max())


def test_the_dask_engine_gives_the_local_fit(data, client):
    local = dpipe.train(data["plain"], "auc", lam=LAM, engine="local")
    dist = dpipe.train(data["plain"], "auc", lam=LAM, engine="dask", client=client, cache="memory")
    assert dist.fit["nit"] == local.fit["nit"]
    np.testing.assert_allclose(dist.coef, local.coef, rtol=1e-10, atol=1e-12)


def test_the_squared_hinge_takes_no_width(data):
    with pytest.raises(ParameterError, match="'smoothing' parameter of train applies to auc's surrogate 'huber-hinge', not to 'squared-hinge'"):
        dpipe.train(data["plain"], "auc", surrogate="squared-hinge", smoothing=0.1, engine="local")
    model = dpipe.train(data["plain"], "auc", surrogate="squared-hinge", engine="local")
    assert model.params["smoothing"] is None and model.params["surrogate"] == "squared-hinge"
    with pytest.raises(ParameterError, match="only auc takes a surrogate"):
        dpipe.train(data["plain"], "auc-smooth", surrogate="squared-hinge", engine="local")


@pytest.mark.parametrize(("options", "why"), [
    ({"epsilon": 1e-3}, "auc's Huber width is smoothing itself"),
    ({"mu_scale": 10.0}, "auc's Huber width is smoothing itself"),
    ({"solver": "newton", "precondition": "moments"}, "the moments preconditioner is L-BFGS's"),
    ({"solver": "newton", "tol": 1e-6}, "it applies to"),
])
def test_options_that_do_not_apply_are_refused(data, options, why):
    with pytest.raises(ParameterError, match=why):
        dpipe.train(data["plain"], "auc", engine="local", **options)


def test_the_jacobi_preconditioner_is_the_default_and_moves_neither_the_minimum_nor_the_result_across_engines(data, client):
    plain = dpipe.train(data["weighted"], "auc", lam=LAM, engine="local", precondition="none", eps=1e-8, train_metrics=False)
    jacobi = dpipe.train(data["weighted"], "auc", lam=LAM, engine="local", eps=1e-8, train_metrics=False)
    assert plain.fit["info"]["precondition"] == "none" and jacobi.fit["info"]["precondition"] == "diagonal"
    assert jacobi.fit["fun"] == pytest.approx(plain.fit["fun"], rel=1e-10)
    # both stop at ||g|| <= 1e-8 ||g(0)|| on a lam-strongly convex objective in u = w * scale: ||u - u*|| <= ||g|| / lam
    bound = 1e-8 * (jacobi.fit["info"]["grad_norm0"] + plain.fit["info"]["grad_norm0"]) / LAM
    scale = np.ones(jacobi.coef.size)
    if jacobi.fit["info"]["standardized"]:
        from dpipe.engine import LocalDataset, column_scales

        with LocalDataset(data["weighted"]) as ds:
            scale = column_scales(ds)
    assert np.linalg.norm((jacobi.coef - plain.coef) * scale) <= bound
    dist = dpipe.train(data["weighted"], "auc", lam=LAM, engine="dask", client=client, cache="memory", eps=1e-8, train_metrics=False)
    assert dist.fit["nit"] == jacobi.fit["nit"] and dist.fit["info"]["cg_steps"] == jacobi.fit["info"]["cg_steps"]
    np.testing.assert_allclose(dist.coef, jacobi.coef, rtol=1e-10, atol=1e-12)


def test_default_ridge_follows_features_per_row_and_counts_weights_as_rows(tmp_path, data):
    from dpipe.fit._params import auc_lam

    assert auc_lam(32561, 123) == 1e-6 and auc_lam(7770, 8315) == pytest.approx(1e-4 * 8315 / 7770)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 200)).astype(np.float32)  # more features than rows: separable
    y = np.where(X[:, 0] > 0, 1, -1).astype(np.int8)
    wide = dpipe.train(write_store(tmp_path / "wide.zarr", X, y), engine="local", train_metrics=False)
    assert wide.fit["info"]["lam"] == pytest.approx(1e-4 * 200 / 60)
    given = dpipe.train(write_store(tmp_path / "wide2.zarr", X, y), engine="local", lam=1e-4 * 200 / 60, train_metrics=False)
    np.testing.assert_array_equal(wide.coef, given.coef)
    weighted = dpipe.train(data["weighted"], engine="local", train_metrics=False)
    repeated = dpipe.train(data["repeated"], engine="local", train_metrics=False)
    n = dpipe.open_store(data["repeated"]).manifest.n_rows
    assert weighted.fit["info"]["lam"] == repeated.fit["info"]["lam"] == auc_lam(n, 5)  # a row of weight v counts v times
    lbfgs = dpipe.train(write_store(tmp_path / "wide3.zarr", X, y), engine="local", solver="lbfgs", train_metrics=False)
    assert lbfgs.fit["info"]["lam"] == wide.fit["info"]["lam"]
