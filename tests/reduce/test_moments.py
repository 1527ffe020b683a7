"""Class moments: pairwise merge vs one NumPy pass, on 1, 7 and 64 shards, locally and on a cluster."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpipe.engine import LocalDataset, ShardedDataset
from dpipe.reduce import ClassMoments, class_moments_of_shard, merge_moments, shard_moments
from dpipe.testing import classification_data, moments_reference, write_store


def assert_moments_close(a: ClassMoments, b: ClassMoments, rtol: float = 1e-10) -> None:
    np.testing.assert_array_equal(a.count, b.count)
    np.testing.assert_allclose(a.weight, b.weight, rtol=rtol)
    for c in (0, 1):
        scale_mean = max(1.0, np.abs(b.mean[c]).max())
        assert np.abs(a.mean[c] - b.mean[c]).max() <= rtol * scale_mean
        scale_m2 = max(1e-300, np.abs(b.m2[c]).max())
        assert np.abs(a.m2[c] - b.m2[c]).max() <= rtol * scale_m2


def _shard_sizes(n: int, k: int, rng: np.random.Generator) -> list[int]:
    cuts = np.sort(rng.integers(0, n + 1, size=k - 1))
    sizes = np.diff(np.concatenate([[0], cuts, [n]])).tolist()
    return sizes


def test_shard_moments_equal_reference_with_large_means():
    X, y = classification_data(5000, 8)
    assert_moments_close(shard_moments(X, y, block_rows=333), moments_reference(X, y))


def test_weighted_moments_equal_reference():
    X, y = classification_data(2000, 5, seed=1)
    w = np.random.default_rng(0).random(2000).astype(np.float32) * 3
    w[:10] = 0
    assert_moments_close(shard_moments(X, y, w, block_rows=100), moments_reference(X, y, w))


def test_weighted_moments_with_integer_weights_equal_repeated_rows():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((50, 3)).astype(np.float32)
    y = np.where(rng.random(50) < 0.5, 1, -1).astype(np.int8)
    reps = rng.integers(0, 4, size=50)
    a = shard_moments(X, y, reps.astype(np.float32))
    b = moments_reference(np.repeat(X, reps, axis=0), np.repeat(y, reps))
    np.testing.assert_allclose(a.weight, b.weight)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a.m2, b.m2, rtol=1e-10, atol=1e-10)


def test_empty_and_single_class_shards_merge():
    X, y = classification_data(600, 4)
    order = np.argsort(y, kind="stable")  # all negatives first: single-class shards
    X, y = X[order], y[order]
    parts = [shard_moments(X[:0], y[:0]), shard_moments(X[:300], y[:300]), shard_moments(X[300:300], y[300:300]), shard_moments(X[300:], y[300:])]
    merged = parts[0]
    for p in parts[1:]:
        merged = merge_moments(merged, p)
    assert_moments_close(merged, moments_reference(X, y))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 60), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_merge_is_order_independent(n, k, seed):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, 3)) * 10 + 50).astype(np.float32)
    y = np.where(rng.random(n) < 0.4, 1, -1).astype(np.int8)
    sizes = _shard_sizes(n, k, rng)
    bounds = np.cumsum([0] + sizes)
    parts = [shard_moments(X[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    forward = parts[0]
    for p in parts[1:]:
        forward = merge_moments(forward, p)
    backward = parts[-1]
    for p in parts[-2::-1]:
        backward = merge_moments(p, backward)
    ref = moments_reference(X, y)
    assert_moments_close(forward, ref, rtol=1e-9)
    assert_moments_close(backward, ref, rtol=1e-9)


@pytest.mark.parametrize("n_shards", [1, 7, 64])
@pytest.mark.parametrize("format", ["zarr", "parquet"])
def test_distributed_moments_equal_numpy_pass(tmp_path, client, n_shards, format):
    X, y = classification_data(4000, 6, seed=n_shards)
    rng = np.random.default_rng(n_shards)
    sizes = _shard_sizes(X.shape[0], n_shards, rng)
    if n_shards > 1:
        sizes[0] += sizes[1]  # an empty shard
        sizes[1] = 0
        order = np.argsort(y[: sizes[0]], kind="stable")  # first shard sorted by label ...
        X[: sizes[0]], y[: sizes[0]] = X[: sizes[0]][order], y[: sizes[0]][order]
    path = write_store(tmp_path / "s", X, y, sizes, format=format)
    ref = moments_reference(X, y)
    for cache in ("memory", "stream"):
        with ShardedDataset(path, client, cache=cache) as ds:
            assert ds.n_shards == n_shards
            assert_moments_close(ds.map_reduce(class_moments_of_shard, merge_moments), ref)
    with LocalDataset(path) as ds:
        assert_moments_close(ds.map_reduce(class_moments_of_shard, merge_moments), ref)


def test_single_class_shards_on_cluster(tmp_path, client):
    X, y = classification_data(1000, 5)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    n_neg = int((y < 0).sum())
    path = write_store(tmp_path / "s", X, y, [n_neg, 1000 - n_neg])
    with ShardedDataset(path, client) as ds:
        assert_moments_close(ds.map_reduce(class_moments_of_shard, merge_moments), moments_reference(X, y))
