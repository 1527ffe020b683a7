"""The objective registry is the one place an objective is declared: its references load, the docs' table is its output,
and a new objective (a risk and one entry, both in this file) trains through every route its family offers."""

from __future__ import annotations

import inspect
import json
import pathlib

import numpy as np
import pytest
from scipy.optimize import minimize

import dpipe
from dpipe._registries import Ref, Registry
from dpipe.exceptions import DPipeError
from dpipe.fit import OBJECTIVES, Objective
from dpipe.fit._records import RECORDS
from dpipe.fit._registry import FAMILIES, objective_table
from dpipe.objectives import STRUCTURAL_LOSSES, RiskAt
from dpipe.testing import write_store

DOCS = pathlib.Path(__file__).parents[2] / "docs" / "training.md"


def test_every_reference_of_the_registries_loads_and_each_family_fit_takes_its_record():
    for family in FAMILIES.values():
        fits = {"fit": family.fit, "fit_datasets": family.fit_datasets, **family.solver_fits}
        assert (family.fit is None) != (family.fit_datasets is None), family.name  # one way to fit a family
        for what, ref in fits.items():
            if ref is None:
                continue
            fit = ref.load()
            assert ref.load() is fit  # resolved once
            record = list(inspect.signature(fit).parameters.values())[1].annotation  # the annotation's text (postponed evaluation)
            assert record == RECORDS[family.name].__name__, f"{family.name}.{what}: {ref.where} takes {record}, not the family's record"
    for o in OBJECTIVES.values():
        assert o.family in FAMILIES and o.solvers
        assert (o.risk is not None or o.rates is not None), f"{o.name} names nothing to minimize"
        made = o.load_risk() if o.risk is not None else None
        if o.family == "smooth":  # a risk of the merged scores from its width; Newton's with its curvature
            risk = made(0.1)
            assert callable(risk.at) and ("newton" not in o.solvers or callable(risk.curvature))
        if o.family == "structural":
            assert made(o.name, 3.0).name == o.name
        if o.family == "rate":
            assert o.rates is None or callable(o.rates.load())
        if o.family in ("smooth", "structural"):
            assert o.metric is not None  # early stopping and lam="auto" measure it


def test_the_registry_and_the_oracles_list_the_same_structural_losses():
    declared = [(o.name, o.takes_k) for o in OBJECTIVES.values() if o.family == "structural"]
    assert declared == [(name, takes_k) for name, (_, takes_k) in STRUCTURAL_LOSSES.items()]


def test_the_docs_objective_table_is_the_registrys():
    table = objective_table()
    assert "| `auc` (the default) |" in table and table.count("\n") == 9
    assert table in DOCS.read_text(), "docs/training.md's objective table is stale: paste dpipe.fit._registry.objective_table() over it"


def test_a_registry_refuses_a_taken_name_and_a_reference_names_a_module():
    registry = Registry("thing", [FAMILIES["moment"]])
    with pytest.raises(ValueError, match="the thing 'moment' is registered already"):
        registry.register(FAMILIES["moment"])
    with pytest.raises(KeyError, match="unknown thing 'x'; one of moment"):
        registry["x"]
    with pytest.raises(ValueError, match="'package.module:attribute'"):
        Ref("._moment:fit_moment")
    with pytest.raises(ImportError, match="has no 'nope'"):
        Ref("dpipe.fit._moment:nope").load()


# --- a new objective, declared here only: its risk and one registry entry -------------------------------------------

class RowHuberHinge:
    """A per-row risk: the mean (weighted) hinge ``max(0, 1 - y s)`` Huberized over ``width`` (exact: the hinge)."""

    name = "row-huber-hinge"

    def __init__(self, width: float | None) -> None:
        assert width is not None and width > 0
        self.width = float(width)

    def at(self, s) -> RiskAt:
        t = self.width
        wp = np.ones(s.pos.size) if s.pos_weight is None else s.pos_weight
        wn = np.ones(s.neg.size) if s.neg_weight is None else s.neg_weight
        total = float(wp.sum() + wn.sum())
        zp, zn = 1.0 - s.pos, 1.0 + s.neg  # the margins' shortfalls, y = +1 and -1

        def huber(z):
            return np.where(z <= 0, 0.0, np.where(z < t, z * z / (2 * t), z - t / 2))

        def slope(z):
            return np.clip(z / t, 0.0, 1.0)

        value = float(wp @ huber(zp) + wn @ huber(zn)) / total
        exact = float(wp @ np.maximum(zp, 0.0) + wn @ np.maximum(zn, 0.0)) / total
        return RiskAt(value, exact, -wp * slope(zp) / total, wn * slope(zn) / total)


TOY = Objective(name="toy-hinge", family="smooth", solvers=("lbfgs",), own_threshold=False, summary="a per-row Huber hinge (a test's)",
                doc="lam/2 ||w||^2 + the mean Huber hinge of the rows", risk=Ref(f"{__name__}:RowHuberHinge"), metric="accuracy",
                width=lambda total_weight, epsilon, scale: 100.0 * epsilon * scale)

LAM = 1e-2
WIDTH = 0.1  # the entry's width at epsilon's default 1e-3


def _reference(X, y, lam=LAM, width=WIDTH):
    """The toy's objective minimized by SciPy on all rows at once."""
    def J(w):
        z = 1.0 - y * (X @ w)
        h = np.where(z <= 0, 0.0, np.where(z < width, z * z / (2 * width), z - width / 2))
        g = -(X.T @ (y * np.clip(z / width, 0.0, 1.0))) / y.size
        return float(h.mean()) + 0.5 * lam * float(w @ w), g + lam * w

    return minimize(J, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10000}).x


@pytest.fixture(scope="module")
def toy():
    with OBJECTIVES.registered(TOY):
        yield TOY.name


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    rng = np.random.default_rng(3)
    n, d = 600, 4
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(X @ np.array([1.0, -0.5, 0.3, 0.0]) + 0.5 * rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    folder = tmp_path_factory.mktemp("toy")
    store = write_store(folder / "toy.zarr", X, y, [200, 250, 150])
    valid = write_store(folder / "toy-valid.zarr", X[:300], y[:300])
    return store, valid, X.astype(np.float64), y.astype(np.float64)


def test_the_toy_is_listed_only_while_registered(toy):
    assert toy in OBJECTIVES and toy in dpipe.fit.PARAMS["epsilon"].where  # the options of its family apply to it
    with pytest.raises(ValueError, match="registered already"):
        OBJECTIVES.register(TOY)


def test_the_toy_trains_on_the_local_engine_to_its_minimum(toy, toy_data):
    store, _, X, y = toy_data
    model = dpipe.train(store, toy, engine="local", lam=LAM, tol=1e-9, max_iter=2000)
    np.testing.assert_allclose(model.coef, _reference(X, y), rtol=1e-4, atol=1e-6)
    assert model.objective == toy and model.fit["info"]["lam"] == LAM


def test_the_toy_trains_on_a_dask_cluster_as_locally(toy, toy_data, client):
    store = toy_data[0]
    local = dpipe.train(store, toy, engine="local", lam=LAM, tol=1e-9, max_iter=2000)
    remote = dpipe.train(store, toy, client=client, lam=LAM, tol=1e-9, max_iter=2000)
    np.testing.assert_array_equal(remote.coef, local.coef)  # the same bits on every engine


def test_the_toy_trains_in_the_estimator_and_the_cli(toy, toy_data, tmp_path):
    from dpipe.cli.main import main

    store, _, X, y = toy_data
    est = dpipe.DPipeClassifier(objective=toy, lam=LAM, tol=1e-9, max_iter=2000).fit(X, y)
    np.testing.assert_allclose(est.coef_[0], _reference(X, y), rtol=1e-4, atol=1e-6)
    out = tmp_path / "toy.json"
    assert main(["train", store, "--objective", toy, "--lam", str(LAM), "--engine", "local", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["objective"] == toy


def test_the_toy_stops_early_and_chooses_its_lam_by_its_own_metric(toy, toy_data):
    store, valid, _, _ = toy_data
    stopped = dpipe.train(store, toy, engine="local", validation=valid, early_stopping_rounds=2, lam=LAM, tol=1e-9, max_iter=2000)
    assert stopped.fit["info"]["early_stopping"]["metric"] == "accuracy"
    assert "validation_accuracy" in stopped.fit["history"][0]
    path = dpipe.train(store, toy, engine="local", lam="auto")
    assert path.fit["info"]["lam_path"]["metric"] == "accuracy" and path.fit["info"]["lam"] in path.fit["info"]["lam_path"]["lams"]


def test_a_smoothed_objective_without_a_default_width_is_an_error_not_prbeps(toy_data):
    store = toy_data[0]
    widthless = Objective(name="toy-widthless", family="smooth", solvers=("lbfgs",), own_threshold=False, summary="-", doc="-",
                          risk=TOY.risk, metric="accuracy")
    with OBJECTIVES.registered(widthless):
        with pytest.raises(DPipeError, match="'toy-widthless' declares no default smoothing width"):
            dpipe.train(store, widthless.name, engine="local")
        assert dpipe.train(store, widthless.name, engine="local", smoothing=WIDTH, max_iter=5).coef.shape == (4,)
