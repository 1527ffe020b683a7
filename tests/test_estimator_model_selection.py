"""The estimator in scikit-learn's model selection on raw tables: adult's string columns as read, rare categories dealt to one
side of a split, and searches over ``lam``, ``C`` and ``objective``."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

from dpipe import DPipeClassifier
from dpipe.exceptions import DataWarning, InputError


@pytest.fixture
def adult(shared_data):
    df = pd.read_csv(shared_data / "adult.data.gz", header=None)  # as a user reads it: strings with their leading blanks
    return df.iloc[:, :14], df.iloc[:, 14]


def test_cross_val_score_on_raw_adult_gives_five_finite_scores_and_says_once_what_it_did_not_see(adult):
    X, y = adult
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scores = cross_val_score(DPipeClassifier(), X, y, scoring="roc_auc", cv=5)
    assert scores.shape == (5,) and np.all(np.isfinite(scores)) and scores.min() > 0.85
    unseen = [w for w in caught if issubclass(w.category, DataWarning)]
    # 'Holand-Netherlands' is in one row of adult's training file: the fold that holds it scores it as no country, one warning
    assert len(unseen) == 1 and "'13': 'Holand-Netherlands' (1 row)" in str(unseen[0].message)
    assert [w for w in caught if w not in unseen] == []
    with pytest.raises(InputError, match=r"unseen category 'Holand-Netherlands' in column '13'"):
        cross_val_score(DPipeClassifier(unseen="error"), X, y, scoring="roc_auc", cv=5, error_score="raise")


def test_an_unseen_category_scores_as_the_row_without_it(adult):
    X, y = adult
    rare = X[13].str.strip() == "Holand-Netherlands"
    est = DPipeClassifier(unseen="ignore").fit(X[~rare], y[~rare])
    row = X[rare]
    known = row.copy()
    known[13] = "United-States"  # the same row with a known country, less that country's weight
    expected = est.decision_function(known)[0] - est.coef_[0][est.feature_names_.index("13=United-States")]
    assert est.decision_function(row)[0] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("grid", [{"lam": [1e-6, 1e-3]}, {"C": [1e-9, 1e-4]}, {"objective": ["auc", "auc-smooth", "rocarea"]}])
def test_grid_search_on_raw_adult_fits_every_candidate(adult, grid):
    X, y = adult
    X, y = X.iloc[:8000], y.iloc[:8000]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)  # a fold may lack a rare category: said by the test above
        search = GridSearchCV(DPipeClassifier(), grid, scoring="roc_auc", cv=KFold(3), error_score="raise").fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and len(set(np.round(scores, 10))) == len(scores)  # every candidate fitted, each its own model
    name, values = next(iter(grid.items()))
    assert search.best_params_[name] == values[int(np.argmax(scores))]
