"""auc's Newton-CG fits on the workers' range route (``dpipe.rank-exchange='workers'``) on real LocalClusters.

The route's model is the driver route's (to rounding, with as many Newton iterations and CG steps), a weighted
store's is its repeated rows', the bytes through the driver per CG step do not grow with the rows, and 1 or 2
workers give the same bits.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest

import dpipe
from dpipe.engine._range_newton import CALL_BYTES
from dpipe.testing import classification_data, write_store

SURROGATES = ["huber-hinge", "squared-hinge"]
SHARDS = [900, 0, 1300, 1000, 800]


def _data(n: int, seed: int = 6):
    X, y = classification_data(n, 6, seed=seed, scales=False)
    v = np.random.default_rng(seed).integers(0, 4, n)
    return X, y, v


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``weighted`` (integer weights, zeros included), ``repeated`` (its rows repeated, other shard bounds), and two
    unweighted stores of 2000 and 8000 rows in as many shards."""
    root = tmp_path_factory.mktemp("newton-workers")
    X, y, v = _data(sum(SHARDS))
    Xr, yr = np.repeat(X, v, axis=0), np.repeat(y, v)
    nr = yr.size
    out = {
        "weighted": write_store(root / "weighted.zarr", X, y, SHARDS, weight=v.astype(np.float64)),
        "repeated": write_store(root / "repeated.zarr", Xr, yr, [nr // 3, nr // 2, nr - nr // 3 - nr // 2]),
    }
    for n in (2000, 8000):
        Xn, yn, _ = _data(n, seed=n)
        out[n] = write_store(root / f"n{n}.zarr", Xn, yn, [n // 4] * 4)
    return out


def _train(store, client, mode, **kw):
    with dask.config.set({"dpipe.rank-exchange": mode}):
        return dpipe.train(store, "auc", client=client, cache="memory", train_metrics=False, **kw)


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("surrogate", SURROGATES)
def test_workers_route_fits_the_driver_routes_model(stores, client, monkeypatch, surrogate):
    monkeypatch.setattr("dpipe.engine._ranges.RANGE_ROWS", 150)  # 36 ranges of about 110 rows
    ranged = _train(stores["weighted"], client, "workers", surrogate=surrogate, eps=1e-6)
    merged = _train(stores["weighted"], client, "driver", surrogate=surrogate, eps=1e-6)
    assert ranged.fit["info"]["exchange"] == "workers" and merged.fit["info"]["exchange"] == "driver"
    assert _rel(ranged.coef, merged.coef) <= 1e-9
    assert ranged.fit["nit"] == merged.fit["nit"] > 1
    assert ranged.fit["info"]["cg_steps"] == merged.fit["info"]["cg_steps"] > ranged.fit["nit"]
    assert ranged.fit["fun"] == pytest.approx(merged.fit["fun"], rel=1e-12)
    # sample weights are repeated rows, on the workers too (other shards, other rounding: to the solver's tolerance)
    repeated = _train(stores["repeated"], client, "workers", surrogate=surrogate, eps=1e-6)
    assert _rel(ranged.coef, repeated.coef) <= 1e-6
    assert ranged.fit["fun"] == pytest.approx(repeated.fit["fun"], rel=1e-10)


@pytest.mark.filterwarnings("ignore::dpipe.exceptions.ConvergenceWarning")  # two Newton iterations on purpose
def test_bytes_through_the_driver_per_cg_step_do_not_grow_with_the_rows(stores, client):
    per_step = {}
    for mode in ("workers", "driver"):
        for n in (2000, 8000):
            model = _train(stores[n], client, mode, max_iter=2)
            steps = [rec["bytes_moved_cg"] for rec in model.fit["history"]]
            assert steps and all(s > 0 for s in steps)
            per_step[mode, n] = steps[-1]
    # d (6 features) to 2 hosts and a d-vector back per shard (4), a few numbers per host and call (3 calls)
    assert per_step["workers", 2000] == per_step["workers", 8000] <= 8 * 6 * (2 + 4) + 3 * 2 * CALL_BYTES
    assert per_step["driver", 8000] > 3.5 * per_step["driver", 2000] > 3.5 * per_step["workers", 2000]  # 16 bytes a row


@pytest.mark.parametrize("surrogate", SURROGATES)
def test_the_workers_route_does_not_depend_on_the_host_count(stores, client, one_worker_client, monkeypatch, surrogate):
    """The ranges are a function of the rows, each merges its pieces in shard order and the driver adds per-shard
    d-vectors in shard order: 1 and 2 workers give the same bits."""
    monkeypatch.setattr("dpipe.engine._ranges.RANGE_ROWS", 150)
    one, two = (_train(stores["weighted"], c, "workers", surrogate=surrogate, eps=1e-6) for c in (one_worker_client, client))
    assert one.fit["info"]["exchange"] == two.fit["info"]["exchange"] == "workers"
    assert np.array_equal(one.coef, two.coef)
    assert one.fit["nit"] == two.fit["nit"] and one.fit["info"]["cg_steps"] == two.fit["info"]["cg_steps"]
