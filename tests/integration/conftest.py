"""Fixtures of the integration tests: an external ``dask scheduler`` with ``--no-nanny`` workers, and fits whose workers are killed
(the helpers live in :mod:`dpipe.testing._clusters`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from dpipe.testing._clusters import ExternalCluster, train_killing_workers


@pytest.fixture
def external_cluster(tmp_path):
    """An :class:`~dpipe.testing._clusters.ExternalCluster` with no worker yet."""
    cluster = ExternalCluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def train_killing(caplog) -> Callable[..., tuple[Any, bool, int]]:
    """:func:`~dpipe.testing._clusters.train_killing_workers`, recording the warnings of ``logger`` (``"dpipe.engine"``) in ``caplog``."""

    def run(store: str, fit: dict[str, Any], *, logger: str = "dpipe.engine", **kwargs: Any) -> tuple[Any, bool, int]:
        watched = logging.getLogger(logger)
        watched.addHandler(caplog.handler)  # the CLI tests may have stopped dpipe's logs propagating
        try:
            with caplog.at_level(logging.WARNING, logger=logger):
                return train_killing_workers(store, fit, **kwargs)
        finally:
            watched.removeHandler(caplog.handler)

    return run
