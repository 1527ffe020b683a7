"""Sample weights are repeated rows, for every objective: brute force against ``np.repeat``.

A row of weight ``v`` must count exactly as ``v`` copies of itself. With integer
weights in {0, 1, 2, 3} a weighted store and the store of the repeated rows (zero
weights dropped, different shard boundaries) define the same objective, so:

* at the value / gradient / plane level the two agree to rounding (1e-10 relative);
* every objective's fit, its objective value, calibrated threshold and weighted
  training metrics agree up to what the solver's stopping rule leaves undetermined.

Tolerances per family (see ``FIT`` below):

* closed form (auc-moment): the same d x d solve from moments that differ only by
  summation order -> 1e-9 relative.
* L-BFGS (error-moment, auc-smooth, prbep-smooth): L-BFGS-B also stops on a relative
  decrease below ``ftol = 1e3 eps`` (dpipe/solvers/_lbfgs.py), so an iterate is only
  determined to about ``sqrt(2 ftol |J| / lam_min)``; with ``lam = 1e-2`` and a
  smoothing of 0.5 (``epsilon = 0.25``) the two fits land within ~3e-7 of each other,
  asserted at 1e-6. Their objective values are quadratic in that error: 1e-10.
* cutting plane (SVM-perf losses), ``eps = 1e-9``: both best ``J`` lie in
  ``[J*, J* + eps]`` so the values agree to ``eps`` absolutely; the iterate ends on
  the same vertex of the piecewise-linear risk (observed 1e-12), asserted at 1e-6.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpipe
from dpipe import DPipeClassifier
from dpipe.engine import LocalDataset, RankPasses, rank_summary
from dpipe.exceptions import ParameterError
from dpipe.fit import OBJECTIVES
from dpipe.fit._smooth import SmoothedObjective
from dpipe.fit._structural import StructuralRisk
from dpipe.io import Shard
from dpipe.objectives import STRUCTURAL_LOSSES, PreconditionedObjective, SmoothedAUCRisk, SmoothedPRBEPRisk, StructuralLoss
from dpipe.testing import classification_data, write_store

N, D = 300, 4
K = 40  # prec@k / rec@k: an explicit integer cut-off (a count of repeated rows)
#: the weighted store's shards: an empty one, and one whose rows all have weight 0
WEIGHTED_SHARDS = [70, 0, 40, 110, 80]
ZERO_WEIGHT_ROWS = slice(70, 110)
METRICS = ("roc_auc", "prbep", "accuracy", "precision", "recall", "f1", "prec_at_k", "rec_at_k")

#: family -> (fit options, coef rtol, |fun| tolerance (rel, abs))
FIT = {
    "closed-form": ({}, 1e-9, (1e-9, 0.0)),
    "lbfgs": ({"tol": 1e-10, "max_iter": 2000}, 1e-6, (1e-10, 0.0)),
    "smooth": ({"lam": 1e-2, "epsilon": 0.25, "tol": 1e-9, "max_iter": 2000}, 1e-6, (1e-10, 0.0)),
    "newton": ({"lam": 1e-2, "eps": 1e-8}, 1e-6, (1e-10, 0.0)),
    "structural": ({"eps": 1e-9, "max_iter": 2000}, 1e-6, (0.0, 1e-9)),
    "rate": ({"constraints": ["recall >= 0.9"], "tol": 1e-10, "max_iter": 2000, "mm_steps": 3}, 1e-6, (1e-10, 0.0)),
}


def _data(seed: int = 5, scales: bool = False):
    """Well separated data (positive_shift 3: PRBEP / F1 / error fits are not w = 0) and weights in {0..3}."""
    X, y = classification_data(N, D, seed=seed, scales=scales, positive_shift=3.0)
    v = np.random.default_rng(seed).integers(0, 4, N)
    v[ZERO_WEIGHT_ROWS] = 0
    return X, y, v


def _repeated(X, y, v):
    return np.repeat(X, v, axis=0), np.repeat(y, v)


def _store_pair(root, X, y, v):
    """The weighted store and the repeated rows' store, with different shard boundaries."""
    Xr, yr = _repeated(X, y, v)
    nr = Xr.shape[0]
    weighted = write_store(root / "weighted.zarr", X, y, WEIGHTED_SHARDS, weight=v.astype(np.float64))
    repeated = write_store(root / "repeated.zarr", Xr, yr, [nr // 3, 0, nr // 2, nr - nr // 3 - nr // 2])
    return weighted, repeated


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``scaled -> (weighted store, repeated store)``; scaled data spans six orders of magnitude (moment objectives)."""
    out = {}
    for scaled in (False, True):
        root = tmp_path_factory.mktemp(f"weights-scaled{int(scaled)}")
        out[scaled] = _store_pair(root, *_data(scales=scaled))
    return out


def _family(name: str) -> str:
    spec = OBJECTIVES[name]
    if spec.family == "moment":
        return "closed-form" if spec.solvers[0] == "closed-form" else "lbfgs"
    return "newton" if spec.solvers[0] == "newton" else spec.family


def _options(name: str) -> dict:
    opts = dict(FIT[_family(name)][0])
    if name == "false-negative-rate":  # the recall bound would be met by predicting everything positive
        opts["constraints"] = ["false_positive_rate <= 0.1"]
    if OBJECTIVES[name].takes_k:
        opts["k"] = K
    return opts


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1e-300, float(np.max(np.abs(b)))))


def _assert_same_model(mw, mr, rtol, fun_tol, X):
    """coef, intercept (to the score scale), objective value and training metrics of two models."""
    assert _rel(mw.coef, mr.coef) <= rtol, (mw.coef, mr.coef)
    score_scale = float(np.max(np.abs(X.astype(np.float64) @ mr.coef))) + abs(mr.intercept) + 1.0
    assert abs(mw.intercept - mr.intercept) <= rtol * score_scale, (mw.intercept, mr.intercept)
    rel, abs_ = fun_tol
    assert mw.fit["fun"] == pytest.approx(mr.fit["fun"], rel=rel, abs=abs_)
    tw, tr = mw.metrics["train"], mr.metrics["train"]
    assert mw.training["weighted"] and not mr.training["weighted"]
    assert tw["weight_total"] == tr["n"] and tw["weight_positive"] == tr["n_positive"]
    for key in METRICS:
        assert tw[key] == pytest.approx(tr[key], rel=1e-12, abs=1e-15), key


# ---------------------------------------------------------------------------
# 1. every objective: weighted store == repeated rows
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_every_objective_fits_the_weighted_store_as_the_repeated_rows(stores, objective):
    weighted, repeated = stores[False]
    X, _, _ = _data()
    opts = _options(objective)
    mw = dpipe.train(weighted, objective, engine="local", **opts)
    mr = dpipe.train(repeated, objective, engine="local", **opts)
    _, rtol, fun_tol = FIT[_family(objective)]
    assert mw.fit["success"] and mr.fit["success"]
    assert np.any(mr.coef != 0), "a degenerate fit (w = 0) would not test the weights"
    _assert_same_model(mw, mr, rtol, fun_tol, X)
    if OBJECTIVES[objective].takes_k:
        assert mw.fit["info"]["k"] == mr.fit["info"]["k"] == K


@pytest.mark.parametrize("objective", ["auc-moment", "error-moment"])
def test_moment_objectives_on_badly_scaled_features(stores, objective):
    """Columns over six orders of magnitude and a mean of 1e5: the weighted moments must not lose them."""
    weighted, repeated = stores[True]
    X, _, _ = _data(scales=True)
    opts = _options(objective)
    mw = dpipe.train(weighted, objective, engine="local", **opts)
    mr = dpipe.train(repeated, objective, engine="local", **opts)
    _, rtol, fun_tol = FIT[_family(objective)]
    _assert_same_model(mw, mr, rtol, fun_tol, X)


def test_auc_moment_by_lbfgs(stores):
    weighted, repeated = stores[False]
    X, _, _ = _data()
    opts = dict(FIT["lbfgs"][0], solver="lbfgs")
    mw = dpipe.train(weighted, "auc-moment", engine="local", **opts)
    mr = dpipe.train(repeated, "auc-moment", engine="local", **opts)
    _assert_same_model(mw, mr, FIT["lbfgs"][1], FIT["lbfgs"][2], X)


# ---------------------------------------------------------------------------
# 2. value, gradient and plane: no solver involved
# ---------------------------------------------------------------------------
def _datasets(seed: int):
    """A weighted LocalDataset (one shard all zero weight, one empty) and the repeated rows in three shards."""
    X, y, v = _data(seed)
    bounds = np.cumsum([0] + WEIGHTED_SHARDS)
    weighted = LocalDataset([
        Shard(X=X[a:b], y=y[a:b], weight=v[a:b].astype(np.float32), index=i) for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))
    ])
    Xr, yr = _repeated(X, y, v)
    cuts = [0, Xr.shape[0] // 4, Xr.shape[0] // 4, 2 * Xr.shape[0] // 3, Xr.shape[0]]
    repeated = LocalDataset([Shard(X=Xr[a:b], y=yr[a:b], index=i) for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))])
    return weighted, repeated, int(v.sum())


def _probes(seed: int) -> list[np.ndarray]:
    """w = 0 (every score tied), the binary column alone (two tied groups), and random directions."""
    rng = np.random.default_rng(100 + seed)
    return [np.zeros(D), np.eye(D)[0], *(rng.normal(size=D) * s for s in (0.1, 1.0, 5.0))]


def _objective(risk, ds, lam):
    """``lam/2 ||w||^2 + R(w)`` through the engine's passes, assembled as the fit layer does."""
    return PreconditionedObjective(SmoothedObjective(RankPasses(ds), risk), np.ones(ds.n_features), lam)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", ["auc-smooth", "prbep-smooth"])
def test_smoothed_value_and_gradient_equal_the_repeated_rows(name, seed):
    weighted, repeated, total = _datasets(seed)
    for width in (1e-3, 0.1, 1.0):
        # prbep's mu is per unit of weight: the default 2 epsilon / W uses the total weight, equal to the repeated count
        risk = SmoothedAUCRisk(width) if name == "auc-smooth" else SmoothedPRBEPRisk(2.0 * width / total)
        ow, orr = _objective(risk, weighted, 1e-3), _objective(risk, repeated, 1e-3)
        for w in _probes(seed):
            fw, gw = ow.value_and_grad(w)
            fr, gr = orr.value_and_grad(w)
            assert fw == pytest.approx(fr, rel=1e-10, abs=1e-14), (width, w)
            np.testing.assert_allclose(gw, gr, rtol=1e-10, atol=1e-10 * max(1e-12, np.abs(gr).max()))
            assert ow.last["J"] == pytest.approx(orr.last["J"], rel=1e-10, abs=1e-14)  # the exact, non-smooth risk
            assert ow.train_auc() == pytest.approx(orr.train_auc(), rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("bias", [0.0, 1.0])
@pytest.mark.parametrize("loss", list(STRUCTURAL_LOSSES))
def test_structural_plane_equals_the_repeated_rows(loss, bias, seed):
    weighted, repeated, _ = _datasets(seed)
    k = K if loss in ("prec@k", "rec@k") else None
    rw = StructuralRisk(RankPasses(weighted), StructuralLoss(loss, k), bias)
    rr = StructuralRisk(RankPasses(repeated), StructuralLoss(loss, k), bias)
    rng = np.random.default_rng(seed)
    elsewhere = [rng.normal(size=rw.n_features) * s for s in (0.3, 3.0)]
    for i, w in enumerate(_probes(seed)):
        v = np.append(w, rng.normal()) if bias else w
        value_w, loss_w, a_w = rw.plane(v)
        value_r, loss_r, a_r = rr.plane(v)
        assert value_w == pytest.approx(value_r, rel=1e-10, abs=1e-14), w
        assert loss_w == pytest.approx(loss_r, rel=1e-12, abs=1e-15), w
        if i >= 2:  # distinct scores (up to a row's own copies): the most violated labeling is unique
            np.testing.assert_allclose(a_w, a_r, rtol=1e-10, atol=1e-10 * max(1e-12, np.abs(a_r).max()))
            continue
        # tied scores: prbep / prec@k / rec@k may label part of a tied group, and which rows is the order of the
        # tied rows (it differs between two unweighted stores with their rows permuted too). Any such plane is a
        # valid one: tight at v and below the risk everywhere.
        for delta, a in ((loss_w, a_w), (loss_r, a_r)):
            assert delta + v @ a == pytest.approx(value_r, rel=1e-10, abs=1e-12)
            for u in elsewhere:
                assert rr.plane(u)[0] >= delta + u @ a - 1e-10 * (1 + abs(delta + u @ a))


# ---------------------------------------------------------------------------
# 3. calibration: the weighted best threshold
# ---------------------------------------------------------------------------
def _brute_force_threshold_errors(s: np.ndarray, y: np.ndarray) -> float:
    """The fewest training errors of "positive iff s > t" over every cut of the (repeated) rows."""
    u = np.unique(s)
    cuts = np.concatenate([[u[0] - 1.0], (u[:-1] + u[1:]) / 2, [u[-1]]])
    return float(min(np.sum((s > t) != (y > 0)) for t in cuts))


@pytest.mark.parametrize("seed", [0, 1])
def test_best_threshold_of_the_weighted_summary_is_the_repeated_rows_one(seed):
    weighted, repeated, _ = _datasets(seed)
    X, y, v = _data(seed)
    Xr, yr = _repeated(X, y, v)
    for w in _probes(seed)[1:]:
        tw, ew = rank_summary(weighted, w, 0.0).best_threshold()
        tr, er = rank_summary(repeated, w, 0.0).best_threshold()
        assert tw == tr and ew == er  # the same scores and the same cuts: bit for bit
        sr = Xr.astype(np.float64) @ w
        assert er == _brute_force_threshold_errors(sr, yr)
        assert np.sum((sr > tr) != (yr > 0)) == er


@pytest.mark.parametrize("objective", ["auc-moment", "error-moment", "auc-smooth", "rocarea", "prec@k"])
def test_calibrated_intercept_equals_the_repeated_store(stores, objective):
    """The calibration table (every candidate's training error and threshold) and the final intercept."""
    weighted, repeated = stores[False]
    X, y, v = _data()
    opts = _options(objective)
    mw = dpipe.train(weighted, objective, engine="local", **opts)
    mr = dpipe.train(repeated, objective, engine="local", **opts)
    rtol = FIT[_family(objective)][1]
    cw, cr = mw.fit["info"]["calibration"], mr.fit["info"]["calibration"]
    assert [r["label"] for r in cw] == [r["label"] for r in cr]
    scale = float(np.max(np.abs(X.astype(np.float64) @ mr.coef))) + 1.0
    for a, b in zip(cw, cr):
        assert a["train_error"] == pytest.approx(b["train_error"], rel=1e-12)
        # the calibrated intercept, not the shift: a moment candidate's own (modelled) intercept comes from the class
        # variances, whose rounding differs between the two stores' moment merges by more than the scores' does
        assert abs(a["intercept"] - b["intercept"]) <= rtol * scale
    assert abs(mw.intercept - mr.intercept) <= rtol * scale
    # the calibrated rule makes the fewest weighted errors among all thresholds of its scores
    Xr, yr = _repeated(X, y, v)
    sr = Xr.astype(np.float64) @ mr.coef
    errors = np.sum((sr + mr.intercept > 0) != (yr > 0))
    assert errors == _brute_force_threshold_errors(sr, yr)
    assert min(r["train_error"] for r in cw) == pytest.approx(errors / yr.size, rel=1e-12)


# ---------------------------------------------------------------------------
# 4. the estimator
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("objective", ["auc-moment", "auc-smooth", "rocarea"])
def test_estimator_sample_weight_equals_repeated_rows(objective):
    X, y, v = _data(3)
    labels = np.where(y > 0, "yes", "no")
    Xr, lr = np.repeat(X, v, axis=0), np.repeat(labels, v)
    opts = _options(objective)
    a = DPipeClassifier(objective, **opts).fit(X, labels, sample_weight=v)
    b = DPipeClassifier(objective, **opts).fit(Xr, lr)
    rtol = FIT[_family(objective)][1]
    assert _rel(a.coef_, b.coef_) <= rtol
    scale = float(np.max(np.abs(X.astype(np.float64) @ b.coef_[0]))) + 1.0
    assert abs(a.intercept_[0] - b.intercept_[0]) <= rtol * scale
    assert a.fit_result_.fun == pytest.approx(b.fit_result_.fun, rel=FIT[_family(objective)][2][0], abs=FIT[_family(objective)][2][1])
    assert list(a.classes_) == list(b.classes_) == ["no", "yes"]
    np.testing.assert_array_equal(a.predict(Xr), b.predict(Xr))


# ---------------------------------------------------------------------------
# 5. refusals
# ---------------------------------------------------------------------------
def test_f1_refuses_non_integer_weights(tmp_path):
    X, y, v = _data()
    w = v + 0.5  # no zero weights left, every one fractional
    store = write_store(tmp_path / "frac.zarr", X, y, [150, 150], weight=w)
    with pytest.raises(ParameterError, match="integer sample weights"):
        dpipe.train(store, "f1", engine="local")
    with pytest.raises(ParameterError, match="integer sample weights"):
        DPipeClassifier("f1").fit(X, y, sample_weight=w)


def test_estimator_refuses_negative_sample_weight():
    X, y, v = _data()
    bad = v.astype(np.float64)
    bad[5] = -1.0
    with pytest.raises(ValueError, match="[Nn]egative"):
        DPipeClassifier("auc-moment").fit(X, y, sample_weight=bad)


# ---------------------------------------------------------------------------
# 6. distributed parity
# ---------------------------------------------------------------------------
def test_weighted_auc_smooth_on_two_workers_equals_local(stores, client):
    weighted, _ = stores[False]
    opts = _options("auc-smooth")
    local = dpipe.train(weighted, "auc-smooth", engine="local", **opts)
    dist = dpipe.train(weighted, "auc-smooth", engine="dask", client=client, **opts)
    assert dist.training["engine"] == "dask" and local.training["engine"] == "local"
    assert _rel(dist.coef, local.coef) <= 1e-8
    assert dist.fit["fun"] == pytest.approx(local.fit["fun"], rel=1e-12)
    for key in METRICS:
        assert dist.metrics["train"][key] == pytest.approx(local.metrics["train"][key], rel=1e-12, abs=1e-15), key
