"""Cluster resolution and the cache decision."""

from __future__ import annotations

import numpy as np
import pytest

from dpipe.engine import LocalDataset, ShardedDataset, choose_cache, cluster_client
from dpipe.exceptions import ParameterError, StoreError
from dpipe.reduce import class_moments_of_shard, merge_moments
from dpipe.testing import classification_data, write_store


def test_choose_cache():
    assert choose_cache("auto", 100, 1000, 0.5) == "memory"
    assert choose_cache("auto", 600, 1000, 0.5) == "stream"
    assert choose_cache("auto", 10**12, 0, 0.5) == "memory"  # no memory limit configured
    assert choose_cache("stream", 1, 1000, 0.5) == "stream"


def test_auto_cache_streams_a_store_larger_than_the_headroom(tmp_path, client):
    import dask

    X, y = classification_data(2000, 5)
    path = write_store(tmp_path / "s.zarr", X, y, [1000, 1000])
    with dask.config.set({"dpipe.cache-headroom": 1e-9}):
        with ShardedDataset(path, client) as ds:
            assert ds.cache == "stream"
            streamed = ds.map_reduce(class_moments_of_shard, merge_moments)
    with ShardedDataset(path, client) as ds:
        assert ds.cache == "memory"
        persisted = ds.map_reduce(class_moments_of_shard, merge_moments)
    np.testing.assert_array_equal(streamed.m2, persisted.m2)


def test_invalid_cache_and_scheduler_values(tmp_path, client):
    X, y = classification_data(100, 5)
    path = write_store(tmp_path / "s.zarr", X, y)
    with pytest.raises(ParameterError, match="'cache' parameter"):
        ShardedDataset(path, client, cache="disk")
    with pytest.raises(ParameterError, match="'scheduler' parameter"):
        with cluster_client(scheduler="not-an-address"):
            pass


def test_a_damaged_shard_is_named(tmp_path, client):
    import shutil

    X, y = classification_data(200, 5)
    path = write_store(tmp_path / "p", X, y, [100, 100], format="parquet")
    (tmp_path / "p" / "part-00001.parquet").write_bytes(b"not parquet")
    with pytest.raises(StoreError, match=r"shard 1 \(rows 100..200\)"):
        with ShardedDataset(path, client, cache="memory"):
            pass
    with pytest.raises(StoreError, match=r"shard 1"):
        with LocalDataset(path) as ds:
            ds.map_reduce(class_moments_of_shard, merge_moments)
    shutil.rmtree(tmp_path / "p")
