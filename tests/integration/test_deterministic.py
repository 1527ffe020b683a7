"""Order-deterministic reductions (issue 17, item 4): the same model, bit for bit, wherever the shards are.

Every reduction forms one partial result per shard and combines them in a fixed order
given by the shard indices only (:func:`dpipe.engine._tree.pairwise`), and each shard's
result is computed on one BLAS thread (:mod:`dpipe.engine._blas`). So the local engine,
1 worker, 2 workers and 2 workers of which one is SIGKILLed mid-fit (its shards read
again from the store on another worker) give ``np.array_equal`` weights and the same
intercept, for a smoothed loss, a cutting-plane loss and a constrained rate fit. The
workers' rank-exchange route is checked for independence of the host count.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import dpipe
from dpipe.engine import LocalDataset, ShardedDataset
from dpipe.engine._blas import single_blas_thread
from dpipe.io import Shard
from dpipe.reduce import class_moments_of_shard, merge_moments
from dpipe.reduce._block import matvec, matvec_pair
from dpipe.testing import classification_data, write_store

# The fits stop at their iteration limit on purpose: a fixed amount of work, long enough to kill a worker in the middle of.
pytestmark = pytest.mark.filterwarnings("ignore::dpipe.exceptions.ConvergenceWarning")

#: 5 shards of uneven sizes: the scheduler spreads them 2 / 3 (or 3 / 2) over 2 workers, and the sums must not care
SHARDS = [5000, 3000, 4000, 2000, 6000]
CONSTRAINT = "positive_rate(group=M) >= 0.8 * positive_rate(group=F)"

#: name -> (train() arguments, the progress line at which a worker is killed)
FITS = {
    "auc-smooth": (dict(objective="auc-smooth", precondition="none", init="zeros", max_iter=30, tol=1e-14), "iter   10"),
    "rocarea": (dict(objective="rocarea", max_iter=30), "iter   10"),
    "error-rate": (dict(objective="error-rate", constraints=[CONSTRAINT], mm_steps=3), "rates: MM step 1:"),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    X, y = classification_data(sum(SHARDS), 6, seed=17)
    group = (np.random.default_rng(17).random(y.size) < 0.4).astype(np.int16)
    X[:, 5] += group  # a feature that carries the group: the constraint binds
    return write_store(tmp_path_factory.mktemp("det") / "s.zarr", X, y, SHARDS, group=group, groups=["M", "F"])


@pytest.fixture(scope="module")
def local_fits(store) -> dict[str, dpipe.LinearModel]:
    return {name: dpipe.train(store, **fit, engine="local", train_metrics=False) for name, (fit, _) in FITS.items()}


def _same(a: dpipe.LinearModel, b: dpipe.LinearModel) -> None:
    assert np.array_equal(a.coef, b.coef), np.max(np.abs(np.asarray(a.coef) - np.asarray(b.coef)))
    assert a.intercept == b.intercept
    assert a.fit["nit"] == b.fit["nit"]


@pytest.mark.integration
@pytest.mark.parametrize("name", list(FITS))
def test_one_and_two_workers_give_the_local_engines_model(store, local_fits, client, one_worker_client, name):
    fit, _ = FITS[name]
    for c in (one_worker_client, client):
        _same(dpipe.train(store, **fit, client=c, cache="memory", train_metrics=False), local_fits[name])


@pytest.mark.integration
@pytest.mark.parametrize("name", list(FITS))
def test_a_worker_killed_mid_fit_gives_the_local_engines_model(store, local_fits, train_killing, caplog, name):
    fit, at = FITS[name]
    got, fired, _ = train_killing(store, dict(fit, train_metrics=False), kill=1, at=at)
    assert fired
    assert "a shard host was lost" in caplog.text  # the loss hit the fit, whose shards were read again elsewhere
    _same(got, local_fits[name])


@pytest.mark.integration
def test_workers_without_a_nanny_run_one_blas_thread(tmp_path, external_cluster):
    """``dask worker --no-nanny`` leaves BLAS one thread per core, where OpenBLAS's threaded gemm rounds the weighted
    moments differently: the passes run on one thread, and the moments (and the models fitted from them) are the local engine's."""
    X, y = classification_data(8000, 50, seed=3)
    weight = np.random.default_rng(2).random(y.size).astype(np.float32) * 3
    path = write_store(tmp_path / "w.zarr", X, y, [2000] * 4, weight=weight)
    external_cluster.start_worker()
    external_cluster.start_worker()
    threads = external_cluster.client.run(lambda: __import__("threadpoolctl").threadpool_info()[0]["num_threads"])
    with LocalDataset(path) as local, ShardedDataset(path, external_cluster.client, cache="memory") as ds:
        want, got = local.map_reduce(class_moments_of_shard, merge_moments), ds.map_reduce(class_moments_of_shard, merge_moments)
    assert np.array_equal(got.m2, want.m2) and np.array_equal(got.mean, want.mean), threads
    model = dpipe.train(path, "auc-moment", client=external_cluster.client, train_metrics=False)
    assert np.array_equal(model.coef, dpipe.train(path, "auc-moment", engine="local", train_metrics=False).coef)


@pytest.mark.integration
@pytest.mark.parametrize("fit", [
    dict(objective="auc-smooth", precondition="none", init="zeros", max_iter=20, tol=1e-14),
    dict(objective="prbep-smooth", max_iter=20, tol=1e-14),  # the scalar-dual route: per-shard sums
    dict(objective="rocarea", max_iter=20),
], ids=["auc-smooth", "prbep-smooth", "rocarea"])
def test_the_workers_route_does_not_depend_on_the_host_count(store, client, one_worker_client, fit):
    """dpipe.rank-exchange=workers: the ranges are a function of the rows, each range merges its pieces in shard order
    and the driver adds per-shard results in shard order, so 1 and 2 hosts, and the local engine's hosts in this
    process (one per thread), give the same model."""
    with dask.config.set({"dpipe.rank-exchange": "workers"}):
        one, two = (dpipe.train(store, **fit, client=c, cache="memory", train_metrics=False) for c in (one_worker_client, client))
        for threads in (1, 2, 3):
            with dask.config.set({"dpipe.local-threads": threads}):
                local = dpipe.train(store, **fit, engine="local", train_metrics=False)
            _same(local, one)
    _same(one, two)


@pytest.mark.integration
@pytest.mark.parametrize("fit", [dict(objective="auc", solver="lbfgs"), dict(objective="auc-smooth"), dict(objective="auc", solver="newton")],
                         ids=["auc-lbfgs", "auc-smooth", "auc-newton"])
def test_from_the_exchange_size_the_default_route_is_the_same_on_every_engine(store, client, monkeypatch, fit):
    """Above dpipe.rank-exchange auto's size (lowered here to this store's rows) the local engine takes the workers'
    route as a cluster does, on its own threads: the same model bit for bit, and the record says which route ran.
    (Newton stays on the driver's route under auto, on every engine.)"""
    from dpipe.engine import _ranges

    monkeypatch.setattr(_ranges, "EXCHANGE_AUTO_ROWS", 10_000)
    local = dpipe.train(store, **fit, engine="local")
    cluster = dpipe.train(store, **fit, client=client, cache="memory")
    _same(local, cluster)
    workers_route = fit.get("solver") != "newton"
    for model in (local, cluster):
        assert ("range_scores" in model.fit["info"]["data_passes_by_kind"]) == workers_route, model.fit["info"]["data_passes_by_kind"]
    assert local.metrics["train"]["roc_auc"] == cluster.metrics["train"]["roc_auc"]


@pytest.mark.integration
def test_tree_levels_on_the_cluster_pair_the_shards_as_the_local_engine_does(tmp_path, client):
    """With dpipe.driver-fanin 1 every level but the last merges in cluster tasks: the association is the local engine's."""
    X, y = classification_data(7000, 4, seed=5)
    X[::3] *= np.float32(1e6)  # large and small values: a float sum that rounds differently in another association
    path = write_store(tmp_path / "s.zarr", X, y, [1000] * 7)
    with LocalDataset(path) as local:
        want = local.map_reduce(class_moments_of_shard, merge_moments)
    for fanin in (1, 2, 16):
        with dask.config.set({"dpipe.driver-fanin": fanin}), ShardedDataset(path, client, cache="memory") as ds:
            got = ds.map_reduce(class_moments_of_shard, merge_moments)
        assert np.array_equal(got.m2, want.m2) and np.array_equal(got.mean, want.mean) and np.array_equal(got.weight, want.weight)


def test_a_pass_under_many_blas_threads_rounds_as_on_one():
    """single_blas_thread (what every worker task runs) limits BLAS in a process that allows more, and restores it after."""
    X, y = classification_data(8192, 50, seed=1)
    shard = Shard(X, y, None, np.random.default_rng(0).random(y.size).astype(np.float32), index=0)
    with threadpool_limits(1, "blas"):
        want = class_moments_of_shard(shard)
    with threadpool_limits(2, "blas"):
        got = single_blas_thread(class_moments_of_shard, shard)
        assert all(lib["num_threads"] == 2 for lib in threadpool_info() if lib["user_api"] == "blas")  # restored
    assert np.array_equal(got.m2, want.m2)


@pytest.mark.parametrize("d", [1, 3, 8, 50, 117])
def test_the_paired_product_rounds_as_the_single_one(d):
    """The rate fit's memo takes margins from matvec_pair on a miss (a shard read again on another worker) and from
    matvec on a hit: both must round alike, or a lost worker would change the fit."""
    rng = np.random.default_rng(d)
    X = rng.standard_normal((3001, d)).astype(np.float32)
    u, w = rng.standard_normal(d), rng.standard_normal(d)
    a, b = matvec_pair(X, u, w)
    assert np.array_equal(a, matvec(X, u)) and np.array_equal(b, matvec(X, w))
