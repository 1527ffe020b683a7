"""The 1-slack cutting-plane method (SVM-perf ``-w 3``, equivalently BMRM).

Minimizes ``J(w) = lam/2 ||w||^2 + R(w)`` for a convex piecewise-linear risk given by
an oracle ``w -> (R(w), b, a)`` with ``R(v) >= b + a . v`` (tight at ``w``). Every
iteration adds the plane at the current ``w`` and solves the master problem
``min_v lam/2 ||v||^2 + max_t (b_t + a_t . v)`` exactly through its dual, a QP over
the simplex of plane weights (:func:`~dpipe.solvers._master_qp.solve_simplex_qp`);
its value is a lower bound on ``min J``. The run stops when the best ``J`` found is
within ``eps`` of that bound (SVM-perf's ``-e`` is this ``eps`` in percent: its
default 0.1 is ``eps = 1e-3``). The plane ``(0, 0)`` (``R >= 0``) starts the master
problem, so the first iterate is ``w = 0``.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .._interrupts import check_interrupted
from .._log import VERBOSE
from .._progress import Throttle
from ..exceptions import ConvergenceWarning
from ._master_qp import solve_simplex_qp
from ._result import FitResult

__all__ = ["fit_cutting_plane"]

log = logging.getLogger("dpipe.solvers")


def fit_cutting_plane(
    risk: Any,
    n_features: int,
    lam: float,
    *,
    eps: float = 1e-3,
    max_iter: int = 1000,
    max_inactive: int = 50,
    validate: Callable[[np.ndarray], dict[str, Any]] | None = None,
    callback: Callable[[np.ndarray, dict[str, Any]], str | None] | None = None,
    name: str = "",
) -> FitResult:
    """Cutting-plane minimization of ``lam/2 ||w||^2 + R(w)``.

    Parameters
    ----------
    risk : object
        ``risk.plane(w) -> (R(w), b, a)`` (e.g. :class:`~dpipe.objectives.StructuralRisk`),
        optionally with timings in ``risk.last``.
    n_features : int
        Dimension of ``w``.
    lam : float
        Ridge weight (> 0).
    eps : float
        Stop when ``min_t J(w_t) - lower bound <= eps`` (absolute, in the units of
        the risk: SVM-perf's ``-e`` divided by 100).
    max_iter : int
        Bound on oracle calls.
    max_inactive : int
        Drop a plane from the master problem after this many consecutive iterations
        with zero weight (SVM-perf does the same), so the QP stays small. Every
        master solution is still a valid lower bound; the reported bound is the
        largest so far.
    validate : callable, optional
        ``w -> dict`` of extra per-iteration figures (e.g. validation AUC); its time
        is left out of ``seconds`` and counted in ``seconds_monitor``.
    callback : callable, optional
        ``callback(w, record) -> str | None``, called after every iteration with the iterate
        and its history record; a message ends the run there (``status`` 2, ``success``,
        that ``message``: a caller's stop, e.g. :class:`~dpipe.fit._early_stopping.EarlyStopping`).
    name : str
        Prefix of the progress lines: one per iteration, at INFO a short one (``J``, the
        gap, seconds), at VERBOSE instead one with the lower bound, the loss, the planes
        and the validation figures.

    Returns
    -------
    FitResult
        ``x`` the iterate with the lowest ``J``; ``history`` per iteration: ``J``,
        ``best_J``, ``lower_bound``, ``gap``, ``risk``, ``loss`` (Delta of the new
        plane), the planes in the master problem and those with positive weight,
        ``seconds`` (solver wall time without the monitor), ``seconds_qp`` and the
        oracle's timings; ``info``: ``lower_bound``, ``gap``, ``planes``.
    """
    if not lam > 0:
        raise ValueError(f"lam must be > 0 for the cutting-plane solver; got {lam}")
    t0 = time.perf_counter()
    d = int(n_features)
    A = np.zeros((1, d))  # planes: R(v) >= b_t + A_t . v; the first is R >= 0
    b = np.zeros(1)
    G = np.zeros((1, 1))  # A A'
    idle = np.zeros(1, dtype=np.int64)  # consecutive iterations with zero weight
    alpha = np.ones(1)
    w = np.zeros(d)
    lower = 0.0
    best_J, best_w = np.inf, w
    monitor_seconds = qp_seconds = 0.0
    history: list[dict[str, Any]] = []
    pace = Throttle()  # per-iteration INFO lines: one every dpipe.progress-interval (every one at -v)
    status, message = 1, f"iteration limit ({max_iter}) reached"
    for it in range(1, int(max_iter) + 1):
        check_interrupted()  # a safe point: a signal whose first raise was dropped stops the fit here
        R, loss, a = risk.plane(w)
        J = 0.5 * lam * float(w @ w) + max(R, 0.0)
        if J < best_J:
            best_J, best_w = J, w
        gap = best_J - lower
        now = time.perf_counter()
        rec: dict[str, Any] = {
            "iteration": it, "J": J, "best_J": best_J, "lower_bound": lower, "gap": gap, "risk": R, "loss": loss,
            "planes": int(A.shape[0]), "active_planes": int(np.count_nonzero(alpha > 0)),
            "seconds": now - t0 - monitor_seconds, "seconds_qp": qp_seconds,
        }
        rec.update({k: v for k, v in getattr(risk, "last", {}).items() if k.startswith(("seconds_", "bytes"))})
        if validate is not None:
            rec.update(validate(w))
            monitor_seconds += time.perf_counter() - now
            rec["seconds_monitor"] = monitor_seconds
        history.append(rec)
        if log.isEnabledFor(VERBOSE):  # one line per iteration: every figure at VERBOSE (-v), a short one (one terminal line) at INFO
            log.log(
                VERBOSE, "%siter %4d  J=%.8g  lower=%.8g  gap=%.3e  loss=%.4f  planes=%d/%d  %.2fs%s", name, it, J, lower, gap, loss,
                rec["active_planes"], rec["planes"], rec["seconds"],
                "".join(f"  {k}={v:.5f}" for k, v in rec.items() if k.startswith("validation_")),
            )
        elif pace.due():
            log.info("%siter %4d  J=%.7g  gap=%.2e  %.1fs", name, it, J, gap, rec["seconds"])
        why = callback(w, rec) if callback is not None else None
        if why:
            status, message = 2, str(why)
            break
        if gap <= eps:
            status, message = 0, f"CONVERGENCE: gap {gap:.3g} <= eps {eps:g}"
            break
        tq = time.perf_counter()
        keep = idle < max_inactive
        if not keep.all():
            A, b, G, idle = A[keep], b[keep], G[np.ix_(keep, keep)], idle[keep]
        row = A @ a
        A = np.vstack([A, a])
        b = np.append(b, loss)
        G = np.block([[G, row[:, None]], [row[None, :], np.array([[a @ a]])]])
        idle = np.append(idle, 0)
        alpha = solve_simplex_qp(G / lam, b)
        idle = np.where(alpha > 1e-10 * alpha.max(), 0, idle + 1)
        w = -(A.T @ alpha) / lam
        lower = max(lower, float(b @ alpha - 0.5 / lam * alpha @ G @ alpha))
        qp_seconds += time.perf_counter() - tq
    elapsed = time.perf_counter() - t0
    log.info("%sdone: %s after %d iterations, J=%.10g, %.2fs", name, message, len(history), best_J, elapsed - monitor_seconds)
    if status == 1:
        empty = not np.any(np.asarray(best_w))  # every weight 0: the best iterate is the start, the model scores every row alike
        warnings.warn(
            f"{name}cutting plane stopped at the iteration limit ({max_iter}) with gap {history[-1]['gap']:.3g} > eps = {eps:g}"
            + (" and every weight 0: the model is empty (it scores every row alike)" if empty else "")
            + "; raise 'max_iter' or loosen 'eps'.",
            ConvergenceWarning,
            stacklevel=2,
        )
    return FitResult(
        x=np.asarray(best_w), fun=float(best_J), nit=len(history), nfev=len(history), status=status, success=status in (0, 2), message=message,
        history=history, time_solve=elapsed - monitor_seconds, info={"lower_bound": lower, "gap": best_J - lower, "planes": int(A.shape[0])},
    )
