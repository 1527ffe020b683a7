"""Quality on the bundled real datasets: the moment objectives next to logistic regression.

Slow: each test ingests a real dataset and its test split.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import dpipe
from dpipe.exceptions import DataWarning

pytestmark = pytest.mark.slow

CASES = {
    "kdd99": (("kddcup.data_10_percent.gz", dict(negative=["normal."])), ("corrected.gz", dict(unseen="ignore"))),
    "a9a": (("a9a.gz", dict(n_features=123)), ("a9a.t.gz", {})),
    "w8a": (("w8a.gz", dict(n_features=300)), ("w8a.t.gz", {})),
    "adult": (("adult.data.gz", dict(header=False, label=14, positive=[">50K", ">50K."], group_col=9)), ("adult.test.gz", dict(skip_rows=1))),
}


# How far below standardized logistic regression the moment objectives may fall. On adult the
# raw numeric columns are heavy-tailed (capital-gain: 92 % zeros, up to 99999) and the normal
# model of the scores fits them worst: measured 0.0124 (AUC) and 0.0130 (accuracy) below; on
# a9a, the same records binned, the gap is under 0.003.
TOLERANCE = {"adult": 0.02}


@pytest.mark.parametrize("name", list(CASES))
def test_moment_objectives_match_logistic_regression(name, shared_data, tmp_path, client):
    (train_file, opts), (test_file, test_opts) = CASES[name]
    train, test = str(tmp_path / "train.zarr"), str(tmp_path / "test.zarr")
    dpipe.ingest(str(shared_data / train_file), train, **opts)
    if test_opts.get("unseen") == "ignore":  # corrected.gz has the service 'icmp' (2 rows), unseen in training
        with pytest.warns(DataWarning, match="icmp"):
            dpipe.ingest(str(shared_data / test_file), test, like=train, **test_opts)
    else:
        dpipe.ingest(str(shared_data / test_file), test, like=train, **test_opts)
    auc_model = dpipe.train(train, "auc-moment", client=client)
    err_model = dpipe.train(train, "error-moment", client=client)
    auc = dpipe.evaluate(auc_model, test, client=client)["roc_auc"]
    acc = dpipe.evaluate(err_model, test, client=client)["accuracy"]
    tr, te = dpipe.open_store(train).read_all(), dpipe.open_store(test).read_all()
    dense = lambda X: X.toarray() if hasattr(X, "toarray") else X  # noqa: E731 - w8a is stored sparse; StandardScaler centres
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lbfgs may stop at its iteration limit on unscaled features
        lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(dense(tr.X), tr.y)
    s = lr.decision_function(dense(te.X))
    lr_auc, lr_acc = roc_auc_score(te.y, s), float(np.mean(np.where(s > 0, 1, -1) == te.y))
    tol = TOLERANCE.get(name, 0.01)
    assert auc >= lr_auc - tol, (auc, lr_auc)
    assert acc >= lr_acc - tol, (acc, lr_acc)
