"""Shared fixtures: real multi-process LocalClusters and the bundled data (helpers live in dpipe.testing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("DPIPE_SHARED_DATA", REPO.parent / "shared" / "data"))


def _local_client(n_workers: int):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0", host="127.0.0.1", memory_limit="2GiB")
    c = Client(cluster, set_as_default=False)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="session")
def client():
    """A ``distributed.Client`` on a LocalCluster of 2 worker processes (1 thread each)."""
    yield from _local_client(2)


@pytest.fixture(scope="session")
def one_worker_client():
    """A ``distributed.Client`` on a LocalCluster of 1 worker process."""
    yield from _local_client(1)


@pytest.fixture
def shared_data() -> Path:
    """The bundled datasets folder; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"bundled data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def retrain_stores(tmp_path_factory) -> Path:
    """A folder of small stores for retraining: ``w1`` (150 rows, for a weak first champion), ``w2`` (2500 rows),
    ``hold`` (2000 labelled rows) and ``pool`` (1350 unlabelled rows), from one linear model with noise."""
    import numpy as np

    from dpipe.testing import write_store

    d = tmp_path_factory.mktemp("retrain-stores")
    rng = np.random.default_rng(5)
    n = 6000
    X = rng.normal(size=(n, 4)).astype(np.float32)
    y = np.where(X @ np.array([1.0, -0.6, 0.4, 0.8]) + 0.8 * rng.normal(size=n) > 0.3, 1, -1).astype(np.int8)
    parts = {"w1": slice(0, 150), "w2": slice(150, 2650), "hold": slice(2650, 4650), "pool": slice(4650, n)}
    for name, rows in parts.items():
        write_store(d / f"{name}.zarr", X[rows], None if name == "pool" else y[rows])
    return d
