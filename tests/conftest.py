"""Shared fixtures: a real multi-process LocalCluster, store builders, the bundled data."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from dpipe.io import ShardWriter

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("DPIPE_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def client():
    """A ``distributed.Client`` on a LocalCluster of 2 worker processes (1 thread each)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", host="127.0.0.1", memory_limit="2GiB")
    c = Client(cluster, set_as_default=False)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="session")
def one_worker_client():
    """A ``distributed.Client`` on a LocalCluster of 1 worker process."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0", host="127.0.0.1", memory_limit="2GiB")
    c = Client(cluster, set_as_default=False)
    yield c
    c.close()
    cluster.close()


def write_store(
    path: str | os.PathLike,
    X: np.ndarray,
    y: np.ndarray,
    shard_sizes: Sequence[int] | None = None,
    *,
    format: str = "zarr",
    group: np.ndarray | None = None,
    weight: np.ndarray | None = None,
    groups: list[str] | None = None,
) -> str:
    """Write ``X, y`` as a store with the given shard sizes (zeros make empty shards)."""
    n, d = X.shape
    sizes = list(shard_sizes) if shard_sizes is not None else [n]
    assert sum(sizes) == n
    with ShardWriter(str(path), d, [f"x{i}" for i in range(d)], max(1, max(sizes)), format=format, with_group=group is not None, with_weight=weight is not None) as w:
        start = 0
        for size in sizes:
            sl = slice(start, start + size)
            w.write_shard(X[sl], y[sl], None if group is None else group[sl], None if weight is None else weight[sl])
            start += size
        w.commit(groups=groups if group is not None else None)
    return str(path)


def classification_data(n: int = 3000, d: int = 8, seed: int = 0, positive_shift: float = 0.8, scales: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Non-Gaussian two-class data: binary, heavy-tailed and Gaussian columns of very different scales."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.3, 1, -1).astype(np.int8)
    X = rng.standard_normal((n, d))
    X[:, 0] = rng.random(n) < np.where(y > 0, 0.6, 0.3)
    X[:, 1] = rng.standard_t(3, n)
    X[:, 2:] += positive_shift * (y[:, None] > 0) * rng.standard_normal(d - 2)
    if scales:
        X *= np.logspace(-2, 4, d)
        X[:, 3] += 1e5  # a large mean: naive sums of squares would lose the variance
    return X.astype(np.float32), y


@pytest.fixture
def shared_data() -> Path:
    """The bundled datasets folder; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"bundled data not found at {SHARED_DATA}")
    return SHARED_DATA
