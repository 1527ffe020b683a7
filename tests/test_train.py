"""dpipe.train end to end on stores: parity across engines and worker counts, artifacts, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn import metrics as skm

import dpipe
from dpipe.exceptions import ConvergenceWarning, DPipeError, ParameterError
from dpipe.testing import classification_data, write_store


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("train")
    X, y = classification_data(6000, 7, seed=11)
    Xt, yt = classification_data(3000, 7, seed=12)
    return {
        "train": write_store(d / "train.zarr", X, y, [1000, 0, 2500, 2500]),
        "train_pq": write_store(d / "train_pq", X, y, [1500] * 4, format="parquet"),
        "test": write_store(d / "test.zarr", Xt, yt, [1000] * 3),
        "X": X, "y": y, "Xt": Xt, "yt": yt,
    }


def rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


@pytest.mark.parametrize("objective", ["auc-moment", "error-moment"])
def test_two_workers_one_worker_and_numpy_give_the_same_weights(stores, client, one_worker_client, objective):
    m2 = dpipe.train(stores["train"], objective, client=client)
    m1 = dpipe.train(stores["train"], objective, client=one_worker_client, cache="stream")
    ml = dpipe.train(stores["train"], objective, engine="local")
    mp = dpipe.train(stores["train_pq"], objective, engine="local")
    est = dpipe.DPipeClassifier(objective).fit(stores["X"], stores["y"])
    for other in (m1.coef, ml.coef, mp.coef, est.coef_[0]):
        assert rel(m2.coef, other) <= 1e-8
    assert abs(m2.intercept - ml.intercept) <= 1e-8 * max(1.0, abs(ml.intercept))


def test_model_round_trip_and_metrics(stores, client, tmp_path):
    path = tmp_path / "m.json"
    model = dpipe.train(stores["train"], "auc-moment", client=client, out=path)
    loaded = dpipe.LinearModel.load(path)
    np.testing.assert_array_equal(loaded.coef, model.coef)
    assert loaded.intercept == model.intercept
    assert loaded.feature_names == [f"x{i}" for i in range(7)]
    assert loaded.training["manifest_sha256"] == dpipe.open_store(stores["train"]).manifest.digest()
    assert loaded.fit == model.fit and loaded.fit["nfev"] == 1  # the whole fit record survives the round trip
    s = stores["X"] @ model.coef + model.intercept
    assert loaded.metrics["train"]["roc_auc"] == pytest.approx(skm.roc_auc_score(stores["y"], s), abs=1e-12)
    got = dpipe.evaluate(path, stores["test"], client=client)
    st = stores["Xt"].astype(np.float64) @ model.coef + model.intercept
    yt = stores["yt"]
    pred = np.where(st > 0, 1, -1)
    assert got["roc_auc"] == pytest.approx(skm.roc_auc_score(yt, st), abs=1e-12)
    assert got["accuracy"] == pytest.approx(skm.accuracy_score(yt, pred), abs=1e-12)
    assert got["precision"] == pytest.approx(skm.precision_score(yt, pred), abs=1e-12)
    assert got["recall"] == pytest.approx(skm.recall_score(yt, pred), abs=1e-12)
    assert got["f1"] == pytest.approx(skm.f1_score(yt, pred), abs=1e-12)
    assert got["n"] == 3000 and got["n_positive"] == int((yt > 0).sum())


def test_predict_writes_scores_in_row_order(stores, client, tmp_path):
    import pyarrow.parquet as pq

    model = dpipe.train(stores["train"], "error-moment", engine="local")
    out = tmp_path / "pred.parquet"
    dpipe.predict(model, stores["test"], out, client=client)
    t = pq.read_table(out).to_pydict()
    expected = stores["Xt"].astype(np.float64) @ model.coef + model.intercept
    np.testing.assert_array_equal(t["row"], np.arange(3000))
    np.testing.assert_allclose(t["score"], expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(t["label"], np.where(expected > 0, 1, -1))
    np.testing.assert_array_equal(t["y"], stores["yt"])
    with pytest.raises(FileExistsError):
        dpipe.predict(model, stores["test"], out, engine="local")
    assert [p.name for p in tmp_path.iterdir()] == ["pred.parquet"]  # no temporary file left


def test_invalid_objective_solver_pair_lists_valid_pairs(stores):
    with pytest.raises(ParameterError, match="Valid pairs: auc: newton, lbfgs; auc-moment: closed-form, lbfgs; error-moment: lbfgs"):
        dpipe.train(stores["train"], "error-moment", solver="closed-form", engine="local")
    with pytest.raises(ParameterError, match="'objective' parameter of train must be one of"):
        dpipe.train(stores["train"], "nope", engine="local")
    with pytest.raises(ParameterError, match=r"'lam' parameter of train must be a float in the range \[0.0, inf\)"):
        dpipe.train(stores["train"], "error-moment", lam=-1, engine="local")


def test_single_class_store_is_a_clear_error(tmp_path):
    X, y = classification_data(500, 5)
    y[:] = 1
    path = write_store(tmp_path / "one.zarr", X, y, [250, 250])
    with pytest.raises(DPipeError, match="no negative rows"):
        dpipe.train(path, "auc-moment", engine="local")


def test_iteration_limit_warns_with_advice(stores):
    with pytest.warns(ConvergenceWarning, match="raise 'max_iter'"):
        dpipe.train(stores["train"], "error-moment", max_iter=1, engine="local", train_metrics=False)


def test_feature_mismatch_in_evaluate_names_the_fix(stores, tmp_path):
    X, y = classification_data(100, 5)
    other = write_store(tmp_path / "o.zarr", X, y)
    model = dpipe.train(stores["train"], "auc-moment", engine="local", train_metrics=False)
    with pytest.raises(ValueError, match="ingest it with like= the training store"):  # the Python spelling (issue 43)
        dpipe.evaluate(model, other, engine="local")


def test_no_warning_on_a_normal_fit(stores):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dpipe.train(stores["train"], "error-moment", engine="local")


def test_calibration_picks_fewest_training_errors(stores):
    X, y = stores["X"].astype(np.float64), stores["y"]
    model = dpipe.train(stores["train"], "error-moment", engine="local")
    table = model.fit["info"]["calibration"]
    assert len(table) == 3 and min(r["train_error"] for r in table) == pytest.approx(1 - model.metrics["train"]["accuracy"])
    # the calibrated intercept is the best threshold: no other shift of the scores makes fewer errors
    s = X @ model.coef + model.intercept
    errors = np.sum(np.where(s > 0, 1, -1) != y)
    cuts = np.unique(s)
    brute = min(int(np.sum(np.where(s > c, 1, -1) != y)) for c in cuts)
    assert errors == min(brute, int(np.sum(y != 1)))
    raw = dpipe.train(stores["train"], "error-moment", engine="local", calibrate=False)
    assert "calibration" not in raw.fit["info"] and raw.params["calibrate"] is False
    assert raw.metrics["train"]["accuracy"] <= model.metrics["train"]["accuracy"]


def test_model_scores_raw_csv_rows_like_the_store(tmp_path):
    """A model trained on an ingested CSV scores the raw CSV rows with the saved vocabulary."""
    rng = np.random.default_rng(5)
    n = 400
    colors = np.array(["red", "green", "blue"])[rng.integers(0, 3, n)]
    sex = np.array(["F", "M"])[rng.integers(0, 2, n)]
    age = rng.integers(18, 80, n)
    label = np.where(rng.random(n) < 0.2 + 0.3 * (colors == "red"), "yes", "no")
    lines = ["age,color,sex,label"] + [f"{a},{c},{s},{lab}" for a, c, s, lab in zip(age, colors, sex, label)]
    src = tmp_path / "d.csv"
    src.write_text("\n".join(lines) + "\n")
    store = tmp_path / "d.zarr"
    dpipe.ingest(str(src), str(store), label="label", positive=["yes"], group_col="sex")
    model = dpipe.train(store, "error-moment", engine="local")
    records = [{"age": a, "color": c, "sex": s} for a, c, s in zip(age, colors, sex)]
    X = dpipe.open_store(store).read_all().X.astype(np.float64)
    np.testing.assert_allclose(model.score_records(records), model.decision_function(X), rtol=1e-12, atol=1e-12)
