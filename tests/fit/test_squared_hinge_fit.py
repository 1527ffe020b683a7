"""``auc-squared-hinge`` through dpipe.train: TRON's minimum against brute force, L-BFGS's, the dask engine's and the
repeated rows'; options that do not apply are refused."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

import dpipe
from dpipe.exceptions import ParameterError
from dpipe.testing import classification_data, squared_hinge_reference, write_store

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


def _brute_minimum(X, y):
    ref = squared_hinge_reference(X, y, LAM)
    return scipy.optimize.minimize(ref.fun, np.zeros(X.shape[1]), jac=ref.grad, method="BFGS", options={"gtol": 1e-12})


def test_newton_reaches_the_brute_force_minimum_and_lbfgs_agrees(data):
    ref = _brute_minimum(data["X"], data["y"])
    newton = dpipe.train(data["plain"], "auc-squared-hinge", lam=LAM, eps=1e-7, engine="local")
    assert newton.fit["nit"] <= 15 and newton.fit["info"]["solver"] == "newton"
    assert newton.fit["fun"] == pytest.approx(ref.fun, rel=1e-9)
    np.testing.assert_allclose(newton.coef, ref.x, rtol=0, atol=1e-4 * np.abs(ref.x).max())
    lbfgs = dpipe.train(data["plain"], "auc-squared-hinge", solver="lbfgs", lam=LAM, tol=1e-9, max_iter=2000, engine="local")
    assert lbfgs.fit["fun"] == pytest.approx(ref.fun, rel=1e-9)
    # the defaults: LIBLINEAR's eps 1e-3 gives the converged test ranking
    default = dpipe.train(data["plain"], "auc-squared-hinge", lam=LAM, engine="local")
    assert dpipe.evaluate(default, data["plain"], engine="local")["roc_auc"] == pytest.approx(
        dpipe.evaluate(newton, data["plain"], engine="local")["roc_auc"], abs=1e-3)


def test_weights_are_repeated_rows(data):
    w = dpipe.train(data["weighted"], "auc-squared-hinge", lam=LAM, eps=1e-8, engine="local")
    r = dpipe.train(data["repeated"], "auc-squared-hinge", lam=LAM, eps=1e-8, engine="local")
    assert w.fit["fun"] == pytest.approx(r.fit["fun"], rel=1e-9)
    np.testing.assert_allclose(w.coef, r.coef, rtol=0, atol=1e-5 * np.abs(r.coef).max())


def test_the_dask_engine_gives_the_local_fit(data, client):
    local = dpipe.train(data["plain"], "auc-squared-hinge", lam=LAM, engine="local")
    dist = dpipe.train(data["plain"], "auc-squared-hinge", lam=LAM, engine="dask", client=client, cache="memory")
    assert dist.fit["nit"] == local.fit["nit"]
    np.testing.assert_allclose(dist.coef, local.coef, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("option", "value", "why"), [
    ("smoothing", 0.1, "the squared hinge is smooth already"),
    ("epsilon", 1e-3, "the squared hinge is not smoothed"),
    ("precondition", "diagonal", "Newton's steps do not depend on the coordinates' scale"),
    ("tol", 1e-6, "it applies to"),
    ("C", 1.0, "liblinear-ranksvm's -c C is lam"),
])
def test_options_that_do_not_apply_are_refused(data, option, value, why):
    with pytest.raises(ParameterError, match=why):
        dpipe.train(data["plain"], "auc-squared-hinge", engine="local", **{option: value})
