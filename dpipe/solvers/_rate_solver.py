"""The rate family's solver (Goh et al., Problem 2, Algorithms 1 and 2): majorization-minimization, a cutting plane over
the Lagrange multipliers, the inner problems, the exact threshold.

Three nested loops, each with a relative stopping rule:

* **Majorization-minimization** (Algorithm 1): at the anchor ``theta'`` every ramp is bounded
  above by a hinge or the constant 1, tight at the anchor (:mod:`dpipe.reduce._rates`); the
  bounded problem is convex. Each step solves it for its multipliers and moves the anchor
  to the chosen solution (:func:`~._rate_multipliers.choose_cut`). The bounded problem's
  optimum can only fall from one step to the next (the previous solution is feasible for
  the next bound, at the same value), so the step's dual estimate ``D_k`` (the best cut's
  smoothed Lagrangian) is the measure of progress: **MM stops when a step lowers it by at
  most ``eps |D_k|``**, or after ``mm_steps`` steps (a :class:`ConvergenceWarning`).
* **Multipliers** (Algorithm 2, :mod:`._rate_multipliers`): a cutting plane over ``v`` in
  ``[0, V]^m`` within a trust region, warm-started at the previous step's multipliers;
  **it stops when its upper and lower bounds on the dual meet within
  ``eps max(1, |D|)``**, or after ``max_cuts`` cuts (a warning). One inner solve per cut.
* **Inner problems**: for fixed ``v`` the Lagrangian is a per-example-weighted,
  Huberized (width ``smoothing``) hinge problem in ``theta = (u, b)``
  (:class:`~._rate_problem.RateProblem`), solved by **L-BFGS** in coordinates scaled by
  the columns' standard deviations (a diagonal preconditioner: same problem, same
  minimizer), warm-started at the previous solution. **It stops when
  ``max|g| <= tol (1 + sum v) max|g_0|``**, ``g`` the gradient in those coordinates and
  ``g_0`` the gradient at the fit's start (``theta = 0``, ``v = 0``): relative to the
  problem's scale, and to the Lagrangian's, which grows with the multipliers. At most
  ``max_iter`` iterations (counted; a warning when the returned step's solves hit it).

Why L-BFGS and not Newton: the inner problem's generalized Hessian ``[X, -1]^T D [X, -1]``
only sees the rows inside a Huber zone (width 0.05 of a ramp 1 wide), so a Newton model
misses every kink outside it and TRON's trust region shrinks step after step. Both are
here (``inner_solver``; Newton's Hessian-vector products read only the Huber rows, kept on
the workers by the evaluation at the same point). Measured on the rate commands of docs/constraints.md
(``python -m bench rate-speed``: whole fits in one process, interleaved, medians of 3, this
machine while shared), TRON took 1.2-1.8x L-BFGS's time on adult and a9a (2-3 Hessian
products per evaluation, about as many evaluations) and 2.5-3.1x on auc-rate and kdd99,
where single inner problems from a far start took it over 1,000 Newton iterations.
The column-scale preconditioner mattered more than the solver: on
adult's raw columns the previous rule (``gtol`` 1e-4 absolute, raw coordinates) stopped
every inner problem at the 200-iteration limit, 0.01-0.02 above its minimum.

The bias is regularized as lightly as ``w`` (``lam/2 (||w||^2 + b^2)``): the paper leaves
it free; without the penalty the inner problem can be flat in ``b``, and two runs whose
sums differ in the last bit (a weighted store and its repeated rows) took different
majorization paths.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections.abc import Callable

import numpy as np

from .._interrupts import check_interrupted
from .._log import VERBOSE
from ..engine._blas import ONE_BLAS_THREAD
from ..exceptions import ConvergenceWarning
from ._lbfgs import minimize_lbfgs
from ._rate_multipliers import Cut, TrustRegion, choose_cut
from ._rate_problem import InnerObjective, RateProblem
from ._rate_threshold import exact_bias
from ._tron import minimize_tron

__all__ = ["RateSolution", "solve_rates", "INNER_SOLVERS"]

log = logging.getLogger("dpipe.solvers")

#: the inner problems' solvers: L-BFGS (the default, measured faster) and TRON (Newton-CG)
INNER_SOLVERS = ("lbfgs", "newton")


@dataclasses.dataclass(frozen=True)
class RateSolution:
    """What :func:`solve_rates` returns.

    Attributes
    ----------
    theta : ndarray of shape (d + 1,)
        ``(u, b)`` of the model (with the exact threshold's bias when asked for).
    v : ndarray of shape (m,)
        The constraints' multipliers at the returned model.
    mm_steps : int
        Majorization-minimization steps run (0: a threshold of the unconstrained ranking solution met every constraint).
    cuts : int
        Inner problems solved (cuts of the multipliers' cutting plane) in all.
    settled : bool
        MM stopped on its rule (not at ``mm_steps``).
    dual : list of float
        Each step's dual estimate ``D_k``.
    inner_at_limit : int
        Inner problems that stopped at ``max_iter``.
    cuts_at_limit : int
        Steps whose cutting plane stopped at ``max_cuts``.
    seconds : float
    """

    theta: np.ndarray
    v: np.ndarray
    mm_steps: int
    cuts: int
    settled: bool
    dual: list[float]
    inner_at_limit: int
    cuts_at_limit: int
    seconds: float


class _Values:
    """A ``(value, gradient)`` function as an objective of :func:`minimize_lbfgs`."""

    def __init__(self, fg: Callable[[np.ndarray], tuple[float, np.ndarray]]) -> None:
        self.value_and_grad = fg


class _Inner:
    """Solves one inner problem after another, with the fit's reference gradient (see the module docstring)."""

    def __init__(self, problem: RateProblem, pre: np.ndarray, tol: float, max_iter: int, solver: str) -> None:
        self.problem, self.pre, self.tol, self.max_iter, self.solver = problem, pre, float(tol), int(max_iter), solver
        self.ref: float | None = None  # max|g_0| (L-BFGS) or ||g_0|| (Newton), in the solver's coordinates
        self.at_limit = 0
        self.last_at_limit = 0  # in the current MM step

    def _fg(self, anchor: np.ndarray, v_full: np.ndarray):
        problem, pre = self.problem, self.pre

        def fg(y: np.ndarray) -> tuple[float, np.ndarray]:
            value, grad, _, _ = problem.smoothed(y * pre, anchor, v_full)
            return value, grad * pre

        return fg

    def solve(self, theta: np.ndarray, anchor: np.ndarray, v_full: np.ndarray) -> tuple[np.ndarray, float]:
        """The inner minimizer from ``theta`` (warm start) and its value."""
        fg = self._fg(anchor, v_full)
        y0 = theta / self.pre
        f0, g0 = fg(y0)  # the solver's first evaluation (remembered by the problem)
        norm = float(np.max(np.abs(g0))) if self.solver == "lbfgs" else float(np.linalg.norm(g0))
        if self.ref is None or self.ref == 0.0:
            self.ref = norm
        target = self.tol * (1.0 + float(np.sum(v_full[1:]))) * self.ref
        if norm <= target:
            return theta, float(f0)
        with warnings.catch_warnings():  # counted here, reported once per fit
            warnings.simplefilter("ignore", ConvergenceWarning)
            if self.solver == "lbfgs":  # the other families' L-BFGS (scipy's L-BFGS-B, max|g| <= target), quiet: the MM steps log
                res = minimize_lbfgs(_Values(fg), y0, max_iter=self.max_iter, tol=target, log_every=0)
            else:
                res = minimize_tron(InnerObjective(self.problem, anchor, v_full, self.pre), y0, eps=target / norm, max_iter=self.max_iter)
        hit = res.status == 1  # the iteration limit
        y, value = np.asarray(res.x), float(res.fun)
        self.at_limit += int(hit)
        self.last_at_limit += int(hit)
        return y * self.pre, value


def solve_rates(
    problem: RateProblem,
    *,
    mm_steps: int,
    eps: float,
    tol: float,
    max_iter: int,
    multiplier_bound: float,
    feasibility_tol: float,
    threshold: str,
    preconditioner: np.ndarray | None = None,
    inner_solver: str = "lbfgs",
    max_cuts: int = 40,
    name: str = "",
    margin: float = 0.0,
    z: float = 0.0,
) -> RateSolution:
    """Minimize the problem's objective row subject to its constraint rows (see the module docstring).

    Parameters
    ----------
    problem : RateProblem
        The stores, rows and passes.
    mm_steps : int
        Majorization-minimization steps at most.
    eps : float
        Relative tolerance of the cutting plane (bounds within ``eps max(1, |D|)``) and of
        majorization-minimization (a step lowers ``D`` by at most ``eps |D|``).
    tol : float
        Inner problems: stop at ``max|g| <= tol (1 + sum v) max|g_0|``.
    max_iter : int
        Iterations per inner problem at most.
    multiplier_bound : float
        ``V``: every multiplier in ``[0, V]``.
    feasibility_tol : float
        A bounded constraint holds at ``<= feasibility_tol``.
    threshold : {"exact", "ramp", "randomized"}
        ``"exact"``: the returned bias is :func:`~._rate_threshold.exact_bias` along the
        solution's direction; the others keep the solution's bias.
    preconditioner : ndarray of shape (d + 1,), optional
        The inner solver's coordinates are ``theta / preconditioner`` (default: none).
    inner_solver : {"lbfgs", "newton"}
        L-BFGS (default) or TRON with the problem's Hessian-vector products (the problem
        must keep its curvature).
    max_cuts : int
        Cuts per step at most.
    name : str
        Prefix of warnings.
    margin : float
        The exact threshold meets every constraint with this much to spare (``value <= -margin``; ``slack``).
    z : float
        ... and with this many standard errors to spare (``confidence``; :func:`~._rate_threshold.exact_bias`).

    Returns
    -------
    RateSolution
    """
    if inner_solver not in INNER_SOLVERS:
        raise ValueError(f"inner_solver must be one of {INNER_SOLVERS}, not {inner_solver!r}")
    # the driver's own linear algebra is on d-vectors and a few d x m matrices: OpenBLAS's threads cost more than they
    # save (scipy's L-BFGS-B, d = 109, on this 2-core machine while busy: 3 ms an iteration with 2 threads, 0.03-0.2 ms with
    # one). scipy's own OpenBLAS loaded with scipy.optimize (this module's minimize_lbfgs), so the limit below reaches it
    from threadpoolctl import threadpool_limits

    with ONE_BLAS_THREAD, threadpool_limits(limits=1, user_api="blas"):
        return _solve_rates(problem, mm_steps, eps, tol, max_iter, multiplier_bound, feasibility_tol, threshold, preconditioner,
                            inner_solver, max_cuts, name, margin, z)


def _solve_rates(problem: RateProblem, mm_steps: int, eps: float, tol: float, max_iter: int, multiplier_bound: float,
                 feasibility_tol: float, threshold: str, preconditioner: np.ndarray | None, inner_solver: str, max_cuts: int,
                 name: str, margin: float = 0.0, z: float = 0.0) -> RateSolution:
    t0 = time.perf_counter()
    d, m = problem.n_features, problem.n_rows - 1
    pre = np.ones(d + 1) if preconditioner is None else np.asarray(preconditioner, dtype=np.float64)
    inner = _Inner(problem, pre, tol, max_iter, inner_solver)
    theta = np.zeros(d + 1)  # the paper starts from w = 0
    if problem.ranking is not None and m and threshold == "exact":
        # the ranking risk does not depend on the bias: a threshold of the unconstrained ranking solution may meet every
        # constraint (then optimal); else MM starts there, at the least violating threshold
        shortcut, theta = _threshold_alone(problem, inner, m, feasibility_tol, margin, z)
        if shortcut is not None:
            return RateSolution(shortcut.theta, shortcut.v, 0, 1, True, [shortcut.value], inner.at_limit, 0, time.perf_counter() - t0)
    best, cuts_total, steps, settled, duals, cut_limits, last_gap = _majorization_minimization(
        problem, inner, theta, m, mm_steps, max_cuts, multiplier_bound, eps, feasibility_tol)
    theta = best.theta.copy()
    if threshold == "exact":
        theta[d] = exact_bias(problem.data.datasets, problem.data.plans, problem.rows, problem.weights(theta), float(theta[d]), feasibility_tol, margin, z)[0]
    if not settled:
        fell = (duals[-2] - duals[-1]) / abs(duals[-1]) if len(duals) > 1 and duals[-1] != 0 else float("nan")
        warnings.warn(f"{name}majorization-minimization did not settle in {mm_steps} steps (its last step lowered the dual "
                      f"estimate by {fell:.2g} relative, more than eps = {eps:g}); raise 'mm_steps' or loosen 'eps'.",
                      ConvergenceWarning, stacklevel=4)
    if cut_limits:
        warnings.warn(f"{name}the multipliers' cutting plane stopped at its limit of {max_cuts} cuts in {cut_limits} of {steps} "
                      f"majorization steps (bounds on the dual still {last_gap:.2g} apart); loosen 'eps'.", ConvergenceWarning, stacklevel=4)
    if inner.last_at_limit:
        warnings.warn(f"{name}{inner.last_at_limit} inner problem(s) of the last majorization step stopped at max_iter = {max_iter} "
                      f"L-BFGS iterations before max|g| <= tol (1 + sum v) max|g_0| (tol = {tol:g}); raise 'max_iter' or "
                      "loosen 'tol'.", ConvergenceWarning, stacklevel=4)
    return RateSolution(theta, best.v.copy(), steps, cuts_total, settled, duals, inner.at_limit, cut_limits, time.perf_counter() - t0)


def _majorization_minimization(problem: RateProblem, inner: _Inner, theta: np.ndarray, m: int, mm_steps: int, max_cuts: int,
                               multiplier_bound: float, eps: float, feasibility_tol: float) -> tuple[Cut, int, int, bool, list[float], int, float]:
    """Algorithm 1 with Algorithm 2 inside: the last step's chosen inner solution, cuts, steps, whether MM settled, each
    step's dual estimate, the steps whose cutting plane hit ``max_cuts`` and the last such gap."""
    cuts_total, cut_limits, last_gap = 0, 0, 0.0
    best: Cut | None = None
    v = np.zeros(m)
    duals: list[float] = []
    settled = False
    steps = 0
    for step in range(1, mm_steps + 1):
        steps = step
        anchor = theta.copy()
        cuts: list[Cut] = []
        last = False
        inner.last_at_limit = 0
        region = TrustRegion(v, multiplier_bound)  # v: the previous step's multipliers, a good start
        for _ in range(max_cuts + 1):
            check_interrupted()  # a safe point: a signal whose first raise was dropped stops the fit here
            v_full = np.concatenate([[1.0], v])
            theta, value = inner.solve(theta, anchor, v_full)
            _, _, results, ranking_risk = problem.smoothed(theta, anchor, v_full)
            smooth, exact = problem.bounded_rows(results, smoothed=True), problem.bounded_rows(results)
            cuts.append(Cut(v.copy(), value, smooth[1:].copy(), float(exact[1:].max(initial=-np.inf)), theta.copy(), float(exact[0]) + ranking_risk))
            cuts_total += 1
            if m == 0 or last:
                break
            v, top = region.step(cuts)
            low = max(c.value for c in cuts)  # each inner minimum estimates the dual at its multipliers
            # once the bounds meet, one last inner solve at the multipliers that maximize the cuts (the dual optimum's
            # estimate): its solution is what the step converged to, not whichever earlier cut happened to be feasible
            if top - low <= eps * max(1.0, abs(low)):
                last = True
            elif len(cuts) >= max_cuts:
                last, cut_limits, last_gap = True, cut_limits + 1, top - low
        best = choose_cut(cuts, feasibility_tol)
        theta, v = best.theta.copy(), best.v.copy()
        duals.append(max(c.value for c in cuts))
        fell = duals[-2] - duals[-1] if len(duals) > 1 else float("inf")
        log.debug("rates: MM step %d: theta %s", step, np.array2string(theta, precision=10))
        if log.isEnabledFor(VERBOSE):  # one line per step: the multipliers at -v, a short line (one terminal line) otherwise
            log.log(VERBOSE, "rates: MM step %d: %d cuts, dual %.8g, bounded objective %.6g, largest bounded constraint %.3g, multipliers %s, "
                    "%d evaluations", step, len(cuts), duals[-1], best.objective, best.violation, np.array2string(v, precision=4), problem.evaluations)
        else:
            log.info("rates: MM step %d: %d cuts, objective %.6g, largest constraint %.3g", step, len(cuts), best.objective, best.violation)
        if fell <= eps * abs(duals[-1]):
            settled = True
            break
    assert best is not None
    return best, cuts_total, steps, settled, duals, cut_limits, last_gap


def _threshold_alone(problem: RateProblem, inner: _Inner, m: int, feasibility_tol: float, margin: float = 0.0,
                     z: float = 0.0) -> tuple[Cut | None, np.ndarray]:
    """The unconstrained ranking solution with a threshold meeting every exact constraint, if one exists; else None and
    that solution at the least violating threshold (where majorization starts).

    The ROC-AUC surrogate does not depend on the bias. When some bias along the
    unconstrained minimizer ``w*`` meets every constraint, ``(w*, b)`` is optimal for the
    constrained problem too (no feasible model ranks better than ``w*``): no multiplier
    and no majorization are needed.
    """
    d = problem.n_features
    v_full = np.concatenate([[1.0], np.zeros(m)])
    theta, value = inner.solve(np.zeros(d + 1), np.zeros(d + 1), v_full)
    bias, feasible = exact_bias(problem.data.datasets, problem.data.plans, problem.rows, problem.weights(theta), float(theta[d]), feasibility_tol, margin, z)
    theta = np.r_[theta[:d], bias]
    if not feasible:
        return None, theta
    log.info("rates: the unconstrained ROC-AUC direction meets every constraint at a threshold: no majorization needed")
    return Cut(np.zeros(m), value, np.zeros(m), 0.0, theta, 0.0), theta

