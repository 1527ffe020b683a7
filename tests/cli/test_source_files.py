"""``dpipe train FILE`` / ``evaluate MODEL FILE`` / ``predict MODEL FILE``: a source file is ingested once into a store cached
by its content and the ingest options (:mod:`dpipe.io._source_cache`, which ``dpipe retrain`` uses too)."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import dask.config
import numpy as np
import pyarrow.parquet as pq
import pytest

import dpipe
from dpipe.cli.main import main
from dpipe.testing import one_error_line


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def svmlight(path: Path, rows: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 5))
    y = np.where(X @ np.array([1.0, -0.5, 0.3, 0.0, 0.8]) + 0.5 * rng.normal(size=rows) > 0, 1, -1)
    path.write_text("".join(f"{label} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x) if j != 3 or label > 0) + "\n"
                            for x, label in zip(X, y)))
    return str(path)


@pytest.fixture
def cache(tmp_path):
    folder = tmp_path / "cache"
    with dask.config.set({"dpipe.ingest-cache": str(folder)}):
        yield folder


def stores(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_train_on_a_source_file_ingests_it_once_per_content_and_options(tmp_path, cache):
    src = svmlight(tmp_path / "train.svm", 400, 1)
    code, out, err = run("train", src, "--out", str(tmp_path / "m.json"), "--engine", "local")
    assert code == 0, err
    (first,) = stores(cache)
    assert first.startswith("train.svm-") and first.endswith(".zarr")
    assert f"train: ingesting {src} -> {cache / first}" in err
    stamp = os.stat(cache / first / "manifest.json").st_mtime_ns
    code, _, err = run("train", src, "--out", str(tmp_path / "m.json"), "--overwrite", "--engine", "local")
    assert code == 0 and f"train: {src} was ingested before with these options: reusing {cache / first}" in err
    assert "ingesting" not in err and stores(cache) == [first]
    assert os.stat(cache / first / "manifest.json").st_mtime_ns == stamp  # the cached store, not written again
    model = dpipe.LinearModel.load(tmp_path / "m.json")
    assert model.training["store"] == str(cache / first) and model.coef.size == 5
    code, _, err = run("train", src, "--out", str(tmp_path / "m7.json"), "--n-features", "7", "--engine", "local")  # other options
    assert code == 0 and "ingesting" in err and len(stores(cache)) == 2
    assert dpipe.LinearModel.load(tmp_path / "m7.json").coef.size == 7
    with open(src, "a") as f:  # new content under the same name
        f.write("1 1:0.5\n")
    code, _, err = run("train", src, "--out", str(tmp_path / "m.json"), "--overwrite", "--engine", "local")
    assert code == 0 and "ingesting" in err and len(stores(cache)) == 3


def test_evaluate_and_predict_read_a_source_file_like_the_training_store(tmp_path, cache):
    src, test = svmlight(tmp_path / "train.svm", 400, 1), svmlight(tmp_path / "test.svm", 300, 2)
    model = str(tmp_path / "m.json")
    assert run("-q", "train", src, "--out", model, "--engine", "local")[0] == 0
    code, out, err = run("evaluate", model, test, "--engine", "local")
    assert code == 0, err
    test_store = next(p for p in cache.iterdir() if p.name.startswith("test.svm-"))
    m = dpipe.open_store(test_store).manifest
    assert m.n_rows == 300 and m.n_features == 5  # feature 4 never occurs on a negative row: like= the training store keeps 5
    assert float(out.split("roc_auc")[1].split()[0]) == pytest.approx(dpipe.evaluate(model, test_store)["roc_auc"])
    code, out, err = run("predict", model, test, "--out", str(tmp_path / "p.parquet"), "--engine", "local")
    assert code == 0 and "reusing" in err and pq.read_metadata(tmp_path / "p.parquet").num_rows == 300


def test_a_missing_file_and_ingest_options_with_a_store_are_one_line(tmp_path, cache):
    code, _, err = run("-q", "train", str(tmp_path / "nothing.svm"), "--out", str(tmp_path / "m.json"))
    assert code == 1 and "nothing.svm: no such store or source file (a store is made by dpipe ingest" in one_error_line(err, "train")
    src = svmlight(tmp_path / "train.svm", 200, 1)
    store = tmp_path / "s.zarr"
    dpipe.ingest(src, store)
    code, _, err = run("-q", "train", str(store), "--out", str(tmp_path / "m.json"), "--n-features", "7")
    assert code == 1 and "--n-features applies to a source file; " in one_error_line(err, "train")
    assert not cache.exists()
