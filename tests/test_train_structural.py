"""SVM-perf's losses through dpipe.train, the estimator and the CLI: parity, conventions, errors."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

import dpipe
from dpipe.cli import main
from dpipe.exceptions import DPipeError, ParameterError
from dpipe.testing import classification_data, write_store

LOSSES = ["rocarea", "prbep", "f1", "prec@k", "rec@k", "error"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("structural")
    X, y = classification_data(2400, 6, seed=21, scales=False)
    Xv, yv = classification_data(800, 6, seed=22, scales=False)
    return {
        "train": write_store(d / "train.zarr", X, y, [700, 0, 900, 800]),
        "valid": write_store(d / "valid.zarr", Xv, yv, [400, 400]),
        "X": X.astype(np.float64), "y": y,
    }


def _fit(data, loss, **kw):
    kw.setdefault("lam", 1e-3)
    kw.setdefault("eps", 1e-4)
    return dpipe.train(data["train"], loss, engine="local", **kw)


@pytest.mark.parametrize("loss", LOSSES)
def test_each_loss_trains_and_reaches_its_lower_bound(data, loss):
    model = _fit(data, loss)
    fit = model.fit
    assert fit["success"]
    assert fit["info"]["gap"] <= 1e-4 and fit["info"]["lower_bound"] <= fit["fun"]
    assert model.params["solver"] == "cutting-plane" and fit["info"]["C"] == pytest.approx(10.0)  # lam 1e-3
    hist = fit["history"]
    assert {"J", "lower_bound", "gap", "loss", "seconds_oracle", "seconds_qp"} <= set(hist[-1])
    # the model's exact training figures are those of its own scores (scikit-learn as the reference)
    s = data["X"] @ model.coef + model.intercept
    assert model.metrics["train"]["roc_auc"] == pytest.approx(skm.roc_auc_score(data["y"], s), abs=1e-12)


def test_dask_cluster_and_local_fits_agree(data, client):
    for loss in ("rocarea", "f1"):
        local = _fit(data, loss)
        dist = dpipe.train(data["train"], loss, client=client, lam=1e-3, eps=1e-4)
        assert abs(local.fit["fun"] - dist.fit["fun"]) <= 1e-4  # each within eps of the same minimum
        assert max(local.fit["info"]["lower_bound"], dist.fit["info"]["lower_bound"]) <= min(local.fit["fun"], dist.fit["fun"]) + 1e-12


def test_svm_perf_conventions(data):
    by_c = _fit(data, "rocarea", lam=None, C=10.0, eps=1e-2)
    by_lam = _fit(data, "rocarea", lam=1e-3, eps=1e-2)
    np.testing.assert_array_equal(by_c.coef, by_lam.coef)  # C = 10 is lam = 1 / (100 C) = 1e-3
    # prec@k / rec@k: SVM-perf's k (half / twice the positives), --p as a fraction of the positives, or k itself
    n_pos = int((data["y"] > 0).sum())
    assert _fit(data, "prec@k", max_iter=3, eps=1.0).fit["info"]["k"] == round(0.5 * n_pos)
    assert _fit(data, "rec@k", max_iter=3, eps=1.0).fit["info"]["k"] == 2 * n_pos
    assert _fit(data, "prec@k", k_fraction=0.25, max_iter=3, eps=1.0).fit["info"]["k"] == round(0.25 * n_pos)
    assert _fit(data, "rec@k", k=77, max_iter=3, eps=1.0).fit["info"]["k"] == 77
    # the bias feature (--b) sets the threshold of error / f1 models; no calibration by default
    err = _fit(data, "error", bias=2.0)
    assert err.fit["info"]["bias"] == 2.0 and err.intercept == pytest.approx(2.0 * err.fit["x"][-1])
    assert "calibration" not in err.fit["info"]
    pred = np.where(data["X"] @ err.coef + err.intercept > 0, 1, -1)
    assert err.metrics["train"]["accuracy"] == pytest.approx(np.mean(pred == data["y"]), abs=1e-12)
    no_bias = _fit(data, "error", bias=0.0)
    assert no_bias.intercept == 0.0 and len(no_bias.fit["x"]) == data["X"].shape[1]


def test_validation_store_is_measured_every_iteration(data):
    model = _fit(data, "rocarea", validation=data["valid"], eps=1e-2)
    hist = model.fit["history"]
    assert all(0.0 <= h["validation_auc"] <= 1.0 for h in hist)
    best = min(hist, key=lambda h: h["J"])  # the iterate the model keeps
    assert best["validation_auc"] == pytest.approx(dpipe.evaluate(model, data["valid"], engine="local")["roc_auc"], abs=1e-12)
    assert all("seconds_monitor" in h for h in hist)  # the validation pass is kept off the solver's clock


def test_parameter_errors_name_the_parameter(data):
    path = data["train"]
    with pytest.raises(ParameterError, match=r"Valid pairs: .*auc-smooth: lbfgs.*rocarea: cutting-plane"):
        dpipe.train(path, "rocarea", solver="lbfgs", engine="local")
    with pytest.raises(ParameterError, match="Valid pairs"):
        dpipe.train(path, "auc-smooth", solver="cutting-plane", engine="local")
    with pytest.raises(ParameterError, match="'C' and 'lam'"):
        dpipe.train(path, "rocarea", C=1.0, lam=1e-3, engine="local")
    with pytest.raises(ParameterError, match="'C' parameter of train does not apply to objective 'auc-moment' with solver 'closed-form': it applies to auc, "
                                             "auc-moment \\(solver lbfgs\\), .*the closed form has no penalty"):
        dpipe.train(path, "auc-moment", C=1.0, engine="local")
    with pytest.raises(ParameterError, match="'k' parameter of train does not apply to objective 'rocarea': it applies to prec@k, rec@k"):
        dpipe.train(path, "rocarea", k=5, engine="local")
    with pytest.raises(ParameterError, match="exclude each other"):
        dpipe.train(path, "prec@k", k=5, k_fraction=0.5, engine="local")
    with pytest.raises(ParameterError, match=r"'k' parameter of train must be an int in the range \[1, "):
        dpipe.train(path, "prec@k", k=10**6, engine="local")
    with pytest.raises(ParameterError, match="'precondition' parameter of train does not apply to objective 'prbep': it applies to auc, auc-smooth, prbep-smooth; the cutting plane"):
        dpipe.train(path, "prbep", precondition=True, engine="local")
    with pytest.raises(ParameterError, match=r"'lam' parameter of train must be a float in the range \(0, inf\)"):
        dpipe.train(path, "f1", lam=0.0, engine="local")


def test_one_class_store_is_a_clear_error(tmp_path):
    X, y = classification_data(200, 5)
    y[:] = 1
    path = write_store(tmp_path / "s.zarr", X, y)
    with pytest.raises(DPipeError, match="no negative rows.*rocarea"):
        dpipe.train(path, "rocarea", engine="local")


def test_estimator_takes_the_svm_perf_losses(data):
    clf = dpipe.DPipeClassifier("prbep", lam=1e-3, eps=1e-4).fit(data["X"], data["y"])
    model = _fit(data, "prbep")
    np.testing.assert_allclose(clf.coef_[0], model.coef, rtol=1e-9, atol=1e-12)
    assert clf.get_params()["solver"] is None and clf.fit_result_.info["gap"] <= 1e-4


def test_cli_trains_prec_at_k_with_svm_perf_flags(data, tmp_path, capsys):
    out = tmp_path / "m.json"
    code = main(["train", data["train"], "--objective", "prec@k", "--solver", "cutting-plane", "--k-fraction", "0.5", "--C", "10",
                 "--eps", "0.01", "--out", str(out), "--engine", "local"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "cutting plane: lower bound" in printed
    model = dpipe.LinearModel.load(out)
    assert model.params["lam"] == pytest.approx(1e-3) and model.fit["info"]["gap"] <= 0.01
    assert main(["train", data["train"], "--objective", "f1", "--solver", "lbfgs", "--out", str(tmp_path / "f1.json"), "--engine", "local"]) == 1
    assert "Valid pairs" in capsys.readouterr().err
