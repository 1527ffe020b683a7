"""Unlabelled stores (``ingest(..., unlabeled=True)``): pools to score and to name in churn / coverage constraints.

The features must encode exactly as the labelled training store's (``like=``), the store says it has no labels, and
everything that needs labels refuses it by name: training, validation, evaluate, and rates that count one label.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpipe
from dpipe.cli.main import main
from dpipe.exceptions import ParameterError, StoreError
from dpipe.io import ingest, open_store


@pytest.fixture
def stores(write_source, tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    a = rng.normal(size=n)
    colour = rng.choice(["red", "green", "blue"], size=n)
    sex = rng.choice(["F", "M"], size=n)
    y = (a + (colour == "red") + 0.3 * rng.normal(size=n) > 0.5).astype(int)
    rows = [f"{a[i]:.6f},{colour[i]},{sex[i]},{y[i]}" for i in range(n)]
    train = write_source("train.csv", "a,colour,sex,y\n" + "\n".join(rows[:300]) + "\n")
    # the pool: the same columns without the label, in the same order
    pool = write_source("pool.csv", "a,colour,sex\n" + "\n".join(r.rsplit(",", 1)[0] for r in rows[300:]) + "\n")
    labelled = write_source("pool-labelled.csv", "a,colour,sex,y\n" + "\n".join(rows[300:]) + "\n")  # the same rows with labels
    ingest(train, str(tmp_path / "train.zarr"), label="y", group_col="sex")
    m = ingest(pool, str(tmp_path / "pool.zarr"), like=str(tmp_path / "train.zarr"), unlabeled=True)
    ingest(labelled, str(tmp_path / "pool-labelled.zarr"), like=str(tmp_path / "train.zarr"))
    return {"train": str(tmp_path / "train.zarr"), "pool": str(tmp_path / "pool.zarr"), "pool_labelled": str(tmp_path / "pool-labelled.zarr"),
            "manifest": m, "y": y}


def test_an_unlabelled_pool_encodes_like_the_training_store(stores):
    m = stores["manifest"]
    train = open_store(stores["train"]).manifest
    assert not m.labelled and train.labelled
    assert m.feature_names == train.feature_names and m.groups == train.groups
    assert m.class_counts == [[0, 0]] * m.n_shards and m.n_positive == m.n_negative == 0
    sh = open_store(stores["pool"], verify=True).read_all()
    assert np.all(sh.y == 0) and sh.X.shape == (100, train.n_features)
    # the same rows ingested with their labels give the same features and groups
    ref = open_store(stores["pool_labelled"]).read_all()
    np.testing.assert_array_equal(sh.X, ref.X)
    np.testing.assert_array_equal(sh.group, ref.group)
    np.testing.assert_array_equal(ref.y == 1, stores["y"][300:] == 1)


def test_svmlight_label_tokens_are_dropped(write_source, tmp_path):
    src = write_source("pool.svm", "1 1:0.5 3:1\n-1 2:2\n7 1:1\n")
    m = ingest(src, str(tmp_path / "p.zarr"), unlabeled=True)
    sh = open_store(str(tmp_path / "p.zarr")).read_all()
    assert not m.labelled and np.all(sh.y == 0) and m.encoding["label"] is None
    np.testing.assert_array_equal(sh.X, [[0.5, 0, 1], [0, 2, 0], [1, 0, 0]])


def test_label_options_with_unlabeled_are_refused(write_source, tmp_path, assert_clean):
    src = write_source("p.csv", "a,b\n1,2\n3,4\n")
    for kw in ({"label": "b"}, {"positive": "1"}, {"negative": "0"}):
        with pytest.raises(ParameterError, match="unlabeled=True says the source has none"):
            ingest(src, str(tmp_path / "p.zarr"), unlabeled=True, **kw)
        assert_clean(tmp_path / "p.zarr")


def test_a_labelled_source_like_an_unlabelled_store_is_refused(stores, write_source, tmp_path):
    src = write_source("more.csv", "a,colour,sex\n0.1,red,F\n")
    with pytest.raises(ParameterError, match="names an unlabelled store"):
        ingest(src, str(tmp_path / "more.zarr"), like=stores["pool"])


def test_an_unlabelled_store_holding_a_label_is_caught_on_read(stores):
    """A y value other than 0 in an unlabelled store is corruption, named with its row."""
    import zarr

    root = zarr.open_group(stores["pool"], mode="r+")
    y = np.asarray(root["y"][:])
    y[7] = 1
    root["y"][:] = y
    with pytest.raises(StoreError, match="unlabelled, but y holds 1 at row 7"):
        open_store(stores["pool"]).read_all()


def test_training_validation_and_evaluate_refuse_it_by_name(stores, tmp_path, capsys):
    with pytest.raises(ParameterError, match="pool.zarr: an unlabelled store .*training needs labels"):
        dpipe.train(stores["pool"], "auc-moment", engine="local")
    with pytest.raises(ParameterError, match="validation needs labels"):
        dpipe.train(stores["train"], "auc-smooth", engine="local", validation=stores["pool"])
    model = dpipe.train(stores["train"], "auc-moment", engine="local")
    with pytest.raises(ParameterError, match="evaluate needs labels"):
        dpipe.evaluate(model, stores["pool"], engine="local")
    assert main(["-q", "train", stores["pool"], "--objective", "auc-moment", "--engine", "local", "--out", str(tmp_path / "m.json")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unlabelled store" in err[0]


def test_churn_and_coverage_on_an_unlabelled_pool_and_labelled_rates_refused(stores, tmp_path):
    deployed = tmp_path / "deployed.json"
    dpipe.train(stores["train"], "auc-moment", engine="local", out=deployed)
    cs = [f"churn('{deployed}', on=pool) <= 0.05", "coverage(on=pool) <= 0.4"]
    model = dpipe.train(stores["train"], "error-rate", engine="local", constraints=cs, datasets={"pool": stores["pool"]})
    pool = open_store(stores["pool"]).read_all()
    X = pool.X.astype(np.float64)
    mine, theirs = model.predict(X) == 1, dpipe.LinearModel.load(deployed).predict(X) == 1
    churn, coverage = np.mean(mine != theirs), mine.mean()
    reports = model.fit["info"]["constraints"]
    assert reports[0]["value"] == pytest.approx(churn - 0.05, abs=1e-12) and reports[1]["value"] == pytest.approx(coverage - 0.4, abs=1e-12)
    assert all(r["satisfied"] for r in reports) and churn <= 0.05 and coverage <= 0.4
    for bad in ("recall(on=pool) >= 0.5", "error_rate(on=pool) <= 0.2", "positive_rate(on=pool, label=-1) <= 0.1"):
        with pytest.raises(ParameterError, match=r"has no labels, and this rate needs them"):
            dpipe.train(stores["train"], "error-rate", engine="local", constraints=[bad], datasets={"pool": stores["pool"]})


def test_predict_scores_an_unlabelled_store(stores, tmp_path):
    model = dpipe.train(stores["train"], "auc-moment", engine="local")
    out = dpipe.predict(model, stores["pool"], str(tmp_path / "p.parquet"), engine="local")
    table = pq.read_table(out)
    X = open_store(stores["pool"]).read_all().X.astype(np.float64)
    np.testing.assert_allclose(table.column("score").to_numpy(), model.decision_function(X), rtol=1e-12)
    assert table.column("y").type == pa.int8() and np.all(table.column("y").to_numpy() == 0)


def test_the_cli_ingests_and_describes_an_unlabelled_store(stores, write_source, tmp_path, capsys):
    src = write_source("more.csv", "a,colour,sex\n0.1,red,F\n0.2,blue,M\n")
    dest = str(tmp_path / "more.zarr")
    assert main(["-q", "ingest", src, dest, "--like", stores["train"], "--unlabeled"]) == 0
    assert "2 rows" in capsys.readouterr().out and not open_store(dest).manifest.labelled
    assert main(["info", dest]) == 0
    assert "none (an unlabelled store)" in capsys.readouterr().out
