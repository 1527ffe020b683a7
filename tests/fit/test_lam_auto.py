"""``lam="auto"``: the folds, the regularization path on held-out rows, its choice, and where the fit record shows it."""

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
from dpipe.engine._split import DatasetPart
from dpipe.exceptions import ParameterError
from dpipe.fit._lam_path import FOLD_SEED, FOLDS, ONE_FOLD_MINORITY, PATH_END, PATH_FACTOR, PATH_LOOSER, PATH_PATIENCE, PATH_REACHES, FoldSplit, choose, folds_used, half_steps, path_lams, path_params
from dpipe.testing import classification_data, write_store


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    X, y = classification_data(n=20_000, d=20, seed=1)
    return write_store(tmp_path_factory.mktemp("dense") / "train.zarr", X, y, [10_000, 10_000])


def _check_path(path, folds=None):
    lams, scores, refined = path["lams"], path["scores"], path["refined"]
    assert lams == sorted(lams, reverse=True) and len(set(lams)) == len(lams)  # strong to weak, each once
    decades = [lam for lam, r in zip(lams, refined) if not r]
    assert decades == path_lams()[: len(decades)]  # the tenfold steps from the start
    best = int(np.argmax(scores))  # the first best: a tie goes to the stronger lam
    assert path["best"] == lams[best]
    chosen = best
    if path["folds"] > 1:  # several folds: of the lam within one paired standard error of the best mean, the nearest the fixed default
        fs = np.array(path["fold_scores"])
        near = [i for i in range(len(lams)) if scores[i] >= scores[best] - np.std(fs[i] - fs[best], ddof=1) / np.sqrt(fs.shape[1])]
        assert best in near
        chosen = min(near, key=lambda i: (round(abs(np.log(lams[i] / path["fixed_default"])), 9), -scores[i]))
    assert path["chosen"] == lams[chosen] and path["chosen_score"] == scores[chosen]
    decade_scores = [s for s, r in zip(scores, refined) if not r]
    centre = decades[int(np.argmax(decade_scores))]
    # it ends PATH_PATIENCE steps after the best tenfold step, and not above the fixed default lam or PATH_REACHES
    ends = max(decades.index(centre) + PATH_PATIENCE, next(i for i, lam in enumerate(path_lams()) if lam <= max(path["fixed_default"], PATH_REACHES) * (1 + 1e-9)))
    assert len(decades) == min(ends + 1, len(path_lams()))
    half = [lam for lam, r in zip(lams, refined) if r]  # then the half-steps beside the best tenfold step: toward its better neighbour
    i = decades.index(centre)
    stronger = decade_scores[i - 1] if i > 0 else np.nan
    weaker = decade_scores[i + 1] if i + 1 < len(decades) else np.nan
    sides = [centre * PATH_FACTOR**0.5, centre / PATH_FACTOR**0.5]
    if np.isfinite(stronger) and np.isfinite(weaker) and stronger != weaker:
        sides = sides[:1] if stronger > weaker else sides[1:]
    assert half == [lam for lam in (float(f"{side:.3g}") for side in sides) if lam >= PATH_END]
    assert half_steps(centre, dict(zip(decades, decade_scores))) == [float(f"{side:.3g}") for side in sides]
    k = path["folds"]
    assert folds is None or k == folds
    assert all(len(f) == k for f in path["fold_scores"]) and len(path["iterations"]) == len(lams)
    np.testing.assert_allclose(scores, [np.mean(f) for f in path["fold_scores"]], rtol=0, atol=1e-12)  # the mean over the folds
    assert all((se is None) == (k == 1) for se in path["score_se"])


def _rows(dataset, split):
    parts = dataset.map_gather(lambda shard: (np.asarray(shard.X), shard.y, split.validation_rows(shard)))
    return (np.concatenate(p) for p in zip(*parts))


def test_folds_are_stratified_seeded_disjoint_and_cover_every_row():
    rng = np.random.default_rng(5)
    for index, n, positives in ((0, 1000, 37), (1, 999, 500), (7, 10, 1), (2, 0, 0)):
        y = np.where(rng.permutation(n) < positives, 1, -1).astype(np.int8)
        shard = types.SimpleNamespace(index=index, n_rows=n, y=y)
        masks = np.array([FoldSplit(1 / FOLDS, 0, folds=FOLDS, fold=j).validation_rows(shard) for j in range(FOLDS)]).reshape(FOLDS, n)
        assert (masks.sum(axis=0) == 1).all()  # disjoint, and every row held out once
        for cls in (y > 0, y < 0):  # stratified: each fold holds each class's rows of the shard to within one
            counts = masks[:, cls].sum(axis=1)
            assert counts.max() - counts.min() <= 1 and counts.sum() == cls.sum()
        again = FoldSplit(1 / FOLDS, 0, folds=FOLDS, fold=0).validation_rows(types.SimpleNamespace(index=index, n_rows=n, y=y.copy()))
        np.testing.assert_array_equal(again, masks[0])  # seeded: the same folds again
        if n >= 100:  # another seed deals other rows
            assert (FoldSplit(1 / FOLDS, 1, folds=FOLDS, fold=0).validation_rows(shard) != masks[0]).any()
    assert folds_used(FOLDS * ONE_FOLD_MINORITY) == 1 and folds_used(FOLDS * ONE_FOLD_MINORITY - 1) == FOLDS


def test_the_path_fits_stop_looser_than_the_fit_and_only_there():
    newton = dpipe.fit.resolve("auc", {"lam": "auto", "solver": "newton"}, "test")
    lbfgs = dpipe.fit.resolve("prbep-smooth", {"lam": "auto", "solver": "lbfgs"}, "test")
    assert newton.solver == "newton" and lbfgs.solver == "lbfgs"
    q = path_params(newton, 1e-3)
    assert q.lam == 1e-3 and q.eps == pytest.approx(newton.eps * PATH_LOOSER["newton"]) and q.eps > newton.eps
    q = path_params(lbfgs, 1e-4)
    assert q.lam == 1e-4 and q.tol == pytest.approx(lbfgs.tol * PATH_LOOSER["lbfgs"]) and q.tol > lbfgs.tol
    structural = dpipe.fit.resolve("rocarea", {"lam": 1.0}, "test")  # the cutting plane's eps is its gap: kept
    assert path_params(structural, 1e-3).eps == structural.eps


def test_the_half_steps_go_toward_the_better_neighbour():
    assert half_steps(1e-4, {1e-3: 0.9, 1e-4: 0.95, 1e-5: 0.94}) == [3.16e-5]
    assert half_steps(1e-4, {1e-3: 0.94, 1e-4: 0.95, 1e-5: 0.9}) == [3.16e-4]
    assert half_steps(1e-4, {1e-3: 0.94, 1e-4: 0.95, 1e-5: 0.94}) == [3.16e-4, 3.16e-5]  # a tie: both
    assert half_steps(1e-2, {1e-2: 0.95, 1e-3: 0.9}) == [3.16e-2, 3.16e-3]  # the path's start: no stronger neighbour, both
    assert half_steps(1e-4, {1e-3: 0.94, 1e-4: 0.95, 1e-5: float("nan")}) == [3.16e-4, 3.16e-5]


def _entry(lam, fold_scores):
    return {"lam": lam, "fold_scores": fold_scores, "score": float(np.mean(fold_scores)),
            "score_se": float(np.std(fold_scores, ddof=1) / np.sqrt(len(fold_scores))) if len(fold_scores) > 1 else None}


def test_several_folds_choose_the_lam_nearest_the_fixed_default_within_a_paired_standard_error():
    best = _entry(1e-4, [0.960, 0.970, 0.980])
    level = _entry(1e-5, [0.959, 0.971, 0.9795])  # 1.7e-4 below on the mean, paired differences -1e-3, 1e-3, -5e-4: within
    falls = _entry(1e-6, [0.955, 0.966, 0.976])  # 4.3e-3 below, every fold lower: outside
    assert choose([best, level, falls], best, 1e-6)[0] is level  # nearest the default of those within
    assert choose([best, level, falls], best, 1e-3)[0] is best  # the default on the strong side: the best is nearest
    assert choose([best, level], best, 1e-4)[0] is best
    # the folds' own levels cancel: a neighbour lower on every fold by 1e-4 is outside although the folds spread by 1e-2
    steady = _entry(1e-5, [0.9599, 0.9699, 0.9799])
    assert choose([best, steady], best, 1e-6)[0] is best
    one = _entry(1e-4, [0.96])  # one fold: the best, whatever the default
    assert choose([one, _entry(1e-5, [0.959])], one, 1e-6)[0] is one


def test_a_fold_part_weighs_exactly_the_other_folds_rows(dense):
    with LocalDataset(dense) as ds:
        split = FoldSplit(1 / FOLDS, FOLD_SEED, folds=FOLDS, fold=1)
        fit_w = np.concatenate(DatasetPart(ds, split, "fit").map_gather(lambda shard: shard.weight))
        held_w = np.concatenate(DatasetPart(ds, split, "validation").map_gather(lambda shard: shard.weight))
        _, y, held = _rows(ds, split)
    np.testing.assert_array_equal(held_w, held.astype(np.float32))
    np.testing.assert_array_equal(fit_w + held_w, np.ones_like(fit_w))
    assert abs(held[y > 0].mean() - 1 / FOLDS) < 1e-3 and abs(held[y < 0].mean() - 1 / FOLDS) < 1e-3


def test_the_path_chooses_by_held_out_auc_and_refits_on_all_rows(dense, tmp_path):
    out = tmp_path / "m.json"
    model = dpipe.train(dense, lam="auto", engine="local", out=out, train_metrics=False)
    path = model.fit["info"]["lam_path"]
    _check_path(path, folds=1)  # 10^4 rows of either class: one fold of the three measures the path
    assert path["metric"] == "roc_auc" and path["refit"] and path["held_out"].startswith(f"1 of {FOLDS} folds of the training rows, stratified")
    assert model.fit["info"]["lam"] == path["chosen"] and model.params["lam"] == "auto" and path["fixed_default"] == 1e-6
    # the held-out measure is the AUC of the path's model on the held-out fold: the chosen lam's, refitted on the other folds
    with LocalDataset(dense) as ds:
        split = FoldSplit(1 / FOLDS, FOLD_SEED, folds=FOLDS, fold=0)
        refit = dpipe.fit.fit_dataset(DatasetPart(ds, split, "fit"), dpipe.fit.resolve("auc", {"lam": path["chosen"]}, "test"))
        X, y, held = _rows(ds, split)
    assert roc_auc_score(y[held], X[held] @ refit.coef) == pytest.approx(path["chosen_score"], abs=2e-4)  # cold fit against warm path fit
    saved = json.loads(out.read_text())["fit"]["info"]["lam_path"]
    assert saved["lams"] == path["lams"] and saved["scores"] == path["scores"] and saved["chosen"] == path["chosen"]
    assert saved["fold_scores"] == path["fold_scores"]


def test_few_rows_of_one_class_measure_the_path_on_every_fold(tmp_path):
    X, y = classification_data(n=6_000, d=8, seed=4)
    y = np.where((y > 0) & (np.arange(y.size) % 4 == 0), 1, -1).astype(np.int8)  # about 750 positives: under 2000 a fold
    store = write_store(tmp_path / "few.zarr", X, y, [3_000, 3_000])
    model = dpipe.train(store, lam="auto", engine="local", train_metrics=False)
    path = model.fit["info"]["lam_path"]
    _check_path(path, folds=FOLDS)
    assert path["held_out"] == f"{FOLDS} folds of the training rows, stratified (seed {FOLD_SEED}), each held out once"
    # each fold's measure is the AUC on that fold of a fit on the other two (cold here, warm on the path)
    chosen = path["lams"].index(path["chosen"])
    with LocalDataset(store) as ds:
        for j in range(FOLDS):
            split = FoldSplit(1 / FOLDS, FOLD_SEED, folds=FOLDS, fold=j)
            fit = dpipe.fit.fit_dataset(DatasetPart(ds, split, "fit"), dpipe.fit.resolve("auc", {"lam": path["chosen"]}, "test"))
            Xs, ys, held = _rows(ds, split)
            assert roc_auc_score(ys[held], Xs[held] @ fit.coef) == pytest.approx(path["fold_scores"][chosen][j], abs=5e-4)


def test_on_wide_text_the_path_measures_the_fixed_default_and_its_choice_tests_at_least_as_well(wide_text):
    text, X_test, y_test = wide_text
    auto = dpipe.train(text, lam="auto", engine="local", train_metrics=False)
    path = auto.fit["info"]["lam_path"]
    _check_path(path, folds=FOLDS)  # about 1000 positives: every fold measures the path
    fixed = dpipe.train(text, engine="local", train_metrics=False)  # the fixed default, 1e-4 d / n = 1e-3
    lam = fixed.fit["info"]["lam"]
    assert path["fixed_default"] == lam and lam in path["lams"]  # the path measures the fixed default's lam ...
    assert path["chosen_score"] >= path["scores"][path["lams"].index(lam)]  # ... and its choice is at least as good on the folds
    # and on the test rows: measured, the folds chose 3.16e-5 here (test AUC 0.9622 against the fixed default's 0.9587)
    assert roc_auc_score(y_test, X_test @ auto.coef) >= roc_auc_score(y_test, X_test @ fixed.coef) - 5e-4


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
    out, png = tmp_path / "m.json", tmp_path / "path.png"
    assert main(["train", dense, "--out", str(out), "--plot", str(png), "--engine", "local", "-q"]) == 1  # --plot draws lam auto's path
    assert capsys.readouterr().err.strip() == ("dpipe train: error: --plot draws the path of --lam auto (the held-out measure per lam); "
                                               "this fit's lam is the default: give --lam auto, or leave --plot out")
    assert not out.exists() and not png.exists()
    assert main(["train", dense, "--lam", "auto", "--out", str(out), "--plot", str(png), "--engine", "local", "--json", "-q"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    trained = json.loads(capsys.readouterr().out)
    assert trained["lam_path"]["folds"] == 1 and trained["lam_path"]["fixed_default"] == 1e-6 and len(trained["lam_path"]["fold_scores"]) == len(trained["lam_path"]["lams"])
    assert trained["lam_path"]["chosen"] == json.loads(out.read_text())["fit"]["info"]["lam_path"]["chosen"]
    assert trained["lam_path"]["best"] == json.loads(out.read_text())["fit"]["info"]["lam_path"]["best"] is not None
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
    X = np.random.default_rng(0).normal(size=(n, 3)).astype(np.float32)
    y = np.full(n, -1, dtype=np.int8)
    y[[10, 200]] = 1  # two positives, dealt to the first two folds: the third holds none
    store = write_store(tmp_path / "s.zarr", X, y)
    with pytest.raises(ParameterError, match=rf"^The 'lam' parameter of train is 'auto', and fold 3 of the {FOLDS} stratified folds of the "
                                             rf"training rows \(seed {FOLD_SEED}\) holds no positive row to measure a lam by; give a validation set"):
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
