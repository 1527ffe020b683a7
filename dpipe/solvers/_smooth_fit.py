"""L-BFGS on the smoothed rank objectives, with optional continuation in the smoothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ._lbfgs import minimize_lbfgs
from ._result import FitResult

__all__ = ["fit_smooth", "CONTINUATION_START"]

#: how many times the target smoothing continuation starts from
CONTINUATION_START = 1000.0


def fit_smooth(
    make_objective: Callable[[float | None], Any],
    w0: np.ndarray,
    smoothing: float | None,
    *,
    memory: int = 6,
    max_iter: int = 500,
    tol: float = 0.03,
    continuation: bool = False,
    continuation_start: float = CONTINUATION_START,
    continuation_factor: float = 10.0,
    validate: Callable[[np.ndarray], dict[str, float]] | None = None,
    name: str = "",
    whitened: bool = False,
    callback: Callable[[np.ndarray, dict[str, Any]], str | None] | None = None,
    grad_reference: float | None = None,
) -> FitResult:
    """Minimize a smoothed objective by L-BFGS, one data evaluation per function call.

    Parameters
    ----------
    make_objective : callable
        ``smoothing -> objective`` (an object with ``value_and_grad`` and ``last``).
    w0 : ndarray
        Starting point.
    smoothing : float or None
        Target smoothing (Huber width t, or PRBEP's mu); None for a risk without one (auc's squared hinge, no continuation).
    memory, max_iter
        L-BFGS settings (the paper keeps 6 correction pairs).
    tol : float
        Stop when ``||g|| <= tol max ||g||`` (relative to the largest gradient norm of each stage: :func:`minimize_lbfgs`'s ``rtol``).
    continuation : bool
        Start at ``continuation_start`` times the target smoothing and divide it by
        ``continuation_factor`` after each stage, warm-starting, until the target;
        intermediate stages stop at a 10 times looser tolerance (at most 0.5). ``max_iter``
        bounds the total.
    validate : callable, optional
        ``w -> {name: value}`` measured after every iteration (e.g. validation AUC).
    name : str
        Prefix of the progress lines.
    whitened : bool
        The objective's coordinates whiten its Hessian: L-BFGS's first trial step
        is then ``-g0`` (see :func:`minimize_lbfgs`).
    callback : callable, optional
        ``callback(x, record) -> str | None`` after every iteration, across the stages; a
        message ends the whole run (see :func:`minimize_lbfgs`), e.g. early stopping.
    grad_reference : float, optional
        A warm start's gradient reference for the last stage's relative rule (:func:`minimize_lbfgs`).

    Returns
    -------
    FitResult
        History entries carry J_mu, the exact non-smooth J, the exact training AUC,
        the seconds of the score pass, merge, kernel and gradient pass, the bytes
        moved, the smoothing and the stage.
    """
    t0 = time.perf_counter()
    widths: list[float | None] = [smoothing]
    if continuation:
        assert smoothing is not None  # the params refuse continuation without a smoothing (squared losses)
        widths = []
        wide = smoothing * continuation_start
        while wide > smoothing * (1 + 1e-12):
            widths.append(wide)
            wide /= continuation_factor
        widths.append(smoothing)
    w = np.asarray(w0, dtype=float)
    history: list[dict[str, Any]] = []
    nit = nfev = 0
    solver_seconds = monitor_seconds = 0.0  # over the finished stages
    result: FitResult | None = None
    halted: list[str] = []  # the callback's reason to stop

    def hook(x: np.ndarray, rec: dict[str, Any]) -> str | None:
        why = callback(x, rec) if callback is not None else None
        if why:
            halted.append(why)
        return why

    for stage, width in enumerate(widths):
        obj = make_objective(width)
        last_stage = stage == len(widths) - 1

        def monitor(x: np.ndarray, obj=obj, width=width, stage=stage) -> dict[str, Any]:
            rec: dict[str, Any] = {"smoothing": width, "stage": stage}
            if obj.last:
                rec.update({k: v for k, v in obj.last.items() if k not in ("sp", "sn")})
                rec["train_auc"] = obj.train_auc()
            if validate is not None:
                rec.update(validate(x))
            return rec

        result = minimize_lbfgs(
            obj, w, memory=memory, max_iter=max(1, max_iter - nit), tol=0.0, rtol=tol if last_stage else min(10 * tol, 0.5), monitor=monitor, log_every=1,
            name=f"{name}[t={width:.3g}] " if continuation else name, whitened=whitened, callback=hook if callback is not None else None,
            grad_reference=grad_reference if last_stage else None,
        )
        stage_monitor = result.history[-1].get("seconds_monitor", 0.0) if result.history else 0.0
        for h in result.history:  # continue the clocks of the earlier stages
            h["iteration"] += nit
            h["seconds"] += solver_seconds
            h["seconds_monitor"] = h.get("seconds_monitor", 0.0) + monitor_seconds
        solver_seconds += result.time_solve - stage_monitor
        monitor_seconds += stage_monitor
        history.extend(result.history)
        nit += result.nit
        nfev += result.nfev
        w = result.x
        if nit >= max_iter or halted:
            break
    assert result is not None
    result.history = history
    result.nit, result.nfev = nit, nfev
    result.time_solve = time.perf_counter() - t0
    result.info.update(smoothing=smoothing, stages=widths if continuation else [smoothing], J=history[-1].get("J") if history else None)
    return result
