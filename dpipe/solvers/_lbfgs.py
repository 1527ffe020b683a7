"""L-BFGS on the coordinator: scipy's L-BFGS-B, one objective evaluation per call."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import scipy.optimize

from .._interrupts import check_interrupted
from .._log import VERBOSE
from .._progress import Throttle
from ..exceptions import ConvergenceWarning
from ._result import FitResult

__all__ = ["minimize_lbfgs", "Objective"]

log = logging.getLogger("dpipe.solvers")

#: with ``rtol``, a line search that can no longer decrease the objective (the rounding floor) counts as converged once the
#: gradient norm is this far below its largest; above it the stop is reported as early (a badly scaled problem)
LINE_SEARCH_FLOOR = 1e-4
#: scipy's ``ftol``: a step that lowers the objective by less than this relative amount ends the run as converged
FTOL = 1e3 * np.finfo(float).eps
#: with ``rtol``, a line search that fails once the gradient is this far below its largest also counts as converged when
#: the decrease still ahead is below what the objective resolves: the last step's decrease times the square of the
#: gradient's last drop (``J - J* ~ ||g||^2`` near the minimum) within ``10 FTOL`` of ``|J|``. How far the iterate is then
#: determined follows from the conditioning: with a ridge ``lam``, a J within ``dJ`` of the minimum is a ``w`` within
#: ``sqrt(2 dJ / lam)`` of the minimizer.
ROUNDING_FLOOR_GRADIENT = 1e-2


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
    rtol: float | None = None,
    monitor: Callable[[np.ndarray], dict[str, Any]] | None = None,
    log_every: int = 1,
    name: str = "",
    stop: Callable[[np.ndarray], bool] | None = None,
    whitened: bool = False,
    callback: Callable[[np.ndarray, dict[str, Any]], str | None] | None = None,
    grad_reference: float | None = None,
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
    rtol : float, optional
        Also stop when ``||g||_2 <= rtol max_k ||g(x_k)||_2``, the largest gradient norm of
        the run's iterates, the start included (usually the start's: LIBLINEAR's relative rule; the largest,
        so that a start where the gradient happens to be small, such as the tied scores of
        ``w = 0`` for the PRBEP risk, does not ask for the impossible): a stopping test that
        does not depend on the objective's scale. The first line search's trial points do not
        count: L-BFGS-B's first step has unit length whatever the objective's scale (no
        curvature pair yet), and the gradient where it overshoots says nothing of the start's;
        counted, it let the rule hold at the first iterate. The later line searches' trials
        count (a kinked objective, such as auc-smooth's at its narrow default width, keeps a
        gradient near its minimum that its iterates alone never get far below). ``info`` keeps
        ``grad_norm0`` (the first evaluation's) and ``grad_norm_max``.
    monitor : callable, optional
        Called with the iterate after every iteration; its dict joins the history.
        Its own time is left out of the history's ``seconds`` (the solver's time)
        and counted in ``seconds_monitor`` (cumulative), so measuring a validation
        metric every iteration does not inflate the training time.
    log_every : int
        Log a progress line every this many iterations (and at the end): at INFO a short
        one (iteration, objective, gradient norm, seconds), at VERBOSE instead one with
        every figure of the history (evaluations, the monitor's, the passes' timings).
        0: an inner solve of an outer method (the rate family's majorization steps), which
        logs its own progress: no lines, the closing one at DEBUG.
    name : str
        Prefix of the progress lines.
    stop : callable, optional
        Called with the iterate after every iteration; returning True ends the run
        as converged (an objective's own stopping rule, e.g. on the gradient of the
        un-transformed loss). ``tol`` still applies.
    whitened : bool
        The coordinates whiten the objective (its Hessian is close to the identity,
        e.g. :func:`moment_preconditioner`'s). L-BFGS-B's first trial step has unit
        length, which from a start near the minimum overshoots and costs several
        backtracking evaluations; here the gradient at ``x0`` is evaluated first
        (that evaluation is reused as L-BFGS-B's first) and L-BFGS-B runs in
        coordinates scaled by its norm, so its first trial is the step ``-g0``,
        the Newton step of an identity Hessian. ``tol`` keeps its meaning.
    callback : callable, optional
        ``callback(x, record) -> str | None``, called after every iteration (after
        ``monitor`` and ``stop``) with the iterate and its history record; a message ends
        the run there (raising ``StopIteration`` in scipy's callback): ``status`` 2,
        ``success``, that ``message``, no warning (a caller's stop, e.g. early stopping).
    grad_reference : float, optional
        A warm start's reference for ``rtol``: the largest gradient norm starts at it (the
        gradient norm at the cold start, where the warm start's own is small already).

    Returns
    -------
    FitResult
        ``status`` 0 converged, 1 iteration limit, 2 stopped in the line search (or by ``callback``).
        An iteration limit, or a line-search stop far from a stationary point,
        warns with :class:`ConvergenceWarning`.
    """
    t0 = time.perf_counter()
    last: dict[str, Any] = {}
    history: list[dict[str, Any]] = []
    pace = Throttle()  # per-iteration INFO lines: one every dpipe.progress-interval (every one at -v)
    nfev = 0
    stopped: list[bool] = []
    halted: list[str] = []  # the callback's reason to stop
    x0 = np.asarray(x0, dtype=float)
    scale, pending = 1.0, None  # x = scale * y, y the coordinates L-BFGS-B sees
    if whitened:
        scale, pending = _whitened_start(objective, x0)
        nfev += 1

    def fun(y: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal nfev, pending
        x = scale * y
        if pending is not None and np.allclose(x, x0, rtol=1e-13, atol=0.0):
            f, g = pending
        else:
            nfev += 1
            f, g = objective.value_and_grad(x)
        pending = None
        last.update(x=x.copy(), f=float(f), g=np.asarray(g, dtype=float))
        _track_gradient_norm(last, float(np.linalg.norm(last["g"])), bool(history), grad_reference)
        return float(f), scale * np.asarray(g, dtype=float)

    monitor_seconds = 0.0

    def on_iteration(yk: np.ndarray) -> None:
        nonlocal monitor_seconds
        check_interrupted()  # a safe point: a signal whose first raise was dropped stops the fit here
        now = time.perf_counter()
        xk = scale * yk
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
        if same and np.isfinite(rec["grad_norm"]):  # the first iterate (its line search's trials do not count)
            last["g_top"] = max(last["g_top"], rec["grad_norm"])
        if stop is not None and stop(xk):
            stopped.append(True)
        elif rtol is not None and same and rec["grad_norm"] <= rtol * last["g_top"]:
            stopped.append(False)  # the relative rule, not the objective's
        if log_every and rec["iteration"] % log_every == 0:
            _log_iteration(rec, name, nfev, pace)
        why = callback(xk, rec) if callback is not None and not stopped else None
        if why:
            halted.append(str(why))
        if stopped or halted:
            raise StopIteration

    res = scipy.optimize.minimize(
        fun,
        x0 / scale,
        jac=True,
        method="L-BFGS-B",
        callback=on_iteration,
        options={"maxcor": int(memory), "maxiter": int(max_iter), "gtol": float(tol) * scale, "ftol": FTOL},
    )
    elapsed = time.perf_counter() - t0
    gmax, g_end = _end_gradient(res.jac, scale)
    # the rule that was asked for, as the warnings word it
    rule = _rule(rtol, g_end, last.get("g_top", 0.0), gmax, tol)
    if stopped:
        status, success = 0, True
        msg = "CONVERGENCE: the objective's stopping rule holds" if stopped[0] else "CONVERGENCE: ||g|| <= rtol max ||g||"
    elif halted:
        status, success, msg = 2, True, halted[0]
    else:
        status, success = _scipy_outcome(res, history, max_iter, tol, rtol, gmax, g_end, last.get("g_top", 0.0))
        msg = str(res.message)
    log.log(logging.INFO if log_every else logging.DEBUG, "%sdone: %s after %d iterations, %d evaluations, f=%.10g, max|g|=%.2e, %.2fs",
            name, msg, res.nit, nfev, res.fun, gmax, elapsed)
    _warn_unconverged(status, success, f"{name}L-BFGS", max_iter, msg, rule)
    return FitResult(
        x=scale * np.asarray(res.x),
        fun=float(res.fun),
        nit=int(res.nit),
        nfev=nfev,
        status=status,
        success=bool(success),
        message=msg,
        history=history,
        time_solve=elapsed,
        info={"grad_norm0": last.get("g0"), "grad_norm_max": last.get("g_top")},
    )


def _log_iteration(rec: dict[str, Any], name: str, nfev: int, pace: Throttle) -> None:
    """One progress line for an iteration: a short one at INFO (one terminal line, throttled), every figure at VERBOSE (-v)."""
    if log.isEnabledFor(VERBOSE):
        extra = "".join(
            f" {k}={v:.6g}" for k, v in rec.items()
            if k not in ("iteration", "fun", "grad_norm", "nfev", "seconds", "stage") and isinstance(v, (float, int)) and not isinstance(v, bool)
        )
        log.log(VERBOSE, "%siter %4d  f=%.10g  |g|=%.3e  evals=%d  %.2fs%s", name, rec["iteration"], rec["fun"], rec["grad_norm"], nfev,
                rec["seconds"], extra)
    elif pace.due():
        log.info("%siter %4d  f=%.7g  |g|=%.2e  %.1fs", name, rec["iteration"], rec["fun"], rec["grad_norm"], rec["seconds"])


def _scipy_outcome(res: Any, history: list[dict[str, Any]], max_iter: int, tol: float, rtol: float | None, gmax: float, g_end: float,
                   g_top: float) -> tuple[int, bool]:
    """``(status, success)`` of a run L-BFGS-B ended itself: converged (0), at the iteration limit (1), or stopped in the
    line search (2), a success when the gradient is small by ``tol`` or ``rtol``, or the objective's rounding floor is reached."""
    if res.status == 0:
        return 0, True
    if res.nit >= max_iter:
        return 1, False
    at_floor = False
    if len(history) >= 2 and history[-2]["grad_norm"] > 0 and np.isfinite(history[-2]["fun"]) and np.isfinite(history[-1]["fun"]):
        ahead = max(history[-2]["fun"] - history[-1]["fun"], 0.0) * (history[-1]["grad_norm"] / history[-2]["grad_norm"]) ** 2
        at_floor = ahead <= 10 * FTOL * max(1.0, abs(history[-1]["fun"]))
    return 2, bool(gmax <= 10 * tol or (rtol is not None and (g_end <= max(10 * rtol, LINE_SEARCH_FLOOR) * g_top
                                                              or (g_end <= ROUNDING_FLOOR_GRADIENT * g_top and at_floor))))


def _whitened_start(objective: Objective, x0: np.ndarray) -> tuple[float, tuple[float, np.ndarray]]:
    """``whitened``: the start's value and gradient (one evaluation, reused as L-BFGS-B's first) and the scale of the
    coordinates L-BFGS-B sees, the gradient's norm (1 when it is 0 or not finite)."""
    f0, g0 = objective.value_and_grad(x0)
    pending = (float(f0), np.asarray(g0, dtype=float))
    g_norm = float(np.linalg.norm(pending[1]))
    return (g_norm if np.isfinite(g_norm) and g_norm > 0 else 1.0), pending


def _warn_unconverged(status: int, success: bool, who: str, max_iter: int, msg: str, rule: str) -> None:
    """The :class:`ConvergenceWarning` of a run at the iteration limit, or stopped early far from a stationary point (issued
    at the caller of :func:`minimize_lbfgs`)."""
    if status == 1:
        warnings.warn(
            f"{who} stopped at the iteration limit ({max_iter}) with {rule}; "
            "raise 'max_iter' or loosen 'tol'.",
            ConvergenceWarning,
            stacklevel=3,
        )
    elif status == 2 and not success:
        warnings.warn(
            f"{who} stopped early ({msg}) with {rule}; "
            "the objective may be badly scaled: try a larger penalty 'lam' or a looser 'tol'.",
            ConvergenceWarning,
            stacklevel=3,
        )


def _end_gradient(jac: np.ndarray | None, scale: float) -> tuple[float, float]:
    """The largest component and the norm of the last gradient, in the caller's coordinates (0 without one)."""
    if jac is None or not np.size(jac):
        return 0.0, 0.0
    return float(np.max(np.abs(jac))) / scale, float(np.linalg.norm(jac)) / scale


def _rule(rtol: float | None, g_end: float, g_top: float, gmax: float, tol: float) -> str:
    """The stopping rule that was asked for, as the warnings word it."""
    if rtol is not None:
        return f"||g|| = {g_end:.2e} > rtol max ||g|| = {rtol * g_top:.2e}"
    return f"max|gradient| = {gmax:.2e} > tol = {tol:g}"


def _track_gradient_norm(last: dict[str, Any], norm: float, counts: bool, grad_reference: float | None) -> None:
    """Keep the references of the relative rule: the start's gradient norm (``g0``) and the largest so far (``g_top``, from
    ``grad_reference`` on); ``counts``: False during the first line search, whose trials do not count (its first step has
    unit length whatever the objective's scale)."""
    if "g0" not in last:  # the start: the first reference of the relative rule
        last["g0"] = norm
        last["g_top"] = max(norm if np.isfinite(norm) else 0.0, grad_reference or 0.0)
    elif counts and np.isfinite(norm):
        last["g_top"] = max(last["g_top"], norm)
