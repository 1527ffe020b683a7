"""Cluster resolution and the cache decision."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from dpipe.engine import ClusterSpec, LocalDataset, ShardedDataset, choose_cache, cluster_client
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


def _row_sums(shard, w):
    return shard.X @ w


def _row_sum_total(shard, w, scale):
    return scale * (shard.X @ w).sum(keepdims=True)


def _fail_on_shard(shard, bad):
    if shard.index == bad:
        raise ValueError(f"shard {shard.index} refused")
    return shard.index


def test_shard_hosts_cover_every_shard_in_order(tmp_path, client):
    X, y = classification_data(1000, 4)
    path = write_store(tmp_path / "s.zarr", X, y, [200, 0, 300, 100, 400])
    w = np.arange(1.0, 5.0)
    with ShardedDataset(path, client, cache="memory") as ds, LocalDataset(path) as local:
        positions = sorted(p for ps, _, _ in ds._hosts for p in ps)
        assert positions == list(range(5)) and len(ds._hosts) == 2  # one actor per worker
        for got, want in zip(ds.map_gather(_row_sums, w), local.map_gather(_row_sums, w)):
            np.testing.assert_array_equal(got, want)  # one BLAS thread on either side: the same rounding
        scales = [(float(i),) for i in range(5)]
        # one result per shard back from the hosts, added in shard order: bit for bit the local engine's sum
        np.testing.assert_array_equal(ds.map_reduce_each(_row_sum_total, np.add, scales, w), local.map_reduce_each(_row_sum_total, np.add, scales, w))
        with pytest.raises(ValueError, match="shard 3 refused"):  # the function's own error, not a lost host
            ds.map_gather(_fail_on_shard, 3)
        assert len(ds._hosts) == 2
    with ShardedDataset(path, client, cache="stream") as ds:
        assert ds._hosts == []  # streamed shards: one task per shard per pass


def test_a_lost_shard_host_falls_back_to_tasks_then_comes_back_spread(tmp_path, caplog):
    import logging
    import os
    import signal

    from distributed import Client, LocalCluster

    X, y = classification_data(800, 4)
    path = write_store(tmp_path / "s.zarr", X, y, [200] * 4)
    w = np.arange(1.0, 5.0)
    expected = LocalDataset(path).map_gather(_row_sums, w)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, Client(cluster) as c:
        with ShardedDataset(path, c, cache="memory") as ds:
            assert len(ds._hosts) == 2  # the scheduler spread the 4 shards, 2 / 2 or 1 / 3
            pids = c.run(os.getpid)
            os.kill(pids[sorted(pids)[0]], signal.SIGKILL)
            engine_log = logging.getLogger("dpipe.engine")
            engine_log.addHandler(caplog.handler)  # the CLI tests may have stopped dpipe's logs propagating
            try:
                with caplog.at_level("INFO", logger="dpipe.engine"):
                    lost, on_tasks = [], []
                    for _ in range(3):  # the first call may still find the host's future "finished"
                        lost.append(ds.map_gather(_row_sums, w))
                        on_tasks.append(ds._hosts == [])
                    # the call that found the host lost ran on tasks; a fast nanny may have the hosts back by the next call
                    assert any(on_tasks)
                    c.wait_for_workers(2, timeout=60)
                    back = ds.map_gather(_row_sums, w)
            finally:
                engine_log.removeHandler(caplog.handler)
            assert "a shard host was lost" in caplog.text
            assert "shard hosts started again on 2 worker(s)" in caplog.text
            # the reloads went to the surviving worker; the shards are spread over both again (1 / 3 at worst)
            assert len(ds._hosts) == 2
            for got in [*lost, back]:
                for a, b in zip(got, expected):
                    np.testing.assert_allclose(a, b, rtol=1e-12)


def _live_shards_and_hosts(dask_worker=None) -> tuple[int, int]:
    import gc

    from dpipe.engine._hosts import ShardHost
    from dpipe.io import Shard

    gc.disable()  # count what is still referenced without collecting the cycles a missed release leaves
    try:
        objects = gc.get_objects()
        return sum(isinstance(o, Shard) for o in objects), sum(isinstance(o, ShardHost) for o in objects)
    finally:
        gc.enable()


def _collect(dask_worker=None) -> int:
    import gc

    return gc.collect()


def test_closing_a_dataset_frees_its_shards_on_the_workers(tmp_path, client):
    X, y = classification_data(1200, 4, seed=21)
    path = write_store(tmp_path / "s.zarr", X, y, [300, 300, 300, 300])
    client.run(_collect)  # what earlier tests left in cycles goes first
    before = client.run(_live_shards_and_hosts)
    for _ in range(2):  # a second dataset must not find the first one's shards still held
        with ShardedDataset(path, client, cache="memory") as ds:
            assert ds.map_reduce(class_moments_of_shard, merge_moments).count.sum() == 1200
            assert sum(n for n, _ in client.run(_live_shards_and_hosts).values()) >= 4 + sum(n for n, _ in before.values())
        # the workers drop the released actors and data asynchronously: wait (bounded) for it, never collecting cycles
        deadline = time.monotonic() + 10.0
        after = client.run(_live_shards_and_hosts)
        while after != before and time.monotonic() < deadline:
            time.sleep(0.05)
            after = client.run(_live_shards_and_hosts)
        assert after == before, "the closed dataset's shards or shard hosts are still alive on a worker"


def test_engine_auto_stays_local_for_small_stores_unless_a_cluster_is_named(tmp_path, caplog, monkeypatch):
    import logging

    import dask

    from dpipe.engine import resolve_engine
    from dpipe.exceptions import ParameterError
    from dpipe.io import open_store

    monkeypatch.delenv("DPIPE_SCHEDULER", raising=False)
    X, y = classification_data(500, 4, seed=1)
    st = open_store(write_store(tmp_path / "s.zarr", X, y, [500]))
    with caplog.at_level(logging.INFO, logger="dpipe.engine"):
        assert resolve_engine(ClusterSpec(engine="auto"), st) == "local"
    assert "engine auto: this process" in caplog.text
    with dask.config.set({"dpipe.local-max-bytes": st.nbytes - 1}):
        assert resolve_engine(ClusterSpec(engine="auto"), st) == "dask"
    assert resolve_engine(ClusterSpec(engine="auto", workers=2), st) == "dask"
    assert resolve_engine(ClusterSpec(engine="auto", memory_limit="1GiB"), st) == "dask"
    assert resolve_engine(ClusterSpec(engine="auto", scheduler="tcp://127.0.0.1:1"), st) == "dask"
    with dask.config.set({"dpipe.scheduler": "tcp://127.0.0.1:1"}):
        assert resolve_engine(ClusterSpec(engine="auto"), st) == "dask"
    with pytest.raises(ParameterError, match="^The 'workers' parameter of train chooses a dask cluster; engine='local' runs in this process. Drop it or the engine.$"):
        resolve_engine(ClusterSpec(engine="local", workers=2), st)
    with pytest.raises(ParameterError, match="'engine' parameter of train must be one of 'auto', 'dask', 'local'"):
        resolve_engine(ClusterSpec(engine="gpu"), st)


@pytest.mark.parametrize("cache", ["memory", "stream"])
def test_local_engine_threads_give_the_same_bits_as_one_thread(tmp_path, cache):
    """The local engine runs shards in parallel threads (dpipe.local-threads) and merges in shard order: the fit is
    bit-identical to one thread's, streamed (memory-mapped, uncompressed store) or persisted."""
    import dask

    import dpipe
    from dpipe.testing import classification_data, write_store

    X, y = classification_data(6000, 6, seed=4)
    write_store(tmp_path / "s.zarr", X, y, [1500, 1500, 1000, 2000])
    models = {}
    for threads in (1, 3):
        with dask.config.set({"dpipe.local-threads": threads}):
            for objective in ("auc-smooth", "error-moment"):
                models[threads, objective] = dpipe.train(str(tmp_path / "s.zarr"), objective, engine="local", cache=cache, train_metrics=False,
                                                         **({"max_iter": 15} if objective == "auc-smooth" else {}))
    for objective in ("auc-smooth", "error-moment"):
        np.testing.assert_array_equal(models[1, objective].coef, models[3, objective].coef)
        assert models[1, objective].intercept == models[3, objective].intercept


def test_auto_keeps_a_store_in_this_process_while_it_fits_the_memory_available(tmp_path, monkeypatch, caplog):
    import dask

    from dpipe.engine import _open
    from dpipe.engine._cluster_spec import ClusterSpec
    from dpipe.io import open_store

    monkeypatch.delenv("DPIPE_SCHEDULER", raising=False)
    X, y = classification_data(500, 4, seed=1)
    st = open_store(write_store(tmp_path / "s.zarr", X, y, [500]))
    fits = int(st.nbytes * _open.LOCAL_PEAK_PER_BYTE / _open.LOCAL_MEMORY_SHARE) + 1  # just enough memory available
    with dask.config.set({"dpipe.local-max-bytes": None}):
        monkeypatch.setattr(_open, "available_memory", lambda: fits)
        assert _open.local_limit()[0] >= st.nbytes
        with caplog.at_level(logging.INFO, logger="dpipe.engine"):
            assert _open.resolve_engine(ClusterSpec(engine="auto"), st) == "local"
        assert f"50% of the {fits / 1e9:.1f} GB available over 1.4 bytes a feature byte" in caplog.text
        monkeypatch.setattr(_open, "available_memory", lambda: fits - 200)
        assert _open.local_limit()[0] < st.nbytes
        assert _open.resolve_engine(ClusterSpec(engine="auto"), st) == "dask"
    assert 0 < _open.available_memory()  # this machine's, read from the system
