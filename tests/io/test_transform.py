"""Ingest-time feature transforms (log1p, minmax / standard scale): fitted values, the auto rule, --like, split, round trips."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

import dpipe
from dpipe.exceptions import InputError, ParameterError
from dpipe.io import open_store, split_store
from dpipe.io._fit_transform import AUTO_LOG1P_OCTAVES
from dpipe.io._split import train_rows


def _write_csv(path, rows, header=("bytes", "count", "proto", "temp", "flag", "label")):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def _rows(n, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        b = int(rng.lognormal(4, 3) * scale)  # heavy-tailed, non-negative
        c = int(rng.integers(0, 40))  # a count, not heavy-tailed
        p = str(rng.choice(["tcp", "udp", "icmp"]))
        t = round(float(rng.normal(0, 2) * scale), 3)  # takes negative values
        fl = int(rng.integers(0, 2))
        y = int(rng.random() < 1 / (1 + math.exp(-(math.log1p(b) - 6 + 0.05 * c))))
        out.append([b, c, p, t, fl, y])
    return out


@pytest.fixture
def sources(tmp_path):
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    _write_csv(train, _rows(3000, 0))
    _write_csv(test, _rows(800, 1, scale=1.5))  # wider range: some test values fall outside [0, 1]
    return train, test


def _raw_features(path):
    """The CSV's numeric columns as float64 (bytes, count, temp, flag), as a reference."""
    with open(path) as f:
        r = list(csv.DictReader(f))
    return np.array([[float(x["bytes"]), float(x["count"]), float(x["temp"]), float(x["flag"])] for x in r]), r


def _octave(v):
    return math.floor(math.log2(1.0 + v))


def test_auto_rule_matches_a_brute_force_median(sources, tmp_path):
    train, _ = sources
    m = dpipe.ingest(str(train), str(tmp_path / "a.zarr"), log1p="auto")
    raw, _ = _raw_features(train)
    report = m.encoding["transform"]["auto"]["features"]
    assert set(report) == {"bytes", "count", "temp", "flag"}  # numeric features only: the one-hot proto=* are not candidates
    for j, name in enumerate(("bytes", "count", "temp", "flag")):
        x = np.sort(raw[:, j].astype(np.float32).astype(np.float64))
        median = x[math.ceil(x.size / 2) - 1]  # the lower median
        expect = bool(x[0] >= 0 and _octave(x[-1]) - _octave(median) >= AUTO_LOG1P_OCTAVES)
        assert report[name]["log1p"] is expect, name
        if x[0] >= 0:
            assert report[name]["median_octave"] == _octave(median) and report[name]["max_octave"] == _octave(x[-1])
    assert [report[k]["log1p"] for k in ("bytes", "count", "temp", "flag")] == [True, False, False, False]
    assert report["temp"]["why"] == "negative values"
    assert m.encoding["transform"]["log1p"] == ["bytes"] and m.encoding["transform"]["scale"] == "none"
    X = open_store(tmp_path / "a.zarr").read_all().X
    j = m.feature_names.index("bytes")
    np.testing.assert_array_equal(X[:, j], np.log1p(raw[:, 0].astype(np.float32).astype(np.float64)).astype(np.float32))


@pytest.mark.parametrize("scale", ["minmax", "standard"])
def test_fitted_values_match_numpy(sources, tmp_path, scale):
    train, _ = sources
    m = dpipe.ingest(str(train), str(tmp_path / "a.zarr"), log1p=["bytes"], scale=scale)
    raw, _ = _raw_features(train)
    t = np.asarray(raw, dtype=np.float32).astype(np.float64)
    t[:, 0] = np.log1p(t[:, 0])
    if scale == "minmax":
        ref = (t - t.min(axis=0)) * (1.0 / (t.max(axis=0) - t.min(axis=0)))
    else:
        ref = (t - t.mean(axis=0)) / t.std(axis=0)
    X = open_store(tmp_path / "a.zarr").read_all().X
    cols = [m.feature_names.index(c) for c in ("bytes", "count", "temp", "flag")]
    if scale == "minmax":
        np.testing.assert_array_equal(X[:, cols], ref.astype(np.float32))
        assert X[:, cols].min() == 0.0 and X[:, cols].max() == 1.0
    else:
        np.testing.assert_allclose(X[:, cols], ref, rtol=1e-5, atol=1e-6)
    onehot = [j for j, n in enumerate(m.feature_names) if n.startswith("proto=")]
    assert set(np.unique(X[:, onehot])) == {0.0, 1.0}  # indicators are neither logged nor scaled
    assert sorted(m.encoding["transform"]["features"]) == sorted(["bytes", "count", "temp", "flag"])


def test_round_trip_store_raw_rows_and_records_give_identical_scores(sources, tmp_path):
    train, test = sources
    dpipe.ingest(str(train), str(tmp_path / "train.zarr"), log1p="auto", scale="minmax")
    mt = dpipe.ingest(str(test), str(tmp_path / "test.zarr"), like=str(tmp_path / "train.zarr"))
    assert mt.encoding["transform"] == open_store(tmp_path / "train.zarr").manifest.encoding["transform"]  # --like reuses the training fit
    model = dpipe.train(str(tmp_path / "train.zarr"), "error-moment", engine="local")
    assert model.transform is not None and model.transform.log1p
    model = dpipe.LinearModel.from_dict(json.loads(json.dumps(model.to_dict())))  # through the JSON document
    st = open_store(tmp_path / "test.zarr").read_all()
    store_scores = model.decision_function(st.X)
    raw, records = _raw_features(test)
    enc_cols = [model.feature_names.index(c) for c in ("bytes", "count", "temp", "flag")]
    X_raw = np.zeros((len(records), model.n_features))
    X_raw[:, enc_cols] = raw
    for k, r in enumerate(records):
        X_raw[k, model.feature_names.index(f"proto={r['proto']}")] = 1.0
    np.testing.assert_array_equal(model.decision_function(X_raw, raw=True), store_scores)
    np.testing.assert_array_equal(model.score_records(records), store_scores)
    np.testing.assert_array_equal(model.score_records(records[37:41]), store_scores[37:41])  # a few rows: the same arithmetic
    np.testing.assert_array_equal(model.predict(X_raw, raw=True), model.predict(st.X))
    scaled = st.X[:, enc_cols]
    assert scaled.max() > 1.0 or scaled.min() < 0.0  # test values beyond the training range stay as they fall
    with pytest.raises(ValueError, match="expected"):
        model.decision_function(X_raw[:, :3], raw=True)


def test_like_refuses_a_second_transform_and_names_a_negative_row(sources, tmp_path):
    train, _ = sources
    dpipe.ingest(str(train), str(tmp_path / "train.zarr"), log1p=["bytes"], scale="minmax")
    with pytest.raises(ParameterError, match="has a transform, which is re-applied"):
        dpipe.ingest(str(train), str(tmp_path / "b.zarr"), like=str(tmp_path / "train.zarr"), scale="standard")
    dpipe.ingest(str(train), str(tmp_path / "raw.zarr"))
    with pytest.raises(ParameterError, match="raw.zarr has none"):  # a transform fitted on a test source would not be the training store's
        dpipe.ingest(str(train), str(tmp_path / "b.zarr"), like=str(tmp_path / "raw.zarr"), log1p=["bytes"])
    rows = _rows(50, 3)
    rows[17][0] = -4  # bytes is logged: a negative value cannot be
    _write_csv(tmp_path / "bad.csv", rows)
    with pytest.raises(InputError, match=r"feature 'bytes' is -4.0 in row 17"):
        dpipe.ingest(str(tmp_path / "bad.csv"), str(tmp_path / "bad.zarr"), like=str(tmp_path / "train.zarr"))
    assert not (tmp_path / "bad.zarr").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".bad.zarr")]


def test_bad_log1p_specifications(sources, tmp_path):
    train, _ = sources
    with pytest.raises(InputError, match="'temp' has negative values"):
        dpipe.ingest(str(train), str(tmp_path / "a.zarr"), log1p="bytes,temp")
    with pytest.raises(ParameterError, match="'proto' is categorical"):
        dpipe.ingest(str(train), str(tmp_path / "a.zarr"), log1p=["proto"])
    with pytest.raises(ParameterError, match="one-hot indicator"):
        dpipe.ingest(str(train), str(tmp_path / "a.zarr"), log1p=["proto=tcp"])
    with pytest.raises(ParameterError, match="'scale' parameter of ingest"):
        dpipe.ingest(str(train), str(tmp_path / "a.zarr"), scale="robust")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".a.zarr", "a.zarr"))]  # nothing half-written


def test_split_permutation_layout_and_a_transform_fitted_on_the_training_part(tmp_path):
    from dpipe.testing import classification_data, write_store

    n = 5001
    X, y = classification_data(n, 4, seed=2, scales=False)
    X[:, 0] = np.arange(n)  # row ids
    X[:, 1] = np.exp(np.abs(X[:, 1]) * 4)  # heavy-tailed
    write_store(tmp_path / "s.zarr", X, y, [1700, 0, 2000, 1301])
    tr, te = split_store(tmp_path / "s.zarr", tmp_path / "tr.zarr", tmp_path / "te.zarr", train_fraction=0.8, seed=0, scale="minmax", log1p=["x1"])
    perm = np.random.RandomState(0).permutation(n)
    k = int(0.8 * n)
    np.testing.assert_array_equal(train_rows(n, 0.8, 0), np.sort(perm[:k]))
    A, B = open_store(tmp_path / "tr.zarr").read_all(), open_store(tmp_path / "te.zarr").read_all()
    assert tr.n_rows == k and te.n_rows == n - k
    lo, hi = np.sort(perm[:k])[[0, -1]]  # the row-id column is min-max scaled by the training part's ids
    ids_tr = np.rint(A.X[:, 0].astype(np.float64) * (hi - lo) + lo).astype(int)
    ids_te = np.rint(B.X[:, 0].astype(np.float64) * (hi - lo) + lo).astype(int)
    np.testing.assert_array_equal(ids_tr, np.sort(perm[:k]))
    np.testing.assert_array_equal(ids_te, np.sort(perm[k:]))
    np.testing.assert_array_equal(A.y, y[np.sort(perm[:k])])
    L = np.log1p(X[:, 1].astype(np.float32).astype(np.float64))
    Ltr = L[np.sort(perm[:k])]
    ref = ((L[np.sort(perm[k:])] - Ltr.min()) * (1.0 / (Ltr.max() - Ltr.min()))).astype(np.float32)
    np.testing.assert_array_equal(B.X[:, 1], ref)  # the test part uses the training part's minimum and maximum
    assert A.X[:, 1].min() == 0.0 and A.X[:, 1].max() == 1.0
    assert tr.encoding["transform"] == te.encoding["transform"] and tr.encoding["transform"]["fitted_on"]["rows"] == k


def test_svmlight_log1p_all_and_standard(tmp_path):
    path = tmp_path / "a.svm"
    rng = np.random.default_rng(4)
    lines = []
    X = np.zeros((400, 3))
    for i in range(400):
        X[i] = [rng.integers(0, 1000), rng.random(), 0.0 if i % 3 else rng.integers(1, 9)]
        lines.append(f"{1 if i % 2 else -1} " + " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(X[i]) if v))
    path.write_text("\n".join(lines) + "\n")
    m = dpipe.ingest(str(path), str(tmp_path / "a.zarr"), log1p="all", scale="standard")
    got = open_store(tmp_path / "a.zarr").read_all().X.astype(np.float64)
    Xr = np.array([[float(np.float32(float(f"{v:g}"))) for v in row] for row in X])
    L = np.log1p(Xr)
    np.testing.assert_allclose(got, (L - L.mean(0)) / L.std(0), rtol=1e-5, atol=1e-6)
    assert m.encoding["transform"]["log1p"] == ["f1", "f2", "f3"]


def test_cli_split_and_info_print_the_transform(tmp_path, capsys):
    from dpipe.cli.main import main
    from dpipe.testing import classification_data, write_store

    X, y = classification_data(3000, 4, seed=1, scales=False)
    X = np.abs(X) ** 6
    write_store(tmp_path / "s.zarr", X, y)
    assert main(["split", str(tmp_path / "s.zarr"), str(tmp_path / "tr.zarr"), str(tmp_path / "te.zarr"),
                 "--fraction", "0.8", "--log1p", "auto", "--scale", "minmax"]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'tr.zarr'}: 2400 rows" in out and f"{tmp_path / 'te.zarr'}: 600 rows" in out
    assert "scale minmax on 4 feature(s)" in out
    assert main(["info", str(tmp_path / "te.zarr")]) == 0
    assert f"fitted on {tmp_path / 'tr.zarr'}" in capsys.readouterr().out



def test_a_store_without_the_models_transform_is_refused(sources, tmp_path):
    """Same feature names, raw values: evaluate, predict, validation and constraint datasets refuse it (one line naming it)."""
    train, test = sources
    dpipe.ingest(str(train), str(tmp_path / "train.zarr"), log1p=["bytes"], scale="minmax")
    dpipe.ingest(str(test), str(tmp_path / "like.zarr"), like=str(tmp_path / "train.zarr"))
    dpipe.ingest(str(test), str(tmp_path / "raw.zarr"))  # no --like: the names match, the values are raw
    assert open_store(tmp_path / "raw.zarr").manifest.feature_names == open_store(tmp_path / "train.zarr").manifest.feature_names
    model = dpipe.train(str(tmp_path / "train.zarr"), "auc-moment", engine="local")
    assert dpipe.evaluate(model, str(tmp_path / "like.zarr"), engine="local")["roc_auc"] > 0.7
    message = r"raw.zarr: its features are stored with no transform, the model's with log1p on 1 feature\(s\), scale minmax"
    with pytest.raises(ValueError, match=message):
        dpipe.evaluate(model, str(tmp_path / "raw.zarr"), engine="local")
    with pytest.raises(ValueError, match=message):
        dpipe.predict(model, str(tmp_path / "raw.zarr"), str(tmp_path / "p.parquet"), engine="local")
    assert not (tmp_path / "p.parquet").exists()
    with pytest.raises(ValueError, match="raw.zarr: its features are stored with no transform, the training store's"):
        dpipe.train(str(tmp_path / "train.zarr"), "auc-smooth", engine="local", validation=str(tmp_path / "raw.zarr"), max_iter=2)
    with pytest.raises(ValueError, match="raw.zarr: its features are stored with no transform, the training store's"):
        dpipe.train(str(tmp_path / "train.zarr"), "error-rate", engine="local", datasets={"pool": str(tmp_path / "raw.zarr")},
                    constraints=["positive_rate(on=pool) <= 0.5"])


def test_non_finite_features_and_colliding_paths_are_refused_before_anything_is_written(tmp_path):
    from dpipe.testing import classification_data, write_store

    X, y = classification_data(3000, 4, seed=5, scales=False)
    X = np.abs(X)
    X[1234, 2] = np.inf  # ingest refuses it; a store written by other code can hold it
    write_store(tmp_path / "s.zarr", X, y, [1000, 2000])
    for kw in ({"scale": "standard"}, {"log1p": "auto"}):
        with pytest.raises(InputError, match=r"shard 1: feature 'x2' is inf in row 1234; a transform is fitted on finite values only"):
            split_store(tmp_path / "s.zarr", tmp_path / "tr.zarr", tmp_path / "te.zarr", train_fraction=0.8, **kw)
    X[1234, 2] = 1.0
    write_store(tmp_path / "ok.zarr", X, y)
    with pytest.raises(ParameterError, match="the training and test stores are one path"):
        split_store(tmp_path / "ok.zarr", tmp_path / "a.zarr", tmp_path / "a.zarr")
    with pytest.raises(ParameterError, match="a destination is the source store itself"):
        split_store(tmp_path / "ok.zarr", tmp_path / "ok.zarr", tmp_path / "b.zarr", overwrite=True, scale="minmax")
    with pytest.raises(ParameterError, match="names 'nope', which is not a feature"):
        split_store(tmp_path / "ok.zarr", tmp_path / "a.zarr", tmp_path / "b.zarr", log1p=["nope"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.zarr", "s.zarr"]
    np.testing.assert_array_equal(open_store(tmp_path / "ok.zarr").read_all().X, X)


def test_bernoulli_split_with_a_transform_fits_on_its_training_rows(tmp_path):
    from dpipe.io._split import _uniforms
    from dpipe.testing import classification_data, write_store

    n = 4000
    X, y = classification_data(n, 4, seed=6, scales=False)
    write_store(tmp_path / "s.zarr", X, y, [1500, 2500])
    tr, te = split_store(tmp_path / "s.zarr", tmp_path / "tr.zarr", tmp_path / "te.zarr", train_fraction=0.6, seed=3, method="bernoulli", scale="standard")
    mask = _uniforms(3, 0, n) < 0.6
    T = X.astype(np.float64)
    ref = (T - T[mask].mean(axis=0)) / T[mask].std(axis=0)
    np.testing.assert_allclose(open_store(tmp_path / "tr.zarr").read_all().X, ref[mask], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(open_store(tmp_path / "te.zarr").read_all().X, ref[~mask], rtol=1e-5, atol=1e-5)
    assert tr.n_rows == int(mask.sum()) and te.encoding["transform"] == tr.encoding["transform"]


@pytest.mark.parametrize("scale", ["minmax", "standard"])
def test_sample_weights_count_as_repeated_rows_in_the_fit(tmp_path, scale):
    """A row of weight k fits the transform as k copies of it (weight 0: absent, also from the minimum and maximum)."""
    from dpipe.io._transform_store import transform_store
    from dpipe.testing import classification_data, write_store

    X, y = classification_data(2000, 4, seed=7, scales=False)
    X = np.abs(X) ** 4  # heavy tails for auto
    X[5] = 1e6  # a row of weight 0: it must not set the maximum
    v = np.random.default_rng(7).integers(0, 4, X.shape[0]).astype(np.float32)
    v[5] = 0
    write_store(tmp_path / "w.zarr", X, y, [700, 1300], weight=v)
    rep = np.repeat(np.arange(X.shape[0]), v.astype(int))
    write_store(tmp_path / "r.zarr", X[rep], y[rep])
    tw = transform_store(tmp_path / "w.zarr", str(tmp_path / "wt.zarr"), log1p="auto", scale=scale).encoding["transform"]
    tr = transform_store(tmp_path / "r.zarr", str(tmp_path / "rt.zarr"), log1p="auto", scale=scale).encoding["transform"]
    assert tw["log1p"] == tr["log1p"] and tw["features"] == tr["features"]
    np.testing.assert_allclose(tw["offset"], tr["offset"], rtol=1e-12)
    np.testing.assert_allclose(tw["factor"], tr["factor"], rtol=1e-10)
    assert {k: f["median_octave"] for k, f in tw["auto"]["features"].items()} == {k: f["median_octave"] for k, f in tr["auto"]["features"].items()}
    assert tw["auto"]["features"]["x0"]["max"] < 1e6
