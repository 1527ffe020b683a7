"""Early stopping on a validation set (``early_stopping_rounds``): the stop, the kept iterate, the record, the errors;
through dpipe.train on each iterative solver, the estimator's ``eval_set`` and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import dpipe
from dpipe.exceptions import ConvergenceWarning, ParameterError
from dpipe.fit import OBJECTIVES
from dpipe.fit._early_stopping import METRICS, EarlyStopping, stopping_metric
from dpipe.testing import write_store

#: the objective trained by trust-region Newton (its default solver on a small store)
NEWTON = next(o.name for o in OBJECTIVES.values() if o.solvers[0] == "newton")
K = 3


def _data(n: int, seed: int, direction: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Two strongly correlated columns (x1 = x0 + 0.3 z) and two noise columns; labels rank by ``direction . (x0, x1)``."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 4))
    X = np.column_stack([z[:, 0], z[:, 0] + 0.3 * z[:, 1], z[:, 2], z[:, 3]]).astype(np.float32)
    s = X[:, :2] @ np.asarray(direction) + 0.05 * rng.standard_normal(n)
    return X, np.where(s > 0, 1, -1).astype(np.int8)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Training labels follow x1 - x0; validation labels a ranking between x1 alone and that difference. The solvers' first
    steps follow the class means (mostly x1), their minimum the difference: the validation metrics peak on the way and
    fall by far more than rounding (about 0.003 to 0.15) before the solvers stop on their own."""
    root = tmp_path_factory.mktemp("early-stopping")
    X, y = _data(600, 1, [-1.0, 1.0])
    Xv, yv = _data(1500, 2, [-0.6, 1.0])
    return {"train": write_store(root / "train.zarr", X, y, [250, 350]), "valid": write_store(root / "valid.zarr", Xv, yv),
            "X": X, "y": y, "Xv": Xv, "yv": yv}


def _check_stopped_at_best_plus_k(model, rounds: int) -> tuple[int, list[float]]:
    """The run stopped ``rounds`` iterations after the best, by the recorded per-iteration validation metric; returns
    the best iteration and that metric's history."""
    fit = model.fit
    es = fit["info"]["early_stopping"]
    assert es["metric"] == stopping_metric(model.objective) and es["early_stopping_rounds"] == rounds and es["stopped"]
    key, label = METRICS[es["metric"]]
    values = [h[key] for h in fit["history"]]
    best = es["best_iteration"]
    assert [h["iteration"] for h in fit["history"]] == list(range(1, len(values) + 1))
    assert len(values) == best + rounds  # stopped exactly K iterations after the best
    assert es["best_score"] == values[best - 1] == max(values)
    assert all(v < es["best_score"] for v in values[: best - 1])  # the first time the best was reached ...
    assert all(v <= es["best_score"] for v in values[best:])  # ... and no strict improvement in the K after it
    assert fit["status"] == 2 and fit["success"]
    assert fit["message"] == f"early stopping: validation {label} did not improve for {rounds} iterations"
    return best, values


def _validation_auc(model, stores) -> float:
    return dpipe.evaluate(model, stores["valid"], engine="local")["roc_auc"]


#: L-BFGS's default tol (relative, 0.03) stops these small fits within a few iterations: a tight one lets the validation
#: metric decide
LONG = {"auc-smooth": {"tol": 1e-8}, "prbep-smooth": {"tol": 1e-8}}


@pytest.mark.parametrize("objective, solver", [("auc-smooth", "lbfgs"), (NEWTON, "newton")])
def test_lbfgs_and_newton_stop_k_after_the_best_and_return_the_best_iterate(stores, objective, solver):
    long = LONG.get(objective, {})
    model = dpipe.train(stores["train"], objective, engine="local", validation=stores["valid"], early_stopping_rounds=K, train_metrics=False, **long)
    assert model.fit["info"]["solver"] == solver  # auc's by the store's size (a small one: Newton)
    best, values = _check_stopped_at_best_plus_k(model, K)
    assert model.fit["nit"] == best + K
    assert _validation_auc(model, stores) == pytest.approx(values[best - 1], abs=1e-12)
    assert _validation_auc(model, stores) > values[-1] + 1e-3  # the kept iterate is not the last one
    # the same solver stopped by its iteration limit at the best iteration gives the same coefficients
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        truncated = dpipe.train(stores["train"], objective, engine="local", max_iter=best, train_metrics=False, **long)
    assert truncated.fit["nit"] == best
    np.testing.assert_allclose(model.coef, truncated.coef, rtol=1e-12, atol=0)
    # without early stopping the same solver goes on: the stop was the early stopping's
    full = dpipe.train(stores["train"], objective, engine="local", validation=stores["valid"], train_metrics=False, **long)
    assert full.fit["nit"] > best + K and "early_stopping" not in full.fit["info"]


@pytest.mark.parametrize("objective", ["rocarea", "error"])
def test_the_cutting_plane_stops_k_after_the_best_and_returns_the_best_iterate(stores, objective):
    model = dpipe.train(stores["train"], objective, engine="local", validation=stores["valid"], early_stopping_rounds=K)
    best, values = _check_stopped_at_best_plus_k(model, K)
    metric = model.fit["info"]["early_stopping"]["metric"]
    assert metric == {"rocarea": "roc_auc", "error": "accuracy"}[objective]
    valid = dpipe.evaluate(model, stores["valid"], engine="local")  # error keeps the fit's own threshold (no calibration)
    assert valid[metric] == pytest.approx(values[best - 1], abs=1e-12)
    assert valid[metric] > values[-1] + 1e-3
    assert model.fit["fun"] == model.fit["history"][best - 1]["J"]  # the kept iterate's objective, not the lowest J seen


def test_the_best_iterate_is_kept_when_the_solver_stops_first(stores):
    model = dpipe.train(stores["train"], NEWTON, engine="local", validation=stores["valid"], early_stopping_rounds=1000, train_metrics=False)
    es = model.fit["info"]["early_stopping"]
    values = [h["validation_auc"] for h in model.fit["history"]]
    assert model.fit["status"] == 0 and not es["stopped"] and es["best_iteration"] < len(values)
    assert es["best_score"] == max(values) > values[-1]
    assert _validation_auc(model, stores) == pytest.approx(es["best_score"], abs=1e-12)


def test_the_model_file_keeps_the_record(stores, tmp_path):
    out = tmp_path / "m.json"
    dpipe.train(stores["train"], "prbep-smooth", engine="local", validation=stores["valid"], early_stopping_rounds=2, out=out, train_metrics=False,
                **LONG["prbep-smooth"])
    fit = dpipe.LinearModel.load(out).fit
    es = fit["info"]["early_stopping"]
    assert set(es) == {"metric", "early_stopping_rounds", "best_iteration", "best_score", "stopped"}
    assert es["metric"] == "prbep" and es["early_stopping_rounds"] == 2
    assert es["best_score"] == fit["history"][es["best_iteration"] - 1]["validation_prbep"]
    assert json.loads(out.read_text())["params"]["early_stopping_rounds"] == 2


def test_ties_do_not_reset_the_count_and_nan_never_improves():
    stop = EarlyStopping("roc_auc", 2)
    x = np.zeros(2)
    said = [stop(x + i, {"validation_auc": v}) for i, v in enumerate([float("nan"), 0.5, 0.7, 0.7, float("nan")])]
    assert said[:4] == [None, None, None, None] and said[4] == "early stopping: validation AUC did not improve for 2 iterations"
    assert stop.best_iteration == 3 and stop.best_score == 0.7 and stop.best_x.tolist() == [2.0, 2.0] and stop.stopped
    assert EarlyStopping("f1", 1)(x, {"validation_f1": 0.2}) is None
    one = EarlyStopping("f1", 1)
    assert [one(x, {"validation_f1": v}) for v in (0.2, 0.2)][1] == "early stopping: validation F1 did not improve for 1 iteration"
    with pytest.raises(ValueError, match="rounds >= 1"):
        EarlyStopping("roc_auc", 0)


def test_each_objective_has_its_metric():
    assert {o: stopping_metric(o) for o in ("auc-smooth", NEWTON, "rocarea", "prbep-smooth", "prbep", "error", "f1", "prec@k", "rec@k")} == {
        "auc-smooth": "roc_auc", NEWTON: "roc_auc", "rocarea": "roc_auc", "prbep-smooth": "prbep", "prbep": "prbep", "error": "accuracy",
        "f1": "f1", "prec@k": "prec_at_k", "rec@k": "rec_at_k"}


def test_errors(stores):
    with pytest.raises(ParameterError, match="'early_stopping_rounds' parameter of train needs the 'validation' parameter"):
        dpipe.train(stores["train"], "auc-smooth", engine="local", early_stopping_rounds=3)
    for bad in (0, -2):
        with pytest.raises(ParameterError, match=r"'early_stopping_rounds' parameter of train must be an int in the range \[1, "):
            dpipe.train(stores["train"], "auc-smooth", engine="local", validation=stores["valid"], early_stopping_rounds=bad)
    for objective in ("auc-moment", "error-moment", "error-rate", "auc-rate"):
        with pytest.raises(ParameterError, match=f"'early_stopping_rounds' parameter of train does not apply to objective '{objective}'"):
            dpipe.train(stores["train"], objective, engine="local", validation=stores["valid"], early_stopping_rounds=3)


def test_the_estimator_takes_one_eval_set(stores):
    X, y, Xv, yv = stores["X"], stores["y"], stores["Xv"], stores["yv"]
    clf = dpipe.DPipeClassifier("rocarea", early_stopping_rounds=K).fit(X, y, eval_set=[(Xv, yv)])
    es = clf.fit_result_.info["early_stopping"]
    assert es["stopped"] and clf.best_iteration_ == es["best_iteration"] and clf.n_iter_ == clf.best_iteration_ + K
    assert clf.best_score_ == es["best_score"] == pytest.approx(roc_auc_score(yv, clf.decision_function(Xv)), abs=1e-12)
    assert clf.to_model().fit["info"]["early_stopping"] == es
    # refitted without early stopping: the validation figures stay in the history, no best iteration is kept
    clf.set_params(early_stopping_rounds=None).fit(X, y, eval_set=[(Xv, yv)])
    assert not hasattr(clf, "best_iteration_") and "validation_auc" in clf.fit_result_.history[-1]
    with pytest.raises(ParameterError, match="'early_stopping_rounds' parameter of DPipeClassifier needs the 'eval_set' argument of fit"):
        dpipe.DPipeClassifier("auc-smooth", early_stopping_rounds=2).fit(X, y)
    with pytest.raises(ParameterError, match="'eval_set' argument of DPipeClassifier.fit takes one validation set, \\[\\(X_val, y_val\\)\\]; got 2 sets"):
        dpipe.DPipeClassifier("auc-smooth", early_stopping_rounds=2).fit(X, y, eval_set=[(Xv, yv), (Xv, yv)])
    with pytest.raises(ParameterError, match="'eval_set' argument of DPipeClassifier.fit applies to the smoothed and structural objectives"):
        dpipe.DPipeClassifier("auc-moment").fit(X, y, eval_set=[(Xv, yv)])
    with pytest.raises(ValueError, match="eval_set's y has labels \\[7\\]"):
        dpipe.DPipeClassifier("auc-smooth").fit(X, y, eval_set=[(Xv, np.where(yv > 0, 7, -1))])
    with pytest.raises(ValueError, match="X has 3 features, but DPipeClassifier is expecting 4"):
        dpipe.DPipeClassifier("auc-smooth").fit(X, y, eval_set=[(Xv[:, :3], yv)])


def test_the_cli_flag_end_to_end(stores, tmp_path):
    out = tmp_path / "m.json"
    r = subprocess.run([sys.executable, "-m", "dpipe", "train", stores["train"], "--objective", "rocarea", "--validation", stores["valid"],
                        "--early-stopping-rounds", "3", "--engine", "local", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    model = dpipe.LinearModel.load(out)
    best, values = _check_stopped_at_best_plus_k(model, 3)
    assert f"early stopping: validation AUC did not improve for 3 iterations at iteration {best + 3}; best {values[best - 1]:.6g} at iteration {best}" in r.stderr
    r = subprocess.run([sys.executable, "-m", "dpipe", "train", stores["train"], "--objective", "rocarea", "--early-stopping-rounds", "3",
                        "--engine", "local", "--out", str(tmp_path / "n.json")], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "--early-stopping-rounds needs --validation: the store whose metric decides when to stop." in r.stderr
    assert not (tmp_path / "n.json").exists()
