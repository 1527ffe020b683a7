"""``DPipeClassifier`` against scikit-learn's own estimator checks, and inside scikit-learn's tools."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from dpipe import DPipeClassifier
from dpipe.exceptions import ParameterError
from dpipe.testing import classification_data

# The instances scikit-learn's checks run on. The checks fit on tiny data (often fewer
# rows than features), where the default penalty of the smoothed objectives (lam=1e-4)
# leaves the problem so flat that L-BFGS cannot meet a tight tolerance in few iterations.
# A stronger ridge and a wider smoothing make the minimizer well determined, so that the
# fits converge (no ConvergenceWarning, which the test settings make an error) within
# max_iter=50 and a relative tol of 1e-7 is tight enough for the weighted fit to agree with the
# repeated-rows fit to the check's rtol=1e-7. auc-moment keeps its closed form (no
# max_iter there: it does not iterate).
CHECKED = [
    DPipeClassifier(),  # the default: auc by trust-region Newton
    DPipeClassifier("auc-moment"),
    DPipeClassifier("error-moment"),
    DPipeClassifier("auc-smooth", max_iter=50, lam=1.0, smoothing=1.0, tol=1e-7),
    DPipeClassifier("prbep-smooth", max_iter=50, lam=0.1, smoothing=1.0, tol=1e-7),
    DPipeClassifier("rocarea", max_iter=50),
]

_ERROR_MOMENT_DEGENERATE = (
    "the check fits 15 rows in 30 features: each class covariance is singular, so error-moment's normal model "
    "has a flat valley of (near) zero modelled error; its minimizer is not unique and L-BFGS stops at points of "
    "the valley that differ by about 3e-5 (relative) between the weighted and the repeated data"
)


def _expected_failed_checks(estimator: DPipeClassifier) -> dict[str, str]:
    if estimator.objective == "error-moment":
        return {
            "check_sample_weight_equivalence_on_dense_data": _ERROR_MOMENT_DEGENERATE,
            "check_sample_weight_equivalence_on_sparse_data": _ERROR_MOMENT_DEGENERATE,
        }
    return {}


@parametrize_with_checks(CHECKED, expected_failed_checks=_expected_failed_checks, xfail_strict=True)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_binary_only_tag():
    tags = DPipeClassifier().__sklearn_tags__()
    assert tags.classifier_tags.multi_class is False
    assert tags.input_tags.sparse is True
    X, y = classification_data(300, 5, seed=1, scales=False)
    with pytest.raises(ValueError, match="Only binary classification is supported"):
        DPipeClassifier().fit(X, np.arange(300) % 3)


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    return classification_data(600, 6, seed=3)


def test_pipeline_with_standard_scaler(data):
    X, y = data
    for clf in (DPipeClassifier("auc-moment"), DPipeClassifier("auc-smooth", max_iter=100)):
        pipe = Pipeline([("scale", StandardScaler()), ("clf", clf)]).fit(X, y)
        raw = clone(clf).fit(StandardScaler().fit_transform(X), y)
        np.testing.assert_allclose(pipe.decision_function(X), raw.decision_function(StandardScaler().fit_transform(X)), rtol=1e-6, atol=1e-8)
        assert pipe.score(X, y) > 0.7


def test_cross_val_score_roc_auc(data):
    X, y = data
    scores = cross_val_score(DPipeClassifier("auc-smooth", max_iter=100), X, y, scoring="roc_auc", cv=3)
    assert scores.shape == (3,)
    assert np.all(scores > 0.75)


@pytest.mark.parametrize(("objective", "grid"), [("auc-smooth", {"lam": [1e-3, 1e-1]}), ("rocarea", {"C": [0.1, 10.0]})])
def test_grid_search(data, objective, grid):
    X, y = data
    X = StandardScaler().fit_transform(X)  # SVM-perf's losses on raw features of six orders of magnitude need many planes
    search = GridSearchCV(DPipeClassifier(objective, max_iter=100), grid, scoring="roc_auc", cv=3).fit(X, y)
    name = next(iter(grid))
    assert search.best_params_[name] in grid[name]
    assert search.best_estimator_.objective == objective
    assert getattr(search.best_estimator_, name) == search.best_params_[name]
    assert search.best_score_ > 0.75
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_dataframe_keeps_feature_names(data):
    X, y = data
    names = ["binary", "heavy_tail", "g2", "g3", "g4", "g5"]
    frame = pd.DataFrame(X, columns=names)
    clf = DPipeClassifier().fit(frame, pd.Series(np.where(y > 0, "yes", "no")))
    assert list(clf.feature_names_in_) == names
    model = clf.to_model()
    assert model.feature_names == names
    np.testing.assert_allclose(model.decision_function(X), clf.decision_function(frame))
    assert list(clf.classes_) == ["no", "yes"]


@pytest.mark.parametrize("objective", ["auc-moment", "auc-smooth"])
def test_sparse_csr_matches_dense(objective):
    rng = np.random.default_rng(5)
    X, y = classification_data(800, 8, seed=5, scales=False)
    X[rng.random(X.shape) < 0.6] = 0.0  # mostly zeros, as sparse data is
    dense = DPipeClassifier(objective).fit(X, y)
    sparse = DPipeClassifier(objective).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(sparse.intercept_, dense.intercept_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(sparse.decision_function(sp.csr_matrix(X)), dense.decision_function(X), rtol=1e-10, atol=1e-10)


def test_sparse_input_is_fitted_sparse_and_equals_the_dense_fit():
    """A sparse X too wide to densify in memory is fitted as CSR shards; the same rows dense give the same model."""
    rng = np.random.default_rng(0)
    X = sp.random(400, 30, density=0.2, format="csr", random_state=0)
    y = (X @ rng.normal(size=30) > 0.1).astype(int)
    a, b = DPipeClassifier(lam=1e-2, eps=1e-8).fit(X, y), DPipeClassifier(lam=1e-2, eps=1e-8).fit(X.toarray(), y)  # converged
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(a.decision_function(sp.coo_matrix(X)), b.decision_function(X.toarray()), rtol=1e-6, atol=1e-9)
    wide = sp.csr_matrix((np.ones(400), (np.arange(400), np.arange(400) * 2_500)), shape=(400, 1_000_000))  # 1.6 GB dense
    ywide = np.arange(400) % 2
    clf = DPipeClassifier(lam=1e-2).fit(wide, ywide)
    assert clf.coef_.shape == (1, 1_000_000)
    with pytest.raises(ParameterError, match="auc-moment builds d x d class moments on the driver; this store has 1000000 features"):
        DPipeClassifier(objective="auc-moment").fit(wide, ywide)


def test_calibrated_probabilities(data):
    X, y = data
    clf = DPipeClassifier("auc-moment")
    # on purpose: the objectives rank or threshold, they do not model probabilities
    assert not hasattr(clf, "predict_proba")
    calibrated = CalibratedClassifierCV(clf, cv=3).fit(X, y)
    proba = calibrated.predict_proba(X)
    assert proba.shape == (X.shape[0], 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.all((proba >= 0) & (proba <= 1))
    assert list(calibrated.classes_) == [-1, 1]


@pytest.mark.parametrize("objective", ["auc-moment", "auc-smooth"])
def test_dask_array_matches_numpy(data, objective):
    X, y = data
    # tol 1e-4: a gradient every BLAS kernel reaches (the default 1e-6 is at this problem's rounding floor, where L-BFGS's
    # line search may end ABNORMAL on one kernel and not another); what is checked is that both routes give the same fit
    params = {"tol": 1e-4} if objective == "auc-smooth" else {}
    ref = DPipeClassifier(objective, **params).fit(X, y)
    # default (threaded) scheduler; blocks that do not align with the estimator's shards
    lazy = DPipeClassifier(objective, **params).fit(da.from_array(X, chunks=(250, 4)), da.from_array(y, chunks=170))
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-12, atol=0)
    np.testing.assert_allclose(lazy.intercept_, ref.intercept_, rtol=1e-12, atol=0)
    scores = lazy.decision_function(da.from_array(X, chunks=(250, 6)))
    assert isinstance(scores, da.Array)
    np.testing.assert_allclose(scores.compute(), ref.decision_function(X), rtol=1e-12)
    np.testing.assert_array_equal(lazy.predict(da.from_array(X, chunks=(250, 6))).compute(), ref.predict(X))


def test_dask_dataframe_fit_and_predict_keep_the_columns():
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(7)
    X = rng.standard_normal((400, 3))
    y = np.where(X[:, 0] - X[:, 2] + 0.5 * rng.standard_normal(400) > 0, 1, 0)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    ddf = dd.from_pandas(df, npartitions=3)
    clf = DPipeClassifier("auc-smooth").fit(ddf, y)
    assert list(clf.feature_names_in_) == ["a", "b", "c"]
    np.testing.assert_allclose(np.asarray(clf.decision_function(ddf).compute()), clf.decision_function(df), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(clf.predict(ddf).compute()), clf.predict(df))
    with pytest.raises(ValueError, match="columns"):
        clf.decision_function(ddf.rename(columns={"a": "z"}))


def test_to_model_keeps_the_resolved_parameters():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((200, 3))
    y = np.where(X[:, 0] + rng.standard_normal(200) > 0, 1, -1)
    model = DPipeClassifier("rocarea", C=10).fit(X, y).to_model()
    assert model.params["lam"] == pytest.approx(1e-3) and model.params["eps"] == 1e-3 and model.params["given"] == ["C"]
