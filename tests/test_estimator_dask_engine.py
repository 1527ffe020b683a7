"""DPipeClassifier's ``engine`` on dask collections: ``"auto"``'s break-even rule, ``"dask"`` and ``"local"`` forced, and the
errors of an engine that does not apply; on a real LocalCluster of 2 worker processes (the ``client`` fixture)."""

from __future__ import annotations

import logging

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from dpipe import DPipeClassifier
from dpipe.engine import _collection
from dpipe.engine._collection import CLUSTER_PASS_SECONDS, THREAD_PASS_BYTES_PER_SECOND, break_even_bytes, cluster_threads
from dpipe.exceptions import ParameterError
from dpipe.testing import classification_data

LOGGER = "dpipe.engine._collection"


def test_the_cluster_pays_only_with_more_threads_than_this_process_and_not_from_this_machine():
    c, r = CLUSTER_PASS_SECONDS, THREAD_PASS_BYTES_PER_SECOND
    assert break_even_bytes(2, 2, 0, 2)[0] == float("inf")  # its workers share this machine's cores
    assert break_even_bytes(2, 8, 0, 2)[0] == float("inf")  # more worker threads here than cores: no faster
    assert break_even_bytes(2, 0, 2, 2)[0] == float("inf")  # as many threads elsewhere as this process has
    assert break_even_bytes(2, 0, 4, 2)[0] == pytest.approx(c * r / (1 / 2 - 1 / 4))  # c + B / 4r = B / 2r
    assert break_even_bytes(2, 8, 0, 8)[0] == pytest.approx(c * r / (1 / 2 - 1 / 8))  # a bigger machine than this process's threads
    assert break_even_bytes(4, 0, 64, 4)[0] < break_even_bytes(4, 0, 8, 4)[0]  # the larger the cluster, the sooner it pays
    assert break_even_bytes(2, 0, 4, 2)[1].startswith(f"the cluster's break-even of {c * r / 0.25 / 1e6:.0f} MB: a pass costs it ")


def test_a_local_clusters_threads_are_on_this_machine(client):
    assert cluster_threads(client) == (2, 0)


def test_auto_fits_below_the_memory_bound_only(client, caplog, monkeypatch):
    # the driver's memory bound applies with the break-even: the same collection goes to the cluster when it is lower
    X, y = classification_data(n=2000, d=5, seed=4)
    dX, dy = da.from_array(X, chunks=(1000, 5)), da.from_array(y, chunks=1000)
    monkeypatch.setattr(_collection, "local_limit", lambda: (10_000, "a bound set by the test"))
    with client.as_current(), caplog.at_level(logging.INFO, logger=LOGGER):
        DPipeClassifier("auc-moment").fit(dX, dy)
    assert ("dask array: 2000 rows x 5 features (0.0 MB as float32): fitted where its partitions live (above the driver's memory "
            "bound of 0 MB: a bound set by the test)") in caplog.text
    assert "built on 2 workers" in caplog.text


def test_engine_local_computes_the_collection_into_memory(client, caplog):
    X, y = classification_data(n=3000, d=5, seed=6)
    frame = pd.DataFrame(X, columns=list("abcde"))
    with client.as_current(), caplog.at_level(logging.INFO, logger=LOGGER):
        local = DPipeClassifier("auc", engine="local").fit(dd.from_pandas(frame, npartitions=3), dd.from_array(y, chunksize=1000))
    assert [r for r in caplog.records if r.name == LOGGER] == []  # neither route of the collection: computed, then fitted as the DataFrame is
    np.testing.assert_array_equal(local.coef_, DPipeClassifier("auc").fit(frame, y).coef_)
    assert list(local.feature_names_in_) == list("abcde")


def test_engine_is_a_parameter_kept_by_clone():
    est = DPipeClassifier("auc-moment", engine="dask")
    assert est.get_params()["engine"] == "dask" and clone(est).engine == "dask"
    assert DPipeClassifier().engine == "auto"


def test_an_engine_that_does_not_apply_is_an_error(client):
    X, y = classification_data(n=200, d=4, seed=1)
    with pytest.raises(ParameterError, match=r"^The 'engine' parameter of DPipeClassifier must be one of 'auto', 'dask', 'local'\. Got 'spark'"):
        DPipeClassifier(engine="spark").fit(X, y)
    with pytest.raises(ParameterError, match=r"'dask' fits a dask array or DataFrame where its partitions live; this X is a ndarray"):
        DPipeClassifier(engine="dask").fit(X, y)
    dX, dy = da.from_array(X, chunks=(100, 4)), da.from_array(y, chunks=100)
    with pytest.raises(ParameterError, match=r"'dask' needs a distributed client"):
        DPipeClassifier(engine="dask").fit(dX, dy)  # no client current here
    with client.as_current(), pytest.raises(ParameterError, match=r"'dask' does not take the 'groups' argument"):
        DPipeClassifier("error-rate", engine="dask").fit(dX, dy, groups=np.arange(200) % 2)
