"""``lam="auto"``: the regularization path on held-out rows, its choice, and where the fit record shows it."""

import json
import pathlib
import types

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import dpipe
from dpipe import DPipeClassifier
from dpipe.cli.main import main
from dpipe.engine import LocalDataset
from dpipe.engine._split import DatasetPart, RowSplit
from dpipe.exceptions import ParameterError
from dpipe.fit._lam_path import HELD_OUT_FRACTION, HELD_OUT_SEED, PATH_PATIENCE, path_lams
from dpipe.testing import classification_data, write_store


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    X, y = classification_data(n=20_000, d=20, seed=1)
    return write_store(tmp_path_factory.mktemp("dense") / "train.zarr", X, y, [10_000, 10_000])


def _check_path(path):
    lams, scores = path["lams"], path["scores"]
    assert lams == path_lams()[: len(lams)]  # strong to weak, from the start
    best = int(np.argmax(scores))  # the first best: a tie goes to the stronger lam
    assert path["chosen"] == lams[best] and path["chosen_score"] == scores[best]
    assert len(lams) == min(best + 1 + PATH_PATIENCE, len(path_lams()))  # it ends PATH_PATIENCE steps after the best
    assert len(path["iterations"]) == len(lams)


def test_the_path_chooses_by_held_out_auc_and_refits_on_all_rows(dense, tmp_path):
    out = tmp_path / "m.json"
    model = dpipe.train(dense, lam="auto", engine="local", out=out, train_metrics=False)
    path = model.fit["info"]["lam_path"]
    _check_path(path)
    assert path["metric"] == "roc_auc" and path["refit"] and path["held_out"] == f"{HELD_OUT_FRACTION:.0%} of the training rows (seed {HELD_OUT_SEED})"
    assert model.fit["info"]["lam"] == path["chosen"] and model.params["lam"] == "auto"
    # the held-out measure is the AUC of the path's model on the held-out rows: the chosen lam's, refitted on the fit part
    with LocalDataset(dense) as ds:
        split = RowSplit(HELD_OUT_FRACTION, HELD_OUT_SEED)
        fit_part = DatasetPart(ds, split, "fit")
        refit = dpipe.fit.fit_dataset(fit_part, dpipe.fit.resolve("auc", {"lam": path["chosen"]}, "test"))
        parts = ds.map_gather(lambda shard: (np.asarray(shard.X), shard.y, split.validation_rows(shard)))
        X, y, held = (np.concatenate(p) for p in zip(*parts))
    assert roc_auc_score(y[held], X[held] @ refit.coef) == pytest.approx(path["chosen_score"], abs=2e-4)  # cold fit against warm path fit
    saved = json.loads(out.read_text())["fit"]["info"]["lam_path"]
    assert saved["lams"] == path["lams"] and saved["scores"] == path["scores"] and saved["chosen"] == path["chosen"]


def test_the_path_chooses_a_stronger_lam_on_wide_text_than_on_dense_rows(dense, wide_text):
    text = wide_text[0]
    dense_path = dpipe.train(dense, lam="auto", engine="local", train_metrics=False).fit["info"]["lam_path"]
    text_model = dpipe.train(text, lam="auto", engine="local", train_metrics=False)
    text_path = text_model.fit["info"]["lam_path"]
    _check_path(text_path)
    assert text_path["chosen"] > dense_path["chosen"]
    fixed = dpipe.train(text, engine="local", train_metrics=False).fit["info"]["lam"]  # the fixed default, 1e-4 d / n
    if fixed in text_path["lams"]:  # the path's held-out AUC at its choice is at least the fixed default's
        assert text_path["chosen_score"] >= text_path["scores"][text_path["lams"].index(fixed)]


def test_a_validation_store_measures_the_path_and_no_refit_follows(dense, tmp_path):
    X, y = classification_data(n=4_000, d=20, seed=2)
    validation = write_store(tmp_path / "v.zarr", X, y)
    model = dpipe.train(dense, "auc-smooth", lam="auto", validation=validation, engine="local", train_metrics=False)
    path = model.fit["info"]["lam_path"]
    _check_path(path)
    assert path["held_out"] == "the validation set" and not path["refit"]
    w = model.coef
    assert roc_auc_score(y, X @ w) == pytest.approx(path["chosen_score"], abs=1e-9)  # the model is the chosen path fit


def test_dpipe_info_and_train_json_show_the_path(dense, tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["train", dense, "--lam", "auto", "--out", str(out), "--engine", "local", "--json", "-q"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["lam_path"]["chosen"] == json.loads(out.read_text())["fit"]["info"]["lam_path"]["chosen"]
    main(["info", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "dpipe-model-info" and doc["lam_path"] == trained["lam_path"] and doc["fit"]["lam"] == doc["lam_path"]["chosen"]
    main(["info", str(out)])
    text = capsys.readouterr().out
    assert f"lam=auto: {doc['lam_path']['chosen']:.3g}, the best held-out AUC" in text
    assert sum(line.strip().startswith("lam ") for line in text.splitlines()) == len(doc["lam_path"]["lams"])
    assert "<- chosen" in text
    from dpipe.plotting import plot_lam_path

    figure = plot_lam_path({"dense": doc["lam_path"]}, tmp_path / "path.png")
    assert pathlib.Path(figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_lam_auto_is_refused_where_it_does_not_apply():
    with pytest.raises(ParameterError, match=r"'lam' parameter of train cannot be 'auto' for objective 'error-moment': .*unit-norm penalty"):
        dpipe.fit.resolve("error-moment", {"lam": "auto"}, "train")
    with pytest.raises(ParameterError, match=r"'lam' parameter of train cannot be 'auto' for objective 'error-rate'"):
        dpipe.fit.resolve("error-rate", {"lam": "auto"}, "train")
    with pytest.raises(ParameterError, match=r"'early_stopping_rounds' parameter of train does not go with lam='auto'"):
        dpipe.fit.resolve("auc-smooth", {"lam": "auto", "early_stopping_rounds": 3}, "train")
    with pytest.raises(ParameterError, match=r"must be a float in the range \[0.0, inf\), or 'auto'\. Got 'best' instead\.$"):
        dpipe.fit.resolve("auc", {"lam": "best"}, "train")
    with pytest.raises(ParameterError, match="'C' and 'lam'"):
        dpipe.fit.resolve("auc", {"lam": "auto", "C": 1.0}, "train")


def test_held_out_rows_of_one_class_are_a_clear_error(tmp_path):
    n = 300
    held = RowSplit(HELD_OUT_FRACTION, HELD_OUT_SEED).validation_rows(types.SimpleNamespace(index=0, n_rows=n))
    X = np.random.default_rng(0).normal(size=(n, 3)).astype(np.float32)
    y = np.where((X[:, 0] > 0.5) & ~held, 1, -1).astype(np.int8)  # every positive among the fitting rows
    store = write_store(tmp_path / "s.zarr", X, y)
    with pytest.raises(ParameterError, match=r"^The 'lam' parameter of train is 'auto', and the held-out 20% of the training rows \(seed 0\) "
                                             r"hold no positive row to measure a lam by; give a validation set"):
        dpipe.train(store, lam="auto", engine="local")
    assert dpipe.train(store, lam="auto", engine="local", validation=store, train_metrics=False).fit["info"]["lam_path"]["refit"] is False


def test_the_estimator_takes_lam_auto():
    X, y = classification_data(n=3_000, d=6, seed=3)
    est = DPipeClassifier(lam="auto").fit(X, y)
    path = est.fit_result_.info["lam_path"]
    _check_path(path)
    assert est.fit_result_.info["lam"] == path["chosen"] and est.get_params()["lam"] == "auto"


def test_on_a_cluster_the_path_runs_on_the_loaded_shards_and_chooses_as_the_local_engine(dense, client):
    local = dpipe.train(dense, lam="auto", engine="local", train_metrics=False)
    remote = dpipe.train(dense, lam="auto", client=client, cache="memory", train_metrics=False)
    info = remote.fit["info"]
    assert "load" not in info["data_passes_by_kind"]  # the path's fits and measures read the shards loaded once, on the workers
    assert remote.fit["info"]["lam_path"]["lams"] == local.fit["info"]["lam_path"]["lams"]
    np.testing.assert_allclose(remote.fit["info"]["lam_path"]["scores"], local.fit["info"]["lam_path"]["scores"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(remote.coef, local.coef, rtol=1e-7, atol=1e-10)
