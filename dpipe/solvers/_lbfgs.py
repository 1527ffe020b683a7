"""L-BFGS on the coordinator: scipy's L-BFGS-B, one objective evaluation per call."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import scipy.optimize

from ..exceptions import ConvergenceWarning
from ._result import FitResult

__all__ = ["minimize_lbfgs", "Objective"]

log = logging.getLogger("dpipe.solvers")


class Objective(Protocol):
    """Anything with ``value_and_grad(w) -> (float, ndarray)``."""

    def value_and_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]: ...


def minimize_lbfgs(
    objective: Objective,
    x0: np.ndarray,
    *,
    memory: int = 10,
    max_iter: int = 500,
    tol: float = 1e-5,
    monitor: Callable[[np.ndarray], dict[str, Any]] | None = None,
    log_every: int = 1,
    name: str = "",
    stop: Callable[[np.ndarray], bool] | None = None,
) -> FitResult:
    """Minimize ``objective`` with L-BFGS-B.

    Parameters
    ----------
    objective : Objective
        Gives value and gradient together (one data evaluation per call).
    x0 : ndarray
        Starting point.
    memory : int
        Number of correction pairs kept (``maxcor``).
    max_iter : int
        Iteration limit.
    tol : float
        Stop when the largest gradient component is below ``tol`` (``gtol``).
    monitor : callable, optional
        Called with the iterate after every iteration; its dict joins the history.
        Its own time is left out of the history's ``seconds`` (the solver's time)
        and counted in ``seconds_monitor`` (cumulative), so measuring a validation
        metric every iteration does not inflate the training time.
    log_every : int
        Log a progress line every this many iterations (and at the end).
    name : str
        Prefix of the progress lines.
    stop : callable, optional
        Called with the iterate after every iteration; returning True ends the run
        as converged (an objective's own stopping rule, e.g. on the gradient of the
        un-transformed loss). ``tol`` still applies.

    Returns
    -------
    FitResult
        ``status`` 0 converged, 1 iteration limit, 2 stopped in the line search.
        An iteration limit, or a line-search stop far from a stationary point,
        warns with :class:`ConvergenceWarning`.
    """
    t0 = time.perf_counter()
    last: dict[str, Any] = {}
    history: list[dict[str, Any]] = []
    nfev = 0
    stopped: list[bool] = []

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal nfev
        nfev += 1
        f, g = objective.value_and_grad(x)
        last.update(x=x.copy(), f=float(f), g=np.asarray(g, dtype=float))
        return float(f), np.asarray(g, dtype=float)

    monitor_seconds = 0.0

    def callback(xk: np.ndarray) -> None:
        nonlocal monitor_seconds
        now = time.perf_counter()
        same = "x" in last and np.array_equal(last["x"], xk)
        rec: dict[str, Any] = {
            "iteration": len(history) + 1,
            "fun": last["f"] if same else float("nan"),
            "grad_norm": float(np.linalg.norm(last["g"])) if same else float("nan"),
            "nfev": nfev,
            "seconds": now - t0 - monitor_seconds,
        }
        if monitor is not None:
            rec.update(monitor(xk))
            monitor_seconds += time.perf_counter() - now
            rec["seconds_monitor"] = monitor_seconds
        history.append(rec)
        if stop is not None and stop(xk):
            stopped.append(True)
        if log_every and rec["iteration"] % log_every == 0:
            extra = "".join(
                f" {k}={v:.6g}" for k, v in rec.items()
                if k not in ("iteration", "fun", "grad_norm", "nfev", "seconds", "stage") and isinstance(v, (float, int)) and not isinstance(v, bool)
            )
            log.info("%siter %4d  f=%.10g  |g|=%.3e  evals=%d  %.2fs%s", name, rec["iteration"], rec["fun"], rec["grad_norm"], nfev, rec["seconds"], extra)
        if stopped:
            raise StopIteration

    res = scipy.optimize.minimize(
        fun,
        np.asarray(x0, dtype=float),
        jac=True,
        method="L-BFGS-B",
        callback=callback,
        options={"maxcor": int(memory), "maxiter": int(max_iter), "gtol": float(tol), "ftol": 1e3 * np.finfo(float).eps},
    )
    elapsed = time.perf_counter() - t0
    gmax = float(np.max(np.abs(res.jac))) if res.jac is not None and np.size(res.jac) else 0.0
    msg = str(res.message)
    if stopped:
        status, success, msg = 0, True, "CONVERGENCE: the objective's stopping rule holds"
    elif res.status == 0:
        status, success = 0, True
    elif res.nit >= max_iter:
        status, success = 1, False
    else:
        status, success = 2, gmax <= 10 * tol
    log.info("%sdone: %s after %d iterations, %d evaluations, f=%.10g, max|g|=%.2e, %.2fs", name, msg, res.nit, nfev, res.fun, gmax, elapsed)
    if status == 1:
        warnings.warn(
            f"{name}L-BFGS stopped at the iteration limit ({max_iter}) with max|gradient| = {gmax:.2e} > tol = {tol:g}; "
            "raise max_iter (--max-iter) or loosen tol (--tol).",
            ConvergenceWarning,
            stacklevel=2,
        )
    elif status == 2 and not success:
        warnings.warn(
            f"{name}L-BFGS stopped early ({msg}) with max|gradient| = {gmax:.2e} > tol = {tol:g}; "
            "the objective may be badly scaled: try a larger penalty (--lam) or a looser tol (--tol).",
            ConvergenceWarning,
            stacklevel=2,
        )
    return FitResult(
        x=np.asarray(res.x),
        fun=float(res.fun),
        nit=int(res.nit),
        nfev=nfev,
        status=status,
        success=bool(success),
        message=msg,
        history=history,
        time_solve=elapsed,
    )
