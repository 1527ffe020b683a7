"""CSR stores (manifest layout csr, schema 3): written, read, verified and refused like dense ones, in Zarr and Parquet."""

from __future__ import annotations

import json
import os
import re

import dask
import numpy as np
import pytest
import scipy.sparse as sp
import zarr

import dpipe
from dpipe.exceptions import ParameterError, StoreError
from dpipe.io import ingest, open_store, split_store
from dpipe.reduce._block import is_csr
from dpipe.testing import write_store


def _rows(n=900, d=60, seed=0):
    rng = np.random.default_rng(seed)
    D = np.where(rng.random((n, d)) < 0.08, rng.normal(size=(n, d)), 0).astype(np.float32)
    y = np.where(D[:, :5].sum(axis=1) + 0.3 * rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    return D, y, rng.integers(0, 3, n).astype(np.int16), rng.integers(0, 4, n).astype(np.float32)


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_csr_store_round_trip_with_groups_and_weights(tmp_path, fmt):
    D, y, g, v = _rows()
    path = write_store(tmp_path / "s", sp.csr_array(D), y, [300, 0, 400, 200], format=fmt, group=g, weight=v, groups=["a", "b", "c"], layout="csr")
    st = open_store(path, verify=True)
    m = st.manifest
    assert (m.layout, m.schema_version, m.n_shards) == ("csr", 3, 4)
    assert m.shard_nnz == [int((D[a:b] != 0).sum()) for a, b in m.shard_bounds] and m.nnz == int((D != 0).sum())
    assert st.nbytes < 0.5 * D.nbytes  # the memory model counts stored values, not 4 d bytes a row
    for i, (a, b) in enumerate(m.shard_bounds):
        sh = st.read_shard(i)
        assert is_csr(sh.X) and sh.X.shape == (b - a, 60)
        np.testing.assert_array_equal(sh.X.toarray(), D[a:b])
        np.testing.assert_array_equal(sh.y, y[a:b])
        np.testing.assert_array_equal(sh.group, g[a:b])
        np.testing.assert_array_equal(sh.weight, v[a:b])
    np.testing.assert_array_equal(st.read_all().X.toarray(), D)


@pytest.mark.parametrize("codec", ["zstd", "none"])
def test_zarr_csr_shards_straddling_chunks_read_exactly_as_zarr_reads_them(tmp_path, monkeypatch, codec):
    """A shard's values and indices are decoded chunk by chunk from their files (bounded memory): the same values as
    zarr's own read, for shards that start and end inside chunks, span several, or fill one exactly."""
    from dpipe.io import _zarr_store

    monkeypatch.setattr(_zarr_store, "CSR_CHUNK_VALUES", 64)
    D, y, _, _ = _rows(n=700)
    with dask.config.set({"dpipe.store-codec": codec}):
        path = write_store(tmp_path / "s", sp.csr_array(D), y, [5, 0, 60, 300, 335], layout="csr")
    root = zarr.open_group(path, mode="r")
    assert root["X/data"].chunks == (64,) and root["X/data"].shape[0] > 10 * 64
    st = open_store(path, verify=True)
    for i, (a, b) in enumerate(st.manifest.shard_bounds):
        X = st.read_shard(i).X
        lo, hi = int(root["X/indptr"][a]), int(root["X/indptr"][b])
        np.testing.assert_array_equal(X.data, root["X/data"][lo:hi])
        np.testing.assert_array_equal(X.indices, root["X/indices"][lo:hi])
        np.testing.assert_array_equal(X.toarray(), D[a:b])


def test_zarr_csr_store_is_anndata_csr_encoded(tmp_path):
    D, y, _, _ = _rows()
    path = write_store(tmp_path / "s.zarr", D, y, [450, 450], layout="csr")
    x = zarr.open_group(path, mode="r")["X"]
    assert x.attrs["encoding-type"] == "csr_matrix" and list(x.attrs["shape"]) == [900, 60]
    ref = sp.csr_array(D)
    np.testing.assert_array_equal(x["indptr"][:], ref.indptr)
    np.testing.assert_array_equal(x["indices"][:], ref.indices)
    np.testing.assert_array_equal(x["data"][:], ref.data)


def test_out_of_range_feature_index_is_refused_naming_the_shard(tmp_path):
    D, y, _, _ = _rows()
    path = write_store(tmp_path / "s.zarr", D, y, [450, 450], layout="csr")
    x = zarr.open_group(path, mode="r+")["X"]
    start = int(x["indptr"][450])
    idx = x["indices"][:]
    idx[start + 2] = 60  # one beyond d: the kernels would read past w
    x["indices"][:] = idx
    st = open_store(path, verify=False)
    st.read_shard(0)
    with pytest.raises(StoreError, match=r"shard 1 .*feature index 60 at row \d+ of the shard is outside \[0, 60\)"):
        st.read_shard(1)


def test_changed_value_fails_verification(tmp_path):
    D, y, _, _ = _rows()
    path = write_store(tmp_path / "s.zarr", D, y, [450, 450], layout="csr")
    x = zarr.open_group(path, mode="r+")["X"]
    data = x["data"][:]
    data[-1] += 1.0
    x["data"][:] = data
    st = open_store(path, verify=True)
    st.read_shard(0)
    with pytest.raises(StoreError, match="shard 1 .*content hash of X differs"):
        st.read_shard(1)


def test_manifest_layout_must_match_the_arrays(tmp_path):
    D, y, _, _ = _rows()
    path = write_store(tmp_path / "s.parquet", D, y, [900], format="parquet")  # dense
    man = os.path.join(path, "manifest.json")
    with open(man) as f:
        d = json.load(f)
    d["layout"], d["shard_nnz"] = "csr", [10]
    with open(man, "w") as f:
        json.dump(d, f)
    with pytest.raises(StoreError, match="X is dense, the manifest says layout csr"):
        open_store(path, verify=False).read_shard(0)
    d["schema_version"] = 2
    with open(man, "w") as f:
        json.dump(d, f)
    with pytest.raises(StoreError, match="manifest field layout: a schema_version 2 store is dense"):
        open_store(path)
    d["schema_version"], d["layout"] = 3, "coo"  # a layout no block declares: one line naming the field, not a KeyError
    with open(man, "w") as f:
        json.dump(d, f)
    with pytest.raises(StoreError, match=r"manifest field layout: must be one of \('dense', 'csr'\), got 'coo'"):
        open_store(path)


def test_svmlight_ingest_layout_auto_sparse_and_dense_hold_the_same_rows(tmp_path):
    D, y, _, _ = _rows(n=500, d=200)
    src = tmp_path / "t.svm"
    with open(src, "w") as f:
        for row, label in zip(D, y):
            nz = np.flatnonzero(row)
            f.write(f"{label} " + " ".join(f"{j + 1}:{float(row[j])!r}" for j in nz) + "\n")
    auto = ingest(str(src), str(tmp_path / "auto.zarr"), n_features=200)
    dense = ingest(str(src), str(tmp_path / "dense.zarr"), n_features=200, layout="dense")
    sparse_pq = ingest(str(src), str(tmp_path / "sp.parquet"), n_features=200, layout="sparse", format="parquet")
    assert (auto.layout, dense.layout, sparse_pq.layout) == ("csr", "dense", "csr")
    ref = open_store(tmp_path / "dense.zarr").read_all()
    for name in ("auto.zarr", "sp.parquet"):
        got = open_store(tmp_path / name).read_all()
        np.testing.assert_array_equal(got.X.toarray(), ref.X)
        np.testing.assert_array_equal(got.y, ref.y)
    with pytest.raises(ParameterError, match=rf"{re.escape(str(src))}: a sparse store; scale='minmax' would shift feature 'f\d+' by -\d.*"
                                             r"\(its minimum is not 0\).*Use scale='maxabs'.*\(ingest\)"):
        ingest(str(src), str(tmp_path / "x.zarr"), layout="sparse", scale="minmax")  # D has negative values
    assert not os.path.exists(tmp_path / "x.zarr") and os.listdir(tmp_path).count("x.zarr") == 0
    with pytest.raises(ParameterError, match="'layout' parameter of ingest must be one of"):
        ingest(str(src), str(tmp_path / "x.zarr"), layout="csc")


def test_split_keeps_the_layout_and_sparse_transforms_equal_the_dense_ones(tmp_path):
    D, y, _, _ = _rows()
    D = np.abs(D)  # log1p needs values >= 0
    sparse = write_store(tmp_path / "s.zarr", D, y, [450, 450], layout="csr")
    dense = write_store(tmp_path / "d.zarr", D, y, [450, 450])
    for scale in ("maxabs", "minmax"):  # minmax keeps the zeros: every column has zeros, so every minimum is 0
        out = {}
        for name, path in (("csr", sparse), ("dense", dense)):
            tr, te = split_store(path, tmp_path / f"tr-{name}-{scale}.zarr", tmp_path / f"te-{name}-{scale}.zarr", train_fraction=0.7, seed=1,
                                 log1p="all", scale=scale)
            assert tr.layout == te.layout == name and tr.n_rows + te.n_rows == 900
            out[name] = [open_store(tmp_path / f"{part}-{name}-{scale}.zarr").read_all() for part in ("tr", "te")]
            assert tr.encoding["transform"]["scale"] == scale
        for a, b in zip(out["csr"], out["dense"]):
            np.testing.assert_array_equal(a.X.toarray(), b.X)  # the same arithmetic on the stored values: bit-identical
            np.testing.assert_array_equal(a.y, b.y)
        assert float(np.abs(out["csr"][0].X.toarray()).max()) == 1.0
        assert float(out["csr"][0].X.toarray().min()) == 0.0
    with pytest.raises(ParameterError, match="a sparse store; scale='standard' would shift its zeros .*Use scale='maxabs'"):
        split_store(sparse, tmp_path / "tr2.zarr", tmp_path / "te2.zarr", scale="standard")
    signed = write_store(tmp_path / "signed.zarr", D - np.float32(1) * (D != 0), y, [450, 450], layout="csr")  # some values below 0
    with pytest.raises(ParameterError, match=r"signed.zarr \(training part\): a sparse store; scale='minmax' would shift feature 'x\d+' by -0\.\d+ "
                                             r"\(its minimum is not 0\).*Use scale='maxabs'.*\(split_store\)"):
        split_store(signed, tmp_path / "tr2.zarr", tmp_path / "te2.zarr", scale="minmax")
    assert not os.path.exists(tmp_path / "tr2.zarr") and not os.path.exists(tmp_path / "te2.zarr")


def test_a_model_scores_raw_sparse_rows_through_its_transform(tmp_path):
    D, y, _, _ = _rows()
    D = np.abs(D) * 7
    src = tmp_path / "t.svm"
    with open(src, "w") as f:
        for row, label in zip(D, y):
            f.write(f"{label} " + " ".join(f"{j + 1}:{float(row[j])!r}" for j in np.flatnonzero(row)) + "\n")
    m = ingest(str(src), str(tmp_path / "t.zarr"), n_features=60, log1p="all", scale="maxabs", layout="sparse")
    assert m.layout == "csr" and m.encoding["transform"]["scale"] == "maxabs"
    stored = open_store(tmp_path / "t.zarr").read_all()
    model = dpipe.train(str(tmp_path / "t.zarr"), engine="local", train_metrics=False)
    raw = sp.csr_array(D.astype(np.float32))
    np.testing.assert_array_equal(model.decision_function(raw, raw=True), model.decision_function(stored.X))
    test = ingest(str(src), str(tmp_path / "t2.zarr"), like=str(tmp_path / "t.zarr"))  # like= re-applies it, sparse
    assert test.layout == "csr"
    np.testing.assert_array_equal(open_store(tmp_path / "t2.zarr").read_all().X.toarray(), stored.X.toarray())
    with pytest.raises(ParameterError, match="'layout' parameter of ingest is 'sparse', but scale='standard' would shift every zero"):
        ingest(str(src), str(tmp_path / "x.zarr"), layout="sparse", scale="standard")


def test_predict_and_evaluate_agree_across_layouts(tmp_path):
    D, y, _, _ = _rows()
    dense = write_store(tmp_path / "d.zarr", D, y, [450, 450])
    sparse = write_store(tmp_path / "s.zarr", D, y, [450, 450], layout="csr")
    model = dpipe.train(dense, "auc", engine="local")
    a, b = dpipe.evaluate(model, dense, engine="local"), dpipe.evaluate(model, sparse, engine="local")
    for key in ("roc_auc", "prbep", "accuracy"):
        assert a[key] == pytest.approx(b[key], abs=1e-12), key


@pytest.mark.parametrize("regular", [True, False])
def test_wide_store_keeps_its_feature_names_out_of_the_manifest(tmp_path, regular):
    from dpipe.io import ShardWriter

    d = 12_000
    names = [f"f{j + 1}" for j in range(d)] if regular else [f"tok_{(7 * j) % d}" for j in range(d)]
    X = sp.csr_array((np.ones(20, np.float32), (np.arange(20), np.arange(20) * 600)), shape=(20, d))
    path = str(tmp_path / "wide.zarr")
    with ShardWriter(path, d, names, 20, layout="csr") as w:
        w.append(X, np.where(np.arange(20) % 2 == 0, 1, -1))
        written = w.commit()
    with open(os.path.join(path, "manifest.json")) as f:
        raw = json.load(f)
    assert raw["feature_names"] == ({"prefix": "f", "start": 1, "count": d} if regular else
                                    {"file": "feature_names.json", "sha256": raw["feature_names"]["sha256"], "count": d})
    assert os.path.getsize(os.path.join(path, "manifest.json")) < 4000
    st = open_store(path, verify=True)
    assert st.manifest.feature_names == names and st.manifest.digest() == written.digest()
    if not regular:
        with open(os.path.join(path, "feature_names.json"), "w") as f:
            json.dump(names[::-1], f)
        with pytest.raises(StoreError, match="feature_names.json differs from the hash recorded in the manifest"):
            open_store(path)
        os.unlink(os.path.join(path, "feature_names.json"))
        with pytest.raises(StoreError, match="feature_names.json .*is missing"):
            open_store(path)


def test_wide_model_is_written_compactly_and_reads_back_exactly(tmp_path):
    d = 50_000
    rng = np.random.default_rng(0)
    rows = 300
    X = sp.csr_array((rng.random(rows * 5).astype(np.float32), (np.repeat(np.arange(rows), 5), rng.integers(0, d, rows * 5))), shape=(rows, d))
    X.sum_duplicates()
    y = np.where(rng.random(rows) < 0.3, 1, -1).astype(np.int8)
    model = dpipe.train(write_store(tmp_path / "w.zarr", X, y, layout="csr"), engine="local", lam=1e-2, train_metrics=False)
    path = model.save(tmp_path / "m.json")
    with open(path) as f:
        raw = json.load(f)
    assert raw["coef"]["dtype"] == "<f8" and raw["feature_names"] == {"prefix": "x", "start": 0, "count": d}
    assert os.path.getsize(path) < 12 * 8 * d  # two base64 vectors (coef and the solver's x), not 2 x 50,000 decimals
    back = dpipe.LinearModel.load(path)
    np.testing.assert_array_equal(back.coef, model.coef)
    assert back.feature_names == model.feature_names
    np.testing.assert_array_equal(back.decision_function(X), model.decision_function(X))


def test_a_wide_store_and_its_model_keep_their_name_pattern_unbuilt(tmp_path):
    """A store whose 12,000 names follow ``f1 .. fd`` opens, trains, saves, loads, evaluates and scores named records
    with the names as a :class:`dpipe._wide.NamePattern`: no list of d strings is built on the way."""
    from dpipe._wide import NamePattern

    d, rows = 12_000, 200
    rng = np.random.default_rng(1)
    cols = rng.integers(0, d, (rows, 4))
    X = sp.csr_array((rng.random(rows * 4).astype(np.float32), (np.repeat(np.arange(rows), 4), cols.ravel())), shape=(rows, d))
    X.sum_duplicates()
    y = np.where(X[:, : d // 2].sum(axis=1) > X[:, d // 2 :].sum(axis=1), 1, -1).astype(np.int8)
    path, src = str(tmp_path / "wide.zarr"), tmp_path / "wide.svm"
    src.write_text("".join(f"{y[i]:+d} " + " ".join(f"{j + 1}:{float(v)!r}" for j, v in zip(X[[i]].indices, X[[i]].data)) + "\n" for i in range(rows)))
    ingest(str(src), path, n_features=d)  # svmlight's names f1 .. fd, its encoding for raw records
    st = open_store(path)
    names = st.manifest.feature_names
    assert isinstance(names, NamePattern) and names == [f"f{j + 1}" for j in range(d)] and names.index("f12000") == d - 1
    model = dpipe.train(path, engine="local", lam=1e-2, train_metrics=False)
    assert isinstance(model.feature_names, NamePattern)
    back = dpipe.LinearModel.load(model.save(tmp_path / "m.json"))
    assert isinstance(back.feature_names, NamePattern) and back.feature_names == model.feature_names
    assert dpipe.evaluate(back, path, engine="local")["roc_auc"] == dpipe.evaluate(model, path, engine="local")["roc_auc"]
    r = 7
    record = {f"f{int(j) + 1}": float(v) for j, v in zip(X[[r]].indices, X[[r]].data)}
    assert back.score_records([record])[0] == pytest.approx(back.decision_function(X[[r]])[0], rel=1e-12)
    with pytest.raises(ValueError, match="names feature 'f0', which the model does not have"):
        back.score_records([{"f0": 1.0}])


def test_transform_statistics_of_a_weighted_csr_block_equal_the_dense_ones():
    from dpipe.io._fit_transform import FeatureStats

    D, _, _, v = _rows()
    D = np.abs(D) * 300  # heavy tails: octaves beyond 0
    D[:, 7] = 0.0  # a column with no stored value
    dense, sparse = FeatureStats(D.shape[1], histograms=True), FeatureStats(D.shape[1], histograms=True)
    dense.add(D, v)  # weights in {0..3}: rows of weight 0 left out, also of the minimum and maximum
    sparse.add(sp.csr_array(D), v)
    for name in ("min", "max", "log_min", "log_max"):
        np.testing.assert_array_equal(getattr(sparse, name), getattr(dense, name), err_msg=name)
    np.testing.assert_array_equal(sparse.hist, dense.hist)
    assert (sparse.n, sparse.rows) == (dense.n, dense.rows)
    assert np.isnan(sparse.mean).all()  # standard is refused on sparse stores: no moments to misuse


def test_tabular_layout_auto_counts_one_hot_columns_and_numeric_zeros(tmp_path, caplog):
    """A CSV with one-hot columns and mostly-zero numbers is stored sparse by ``auto`` (its density counted in the first
    pass), a dense one dense; both hold the rows the dense layout holds."""
    import logging

    rng = np.random.default_rng(3)
    n = 400
    cats = [rng.choice([f"c{i}" for i in range(12)], n), rng.choice([f"k{i}" for i in range(15)], n)]
    nums = np.where(rng.random((n, 3)) < 0.1, np.round(rng.normal(size=(n, 3)), 3), 0.0)
    labels = rng.choice(["yes", "no"], n)
    sparse_csv, dense_csv = tmp_path / "sparse.csv", tmp_path / "dense.csv"
    sparse_csv.write_text("a,b,x,y,z,label\n" + "".join(f"{cats[0][i]},{cats[1][i]},{float(nums[i, 0])!r},{float(nums[i, 1])!r},{float(nums[i, 2])!r},{labels[i]}\n"
                                                        for i in range(n)))
    dense_csv.write_text("x,y,z,label\n" + "".join(f"{float(v[0] + 1)!r},{float(v[1] - 1)!r},{float(v[2] + 2)!r},{labels[i]}\n" for i, v in enumerate(nums)))
    with caplog.at_level(logging.DEBUG - 5, logger="dpipe.ingest"):
        auto = ingest(str(sparse_csv), str(tmp_path / "auto.zarr"), label="label", positive="yes", header=True)
    expected = (2 * n + int(np.count_nonzero(nums))) / (n * auto.n_features)  # one value a one-hot column and row, the non-zero numbers
    assert auto.layout == "csr" and auto.n_features == 12 + 15 + 3 and expected <= 0.125
    assert f"layout auto: sparse ({100 * expected:.2f} % of the entries are non-zero; sparse up to 12.5 %)" in caplog.text
    ref = ingest(str(sparse_csv), str(tmp_path / "ref.zarr"), label="label", positive="yes", header=True, layout="dense")
    np.testing.assert_array_equal(open_store(tmp_path / "auto.zarr").read_all().X.toarray(), open_store(tmp_path / "ref.zarr").read_all().X)
    assert ref.feature_names == auto.feature_names
    assert ingest(str(dense_csv), str(tmp_path / "d.zarr"), label="label", positive="yes", header=True).layout == "dense"
    # minmax makes auto dense (its minima are known only after the fitting pass); sparse with minmax keeps non-negative columns
    assert ingest(str(sparse_csv), str(tmp_path / "mm.zarr"), label="label", positive="yes", header=True, scale="minmax").layout == "dense"
