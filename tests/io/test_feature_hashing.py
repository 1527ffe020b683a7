"""Feature hashing at ingest (``hash_features``): scikit-learn's FeatureHasher's rows, models that score raw records alike."""

from __future__ import annotations

import csv
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher

import dpipe
from dpipe.exceptions import DataWarning, ParameterError
from dpipe.io._hashing import FeatureHashing, check_hash_features


def _rows(store):
    st = dpipe.open_store(store)
    return sp.vstack([st.read_shard(i).X for i in range(st.n_shards)]).tocsr(), np.concatenate([st.read_shard(i).y for i in range(st.n_shards)])


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A CSV with an identifier column of 600 values, a small categorical, two numeric columns (zeros among them)."""
    rng = np.random.default_rng(11)
    path = tmp_path_factory.mktemp("hash") / "clicks.csv"
    records = []
    for _ in range(1500):
        user, city = f"user{rng.integers(0, 600)}", str(rng.choice(["paris", "oslo", "köln", "?"]))
        amount, visits = round(float(rng.normal()), 4), float(rng.integers(0, 3))
        y = int(amount + (int(user[4:]) % 3 == 0) + (city == "oslo") + 0.3 * rng.normal() > 0.6)
        records.append({"amount": amount, "user": user, "city": city, "visits": visits, "label": y})
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(records[0]))
        w.writeheader()
        w.writerows(records)
    return path, records


@pytest.mark.parametrize("n", [8, 2**16])  # 8 slots: most tokens collide and their values add up within a row
def test_hashed_rows_are_feature_hashers(tmp_path, source, n):
    path, records = source
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        m = dpipe.ingest(path, tmp_path / "h.zarr", hash_features=n)
    assert m.layout == "csr" and m.n_features == n and m.feature_names[:2] == ["hash0", "hash1"]
    X, y = _rows(tmp_path / "h.zarr")
    feats = [{k: v for k, v in r.items() if k != "label"} for r in records]
    ref = FeatureHasher(n_features=n, input_type="dict", alternate_sign=True, dtype=np.float64).transform(feats).toarray()
    # FeatureHasher sums a row's colliding tokens; the store sums them in float64 and keeps float32
    np.testing.assert_allclose(X.toarray(), ref.astype(np.float32), rtol=2e-7, atol=1e-7)
    assert not np.any(X.data == 0)  # zero values (visits = 0, cancelled collisions) are not stored
    np.testing.assert_array_equal(y, [1 if r["label"] else -1 for r in records])


def test_the_manifest_counts_the_slots_and_warns_with_a_remedy(tmp_path, source):
    path, records = source
    with pytest.warns(DataWarning, match=r"% of the 256 hash slots are in use.*hash_features=\d+ would keep it under 5 %"):
        m = dpipe.ingest(path, tmp_path / "h.zarr", hash_features="2^8")
    h = m.encoding["hashing"]
    X, _ = _rows(tmp_path / "h.zarr")
    assert h["slots_used"] == np.unique(X.indices).size
    distinct = len({f"user={r['user']}" for r in records} | {f"city={r['city']}" for r in records}) + 2  # amount, visits
    assert h["tokens_estimate"] == pytest.approx(distinct, rel=0.15)  # linear counting
    assert h["collision_rate"] == pytest.approx(h["slots_used"] / 256)
    wide = FeatureHashing(256, h["slots_used"]).slots_for(0.05)
    assert 1 - np.exp(-distinct / wide) < 0.06 and wide & (wide - 1) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)  # roomy: no warning
        dpipe.ingest(path, tmp_path / "roomy.zarr", hash_features=2**18)


def test_models_score_raw_records_as_the_ingested_rows_across_save_and_like(tmp_path, source):
    path, records = source
    dpipe.ingest(path, tmp_path / "train.zarr", hash_features=2**14, scale="maxabs")
    test = dpipe.ingest(path, tmp_path / "test.zarr", like=tmp_path / "train.zarr")
    assert test.encoding["hashing"]["n_features"] == 2**14 and test.layout == "csr"
    model = dpipe.train(tmp_path / "train.zarr", engine="local", train_metrics=False)
    assert model.encoding["hashing"]["n_features"] == 2**14
    model.save(tmp_path / "m.json")
    loaded = dpipe.LinearModel.load(tmp_path / "m.json")
    X, _ = _rows(tmp_path / "test.zarr")
    stored = model.decision_function(X)
    as_text = [{k: str(v) for k, v in r.items()} for r in records]  # as a CSV reader gives them, label included
    for m in (model, loaded):
        np.testing.assert_array_equal(m.score_records(records), stored)
        np.testing.assert_array_equal(m.score_records(as_text), stored)
    assert dpipe.evaluate(model, tmp_path / "test.zarr", engine="local")["roc_auc"] > 0.9


def test_a_parquet_source_hashes_like_its_csv(tmp_path, source):
    path, records = source
    table = pa.table({k: [r[k] for r in records] for k in records[0]})
    pq.write_table(table, tmp_path / "clicks.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        dpipe.ingest(path, tmp_path / "csv.zarr", hash_features=64)
        dpipe.ingest(tmp_path / "clicks.parquet", tmp_path / "pq.zarr", hash_features=64, format="parquet")
    a, ya = _rows(tmp_path / "csv.zarr")
    b, yb = _rows(tmp_path / "pq.zarr")
    np.testing.assert_array_equal(a.toarray(), b.toarray())
    np.testing.assert_array_equal(ya, yb)


def test_one_hot_sparse_rows_equal_the_dense_store_without_a_dense_buffer(tmp_path, source):
    path, _ = source
    dpipe.ingest(path, tmp_path / "dense.zarr", layout="dense")
    m = dpipe.ingest(path, tmp_path / "sparse.zarr", layout="sparse")
    st = dpipe.open_store(tmp_path / "dense.zarr")
    dense = np.concatenate([st.read_shard(i).X for i in range(st.n_shards)])
    X, _ = _rows(tmp_path / "sparse.zarr")
    np.testing.assert_array_equal(X.toarray(), dense)
    assert m.nnz == np.count_nonzero(dense) and m.feature_names == st.manifest.feature_names


def test_svmlight_models_score_sparse_dicts_of_feature_names(tmp_path):
    rng = np.random.default_rng(3)
    lines = []
    for _ in range(300):
        cols = np.sort(rng.choice(np.arange(1, 51), size=5, replace=False))
        vals = rng.normal(size=5).round(3)
        lines.append(f"{1 if vals[0] + (cols[0] < 10) > 0.5 else -1} " + " ".join(f"{c}:{v}" for c, v in zip(cols, vals)))
    (tmp_path / "t.svm").write_text("\n".join(lines) + "\n")
    dpipe.ingest(tmp_path / "t.svm", tmp_path / "t.zarr", layout="sparse")
    model = dpipe.train(tmp_path / "t.zarr", engine="local", train_metrics=False)
    X, _ = _rows(tmp_path / "t.zarr")
    records = [{model.feature_names[j]: float(v) for j, v in zip(X.indices[X.indptr[i]:X.indptr[i + 1]], X.data[X.indptr[i]:X.indptr[i + 1]])}
               for i in range(X.shape[0])]
    np.testing.assert_array_equal(model.score_records(records), model.decision_function(X))
    with pytest.raises(ValueError, match="record 0 names feature 'f999', which the model does not have"):
        model.score_records([{"f999": 1.0}])


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(hash_features="2^29"), r"whole number of slots in \[2, 2\^28\]"),
    (dict(hash_features="many"), "such as 1048576 or '2\\^20'"),
    (dict(hash_features=2**10, layout="dense"), "writes a sparse store"),
    (dict(hash_features=2**10, log1p="all"), "hashed features have no names of their own"),
])
def test_bad_hashing_options_are_one_line_errors(tmp_path, source, kwargs, match):
    with pytest.raises(ParameterError, match=match):
        dpipe.ingest(source[0], tmp_path / "x.zarr", **kwargs)
    assert not (tmp_path / "x.zarr").exists()


def test_svmlight_sources_and_like_stores_refuse_hash_features(tmp_path, source):
    (tmp_path / "t.svm").write_text("1 1:1\n-1 2:1\n")
    with pytest.raises(ParameterError, match="applies to CSV and Parquet sources"):
        dpipe.ingest(tmp_path / "t.svm", tmp_path / "x.zarr", hash_features=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        dpipe.ingest(source[0], tmp_path / "h.zarr", hash_features=16)
    with pytest.raises(ParameterError, match="reuses its store's hashing"):
        dpipe.ingest(source[0], tmp_path / "y.zarr", like=tmp_path / "h.zarr", hash_features=16)


def test_check_hash_features_spellings():
    assert check_hash_features("2^20", "f") == check_hash_features("2**20", "f") == check_hash_features(" 1048576 ", "f") == 2**20
    assert check_hash_features(None, "f") is None
    with pytest.raises(ParameterError):
        check_hash_features(True, "f")


def test_the_cli_hashes_with_a_power_of_two(tmp_path, source, capsys):
    from dpipe.cli.main import main

    assert main(["ingest", str(source[0]), str(tmp_path / "c.zarr"), "--hash-features", "2^16", "-q"]) in (0, None)
    m = dpipe.open_store(tmp_path / "c.zarr").manifest
    assert m.n_features == 2**16 and m.layout == "csr" and m.encoding["hashing"]["slots_used"] > 500
    assert "65536 features, sparse" in capsys.readouterr().out


def test_parquet_token_lists_and_maps_are_hashed_as_feature_hasher_pairs(tmp_path):
    rng = np.random.default_rng(4)
    words = [f"w{i}" for i in range(300)]
    rows = []
    for i in range(900):
        tokens = list(rng.choice(words, size=int(rng.integers(0, 6))))  # repeats count; some rows have none
        counts = {str(k): float(v) for k, v in zip(rng.choice(words[:50], 2, replace=False), rng.integers(1, 4, 2))}
        rows.append({"amount": float(rng.normal()), "tags": tokens if i % 17 else None, "counts": counts,
                     "label": int(("w3" in tokens) + rng.normal() > 0.5)})
    table = pa.table({"amount": [r["amount"] for r in rows], "tags": pa.array([r["tags"] for r in rows], pa.list_(pa.string())),
                      "counts": pa.array([list(r["counts"].items()) for r in rows], pa.map_(pa.string(), pa.float64())),
                      "label": [r["label"] for r in rows]})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=250)
    with pytest.raises(ParameterError, match="'tags' column .* holds lists of tokens, which only feature hashing encodes"):
        dpipe.ingest(tmp_path / "t.parquet", tmp_path / "no.zarr")
    dpipe.ingest(tmp_path / "t.parquet", tmp_path / "h.zarr", hash_features=2**12, read_rows=200)
    X, _ = _rows(tmp_path / "h.zarr")
    pairs = [[("amount", r["amount"])] + [("tags", t) for t in (r["tags"] or [])] + [(f"counts={k}", v) for k, v in r["counts"].items()]
             for r in rows]
    ref = FeatureHasher(n_features=2**12, input_type="pair", alternate_sign=True, dtype=np.float64).transform(pairs).toarray()
    np.testing.assert_allclose(X.toarray(), ref.astype(np.float32), rtol=2e-7, atol=1e-7)
    model = dpipe.train(tmp_path / "h.zarr", engine="local", train_metrics=False)
    assert model.encoding["columns"][1]["type"] == "tokens" and model.encoding["columns"][2]["type"] == "map"
    np.testing.assert_array_equal(model.score_records(rows), model.decision_function(X))
