"""The scikit-learn-style estimator on NumPy and dask arrays."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from dpipe import DPipeClassifier
from dpipe.exceptions import ParameterError
from dpipe.testing import classification_data


def test_numpy_and_dask_inputs_agree():
    X, y = classification_data(3000, 6, seed=2)
    labels = np.where(y > 0, "spam", "ham")
    a = DPipeClassifier("error-moment").fit(X, labels)
    with dask.config.set(scheduler="sync"):
        b = DPipeClassifier("error-moment").fit(da.from_array(X, chunks=(700, 3)), da.from_array(labels, chunks=500))
        pred = b.predict(da.from_array(X, chunks=1000)).compute()
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8)
    assert list(a.classes_) == ["ham", "spam"]
    np.testing.assert_array_equal(pred, a.predict(X))
    assert a.coef_.shape == (1, 6) and a.intercept_.shape == (1,) and a.n_features_in_ == 6
    assert a.score(X, labels) == np.mean(a.predict(X) == labels)


def test_params_protocol():
    c = DPipeClassifier("auc-moment", lam=0.1)
    assert c.get_params()["lam"] == 0.1
    c.set_params(solver="lbfgs")
    assert c.solver == "lbfgs"
    assert "lam=0.1" in repr(c)
    with pytest.raises(ValueError, match="Invalid parameter 'gamma'"):  # scikit-learn's set_params
        c.set_params(gamma=1)


def test_errors():
    X, y = classification_data(100, 5)
    with pytest.raises(NotFittedError, match="not fitted"):
        DPipeClassifier().predict(X)
    with pytest.raises(ValueError, match="exactly two classes"):
        DPipeClassifier().fit(X, np.zeros(100))
    with pytest.raises(ParameterError, match="'solver'"):
        DPipeClassifier("error-moment", solver="closed-form").fit(X, y)


def test_to_model_scores_like_the_estimator():
    X, y = classification_data(500, 5)
    c = DPipeClassifier().fit(X, y)
    np.testing.assert_allclose(c.to_model().decision_function(X), c.decision_function(X))


def test_smoothed_objectives_on_numpy_match_train_on_a_store(tmp_path):
    import dpipe
    from dpipe.testing import write_store

    X, y = classification_data(1200, 5, seed=9, scales=False)
    path = write_store(tmp_path / "s.zarr", X, y, [500, 700])
    for objective in ("auc-smooth", "prbep-smooth"):
        est = DPipeClassifier(objective).fit(X, y)
        model = dpipe.train(path, objective, engine="local")
        scale = np.abs(model.coef).max()  # the shards split the sums differently: rounding-level differences
        assert np.abs(est.coef_[0] - model.coef).max() <= 1e-6 * scale
        assert abs(est.intercept_[0] - model.intercept) <= 1e-6 * scale
        lazy = DPipeClassifier(objective).fit(da.from_array(X, chunks=600), da.from_array(y, chunks=600))  # dask input is computed, then fitted alike
        np.testing.assert_allclose(lazy.coef_, est.coef_, rtol=1e-12)
