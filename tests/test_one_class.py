"""Rows of one class (issue 41): ``evaluate`` reports what is defined on them; a rate objective refuses them up front."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import dpipe
from dpipe.cli import main
from dpipe.exceptions import DataWarning, DPipeError
from dpipe.testing import write_store


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("one-class")
    X = np.random.default_rng(0).normal(size=(400, 3)).astype(np.float32)
    y = np.where(X[:, 0] + 0.5 * np.random.default_rng(1).normal(size=400) > 0, 1, -1).astype(np.int8)
    write_store(d / "two.zarr", X, y)
    write_store(d / "pos.zarr", X[y > 0], y[y > 0])
    write_store(d / "neg.zarr", X[y < 0], y[y < 0])
    dpipe.train(str(d / "two.zarr"), "auc-smooth", out=str(d / "m.json"), engine="local")
    return d


def test_evaluate_on_a_one_class_holdout_reports_what_is_defined(stores):
    model = dpipe.LinearModel.load(stores / "m.json")
    with pytest.warns(DataWarning, match="every row is positive, so ROC-AUC, PRBEP and the at-k figures are undefined"):
        pos = dpipe.evaluate(model, str(stores / "pos.zarr"), engine="local")
    scores = model.decision_function(dpipe.io.open_store(str(stores / "pos.zarr")).read_shard(0).X)
    assert pos["roc_auc"] is None and pos["prbep"] is None and pos["k"] is None
    assert pos["accuracy"] == pos["recall"] == pytest.approx(float(np.mean(scores > model.threshold if hasattr(model, "threshold") else scores > 0)))
    assert pos["precision"] == 1.0 and pos["n"] == pos["n_positive"]
    with pytest.warns(DataWarning, match="every row is negative.* as are recall and F1"):
        neg = dpipe.evaluate(model, str(stores / "neg.zarr"), engine="local")
    assert neg["roc_auc"] is None and neg["recall"] is None and neg["f1"] is None and 0.0 <= neg["accuracy"] <= 1.0


def test_the_cli_prints_undefined_and_exits_0(stores, capsys):
    with warnings.catch_warnings():  # as a user's shell runs it: the warning shown, not an error
        warnings.simplefilter("default", DataWarning)
        assert main(["-q", "evaluate", str(stores / "m.json"), str(stores / "neg.zarr"), "--json", "--engine", "local"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["roc_auc"] is None and isinstance(doc["accuracy"], float)
    assert "dpipe: warning:" in out.err and "every row is negative" in out.err


@pytest.mark.parametrize("objective", ["error-rate", "false-negative-rate"])
def test_a_rate_objective_refuses_one_class_training_data_up_front(stores, objective):
    with pytest.raises(DPipeError, match=f"the training data has no negative rows .*; {objective} needs both classes"):
        dpipe.train(str(stores / "pos.zarr"), objective, engine="local")
