"""auc's default solver chosen by the data's size (Newton on small stores, L-BFGS in the moments' metric on large ones),
options that pin one solver, the data passes a fit records, and the score summary the moment ray is searched on."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

import dpipe
from dpipe.engine import LocalDataset, RankPasses
from dpipe.exceptions import ParameterError
from dpipe.fit import _registry
from dpipe.fit._params import AUTO_SOLVER, resolve, settle_solver
from dpipe.objectives import SmoothedAUCRisk, ray_minimum
from dpipe.reduce import class_score_summary
from dpipe.testing import classification_data, huber_hinge_reference, write_store

LAM = 1e-3


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    X, y = classification_data(600, 5, seed=5, scales=False)
    v = np.random.default_rng(5).integers(0, 3, y.size).astype(np.float32)
    root = tmp_path_factory.mktemp("solver-by-size")
    plain = write_store(root / "plain.zarr", X, y, [200, 0, 250, 150])
    weighted = write_store(root / "weighted.zarr", X, y, [300, 300], weight=v)
    return {"X": X.astype(np.float64), "y": y, "v": v.astype(np.float64), "plain": str(plain), "weighted": str(weighted)}


@pytest.fixture
def small_threshold(monkeypatch):
    """auc's L-BFGS threshold lowered to 500 rows, so that a 600-row store counts as large (the rule is read at fit time)."""
    monkeypatch.setattr(_registry, "AUC_LBFGS_MIN_ROWS", 500)


def test_resolve_leaves_the_solver_to_the_data_unless_an_option_pins_it():
    assert resolve("auc", {}, "train").solver == AUTO_SOLVER
    assert resolve("auc", {"lam": 1e-4}, "train").solver == AUTO_SOLVER  # both solvers take lam
    assert resolve("auc", {"eps": 1e-4}, "train").solver == "newton"
    assert resolve("auc", {"tol": 1e-2}, "train").solver == "lbfgs"
    assert resolve("auc", {"init": "zeros"}, "train").solver == "lbfgs"
    assert resolve("auc", {"precondition": "moments"}, "train").solver == "lbfgs"  # the moments preconditioner is L-BFGS's
    assert resolve("auc", {"solver": "newton"}, "train").solver == "newton"
    assert resolve("auc-smooth", {}, "train").solver == "lbfgs"  # one solver: no choice
    with pytest.raises(ParameterError, match=r"'eps', 'tol' of train do not all apply to one solver of 'auc' \(newton, lbfgs\)"):
        resolve("auc", {"eps": 1e-4, "tol": 1e-2}, "train")


def test_settle_solver_chooses_by_rows_and_features_and_clears_the_other_solvers_options():
    auto = resolve("auc", {}, "train")
    assert auto.eps is not None and auto.tol is not None  # both solvers' defaults until the data is open
    small, why = settle_solver(auto, _registry.AUC_LBFGS_MIN_ROWS - 1, 50)
    assert small.solver == "newton" and small.tol is None and small.memory is None and small.eps == auto.eps
    assert "fewer than" in why
    large, why = settle_solver(auto, _registry.AUC_LBFGS_MIN_ROWS, 50)
    assert large.solver == "lbfgs" and large.eps is None and large.tol == auto.tol
    assert "fewest data passes" in why
    wide, why = settle_solver(auto, 10 * _registry.AUC_LBFGS_MIN_ROWS, _registry.MOMENT_MAX_FEATURES + 1)
    assert wide.solver == "newton" and "features" in why
    pinned = resolve("auc", {"eps": 1e-4}, "train")
    assert settle_solver(pinned, 10 * _registry.AUC_LBFGS_MIN_ROWS, 50) == (pinned, None)


def test_a_large_store_is_fitted_by_lbfgs_from_the_moments_to_the_brute_force_minimum(data, small_threshold):
    ref = huber_hinge_reference(data["X"], data["y"], LAM, 0.2)
    best = scipy.optimize.minimize(ref.fun, np.zeros(data["X"].shape[1]), jac=ref.grad, method="BFGS", options={"gtol": 1e-12})
    model = dpipe.train(data["plain"], lam=LAM, tol=1e-9, max_iter=2000, engine="local")
    info = model.fit["info"]
    assert info["solver"] == "lbfgs" and model.params["solver"] == "lbfgs"  # tol pins L-BFGS: no choice to record
    assert model.fit["fun"] == pytest.approx(best.fun, rel=1e-9)
    default = dpipe.train(data["plain"], lam=LAM, engine="local")
    assert default.params["solver"] == AUTO_SOLVER and default.fit["info"]["solver"] == "lbfgs"
    assert "at least 500" in default.fit["info"]["solver_choice"]
    assert default.fit["info"]["init"] == "auc-moment" and default.fit["info"]["preconditioner"] == "moments"
    assert dpipe.evaluate(default, data["plain"], engine="local")["roc_auc"] == pytest.approx(
        dpipe.evaluate(model, data["plain"], engine="local")["roc_auc"], abs=1e-3)


def test_a_small_store_keeps_newton(data):
    model = dpipe.train(data["plain"], lam=LAM, engine="local")
    assert model.params["solver"] == AUTO_SOLVER and model.fit["info"]["solver"] == "newton"
    assert "fewer than 1,000,000" in model.fit["info"]["solver_choice"]


def test_the_fit_records_its_data_passes_by_kind_the_same_on_every_engine(data, client, small_threshold):
    newton = dpipe.train(data["plain"], lam=LAM, solver="newton", engine="local")
    info, fit = newton.fit["info"], newton.fit
    by_kind = info["data_passes_by_kind"]
    # one score pass per evaluation, one gradient pass per accepted step (and at the start), two passes per CG step
    assert by_kind["score_pass"] == fit["nfev"]
    assert by_kind["gradient_squares_pass"] == fit["nit"] + 1
    assert by_kind["direction_pass"] == by_kind["product_pass"] == info["cg_steps"]
    assert info["data_passes"] == sum(by_kind.values())
    # the command's total: the load, the fit's, and the passes after it (threshold calibration, training metrics)
    assert info["data_passes_total"] > info["data_passes"]
    lbfgs = dpipe.train(data["plain"], lam=LAM, engine="local")
    by_kind = lbfgs.fit["info"]["data_passes_by_kind"]
    assert by_kind["class_moments_of_shard"] == 1 and by_kind["class_score_summary"] == 1  # the moment ray's setup
    assert by_kind["score_pass"] == by_kind["gradient_pass"] == lbfgs.fit["nfev"]
    for local in (newton, lbfgs):
        dist = dpipe.train(data["plain"], lam=LAM, solver=local.fit["info"]["solver"], engine="dask", client=client, cache="memory")
        assert dist.fit["info"]["data_passes_by_kind"] == local.fit["info"]["data_passes_by_kind"]
        np.testing.assert_allclose(dist.coef, local.coef, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_the_score_summary_keeps_each_classs_weight_and_mean_and_is_exact_when_small(data, weighted):
    w = np.array([0.5, -1.0, 2.0, 0.25, 1.5])
    with LocalDataset(data["weighted" if weighted else "plain"]) as ds:
        shard = ds.map_gather(lambda sh: sh)[0]
        exact = class_score_summary(shard, w, 10**6)
        small = class_score_summary(shard, w, 7)
        for cls, sign in (("pos", 1), ("neg", -1)):
            rows = shard.y == sign
            s = shard.X[rows].astype(np.float64) @ w
            v = np.ones(s.size) if not weighted else shard.weight[rows].astype(np.float64)
            order = np.argsort(s, kind="stable")
            np.testing.assert_allclose(getattr(exact, cls), s[order], rtol=1e-12)
            np.testing.assert_array_equal(getattr(exact, f"{cls}_weight"), v[order])
            points, weights = getattr(small, cls), getattr(small, f"{cls}_weight")
            assert points.size == 7 and np.all(np.diff(points) >= 0)
            assert weights.sum() == pytest.approx(v.sum(), rel=1e-12)
            assert points @ weights == pytest.approx(s @ v, rel=1e-9)


def test_the_ray_on_the_summary_is_the_ray_on_every_score(data, monkeypatch):
    from dpipe.engine import _passes

    direction = np.linalg.lstsq(data["X"], data["y"].astype(np.float64), rcond=None)[0]
    risk = SmoothedAUCRisk(0.2)
    with LocalDataset(data["plain"]) as ds:
        passes = RankPasses(ds)
        exact = ray_minimum(risk, passes.scores(direction, remember=False), LAM)
        monkeypatch.setattr(_passes, "SUMMARY_POINTS", 64)
        monkeypatch.setattr(_passes, "SUMMARY_MIN_POINTS", 16)  # about 16 points a class a shard, of 40-150 rows
        summary = passes.score_summary(direction)
        assert summary.pos.size + summary.neg.size < 150
        approx = ray_minimum(risk, summary, LAM)
    assert approx.alpha == pytest.approx(exact.alpha, rel=0.05)
    assert approx.curvature == pytest.approx(exact.curvature, rel=0.25)


def test_streamed_shards_keep_no_orders_on_the_workers_and_give_the_same_bits(data, client, small_threshold):
    """Streamed, the driver keeps each score pass's row orders (dpipe.reduce._driver_order) and sends each shard its row
    weights in row order: the local engine's model bit for bit, the same passes by kind, 4 bytes a row more to the driver
    on a score pass, 8 a row from it on a gradient pass, nothing of a row left in a worker's memo."""
    from dpipe.reduce import _sorted

    n = dpipe.open_store(data["plain"]).manifest.n_rows
    remembered = lambda: set().union(*client.run(lambda: set(_sorted._MEMO)).values())  # noqa: E731 - fit tokens in the workers' memos
    before = remembered()
    for solver in ("newton", "lbfgs"):
        local = dpipe.train(data["plain"], lam=LAM, solver=solver, engine="local")
        streamed = dpipe.train(data["plain"], lam=LAM, solver=solver, engine="dask", client=client, cache="stream")
        np.testing.assert_array_equal(streamed.coef, local.coef)
        assert streamed.intercept == local.intercept
        info = streamed.fit["info"]
        assert info["data_passes_by_kind"] == local.fit["info"]["data_passes_by_kind"]
        traffic = info["pass_traffic"]
        assert traffic["score_pass"]["bytes_to_driver_per_round"] >= 12 * n  # float64 score and int32 row of every row
        gradient = "gradient_pass" if solver == "lbfgs" else "gradient_squares_pass"
        assert traffic[gradient]["bytes_from_driver_per_round"] >= 8 * n * (1 if solver == "lbfgs" else 2)
        assert all(t["bytes_to_driver_per_round"] == 0 for t in local.fit["info"]["pass_traffic"].values())  # nothing leaves the process
    assert remembered() <= before  # no worker remembered an order of these fits


def test_the_rate_objectives_declare_the_memory_models_row_bytes():
    from dpipe.engine._memory import ROW_BYTES

    assert {o.worker_row_bytes for o in _registry.OBJECTIVES.values() if o.family == "rate"} == {ROW_BYTES} == {_registry.RATE_WORKER_ROW_BYTES}
    assert {o.worker_row_bytes for o in _registry.OBJECTIVES.values() if o.family != "rate"} == {0}
