"""Tests of dpipe.io.make_data: synthetic stores."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import kurtosis
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import dpipe.io._synthetic as synthetic
from dpipe.exceptions import ParameterError, StoreError
from dpipe.io import make_data, open_store


def read(path):
    return open_store(path).read_all()


def assert_same_rows(a, b):
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    if a.group is None:
        assert b.group is None
    else:
        np.testing.assert_array_equal(a.group, b.group)


def test_shape_and_manifest(tmp_path):
    m = make_data(tmp_path / "s", rows=10_000, features=12, n_groups=3, shard_rows=3000, seed=4, model_seed=5)
    assert (m.n_rows, m.n_features, m.n_shards) == (10_000, 12, 4)
    assert m.feature_names == [f"x{j}" for j in range(12)]
    assert m.groups == ["g0", "g1", "g2"]
    assert m.source["format"] == "synthetic"
    opts = m.source["options"]
    assert opts["rows"] == 10_000 and opts["features"] == 12 and opts["seed"] == 4 and opts["model_seed"] == 5
    assert opts["n_groups"] == 3 and opts["shard_rows"] == 3000 and opts["format"] == "zarr"
    assert {"positive_rate", "label_noise", "chunk_rows"} <= set(opts)
    assert m.encoding == {"kind": "synthetic"}
    store = open_store(tmp_path / "s")
    assert store.manifest.to_dict() == m.to_dict()
    data = store.read_all()
    assert data.X.shape == (10_000, 12) and data.X.dtype == np.float32
    assert set(np.unique(data.y)) == {-1, 1}
    assert np.all(np.isfinite(data.X))
    counts = np.bincount(data.group, minlength=3)
    assert counts.sum() == 10_000 and np.all(counts > 0)
    assert counts.max() > 1.3 * counts.min()  # unequal group sizes
    assert m.group_counts is not None and np.sum(m.group_counts, axis=0).tolist() == counts.tolist()


@pytest.mark.parametrize("rate, noise", [(0.2, 0.02), (0.5, 0.0), (0.05, 0.01)])
def test_positive_rate(tmp_path, rate, noise):
    m = make_data(tmp_path / "s", rows=40_000, features=10, positive_rate=rate, label_noise=noise)
    observed = m.n_positive / m.n_rows
    assert abs(observed - rate) < 4 * math.sqrt(rate * (1 - rate) / m.n_rows) + 0.005


def test_deterministic_and_independent_of_chunking(tmp_path):
    kw = dict(rows=12_000, features=9, seed=3)
    make_data(tmp_path / "a", **kw)
    make_data(tmp_path / "b", **kw)
    make_data(tmp_path / "c", chunk_rows=1000, shard_rows=2_777, **kw)
    make_data(tmp_path / "d", chunk_rows=100_000, **kw)
    a = read(tmp_path / "a")
    for other in "bcd":
        assert_same_rows(a, read(tmp_path / other))
    # a smaller store is a prefix of a larger one
    make_data(tmp_path / "e", rows=9_001, features=9, seed=3)
    e = read(tmp_path / "e")
    np.testing.assert_array_equal(e.X, a.X[:9_001])
    np.testing.assert_array_equal(e.y, a.y[:9_001])


def test_seeds_differ(tmp_path):
    make_data(tmp_path / "a", rows=5_000, features=8, seed=0)
    make_data(tmp_path / "b", rows=5_000, features=8, seed=1)
    make_data(tmp_path / "c", rows=5_000, features=8, seed=0, model_seed=1)
    a, b, c = read(tmp_path / "a"), read(tmp_path / "b"), read(tmp_path / "c")
    assert not np.array_equal(a.X, b.X) and not np.array_equal(a.y, b.y)
    assert not np.array_equal(a.X, c.X)


def test_shared_model_is_learnable(tmp_path):
    make_data(tmp_path / "train", rows=30_000, features=20, seed=1, model_seed=7)
    make_data(tmp_path / "test", rows=30_000, features=20, seed=2, model_seed=7)
    train, test = read(tmp_path / "train"), read(tmp_path / "test")
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    clf.fit(train.X, train.y)
    assert roc_auc_score(test.y, clf.decision_function(test.X)) > 0.7
    # a model of another model_seed does not transfer
    make_data(tmp_path / "other", rows=30_000, features=20, seed=2, model_seed=8)
    other = read(tmp_path / "other")
    assert abs(roc_auc_score(other.y, clf.decision_function(other.X)) - 0.5) < 0.2


def test_features_are_not_all_gaussian(tmp_path):
    make_data(tmp_path / "s", rows=20_000, features=40, seed=0)
    d = read(tmp_path / "s")
    binary = [j for j in range(40) if set(np.unique(d.X[:, j])) == {0.0, 1.0}]
    assert len(binary) >= 5
    rates = d.X[:, binary].mean(axis=0)
    assert rates.max() - rates.min() > 0.1  # varied rates
    kurt = kurtosis(d.X.astype(np.float64), axis=0)
    assert np.sum(kurt > 5) >= 3  # Student-t(3) and log-normal columns
    assert np.any(d.X.min(axis=0) > 0) and np.any(kurt > 20)  # log-normal: positive, heavy right tail
    corr = np.corrcoef(d.X.T)
    np.fill_diagonal(corr, 0.0)
    assert np.abs(corr).max() > 0.3  # some correlated columns


def test_group_relates_to_features_and_label(tmp_path):
    make_data(tmp_path / "s", rows=30_000, features=10, n_groups=3, seed=0)
    d = read(tmp_path / "s")
    pos_rate = np.array([(d.y[d.group == g] == 1).mean() for g in range(3)])
    assert pos_rate.max() - pos_rate.min() > 0.03
    means = np.array([d.X[d.group == g].mean(axis=0) for g in range(3)])
    stds = d.X.std(axis=0)
    assert np.max((means.max(axis=0) - means.min(axis=0)) / stds) > 0.3


def test_parquet_matches_zarr(tmp_path):
    mz = make_data(tmp_path / "z", rows=6_000, features=7, shard_rows=2_500, format="zarr")
    mp = make_data(tmp_path / "p", rows=6_000, features=7, shard_rows=2_500, format="parquet")
    assert mp.format == "parquet" and mp.shard_bounds == mz.shard_bounds
    assert mp.class_counts == mz.class_counts
    assert_same_rows(read(tmp_path / "z"), read(tmp_path / "p"))


def test_no_groups_and_tiny_feature_counts(tmp_path):
    m = make_data(tmp_path / "a", rows=100, features=1, n_groups=0)
    assert m.groups is None and m.group_counts is None
    d = read(tmp_path / "a")
    assert d.group is None and d.X.shape == (100, 1)
    for f in (2, 3, 5):
        m = make_data(tmp_path / f"f{f}", rows=50, features=f, n_groups=1, format="parquet")
        assert read(tmp_path / f"f{f}").X.shape == (50, f)
        assert m.groups == ["g0"]


def test_generates_chunk_by_chunk(tmp_path, monkeypatch):
    calls = []
    real = synthetic._rows

    def spy(model, seed, first_block, n_blocks):
        calls.append(n_blocks)
        return real(model, seed, first_block, n_blocks)

    monkeypatch.setattr(synthetic, "_rows", spy)
    make_data(tmp_path / "s", rows=5 * 8192 + 3, features=4, chunk_rows=2 * 8192)
    assert calls == [2, 2, 2]


def test_overwrite(tmp_path):
    make_data(tmp_path / "s", rows=100, features=3)
    with pytest.raises(StoreError, match="exists"):
        make_data(tmp_path / "s", rows=100, features=3)
    m = make_data(tmp_path / "s", rows=200, features=3, overwrite=True)
    assert m.n_rows == 200 and open_store(tmp_path / "s").manifest.n_rows == 200
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # no temporary left behind


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(rows=0), "rows"),
        (dict(rows=1.5), "rows"),
        (dict(features=0), "features"),
        (dict(positive_rate=0.0), "positive_rate"),
        (dict(positive_rate=1.2), "positive_rate"),
        (dict(positive_rate=0.01, label_noise=0.02), "positive_rate"),
        (dict(positive_rate=0.99, label_noise=0.02), "positive_rate"),
        (dict(label_noise=0.5), "label_noise"),
        (dict(label_noise=-0.1), "label_noise"),
        (dict(seed=-1), "seed"),
        (dict(model_seed="x"), "model_seed"),
        (dict(n_groups=-1), "n_groups"),
        (dict(n_groups=40_000), "n_groups"),
        (dict(shard_rows=0), "shard_rows"),
        (dict(format="csv"), "format"),
        (dict(chunk_rows=0), "chunk_rows"),
        (dict(overwrite="yes"), "overwrite"),
    ],
)
def test_invalid_parameters(tmp_path, kw, name):
    args = dict(rows=100, features=3)
    args.update(kw)
    with pytest.raises(ParameterError, match=f"'{name}' parameter of make_data"):
        make_data(tmp_path / "s", **args)
    assert not (tmp_path / "s").exists()


def test_default_shard_size_spreads_small_stores_over_min_shards(tmp_path):
    import dask

    import dpipe
    from dpipe.io import split_store
    from dpipe.io._writer import shard_rows_for

    assert shard_rows_for(100, 10) == 100  # below 4 x 8192 rows: one shard
    assert shard_rows_for(50_000, 300) == 12_500  # 4 shards, not one of 60 MB
    assert shard_rows_for(10**7, 120) == 131_579  # big stores: 76 equal shards of about dpipe.shard-bytes (not 75 and one of 25 rows)
    m = dpipe.make_data(tmp_path / "a.zarr", rows=40_000, features=5)
    assert m.n_shards == 4 and {b - a for a, b in m.shard_bounds} == {10_000}
    with dask.config.set({"dpipe.min-shards": 1}):
        assert dpipe.make_data(tmp_path / "b.zarr", rows=40_000, features=5).n_shards == 1
    train, test = split_store(tmp_path / "a.zarr", tmp_path / "tr.zarr", tmp_path / "te.zarr", train_fraction=0.8, seed=0)
    assert train.n_shards == 4 and test.n_shards == 1 and train.n_rows + test.n_rows == 40_000


def test_split_does_not_depend_on_the_shard_layout(tmp_path):
    from dpipe.io import open_store, split_store
    from dpipe.io._split import SPLIT_BLOCK
    from dpipe.testing import classification_data, write_store

    n = SPLIT_BLOCK + 5000  # rows in two random-number blocks
    X, y = classification_data(n, 4, seed=3)
    X[:, 0] = np.arange(n)  # row ids
    parts = {}
    for name, shards in (("one", [n]), ("many", [7000, 0, SPLIT_BLOCK - 7000 + 13, 3000, n - SPLIT_BLOCK - 3013])):
        write_store(tmp_path / f"{name}.zarr", X, y, shards)
        for method in ("bernoulli", "permutation"):
            split_store(tmp_path / f"{name}.zarr", tmp_path / f"{name}-tr.zarr", tmp_path / f"{name}-te.zarr", train_fraction=0.7, seed=5, method=method,
                        overwrite=True)
            parts[name, method] = [open_store(tmp_path / f"{name}-{p}.zarr").read_all().X[:, 0] for p in ("tr", "te")]
    for method in ("bernoulli", "permutation"):
        for a, b in zip(parts["one", method], parts["many", method]):
            np.testing.assert_array_equal(a, b)
        train_ids, test_ids = parts["one", method]
        assert abs(test_ids.size / n - 0.3) < 0.01 and np.intersect1d(test_ids, train_ids).size == 0
        assert test_ids.size + train_ids.size == n and np.all(np.diff(train_ids) > 0)  # the source's order within a part
    assert parts["one", "permutation"][0].size == int(0.7 * n)
