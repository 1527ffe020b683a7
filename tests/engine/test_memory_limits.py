"""Issue 18 item 2: memory limits that work — measured footprint, a refused limit names the minimum, the minimum works.

Real embedded clusters (worker processes on 127.0.0.1).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import dpipe
from dpipe.engine import ShardedDataset, cluster_client
from dpipe.engine._memory import (
    RANGE_ROW_BYTES,
    ROW_BYTES,
    SAFETY,
    WORKING_COPIES,
    MemoryNeed,
    WorkerMemory,
    check_memory_limits,
    memory_need,
    short_workers,
    uniform_shards,
)
from dpipe.exceptions import ParameterError
from dpipe.testing import classification_data, write_store

MB = 1_000_000


def test_memory_need_counts_the_largest_shards_a_worker_gets():
    # 5 shards over 2 workers: an even share is 3, a worker may get one more; the largest four are counted
    need = memory_need([10 * MB, 40 * MB, 20 * MB, 30 * MB, 5 * MB], [100, 400, 200, 300, 50], 2, persisted=True)
    assert need.resident == (40 + 30 + 20 + 10) * MB + ROW_BYTES * (400 + 300 + 200 + 100)
    ranged = memory_need([10 * MB, 40 * MB, 20 * MB, 30 * MB, 5 * MB], [100, 400, 200, 300, 50], 2, persisted=True, row_bytes=RANGE_ROW_BYTES)
    assert ranged.resident - need.resident == (RANGE_ROW_BYTES - ROW_BYTES) * (400 + 300 + 200 + 100)  # the workers' route's rows
    assert need.working == WORKING_COPIES * 40 * MB
    streamed = memory_need([10 * MB, 40 * MB], [100, 400], 2, persisted=False)
    assert streamed.resident == ROW_BYTES * 500  # nothing persisted, only the per-row state (both shards may land on one worker)


def test_memory_need_counts_wide_vectors_and_a_csr_shards_read():
    from dpipe.engine._memory import CSR_WORKING_COPIES, D_VECTORS, FLIGHT_ROW_BYTES, SHARD_D_VECTORS

    flight = FLIGHT_ROW_BYTES * 400  # the one shard's rows in flight (streamed)
    dense = memory_need([40 * MB], [400], 2, persisted=False)
    wide_csr = memory_need([40 * MB], [400], 2, persisted=False, n_features=2**20, csr=True)
    assert wide_csr.resident == dense.resident
    assert wide_csr.working == int(CSR_WORKING_COPIES * 40 * MB) + flight + (D_VECTORS + SHARD_D_VECTORS) * 8 * 2**20  # a tree on the worker
    fetched = memory_need([40 * MB], [400], 2, persisted=False, n_features=2**20, csr=True, driver_fanin=16)
    assert fetched.working == int(CSR_WORKING_COPIES * 40 * MB) + flight + D_VECTORS * 8 * 2**20  # each result leaves as its task ends
    persisted = memory_need([40 * MB], [400], 2, persisted=True, n_features=2**20, csr=True, driver_fanin=16)
    assert persisted.working == wide_csr.working - flight  # a shard host answers for all its shards at once; nothing in flight
    # the measured case (10^6 x 2^20 text rows, 6 shards of 58 MB, 2 workers streamed, auc): workers peaked at 347-353 MB
    # with a footprint of 197 MB, and 500 MB and 410 MB ran clean; the model's peak covers that, and its limit (with
    # SAFETY) is at most 500 MB (the budget) and not far above the peak
    need = memory_need([58 * MB] * 6, [166_667] * 6, 2, persisted=False, n_features=2**20, csr=True, driver_fanin=16)
    worker = WorkerMemory(footprint=197 * MB, limit=0, pause=0.8, terminate=0.95)
    assert worker.footprint + need.resident + need.working >= 353 * MB
    assert 353 * MB < need.minimum_limit(worker) <= 420 * MB


def test_a_refused_streaming_limit_names_the_shard_rows_that_need_the_least():
    """The refusal's remedy is a number: the streamed shard size that needs the least, which the model then accepts;
    at 2^20 features that is not always a smaller shard (past ``dpipe.driver-fanin`` shards, each one's d-vectors count)."""
    MB_ = 1e6
    rows, per_row = [166_667] * 6, 58 * MB_ / 166_667
    need = memory_need([int(r * per_row) for r in rows], rows, 2, persisted=False, n_features=2**20, csr=True, driver_fanin=16)
    tight = WorkerMemory(footprint=204 * MB_, limit=380 * MB_, pause=0.8, terminate=0.95)
    assert need.minimum_limit(tight) > tight.limit
    fit = need.workable_shard_rows(tight)
    assert fit is not None and 10_000 < fit < 166_667
    assert need.layout is not None
    assert uniform_shards(need.layout, fit).minimum_limit(tight) <= tight.limit - 10 * MB_
    for other in (fit // 4, 4 * fit):  # much smaller shards (more than 16) cost d-vectors each, larger ones more bytes
        assert uniform_shards(need.layout, other).minimum_limit(tight) > tight.limit
    # one d-vector per shard past the fan-in: the same rows in 13 shards need less than in 40, where 8 MB a shard adds up
    assert uniform_shards(need.layout, 25_000).minimum_limit(tight) > uniform_shards(need.layout, 80_000).minimum_limit(tight)
    with pytest.raises(ParameterError, match=rf"or write shards of {fit:,} rows \(ingest's 'shard_rows'\), which need the least"):
        check_memory_limits({"w": tight}, need, "s.zarr", "stream")
    too_tight = WorkerMemory(footprint=204 * MB_, limit=340 * MB_, pause=0.8, terminate=0.95)  # no shard size fits
    assert need.workable_shard_rows(too_tight) is None
    with pytest.raises(ParameterError, match=r"at least 420 MB, or use more workers$"):
        check_memory_limits({"w": too_tight}, need, "s.zarr", "stream")
    persisted = memory_need([int(r * per_row) for r in rows], rows, 2, persisted=True, n_features=2**20, csr=True)
    assert persisted.workable_shard_rows(tight) is None  # persisted shards: their bytes count whatever their size


def test_minimum_limit_is_the_tighter_of_pause_and_restart():
    need = MemoryNeed(resident=100 * MB, working=300 * MB)
    worker = WorkerMemory(footprint=200 * MB, limit=0, pause=0.8, terminate=0.95)
    # steady 300 MB / 0.8 = 375 MB; peak 600 MB / 0.95 = 632 MB: the restart line decides
    assert need.minimum_limit(worker) == int(np.ceil(600 / 0.95 * SAFETY / 10) * 10) * MB
    no_pause = WorkerMemory(footprint=200 * MB, limit=0, pause=1.0, terminate=1.0)
    assert need.minimum_limit(no_pause) == int(np.ceil(600 * SAFETY / 10) * 10) * MB
    holds_a_lot = MemoryNeed(resident=600 * MB, working=10 * MB)  # 800 MB between passes: the pause line decides
    assert holds_a_lot.minimum_limit(worker) == int(np.ceil(800 / 0.8 * SAFETY / 10) * 10) * MB
    limited = {"a": WorkerMemory(200 * MB, 700 * MB, 0.8, 0.95), "b": WorkerMemory(200 * MB, 600 * MB, 0.8, 0.95), "c": WorkerMemory(200 * MB, 0, 0.8, 0.95)}
    assert set(short_workers(limited, need)) == {"b"}  # "c" has no limit


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    X, y = classification_data(40000, 20, seed=41)
    return write_store(tmp_path_factory.mktemp("memory") / "s.zarr", X, y, [10000] * 4)


def _train_cli(store: str, out, limit: str) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "dpipe", "train", store, "--memory-limit", limit, "--workers", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    assert not out.exists()
    return errors


def test_a_limit_below_what_the_store_needs_is_refused_naming_the_minimum(tmp_path):
    X, y = classification_data(60000, 200, seed=42)  # one 48 MB shard: about 145 MB more while a pass reads it
    store = write_store(tmp_path / "wide.zarr", X, y, [60000])
    (error,) = _train_cli(store, tmp_path / "m.json", "300MB")
    assert "a worker memory limit of 300 MB is below the" in error and "footprint" in error and "--memory-limit" in error, error
    minimum = int(error.split("to at least ")[1].split(" MB")[0])
    assert 300 < minimum < 1000


def test_a_limit_below_a_workers_own_footprint_is_one_line(store, tmp_path):
    (error,) = _train_cli(store, tmp_path / "m.json", "120MB")  # the workers die loading the kernels, before they can be measured
    assert "a worker memory limit of 120 MB is below a worker's own footprint" in error, error


@pytest.mark.filterwarnings("ignore::dpipe.exceptions.ConvergenceWarning")  # a fixed budget of iterations; parity is what counts
def test_the_smallest_accepted_limit_streams_a_fit_to_the_end(store):
    with cluster_client(workers=2, memory_limit="2GB") as client, ShardedDataset(store, client, cache="stream") as ds:
        minimum = ds.minimum_memory_limit
        footprint = max(w.footprint for w in ds.worker_memory.values())
    assert footprint < minimum < 2 * footprint  # a small store needs little beyond the footprint
    local = dpipe.train(store, "auc-smooth", engine="local", max_iter=15, train_metrics=False)
    with cluster_client(workers=2, memory_limit=minimum) as client:
        pids = client.run(os.getpid)
        got = dpipe.train(store, "auc-smooth", client=client, cache="stream", max_iter=15, train_metrics=False)
        assert client.run(os.getpid) == pids  # no worker was restarted
    np.testing.assert_allclose(got.coef, local.coef, rtol=1e-10, atol=1e-12)
    with cluster_client(workers=2, memory_limit=minimum - 20 * MB) as client:
        with pytest.raises(ParameterError, match="a worker memory limit of [0-9]+ MB is below"):  # the store's need, or the footprint itself
            ShardedDataset(store, client, cache="stream")


def _pause_fraction(dask_worker) -> object:
    return dask_worker.memory_manager.memory_pause_fraction


def test_a_worker_its_nanny_restarts_does_not_pause_either():
    """The embedded cluster's workers never pause (dpipe.engine._memory.EMBEDDED_WORKER_MEMORY): measured before, a worker
    restarted by its nanny came back with dask's default pause at 80 % and sat paused with its shard (4 minutes, streaming
    5x10^7 rows on one worker)."""
    with cluster_client(workers=1, memory_limit="1GB") as client:
        assert list(client.run(_pause_fraction).values()) == [False]
        client.restart_workers(list(client.scheduler_info()["workers"]))
        assert list(client.run(_pause_fraction).values()) == [False]
