"""DPipeClassifier on dask collections fits where the partitions live (``engine="dask"``, and ``"auto"`` above the
cluster's break-even): real ``dask scheduler`` / ``dask worker`` processes, this process only the client, and the bytes it
receives read from the kernel (``ss``), not estimated. Below the break-even ``"auto"`` fits here, and gives the same model."""

from __future__ import annotations

import logging
import os
import re
import shutil

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from dpipe import DPipeClassifier
from dpipe._estimator import ESTIMATOR_SHARD_ROWS
from dpipe.engine._threshold import MAX_GATHER
from dpipe.testing import classification_data
from dpipe.testing._clusters import ExternalCluster
from dpipe.testing._sockets import received_since, tcp_bytes_received

D = 20
NAMES = [f"f{i}" for i in range(D)]

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ExternalCluster(tmp_path_factory.mktemp("native"))
    try:
        c.start_worker()
        c.start_worker()
        yield c
    finally:
        c.close()


def _frame(blocks: int, rows: int) -> tuple[dd.DataFrame, dd.Series]:
    """A dask DataFrame whose partitions are made on the workers (nothing is sent from here but the graph)."""
    parts = [dask.delayed(classification_data)(n=rows, d=D, seed=50 + i) for i in range(blocks)]
    X = dd.from_delayed([dask.delayed(pd.DataFrame)(p[0], columns=NAMES) for p in parts], meta=pd.DataFrame(columns=NAMES, dtype=np.float32))
    y = dd.from_delayed([dask.delayed(pd.Series)(p[1], name="y") for p in parts], meta=pd.Series(name="y", dtype=np.int8))
    return X, y


def _adult(shared_data, tmp_path) -> tuple[pd.DataFrame, dd.DataFrame]:
    """adult's training rows, in memory and read back from a CSV as a dask DataFrame of 3 partitions."""
    frame = pd.read_csv(shared_data / "adult.data.gz", header=None, skipinitialspace=True)
    frame.columns = [f"c{i}" for i in range(14)] + ["income"]
    frame.to_csv(tmp_path / "adult.csv", index=False)
    lazy = dd.read_csv(tmp_path / "adult.csv", blocksize="1MB")
    assert lazy.npartitions >= 3
    return frame, lazy


@pytest.mark.parametrize("objective", ["auc", "auc-moment"])
def test_a_dask_dataframe_gives_the_in_memory_model(cluster, objective):
    # partitions of the in-memory path's shard size, so that both sum in the same order: auc's Newton stops by a
    # relative rule, and other shard sizes give other rounding, other iterates and models that agree only to the tolerance
    X, y = _frame(2, ESTIMATOR_SHARD_ROWS)
    with cluster.client.as_current():
        native = DPipeClassifier(objective, engine="dask").fit(X, y)
        X_mem, y_mem = dask.compute(X, y)
        scores = native.decision_function(X)
        assert hasattr(scores, "compute")  # predictions stay lazy
        np.testing.assert_allclose(scores.compute(), native.decision_function(X_mem), rtol=1e-12)
    memory = DPipeClassifier(objective).fit(X_mem, y_mem.to_numpy())
    np.testing.assert_allclose(native.coef_, memory.coef_, rtol=1e-8, atol=1e-12 * np.abs(memory.coef_).max())
    assert native.intercept_[0] == pytest.approx(memory.intercept_[0], rel=1e-8)
    assert list(native.feature_names_in_) == NAMES and native.n_features_in_ == D


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) reads the sockets' byte counts")
def test_the_driver_receives_bytes_that_do_not_grow_with_the_rows(cluster):
    pid = os.getpid()
    received = {}
    with cluster.client.as_current():
        for rows in (100_000, 400_000):
            X, y = _frame(4, rows)
            before = tcp_bytes_received(pid)
            DPipeClassifier("auc-moment", engine="dask").fit(X, y)
            received[rows] = received_since(before, tcp_bytes_received(pid))
        data = 4 * 400_000 * D * 4  # float32 features of the larger fit
        before = tcp_bytes_received(pid)
        X.compute()  # what the fit would receive if it pulled the rows: the counter sees them
        pulled = received_since(before, tcp_bytes_received(pid))
    assert pulled >= data
    print(f"driver received {received} bytes; the rows are {data} bytes")
    assert received[400_000] < 0.01 * data  # moments (d x d per shard, merged on the workers), the threshold's range counts
    # four times the rows, not four times the bytes: what may grow is the threshold search's last step, at most MAX_GATHER
    # rows (a score and a weight each) whatever the rows, and the scheduler's chatter of a longer fit (10 %); the 300,000 more
    # rows' scores alone (8 bytes each, 2.4 MB) would break this
    bound = MAX_GATHER * 24 + 0.1 * received[100_000]
    assert received[400_000] - received[100_000] < bound < 300_000 * 8


def test_a_parquet_read_cut_to_its_feature_columns(cluster, tmp_path):
    # dask merges the partitions of a Parquet read projected onto some columns: X and y may be cut differently
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(rng.normal(size=(4000, 5)), columns=list("abcde"))
    frame["y"] = np.where(frame["a"] + rng.normal(size=4000) > 0, 1, -1)
    for i in range(4):
        frame.iloc[1000 * i : 1000 * (i + 1)].to_parquet(tmp_path / f"part-{i}.parquet")
    table = dd.read_parquet(tmp_path)
    with cluster.client.as_current():
        native = DPipeClassifier("auc-moment", engine="dask").fit(table.drop(columns="y"), table["y"])
    memory = DPipeClassifier("auc-moment").fit(frame.drop(columns="y"), frame["y"].to_numpy())
    np.testing.assert_allclose(native.coef_, memory.coef_, rtol=1e-6)


def test_a_dask_dataframe_with_string_columns_is_encoded_where_its_partitions_live(cluster):
    rng = np.random.default_rng(8)
    n = 3000
    frame = pd.DataFrame({"age": rng.integers(18, 90, n), "colour": rng.choice([" red", "blue", "green "], n),
                          "size": pd.Categorical(rng.choice(["S", "M", "L"], n))})
    frame.loc[frame.index[-5:], "colour"] = "violet"  # a category only the last partition holds
    y = np.where(0.05 * (frame["age"] - 50) + (frame["colour"].str.strip() == "red") + rng.normal(size=n) > 0, "yes", "no")
    lazy = dd.from_pandas(frame, npartitions=3)
    with cluster.client.as_current():
        native = DPipeClassifier("auc-moment", engine="dask").fit(lazy, dd.from_pandas(pd.Series(y), npartitions=3))
        np.testing.assert_allclose(native.decision_function(lazy).compute(), native.decision_function(frame), rtol=1e-12)
    memory = DPipeClassifier("auc-moment").fit(frame, y)
    assert native.feature_names_ == memory.feature_names_ and "colour=violet" in native.feature_names_  # one vocabulary: every partition's
    assert native.encoding_ == memory.encoding_
    np.testing.assert_allclose(native.coef_, memory.coef_, rtol=1e-6)
    assert list(native.predict(frame.head())) == list(memory.predict(frame.head()))


def test_adult_read_from_csv_in_partitions_gives_the_in_memory_model(cluster, shared_data, tmp_path):
    # the documented path (dd.read_csv of a file with string columns and string labels, several partitions): auc's Newton
    # (a pass a CG step) gives the in-memory model within its tolerance; error-rate with one constraint (an MM loop of cuts,
    # not convex) a model as good: the constraint holds and the training error is the same within 0.01. And no shuffle:
    # the labels are reduced in a tree (a dask Series' unique() shuffled, and the scheduler logged each shuffle's start and
    # end as warnings)
    import dpipe.rates as R

    frame, lazy = _adult(shared_data, tmp_path)
    X_mem, y_mem = frame.drop(columns="income"), frame["income"]
    def shuffles() -> int:  # the scheduler's task prefixes of a shuffle ("shuffle-transfer", ...), kept while it runs
        return cluster.client.run_on_scheduler(lambda dask_scheduler: sum("shuffle" in name for name in dask_scheduler.task_prefixes))

    with cluster.client.as_current():
        native = DPipeClassifier("auc", engine="dask").fit(lazy.drop(columns="income"), lazy["income"])
        rate = DPipeClassifier("error-rate", constraints=[R.recall() >= 0.8], engine="dask").fit(lazy.drop(columns="income"), lazy["income"])
        assert shuffles() == 0  # this module's fits shuffled nothing
        assert lazy["income"].unique().compute().size == 2 and shuffles() > 0  # what a shuffle leaves
    memory = DPipeClassifier("auc").fit(X_mem, y_mem)
    assert native.feature_names_ == memory.feature_names_ and list(native.classes_) == ["<=50K", ">50K"]
    np.testing.assert_allclose(native.coef_, memory.coef_, atol=1e-5 * np.abs(memory.coef_).max())
    assert native.intercept_[0] == pytest.approx(memory.intercept_[0], abs=1e-5)
    rate_memory = DPipeClassifier("error-rate", constraints=[R.recall() >= 0.8]).fit(X_mem, y_mem)
    for est in (rate, rate_memory):
        positive = est.predict(X_mem) == ">50K"
        assert positive[y_mem.to_numpy() == ">50K"].mean() >= 0.8 - 0.01  # recall, on the training rows
    error = {id(e): float(np.mean(e.predict(X_mem) != y_mem.to_numpy())) for e in (rate, rate_memory)}
    assert error[id(rate)] == pytest.approx(error[id(rate_memory)], abs=0.01)


_HERE = re.compile(r"dask DataFrame: 32561 rows x 108 features \(14\.1 MB as float32\): fitted in this process \(below the cluster's "
                   r"break-even, which is none: its 2 worker thread\(s\), 2 of them on this machine, make a pass no faster than this "
                   r"process's \d+; below the driver's memory bound of \d+ MB: ")


@pytest.mark.parametrize("objective", ["auc", "auc-moment"])
def test_auto_fits_adult_here_with_the_cluster_routes_model(cluster, shared_data, tmp_path, caplog, objective):
    # adult (14 MB of features) on 2 workers of this machine: engine="auto" builds the same shards on the workers and
    # brings them here; this process's threads merge the passes in the same tree, so the model is the cluster route's, bit
    # for bit (auc: 110 Newton passes of it)
    _, lazy = _adult(shared_data, tmp_path)
    X, y = lazy.drop(columns="income"), lazy["income"]
    with cluster.client.as_current():
        with caplog.at_level(logging.INFO, logger="dpipe.engine._collection"):
            here = DPipeClassifier(objective).fit(X, y)
        assert _HERE.search(caplog.text) and "built on" not in caplog.text
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="dpipe.engine._collection"):
            there = DPipeClassifier(objective, engine="dask").fit(X, y)
        assert "32561 rows x 108 features, built on 2 workers" in caplog.text and "fitted in this process" not in caplog.text
    assert here.encoding_ == there.encoding_ and here.feature_names_ == there.feature_names_
    np.testing.assert_array_equal(here.coef_, there.coef_)
    np.testing.assert_array_equal(here.intercept_, there.intercept_)
    assert here.fit_result_.info["data_passes"] == there.fit_result_.info["data_passes"]


def test_auto_and_the_cluster_route_agree_on_a_weighted_dask_array(cluster, caplog):
    X, y = classification_data(n=6000, d=D, seed=12)
    w = np.random.default_rng(12).uniform(0.2, 3.0, size=6000)
    dX, dy, dw = da.from_array(X, chunks=(2000, D)), da.from_array(y, chunks=2000), da.from_array(w, chunks=2000)
    with cluster.client.as_current():
        for objective in ("auc", "auc-moment"):
            with caplog.at_level(logging.INFO, logger="dpipe.engine._collection"):
                here = DPipeClassifier(objective).fit(dX, dy, sample_weight=dw)
            assert "dask array: 6000 rows x 20 features (0.5 MB as float32): fitted in this process" in caplog.text
            there = DPipeClassifier(objective, engine="dask").fit(dX, dy, sample_weight=dw)
            np.testing.assert_array_equal(here.coef_, there.coef_)
            np.testing.assert_array_equal(here.intercept_, there.intercept_)
            unweighted = DPipeClassifier(objective).fit(dX, dy)
            assert np.abs(unweighted.coef_ - here.coef_).max() > 1e-3 * np.abs(here.coef_).max()  # the weights were used


def test_auto_fits_where_the_partitions_live_above_the_bound(cluster, caplog):
    X, y = _frame(2, 1000)
    with cluster.client.as_current(), caplog.at_level(logging.INFO, logger="dpipe.engine._collection"):
        with dask.config.set({"dpipe.local-max-bytes": 100_000}):
            above = DPipeClassifier("auc-moment").fit(X, y)
        assert ("dask DataFrame: 2000 rows x 20 features (0.2 MB as float32): fitted where its partitions live (above "
                "dpipe.local-max-bytes, 0.1 MB)") in caplog.text
        assert "2 blocks, 2000 rows x 20 features, built on 2 workers" in caplog.text
        caplog.clear()
        with dask.config.set({"dpipe.local-max-bytes": 200_000}):
            below = DPipeClassifier("auc-moment").fit(X, y)
        assert "(0.2 MB as float32): fitted in this process (below dpipe.local-max-bytes, 0.2 MB)" in caplog.text
        assert "built on" not in caplog.text
    np.testing.assert_array_equal(above.coef_, below.coef_)
