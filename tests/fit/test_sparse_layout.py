"""Dense and CSR stores of the same rows train the same model, for every objective, locally and on a real 2-worker cluster.

The products differ only in summation order (the dense ``X w`` is vectorized, CSR's adds its
stored values in order; ``X^T g`` is bitwise the same), so the fits agree to what the solvers'
stopping rules leave undetermined: the tolerances of ``tests/fit/test_sample_weights.py``
(``FIT``), with tight solver tolerances.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpipe
from dpipe.fit import OBJECTIVES
from dpipe.testing import write_store

N, D = 300, 12
K = 40
METRICS = ("roc_auc", "prbep", "accuracy", "precision", "recall", "f1", "prec_at_k", "rec_at_k")
#: family -> (fit options, coef rtol): tight stops, as in tests/fit/test_sample_weights.py
FIT = {
    "closed-form": ({}, 1e-9),
    "lbfgs": ({"tol": 1e-10, "max_iter": 2000}, 1e-6),
    "smooth": ({"lam": 1e-2, "epsilon": 0.25, "tol": 1e-9, "max_iter": 2000}, 1e-6),
    "newton": ({"lam": 1e-2, "eps": 1e-8}, 1e-6),
    "structural": ({"eps": 1e-9, "max_iter": 2000}, 1e-6),
    # the MM loop stops when a step lowers the dual by at most eps |D| (1e-3): the iterate is determined to a few 1e-6
    "rate": ({"constraints": ["recall >= 0.9"], "tol": 1e-10, "max_iter": 2000}, 2e-5),
}


def _family(name: str) -> str:
    spec = OBJECTIVES[name]
    if spec.family == "moment":
        return "closed-form" if spec.solvers[0] == "closed-form" else "lbfgs"
    return "newton" if spec.solvers[0] == "newton" else spec.family


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1e-300, float(np.max(np.abs(b)))))


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = np.where(rng.random((N, D)) < 0.3, rng.normal(size=(N, D)) + 0.5, 0.0).astype(np.float32)
    y = np.where(X[:, :4] @ np.array([1.5, -1.0, 1.0, 0.7]) + 0.4 * rng.normal(size=N) > 0.2, 1, -1).astype(np.int8)
    v = rng.integers(0, 4, N).astype(np.float32)
    return X, y, v


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts")
    X, y, v = _data()
    shards = [90, 0, 120, 90]
    return {(layout, weighted): write_store(root / f"{layout}-{int(weighted)}.zarr", X, y, shards, weight=v if weighted else None, layout=layout)
            for layout in ("dense", "csr") for weighted in (False, True)}


def _options(name: str) -> dict:
    opts = dict(FIT[_family(name)][0])
    if name == "false-negative-rate":
        opts["constraints"] = ["false_positive_rate <= 0.1"]
    if OBJECTIVES[name].takes_k:
        opts["k"] = K
    return opts


def _same(a, b, rtol):
    assert _rel(a.coef, b.coef) <= rtol, (a.coef, b.coef)
    assert a.intercept == pytest.approx(b.intercept, rel=rtol, abs=rtol * (1 + float(np.abs(b.coef).sum())))
    assert a.fit["fun"] == pytest.approx(b.fit["fun"], rel=1e-9, abs=1e-9)
    for key in METRICS:
        assert a.metrics["train"][key] == pytest.approx(b.metrics["train"][key], abs=1e-9), key


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_every_objective_trains_the_same_model_on_both_layouts(stores, objective, weighted):
    opts = _options(objective)
    dense = dpipe.train(stores["dense", weighted], objective, engine="local", **opts)
    sparse = dpipe.train(stores["csr", weighted], objective, engine="local", **opts)
    assert np.any(dense.coef != 0)
    _same(sparse, dense, FIT[_family(objective)][1])


@pytest.mark.parametrize("objective", ["auc", "auc-smooth", "auc-moment", "rocarea", "false-negative-rate"])
def test_the_cluster_trains_the_csr_store_as_the_local_engine(stores, client, objective):
    opts = _options(objective)
    local = dpipe.train(stores["csr", True], objective, engine="local", **opts)
    remote = dpipe.train(stores["csr", True], objective, client=client, **opts)
    _same(remote, local, FIT[_family(objective)][1])
    dense_remote = dpipe.train(stores["dense", True], objective, client=client, **opts)
    _same(remote, dense_remote, FIT[_family(objective)][1])
