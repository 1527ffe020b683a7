"""Trust-region Newton-CG (TRON: Lin and Moré 1999, as LIBLINEAR uses it) on the coordinator.

Each Newton iteration minimizes the quadratic model ``g.s + 1/2 s.H s`` by conjugate
gradients inside a trust region ``||s|| <= delta`` (Steihaug: stop at the boundary, or
when the residual is below ``0.1 ||g||``), then evaluates the objective at ``w + s`` and
accepts the step when the actual reduction is a fair share of the predicted one; the
radius follows LIBLINEAR's rules. No line search: one objective evaluation per Newton
iteration, plus one Hessian-vector product per CG step (at a fixed ``w``, where the
pairwise objectives reuse their sort).

An objective that also has ``preconditioner() -> M`` (a positive diagonal at the last
``value_and_grad`` point, or None) has its CG steps preconditioned by ``M``, as in
LIBLINEAR's TRON since 2.20 (Hsia, Chiang and Lin 2018). Unlike LIBLINEAR the trust
region stays Euclidean: on auc's Huber hinge a region in ``M``'s norm took more Newton
iterations than no preconditioner at all (covtype: 36 against 16; a9a 12 against 8), a
Euclidean one fewer CG steps at as many Newton iterations (``python -m bench race``).

Stopping rule (LIBLINEAR's): ``||g(w)|| <= eps ||g(w0)||``.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from typing import Any, Protocol

import numpy as np

from .._interrupts import check_interrupted
from .._log import VERBOSE
from .._progress import Throttle
from ..exceptions import ConvergenceWarning
from ._result import FitResult

__all__ = ["NewtonObjective", "minimize_tron", "TRON_ETA", "TRON_SIGMA"]

log = logging.getLogger("dpipe.solvers")

#: acceptance thresholds of the actual / predicted reduction (LIBLINEAR's eta0, eta1, eta2)
TRON_ETA = (1e-4, 0.25, 0.75)
#: radius factors (LIBLINEAR's sigma1, sigma2, sigma3)
TRON_SIGMA = (0.25, 0.5, 4.0)
#: CG stops when the residual is below this times ``||g||`` (LIBLINEAR's)
CG_RELATIVE_TOL = 0.1
#: reductions (actual and predicted) below this times ``|f|`` are rounding: TRON stops (LIBLINEAR uses 1e-12, which
#: stops well-conditioned problems short of small ``eps``; a few float64 ulps is what ``f`` can resolve)
PRECISION = 8 * np.finfo(np.float64).eps


class NewtonObjective(Protocol):
    """What TRON needs: value, gradient, and Hessian-vector products at the last ``value_and_grad`` point."""

    def value(self, w: np.ndarray) -> float:
        """The objective at a trial point (it may become the next expansion point)."""

    def value_and_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """Value and gradient at ``w``; the Hessian-vector products are then taken at ``w``."""

    def hess_vec(self, d: np.ndarray) -> np.ndarray:
        """The (generalized) Hessian at the expansion point times ``d``."""


def _boundary_step(s: np.ndarray, d: np.ndarray, delta: float) -> float:
    """``tau >= 0`` with ``||s + tau d|| = delta`` (``||s|| <= delta``), computed without cancellation."""
    std, sts, dtd = float(s @ d), float(s @ s), float(d @ d)
    rad = math.sqrt(max(std * std + dtd * (delta * delta - sts), 0.0))
    return (delta * delta - sts) / (std + rad) if std >= 0 else (rad - std) / dtd


def _truncated_cg(objective: NewtonObjective, g: np.ndarray, delta: float, max_cg: int,
                  M: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Steihaug CG on ``H s = -g`` within ``||s|| <= delta``: ``(s, r = -g - H s, steps, reached the boundary)``.

    With a diagonal preconditioner ``M`` the directions are preconditioned CG's (``z = r / M``);
    the stopping test stays on the residual, ``||r|| <= 0.1 ||g||``, so both solve the model
    equally far.
    """
    s = np.zeros_like(g)
    r = -g
    z = r if M is None else r / M
    d = z.copy()
    ztr = float(z @ r)
    cg_tol = CG_RELATIVE_TOL * math.sqrt(float(g @ g))
    for step in range(1, max_cg + 1):
        if math.sqrt(float(r @ r)) <= cg_tol:
            return s, r, step - 1, False
        hd = objective.hess_vec(d)
        dhd = float(d @ hd)
        if dhd <= 0:  # no curvature along d (a flat direction of the generalized Hessian): go to the boundary
            tau = _boundary_step(s, d, delta)
            return s + tau * d, r - tau * hd, step, True
        alpha = ztr / dhd
        s_next = s + alpha * d
        if math.sqrt(float(s_next @ s_next)) > delta:
            tau = _boundary_step(s, d, delta)
            return s + tau * d, r - tau * hd, step, True
        s = s_next
        r = r - alpha * hd
        z = r if M is None else r / M
        ztr_next = float(z @ r)
        d = z + (ztr_next / ztr) * d
        ztr = ztr_next
    return s, r, max_cg, False


def _new_radius(delta: float, snorm: float, gs: float, curvature_gap: float, actual: float, predicted: float) -> float:
    """LIBLINEAR's trust-region update: the radius after a step of norm ``snorm`` that reduced ``f`` by ``actual`` where the
    model predicted ``predicted`` (``gs = g.s``; ``curvature_gap = f(w + s) - f(w) - g.s``, which sets the step's
    interpolated length ``alpha``)."""
    eta0, eta1, eta2 = TRON_ETA
    sigma1, sigma2, sigma3 = TRON_SIGMA
    alpha = sigma3 if curvature_gap <= 0 else max(sigma1, -0.5 * (gs / curvature_gap))
    if actual < eta0 * predicted:
        return min(max(alpha, sigma1) * snorm, sigma2 * delta)
    if actual < eta1 * predicted:
        return max(sigma1 * delta, min(alpha * snorm, sigma2 * delta))
    if actual < eta2 * predicted:
        return max(sigma1 * delta, min(alpha * snorm, sigma3 * delta))
    return max(delta, min(alpha * snorm, sigma3 * delta))


def minimize_tron(
    objective: NewtonObjective,
    x0: np.ndarray,
    *,
    eps: float = 1e-3,
    max_iter: int = 100,
    max_cg: int | None = None,
    name: str = "",
    monitor: Any = None,
    callback: Any = None,
    gnorm_ref: float | None = None,
) -> FitResult:
    """Minimize a twice (generalized-) differentiable convex objective with TRON.

    Parameters
    ----------
    objective : NewtonObjective
        Value, gradient and Hessian-vector products.
    x0 : ndarray
        Starting point.
    eps : float
        Stop when ``||g|| <= eps ||g(x0)||`` (LIBLINEAR's rule and default).
    max_iter : int
        Newton iterations at most.
    max_cg : int, optional
        CG steps per Newton iteration at most (default: the dimension).
    name : str
        Prefix of the log lines.
    monitor : callable, optional
        Called with every accepted iterate; its dict joins the history. Its own time is left
        out of the history's ``seconds`` and of ``time_solve`` (counted in ``seconds_monitor``),
        so that measuring a validation metric does not inflate the solver's time.
    callback : callable, optional
        ``callback(w, record) -> str | None``, called with every accepted iterate and its
        history record (after ``monitor``); a message ends the run there: ``status`` 2,
        ``success``, that ``message`` (a caller's stop, e.g. early stopping).
    gnorm_ref : float, optional
        A warm start's reference: stop when ``||g|| <= eps gnorm_ref`` instead (LIBLINEAR's
        rule with an initial solution: the gradient norm at ``w = 0``, where a path's first
        fit started; the warm start's own gradient is small already and would ask for more).

    Returns
    -------
    FitResult
        ``nit`` Newton iterations, ``nfev`` objective evaluations; ``info["cg_steps"]``
        (all CG steps, each one Hessian-vector product).
    """
    eta0 = TRON_ETA[0]
    t0 = time.perf_counter()
    w = np.array(x0, dtype=np.float64)
    max_cg = int(max_cg) if max_cg is not None else max(1, w.size)
    f, g = objective.value_and_grad(w)
    nfev, cg_total = 1, 0
    gnorm0 = gnorm = float(np.linalg.norm(g))
    if gnorm_ref is not None:
        gnorm0 = max(float(gnorm_ref), 0.0)
    precondition = getattr(objective, "preconditioner", None)
    M = precondition() if precondition is not None else None
    delta = gnorm0
    history: list[dict[str, Any]] = []
    pace = Throttle()  # per-iteration INFO lines: one every dpipe.progress-interval (every one at -v)
    status, message = 0, "CONVERGENCE: ||g|| <= eps ||g(w0)||"
    halted = False  # the callback ended the run
    nit = 0
    monitor_seconds = 0.0
    log.info("%sTRON: f=%.10g |g|=%.3e, stop at |g| <= %.3e", name, f, gnorm, eps * gnorm0)
    while gnorm > eps * gnorm0:
        check_interrupted()  # a safe point: a signal whose first raise was dropped stops the fit here
        if nit >= max_iter:
            status, message = 1, f"ITERATION LIMIT: {max_iter} Newton iterations"
            break
        s, r, steps, _ = _truncated_cg(objective, g, delta, max_cg, M)
        cg_total += steps
        gs = float(g @ s)
        predicted = -0.5 * (gs - float(s @ r))
        f_new = objective.value(w + s)
        nfev += 1
        actual = f - f_new
        snorm = float(np.linalg.norm(s))
        if nit == 0:
            delta = min(delta, snorm)
        delta = _new_radius(delta, snorm, gs, f_new - f - gs, actual, predicted)
        if actual > eta0 * predicted:
            nit += 1
            w = w + s
            f, g = objective.value_and_grad(w)
            gnorm = float(np.linalg.norm(g))
            M = precondition() if precondition is not None else None  # the new point's diagonal (the radius carries over)
            now = time.perf_counter()
            rec: dict[str, Any] = {"iteration": nit, "fun": float(f), "grad_norm": gnorm, "nfev": nfev, "cg_steps": steps,
                                   "seconds": now - t0 - monitor_seconds}
            if monitor is not None:  # its time (a validation pass) is not the solver's: kept apart, as L-BFGS does
                rec.update(monitor(w))
                monitor_seconds += time.perf_counter() - now
                rec["seconds_monitor"] = monitor_seconds
            history.append(rec)
            if log.isEnabledFor(VERBOSE):
                log.log(VERBOSE, "%siter %3d  f=%.10g  |g|=%.3e  cg=%d  delta=%.3e  %.2fs", name, nit, f, gnorm, steps, delta, rec["seconds"])
            elif pace.due():
                log.info("%siter %3d  f=%.7g  |g|=%.2e  cg=%d  %.1fs", name, nit, f, gnorm, steps, rec["seconds"])
            why = callback(w, rec) if callback is not None else None
            if why:
                status, message, halted = 2, str(why), True
                break
        if actual <= 0 and predicted <= 0:
            status, message = 2, "STOPPED: no reduction predicted or achieved (the precision limit)"
            break
        if abs(actual) <= PRECISION * abs(f) and abs(predicted) <= PRECISION * abs(f):
            status, message = 2, "STOPPED: reductions at f's rounding (the precision limit)"
            break
    elapsed = time.perf_counter() - t0 - monitor_seconds
    success = status == 0 or halted or gnorm <= 10 * eps * gnorm0
    log.info("%sdone: %s after %d Newton iterations, %d CG steps, %d evaluations, f=%.10g, |g|=%.2e, %.2fs",
             name, message, nit, cg_total, nfev, f, gnorm, elapsed)
    if not success:
        warnings.warn(f"{name}TRON stopped ({message}) with ||g|| = {gnorm:.2e} > eps ||g(w0)|| = {eps * gnorm0:.2e}; "
                      "raise 'max_iter' or loosen 'eps'." if status == 1 else
                      f"{name}TRON stopped ({message}) with ||g|| = {gnorm:.2e} > eps ||g(w0)|| = {eps * gnorm0:.2e}; "
                      "the objective may be badly scaled: try a larger penalty 'lam'.", ConvergenceWarning, stacklevel=2)
    return FitResult(x=w, fun=float(f), nit=nit, nfev=nfev, status=status, success=bool(success), message=message, history=history,
                     time_solve=elapsed, info={"cg_steps": cg_total, "grad_norm0": gnorm0, "grad_norm": gnorm, "eps": eps,
                                               "preconditioned": M is not None})
