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
