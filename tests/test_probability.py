"""``probability=``: a calibration from scores to probabilities, fitted on held-out rows and kept in the model.

References: scikit-learn's own calibrations on the same scores (``CalibratedClassifierCV`` of a
frozen model, ``IsotonicRegression``), and ``CalibratedClassifierCV(DPipeClassifier(), cv=5)`` on
real data for the log-loss.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_svmlight_file
from sklearn.frozen import FrozenEstimator
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

import dpipe
from dpipe import DPipeClassifier
from dpipe.exceptions import ParameterError
from dpipe.model._probability import fit_probability_calibration
from dpipe.testing import classification_data, write_store


@pytest.fixture(scope="module")
def data():
    X, y = classification_data(4000, 6, seed=11, scales=False)
    return X, y


def test_sigmoid_is_scikit_learn_s_platt_scaling_on_the_same_scores(data):
    X, y = data
    s = X[:, 0] * 1.7 - X[:, 1] + 0.3  # any scores
    w = np.random.default_rng(0).integers(1, 4, y.size)
    ours = fit_probability_calibration("sigmoid", s, y, w.astype(float), "test").probability(s)
    frozen = LogisticRegression().fit(s[:, None], y)  # a stand-in whose decision_function we replace by s itself
    frozen.coef_, frozen.intercept_ = np.array([[1.0]]), np.array([0.0])
    repeated = np.repeat(np.arange(y.size), w)  # weights as repeated rows
    ref = CalibratedClassifierCV(FrozenEstimator(frozen), method="sigmoid").fit(s[repeated, None], y[repeated]).predict_proba(s[:, None])[:, 1]
    np.testing.assert_allclose(ours, ref, atol=1e-6)


def test_isotonic_is_scikit_learn_s_isotonic_regression_and_clips_outside(data):
    X, y = data
    s = X[:, 2] - 0.5 * X[:, 3]
    w = np.random.default_rng(1).random(y.size) + 0.1
    cal = fit_probability_calibration("isotonic", s, y, w, "test")
    iso = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(s, (y > 0).astype(float), sample_weight=w)
    grid = np.linspace(s.min() - 3, s.max() + 3, 2001)
    np.testing.assert_allclose(cal.probability(grid), iso.predict(grid), atol=1e-12)


def test_folds_hold_out_every_row_once_and_the_model_file_keeps_the_calibration(data, tmp_path):
    X, y = data
    store = write_store(tmp_path / "s.zarr", X, y, [1500, 1500, 1000])
    model = dpipe.train(store, "auc", engine="local", probability="sigmoid", probability_folds=4, out=tmp_path / "m.json")
    assert model.probability.held_out == "folds=4" and model.probability.n_rows == y.size  # the folds partition the rows
    loaded = dpipe.LinearModel.load(tmp_path / "m.json")
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    P = loaded.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert np.all(np.diff(P[np.argsort(model.decision_function(X)), 1]) >= 0)  # monotone in the score
    assert loaded.params["probability"] == "sigmoid"
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["probability"]["values"] = [0.5]
    doc["probability"]["method"] = "isotonic"
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(ParameterError, match=r"bad.json: field 'probability' needs as many knots as values"):
        dpipe.LinearModel.load(tmp_path / "bad.json")


def test_a_validation_store_is_the_held_out_data(data, tmp_path):
    X, y = data
    train = write_store(tmp_path / "t.zarr", X[:3000], y[:3000], [3000])
    valid = write_store(tmp_path / "v.zarr", X[3000:], y[3000:], [1000])
    model = dpipe.train(train, "auc-smooth", engine="local", validation=valid, probability="isotonic")
    assert model.probability.held_out == "validation" and model.probability.n_rows == 1000
    reference = fit_probability_calibration("isotonic", model.decision_function(X[3000:]), y[3000:], None, "validation")
    np.testing.assert_allclose(model.probability.values, reference.values, atol=1e-12)
    with pytest.raises(ParameterError, match=r"'probability_folds' parameter applies when probabilities are calibrated on folds"):
        dpipe.train(train, "auc-smooth", engine="local", validation=valid, probability="sigmoid", probability_folds=3)


def test_the_estimator_and_train_give_one_calibration(data, tmp_path):
    X, y = data
    store = write_store(tmp_path / "one.zarr", X, y, [X.shape[0]])  # one shard, as the estimator's: the same folds
    model = dpipe.train(store, "auc-moment", engine="local", probability="sigmoid")
    est = DPipeClassifier("auc-moment", probability="sigmoid").fit(X, y)
    assert est.probability_.a == pytest.approx(model.probability.a, rel=1e-8) and est.probability_.b == pytest.approx(model.probability.b, rel=1e-8, abs=1e-10)
    np.testing.assert_allclose(est.to_model().predict_proba(X), est.predict_proba(X))
    np.testing.assert_array_equal(est.classes_, [-1, 1])


def test_refusals(data, tmp_path):
    X, y = data
    assert not hasattr(DPipeClassifier().fit(X, y), "predict_proba")  # scorers fall back to decision_function
    with pytest.raises(ValueError, match=r"^LinearModel: this model has no probability calibration; train it with probability="):
        DPipeClassifier().fit(X, y).to_model().predict_proba(X)
    with pytest.raises(ParameterError, match=r"'probability_folds' parameter of DPipeClassifier applies only with 'probability'"):
        DPipeClassifier(probability_folds=3).fit(X, y)
    with pytest.raises(ParameterError, match=r"The 'probability' parameter of DPipeClassifier does not apply to objective 'error-rate'"):
        DPipeClassifier("error-rate", probability="sigmoid", constraints=("positive_rate <= 0.5",)).fit(X, y)
    with pytest.raises(ParameterError, match=r"probability='isotonic': the held-out rows \(validation\) need both classes to fit a calibration; "
                                             r"they have 0 positive and 2 negative"):
        fit_probability_calibration("isotonic", np.array([0.1, 0.4, 0.3]), np.array([-1, -1, 1]), np.array([1.0, 2.0, 0.0]), "validation")


def _log_loss_ratio(X, y, X_test, y_test, method, unseen="warn"):
    ours = DPipeClassifier(probability=method, unseen=unseen).fit(X, y).predict_proba(X_test)[:, 1]
    ref = CalibratedClassifierCV(DPipeClassifier(unseen=unseen), method=method, cv=5).fit(X, y).predict_proba(X_test)[:, 1]
    positive = np.unique(y)[1]
    return log_loss(y_test == positive, ours) / log_loss(y_test == positive, ref)


@pytest.mark.parametrize("method", ["sigmoid", "isotonic"])
def test_log_loss_within_2_percent_of_calibrated_classifier_cv_on_a9a_and_adult(shared_data, method):
    X, y = load_svmlight_file(shared_data / "a9a.gz", n_features=123)
    X_test, y_test = load_svmlight_file(shared_data / "a9a.t.gz", n_features=123)
    assert _log_loss_ratio(X, y, X_test, y_test, method) <= 1.02
    train = pd.read_csv(shared_data / "adult.data.gz", header=None)
    test = pd.read_csv(shared_data / "adult.test.gz", header=None, skiprows=1)
    y_adult, y_adult_test = train[14].str.strip(), test[14].str.strip().str.rstrip(".")  # the test file's labels end in "."
    # adult's test rows (and the reference's folds) hold countries some training rows lack: unseen="ignore"
    assert _log_loss_ratio(train.iloc[:, :14], y_adult.to_numpy(), test.iloc[:, :14], y_adult_test.to_numpy(), method, unseen="ignore") <= 1.02


@pytest.mark.integration
def test_the_folds_and_the_calibration_are_the_same_on_a_two_worker_cluster(data, tmp_path, client):
    X, y = data
    store = write_store(tmp_path / "c.zarr", X, y, [1500, 1500, 1000])
    local = dpipe.train(store, "auc", engine="local", probability="isotonic")
    remote = dpipe.train(store, "auc", client=client, probability="isotonic")
    assert remote.training["engine"] != "local"
    assert remote.probability.n_rows == local.probability.n_rows == y.size
    np.testing.assert_allclose(remote.probability.knots, local.probability.knots, rtol=1e-10)
    np.testing.assert_allclose(remote.probability.values, local.probability.values, rtol=1e-10)


def test_predict_proba_without_probability_says_how_to_get_it_and_stays_absent(data):
    X, y = data[0], data[1]
    clf = DPipeClassifier("auc-moment").fit(X, y)
    assert not hasattr(clf, "predict_proba")  # scikit-learn's scorers then use decision_function
    with pytest.raises(AttributeError, match=r"^This DPipeClassifier has no predict_proba: it was made without probability .* Set "
                                             r"probability='sigmoid' \(or 'isotonic'\) and fit again"):
        clf.predict_proba(X)
    with pytest.raises(AttributeError, match=r"^'DPipeClassifier' object has no attribute 'coef'$"):
        clf.coef  # noqa: B018  # another missing name: Python's own message
