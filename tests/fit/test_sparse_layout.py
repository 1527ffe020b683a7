"""Dense and CSR stores of the same rows train the same model, for every objective, locally and on a real 2-worker cluster.

Every sum over a shard's features is taken in one order whatever the layout (:mod:`dpipe.reduce._linalg`:
``X w`` in fixed lanes over the columns, ``X^T g`` row after row; the column moments row after row over
the non-zero values, :func:`dpipe.reduce._moments.column_weighted_moments`), and a dense zero adds a
signed zero, which changes no sum. So the two layouts give the same bits at every pass, the solvers
take the same steps, and the models agree to the last bit: the checks below ask for the coefficients to
1e-10 relative (``RTOL``), the same iteration and evaluation counts, and the same metrics, predictions
and evaluations. Before the lane order (``X w`` vectorized by the compiler's own reassociation, the
column moments blocked for dense and not for CSR), the race's stores differed by up to 4e-2 relative in
``coef`` for ``auc`` (covtype: the generalized Hessian's active pairs flip at rounding-level score
changes, and Newton took 14 against 16 steps), and the rate objectives by 1e-6 here.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import dpipe
from dpipe.fit import OBJECTIVES
from dpipe.testing import write_store

N, D = 300, 12
K = 40
RTOL = 1e-10
METRICS = ("roc_auc", "prbep", "accuracy", "precision", "recall", "f1", "prec_at_k", "rec_at_k")
#: family -> fit options: tight stops, as in tests/fit/test_sample_weights.py (many iterations: many chances to diverge)
FIT = {
    "closed-form": {},
    "lbfgs": {"tol": 1e-10, "max_iter": 2000},
    "smooth": {"lam": 1e-2, "epsilon": 0.25, "tol": 1e-9, "max_iter": 2000},
    "newton": {"lam": 1e-2, "eps": 1e-8},
    "structural": {"eps": 1e-9, "max_iter": 2000},
    "rate": {"constraints": ["recall >= 0.9"], "tol": 1e-10, "max_iter": 2000},
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
    X[:, 5] *= 1e3  # columns of unlike scales: the column scales and the sums' rounding matter
    X[:, 7] += np.where(X[:, 7] != 0, 40.0, 0.0).astype(np.float32)
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
    opts = dict(FIT[_family(name)])
    if name == "false-negative-rate":
        opts["constraints"] = ["false_positive_rate <= 0.1"]
    if OBJECTIVES[name].takes_k:
        opts["k"] = K
    return opts


def _counts(model) -> tuple:
    """What the solver counted: iterations, evaluations, Newton's CG steps, the cutting plane's cuts, MM steps."""
    info = model.fit.get("info", {})
    return (model.fit.get("nit"), model.fit.get("nfev"), info.get("cg_steps"), model.fit.get("cuts"), len(model.fit.get("history", [])))


def _same(a, b):
    assert _rel(a.coef, b.coef) <= RTOL, (a.coef, b.coef)
    assert a.intercept == pytest.approx(b.intercept, rel=RTOL, abs=RTOL * (1 + float(np.abs(b.coef).sum())))
    assert _counts(a) == _counts(b)
    assert a.fit["fun"] == pytest.approx(b.fit["fun"], rel=RTOL, abs=RTOL)
    for key in METRICS:
        assert a.metrics["train"][key] == pytest.approx(b.metrics["train"][key], abs=1e-12), key


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_every_objective_trains_the_same_model_on_both_layouts(stores, objective, weighted):
    opts = _options(objective)
    dense = dpipe.train(stores["dense", weighted], objective, engine="local", **opts)
    sparse = dpipe.train(stores["csr", weighted], objective, engine="local", **opts)
    assert np.any(dense.coef != 0)
    assert _counts(dense)[:2] != (None, None)  # the fit records its iterations: the comparison below means something
    _same(sparse, dense)


@pytest.mark.filterwarnings("ignore::dpipe.exceptions.ConvergenceWarning")  # the rate fits stop at a fixed amount of work
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_the_cluster_trains_both_layouts_as_the_local_engine(stores, client, objective):
    """Weighted stores (the harder case: the weights enter every sum); the unweighted ones are the local test's. The rate
    family stops after 1 MM step of at most 10 inner iterations: at its tight stops it makes a thousand round trips
    to the workers (two minutes a fit), and the same bits at every step need no convergence to show."""
    opts = _options(objective)
    if _family(objective) == "rate":
        opts.update(max_iter=10, mm_steps=1)
    local = dpipe.train(stores["csr", True], objective, engine="local", **opts)
    remote = dpipe.train(stores["csr", True], objective, client=client, **opts)
    _same(remote, local)
    dense_remote = dpipe.train(stores["dense", True], objective, client=client, **opts)
    _same(dense_remote, remote)


def test_predict_and_evaluate_agree_on_both_layouts(stores, client, tmp_path):
    import pyarrow.parquet as pq

    model = dpipe.train(stores["dense", True], "auc", engine="local", **_options("auc"))
    metrics = [dpipe.evaluate(model, stores[layout, True], engine="local") for layout in ("dense", "csr")]
    metrics.append(dpipe.evaluate(model, stores["csr", True], client=client))
    assert metrics[0] == metrics[1] == metrics[2]
    scores = []
    for layout in ("dense", "csr"):
        out = dpipe.predict(model, stores[layout, True], tmp_path / f"{layout}.parquet", engine="local")
        scores.append(pq.read_table(out).column("score").to_numpy())
    np.testing.assert_array_equal(scores[0], scores[1])


@pytest.fixture(scope="module")
def a9a_stores(tmp_path_factory):
    """The first 3,000 rows of the bundled a9a (123 binary columns, about 11 % non-zero), in both layouts."""
    shared = Path(os.environ.get("DPIPE_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))  # as tests/conftest.py
    if not (shared / "a9a.gz").is_file():
        pytest.skip(f"bundled data not found at {shared}")
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(shared / "a9a.gz"), n_features=123)
    X, y = X[:3000].toarray().astype(np.float32), np.where(y[:3000] > 0, 1, -1).astype(np.int8)
    v = np.random.default_rng(3).uniform(0.5, 2.0, y.size).astype(np.float32)
    root = tmp_path_factory.mktemp("a9a")
    return {layout: write_store(root / f"{layout}.zarr", X, y, [1000, 1000, 1000], weight=v, layout=layout) for layout in ("dense", "csr")}


@pytest.mark.parametrize("objective", ["auc", "auc-smooth", "error-moment", "rocarea", "error-rate"])
def test_real_rows_train_the_same_model_on_both_layouts(a9a_stores, objective):
    """One objective of each solver on real rows (weighted): Newton, L-BFGS, the cutting plane, the rate family."""
    opts = {"constraints": ["recall >= 0.8"]} if objective == "error-rate" else {}
    dense = dpipe.train(a9a_stores["dense"], objective, engine="local", **opts)
    sparse = dpipe.train(a9a_stores["csr"], objective, engine="local", **opts)
    _same(sparse, dense)


@pytest.mark.parametrize("objective", ["auc", "auc-smooth"])
def test_a_wide_store_streamed_on_the_cluster_trains_as_the_local_engine(tmp_path, client, objective):
    """At 2^16 features ``w`` (512 KB) goes to the workers as one task's result a pass, not inside every shard's task, and
    each shard's result is fetched as its task ends (:func:`dpipe.engine._waits.gather_bounded`): the same model."""
    from distributed import get_task_stream

    rng = np.random.default_rng(3)
    n, d = 400, 2**16
    cols = np.sort(rng.choice(d, size=(n, 12)), axis=1)
    X = np.zeros((n, d), dtype=np.float32)
    X[np.arange(n)[:, None], cols] = rng.normal(size=(n, 12)).astype(np.float32)
    y = np.where(X[:, :: d // 64].sum(axis=1) + 0.2 * rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    path = write_store(tmp_path / "wide.zarr", X, y, [120, 80, 0, 200], layout="csr")
    opts = {"lam": 1e-2}  # the defaults otherwise
    local = dpipe.train(path, objective, engine="local", **opts)
    with get_task_stream(client) as tasks:
        remote = dpipe.train(path, objective, client=client, cache="stream", **opts)
    _same(remote, local)
    keys = [t["key"] for t in tasks.data]
    shipped = sum(str(k).startswith("_argument-") for k in keys)
    shard_tasks = sum("_pass-" in str(k) for k in keys)
    assert 0 < shipped and 2 * shipped <= shard_tasks  # once a pass of 4 shard tasks (twice for Newton's w and direction)
