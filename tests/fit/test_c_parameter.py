"""``C``, ``lam``'s other name, for every objective: each objective's peer convention, and scikit-learn's model selection over it."""

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, cross_val_score

from dpipe import DPipeClassifier
from dpipe.exceptions import ParameterError
from dpipe.fit import OBJECTIVES
from dpipe.fit._params import lam_from_c
from dpipe.fit._registry import C_CONVENTIONS


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 6)) * [1.0, 2.0, 0.5, 1.0, 1.0, 3.0]
    y = np.where(X @ np.array([1.0, -0.5, 2.0, 0.0, 0.3, 0.1]) + rng.normal(size=600) > 0.4, 1, 0)
    weight = rng.integers(1, 4, size=600).astype(np.float64)
    return X, y, weight


#: one objective of each convention (and its options), with a binding constraint for the rate one
CASES = {
    "auc": {},
    "auc-moment": {"solver": "lbfgs"},
    "error-moment": {},
    "rocarea": {},
    "auc-smooth": {},
    "error-rate": {"constraints": ("recall >= 0.9",)},
}


def test_every_objective_has_one_documented_convention():
    assert {o.c_means for o in OBJECTIVES.values()} == set(C_CONVENTIONS)
    assert OBJECTIVES["auc"].c_means == "pairs" and OBJECTIVES["error-rate"].c_means == "rows" and OBJECTIVES["rocarea"].c_means == "svm-perf"
    assert lam_from_c(2.0, "pairs", 10.0, 20.0) == pytest.approx(1.0 / (2.0 * 10.0 * 20.0))
    assert lam_from_c(2.0, "rows", 10.0, 20.0) == pytest.approx(1.0 / (2.0 * 30.0))
    assert lam_from_c(2.0, "svm-perf", 10.0, 20.0) == pytest.approx(1.0 / 200.0)


@pytest.mark.parametrize("objective", list(CASES))
def test_c_is_the_lam_of_its_convention_from_the_training_weights(data, objective):
    X, y, weight = data
    kw = CASES[objective]
    C = 3.0
    by_c = DPipeClassifier(objective, C=C, **kw).fit(X, y, sample_weight=weight)
    positive, negative = float(weight[y == 1].sum()), float(weight[y == 0].sum())  # a row of weight v counts v times
    lam = lam_from_c(C, OBJECTIVES[objective].c_means, positive, negative)
    by_lam = DPipeClassifier(objective, lam=lam, **kw).fit(X, y, sample_weight=weight)
    assert by_c.fit_result_.info["lam"] == pytest.approx(lam, rel=1e-12)
    np.testing.assert_allclose(by_c.coef_, by_lam.coef_, rtol=1e-9, atol=1e-12)
    assert by_c.fit_params_["C"] == C
    other = DPipeClassifier(objective, C=C * 1e-4, **kw).fit(X, y, sample_weight=weight)
    assert not np.allclose(other.coef_, by_c.coef_)  # honoured: another C, another model


def test_c_and_lam_together_is_an_error_naming_the_convention(data):
    X, y, _ = data
    with pytest.raises(ParameterError, match=r"^The 'C' and 'lam' parameters of DPipeClassifier are two names for one weight \(auc: liblinear-ranksvm's.*"
                                             r"lam = 1 / \(C n\+ n-\)\); give one\."):
        DPipeClassifier(C=1.0, lam=1e-4).fit(X, y)
    with pytest.raises(ParameterError, match=r"the closed form has no penalty"):
        DPipeClassifier("auc-moment", C=1.0).fit(X, y)


def test_grid_search_over_c_fits_every_candidate(data):
    X, y, _ = data
    grid = [1e-6, 1e-3, 1.0, 100.0]
    search = GridSearchCV(DPipeClassifier(), {"C": grid}, scoring="roc_auc", cv=3, error_score="raise").fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and len(set(np.round(scores, 12))) > 1  # every candidate fitted, and C changes the fit
    assert search.best_params_["C"] == grid[int(np.argmax(scores))]
    assert search.best_estimator_.fit_params_["C"] == search.best_params_["C"]
    both = GridSearchCV(DPipeClassifier(), [{"objective": ["auc", "rocarea"], "C": [1e-2, 10.0]}], scoring="roc_auc", cv=3,
                        error_score="raise").fit(X, y)
    assert np.all(np.isfinite(both.cv_results_["mean_test_score"]))
    assert np.all(np.isfinite(cross_val_score(DPipeClassifier("error-moment", C=0.5), X, y, scoring="roc_auc", cv=3, error_score="raise")))
