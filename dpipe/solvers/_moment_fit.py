"""Fitting the moment objectives: closed form or L-BFGS, no data pass after the moments."""

from __future__ import annotations

import math
import time

import numpy as np

from ..objectives import AUCMomentObjective, ErrorMomentObjective, StandardizedMoments, closed_form_auc_direction
from ..reduce import ClassMoments
from ._lbfgs import minimize_lbfgs
from ._result import Candidate, FitResult

__all__ = ["fit_auc_moment", "fit_error_moment", "best_moment_intercept", "paper_start"]


def paper_start(moments: ClassMoments, augment: bool) -> tuple[np.ndarray, float]:
    """The paper's starting point ``mu+ - (mu-.mu+ / ||mu-||^2) mu-`` in raw coordinates.

    With ``augment`` the means carry the bias feature 1 and the last entry is the
    intercept. Falls back to ``mu+ - mu-`` when the projection vanishes.
    """
    mp, mn = moments.mean[1], moments.mean[0]
    if augment:
        mp, mn = np.append(mp, 1.0), np.append(mn, 1.0)
    nn = float(mn @ mn)
    w = mp - (float(mn @ mp) / nn) * mn if nn > 0 else mp.copy()
    if not np.linalg.norm(w) > 1e-12 * max(1.0, float(np.linalg.norm(mp))):
        w = mp - mn
    if augment:
        return w[:-1], float(w[-1])
    return w, 0.0


def best_moment_intercept(std: StandardizedMoments, w_z: np.ndarray) -> float:
    """Intercept ``b`` minimizing the modelled error F_n01(w_z, b) for a fixed direction.

    A grid over the range the class score distributions cover, refined by a bounded
    scalar search around the best grid point.
    """
    import scipy.optimize

    obj = ErrorMomentObjective(std, lam=0.0)
    means = std.mu @ w_z
    sig = np.sqrt(np.maximum([w_z @ std.cov[c] @ w_z for c in (0, 1)], 1e-300))
    lo, hi = float(-means.max() - 8 * sig.max()), float(-means.min() + 8 * sig.max())
    grid = np.linspace(lo, hi, 401)
    vals = obj.log_error_along(w_z, grid)
    i = int(np.argmin(vals))
    a, c = grid[max(0, i - 1)], grid[min(len(grid) - 1, i + 1)]
    res = scipy.optimize.minimize_scalar(lambda b: obj.log_error(np.append(w_z, b)), bounds=(a, c), method="bounded", options={"xatol": 1e-10})
    return float(res.x) if res.fun <= vals[i] else float(grid[i])


def fit_auc_moment(
    moments: ClassMoments,
    *,
    solver: str = "closed-form",
    lam: float = 1e-3,
    ridge: float = 1e-6,
    max_iter: int = 500,
    tol: float = 1e-4,
    memory: int = 20,
) -> tuple[np.ndarray, float, FitResult]:
    """Minimize the moment ranking loss F_nrank.

    Parameters
    ----------
    moments : ClassMoments
        Moments of the training data.
    solver : {"closed-form", "lbfgs"}
        ``closed-form``: ``(S+ + S- + ridge I)^{-1} (mu+ - mu-)`` in standardized
        coordinates. ``lbfgs``: the paper's route, ``-log Phi(z) + lam (1 - ||w||^2)^2``
        from the paper's starting point.
    lam, ridge, max_iter, tol, memory
        Penalty weight, ridge of the closed form, and L-BFGS settings.

    Returns
    -------
    coef, intercept, FitResult
        Raw-feature weights and the intercept that minimizes the modelled error
        along that direction (the ranking loss itself ignores the intercept).
    """
    t0 = time.perf_counter()
    std = StandardizedMoments(moments)
    obj = AUCMomentObjective(std, lam=lam)
    if solver == "closed-form":
        w_z = closed_form_auc_direction(std, ridge=ridge)
        g = obj.value_and_grad(w_z)
        result = FitResult(x=w_z, fun=float(g[0]), nit=0, nfev=1, message="closed form (S+ + S- + ridge I)^-1 (mu+ - mu-)")
    else:
        w0, _ = paper_start(moments, augment=False)
        w0z, _ = std.to_standardized(w0)
        w0z /= np.linalg.norm(w0z) or 1.0
        result = minimize_lbfgs(
            obj, w0z, memory=memory, max_iter=max_iter, tol=tol, log_every=25, name="auc-moment: ",
            monitor=lambda w: {"rank_loss": obj.rank_loss(w)},
        )
        w_z = result.x
    b_z = best_moment_intercept(std, w_z)
    coef, intercept = std.to_raw(w_z, b_z)
    result.time_solve = time.perf_counter() - t0
    result.info.update(rank_loss=obj.rank_loss(w_z), solver=solver, standardized_intercept=b_z)
    return coef, intercept, result


def fit_error_moment(
    moments: ClassMoments,
    *,
    lam: float = 1e-3,
    max_iter: int = 500,
    tol: float = 1e-4,
    memory: int = 20,
    ridge: float = 1e-6,
) -> tuple[np.ndarray, float, FitResult, list[Candidate]]:
    """Minimize the moment expected error F_n01 with a bias feature, from two starts.

    The starts are the paper's point and the closed-form AUC direction with its
    best modelled intercept (both scaled to unit norm); the fit with the lower
    modelled F_n01 is returned and both are recorded in ``info["starts"]``.
    The candidates are every model worth comparing on the data (both fits and the
    AUC direction itself), in raw coordinates, best modelled error first: threshold
    calibration picks among them by exact training error.

    Returns
    -------
    coef, intercept, FitResult, list of Candidate
    """
    t0 = time.perf_counter()
    std = StandardizedMoments(moments)
    obj = ErrorMomentObjective(std, lam=lam)
    w_p, b_p = paper_start(moments, augment=True)
    wz, bz = std.to_standardized(w_p, b_p)
    starts = {"paper": np.append(wz, bz)}
    w_auc = closed_form_auc_direction(std, ridge=ridge)
    starts["auc-moment"] = np.append(w_auc, best_moment_intercept(std, w_auc))
    best: FitResult | None = None
    tried = {}
    candidates = []
    for label, v0 in starts.items():
        v0 = v0 / (np.linalg.norm(v0) or 1.0)
        res = minimize_lbfgs(
            obj, v0, memory=memory, max_iter=max_iter, tol=tol, log_every=25, name=f"error-moment ({label} start): ",
            monitor=lambda v: {"error": obj.error(v)},
            stop=lambda v: obj.error_gradient_norm(v) <= tol,
        )
        res.info["start"] = label
        err = obj.error(res.x)
        tried[label] = {"error": err, "fun": res.fun, "nit": res.nit, "status": res.status, "start_error": obj.error(v0)}
        coef_c, intercept_c = std.to_raw(res.x[:-1], float(res.x[-1]))
        candidates.append(Candidate(f"lbfgs from the {label} start", coef_c, intercept_c, modelled_error=err))
        if best is None or err < obj.error(best.x):
            best = res
    assert best is not None
    v_auc = starts["auc-moment"]
    coef_c, intercept_c = std.to_raw(v_auc[:-1], float(v_auc[-1]))
    candidates.append(Candidate("auc-moment direction", coef_c, intercept_c, modelled_error=obj.error(v_auc)))
    candidates.sort(key=lambda c: math.inf if c.modelled_error is None else c.modelled_error)  # every one here has its error
    coef, intercept = std.to_raw(best.x[:-1], float(best.x[-1]))
    best.time_solve = time.perf_counter() - t0
    best.info.update(error=obj.error(best.x), starts=tried)
    return coef, intercept, best, candidates
