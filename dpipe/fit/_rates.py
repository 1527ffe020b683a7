"""Training under rate constraints (Goh et al., Problem 2, Algorithms 1 and 2).

minimize ``lam/2 ||w||^2 + objective rates`` subject to ``constraint rates <= 0``, with every
indicator replaced by the ramp ``sigma(w.x - b)``:

* **Majorization-minimization** (Algorithm 1): at the anchor ``(w', b')`` each ramp is
  bounded above by a hinge or the constant 1, tight at the anchor
  (:mod:`dpipe.reduce._rates`); the bounded problem is convex.
* **Multipliers** (Algorithm 2, the maximization-based CutChooser of appendix E): the
  dual ``F(v) = min_{w,b} Psi(w, b, v)`` over ``v`` in ``[0, V]^m`` is maximized by a
  cutting plane. A cut at ``v_s`` is ``u_s + g_s.(v - v_s)`` with ``u_s`` the bounded
  Lagrangian at the inner solution (exact hinges) and ``g_s`` the bounded constraint
  values there; the next ``v`` maximizes the cuts' minimum (a small linear program,
  :func:`scipy.optimize.linprog`), kept within a trust region around the best
  multipliers so far (:class:`_TrustRegion`; a9a at kappa 0.8 with 5 MM steps: 1,190
  evaluations instead of 2,420). ``l_s``, the smoothed inner minimum, is a lower bound
  (the Huberized hinge is below the hinge). Stops when the bounds meet within ``tol``.
* **Inner problem**: for fixed ``v`` the Lagrangian is a per-example-weighted hinge
  problem; its hinges are Huberized (width ``smoothing``) and it is solved by L-BFGS
  over ``(w, b)``, warm-started. One evaluation is one pass over each store, returning
  value, gradient and per-cell sums; the per-example weights are computed on the workers
  from the multipliers and the anchor.

The bias ``b`` is regularized as lightly as ``w`` (``lam/2 (||w||^2 + b^2)``, ``lam = 1/n`` by
default). The paper leaves it free and assumes the solver prefers the smallest ``|b|``
among equal minima (its appendix D); the light penalty is that preference made
explicit. Without it the inner problem can be flat in ``b``, L-BFGS stops anywhere on
the flat, and two runs whose sums differ in the last bit (a weighted store and its
repeated rows) took different majorization paths. Each step keeps the inner
solution at the multipliers the cutting plane converged to when its bounded constraints
hold (within ``feasibility_tol``), else the feasible one with the highest dual value, else
the least violating (:func:`_choose`); predictions are deterministic
(``sign(w.x - b)``), as the paper found better.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.optimize import linprog, minimize

from .._log import VERBOSE
from .._runs import merge_runs
from ..engine import RankPasses, column_scales
from ..exceptions import ConvergenceWarning, ParameterError
from ..objectives import SmoothedAUCRisk
from ..rates._cells import CompiledRows, DataInfo, StorePlan, compile_rows, plan_stores
from ..rates._expr import Constraint, RateExpression, error_rate, false_negative_rate, false_positive_rate
from ..reduce._rates import BOUND_NEGATIVE, BOUND_POSITIVE, INDICATOR, RAMP, SMOOTH_NEGATIVE, SMOOTH_POSITIVE, WEIGHT, RatePass, cell_weights, rate_pass, sorted_scores_cells
from ..solvers import FitResult
from ._outcome import FitOutcome
from ._smooth import SmoothedObjective

#: rate objective name (the registry's) -> the rates it minimizes on the training store (None: the ROC-AUC surrogate alone)
RATE_OBJECTIVES = {"error-rate": error_rate, "false-negative-rate": false_negative_rate, "false-positive-rate": false_positive_rate,
                   "auc-rate": None}
#: the rate objectives that minimize the ROC-AUC surrogate (the pairwise hinge of auc-smooth) instead of rates
RANKING_OBJECTIVES = ("auc-rate",)

#: the first trust region's radius around the best multipliers (:class:`_TrustRegion`)
TRUST_RADIUS = 0.1

__all__ = ["RateReport", "RateFit", "fit_rates", "fit_rate_family", "deployed_model", "RATE_OBJECTIVES", "RANKING_OBJECTIVES"]

log = logging.getLogger("dpipe.fit")


@dataclasses.dataclass(frozen=True)
class RateReport:
    """One row of the fit (the objective or a constraint) at the returned model.

    Attributes
    ----------
    text : str
        The constraint as written (``"objective"`` for the objective).
    value : float
        Left-hand side minus right-hand side with exact (indicator) rates, or with expected
        (ramp) rates for a randomized model: the constraint holds when it is ``<= 0``; for
        the objective, its value.
    ramp_value : float
        The same with ramp rates (what was optimized).
    multiplier : float
        The constraint's Lagrange multiplier at the returned model (1 for the objective).
    satisfied : bool
        ``value <= 0`` (always True for the objective).
    """

    text: str
    value: float
    ramp_value: float
    multiplier: float
    satisfied: bool


@dataclasses.dataclass(frozen=True)
class RateFit:
    """The result of :func:`fit_rates`."""

    coef: np.ndarray
    bias: float
    reports: list[RateReport]
    mm_steps: int
    cuts: int
    evaluations: int
    seconds: float

    @property
    def intercept(self) -> float:
        """dpipe's convention: the score is ``X coef + intercept`` (the paper's ``w.x - b``)."""
        return -self.bias


class _Problem:
    """The stores, the compiled rows and the passes of one rate fit."""

    def __init__(self, datasets: Mapping[str, Any], plans: Mapping[str, StorePlan], rows: CompiledRows, lam: float, smoothing: float,
                 ranking: bool = False, scale: np.ndarray | None = None) -> None:
        self.datasets, self.plans, self.rows, self.lam, self.smoothing = datasets, plans, rows, lam, smoothing
        self.split = {a: (np.maximum(c, 0.0), np.maximum(-c, 0.0)) for a, c in rows.coef.items()}
        self.n_features = int(next(iter(datasets.values())).n_features)
        # theta = (u, b) with the raw weights w = u / scale (standardize); lam/2 ||theta||^2 penalizes u
        self.inv_scale = np.ones(self.n_features) if scale is None else 1.0 / np.asarray(scale, dtype=np.float64)
        self.evaluations = 0
        # the ROC-AUC surrogate on the training store: convex already (no majorization), its own two passes
        self.ranking = SmoothedObjective(RankPasses(datasets["train"]), SmoothedAUCRisk(smoothing)) if ranking else None
        self._recent: list[tuple[tuple[bytes, bytes, bytes], tuple[float, np.ndarray, dict[str, RatePass], float]]] = []

    def weights(self, theta: np.ndarray) -> np.ndarray:
        """The raw-feature weights ``w`` of ``theta = (u, b)``."""
        return theta[: self.n_features] * self.inv_scale

    def passes(self, theta: np.ndarray, anchor: np.ndarray, v_full: np.ndarray) -> dict[str, RatePass]:
        d = self.n_features
        out = {}
        w, w_anchor = self.weights(theta), self.weights(anchor)
        for alias, ds in self.datasets.items():
            cp, cn = self.split[alias]
            P, N = v_full @ cp, v_full @ cn
            out[alias] = ds.map_reduce(rate_pass, operator.add, w, float(theta[d]), (w_anchor, float(anchor[d])), self.plans[alias].layout, P, N, self.smoothing)
        self.evaluations += 1
        return out

    def bounded_rows(self, results: Mapping[str, RatePass], smoothed: bool = False) -> np.ndarray:
        """Every row with each ramp replaced by its bound at the anchor (exact hinges, or Huberized with ``smoothed``)."""
        pos, neg = (SMOOTH_POSITIVE, SMOOTH_NEGATIVE) if smoothed else (BOUND_POSITIVE, BOUND_NEGATIVE)
        value = self.rows.constant.copy()
        for alias, r in results.items():
            cp, cn = self.split[alias]
            c = self.rows.coef[alias]
            value += cp @ r.sums[pos] + cn @ r.sums[neg] + np.minimum(c, 0.0) @ r.sums[WEIGHT]
        return value

    def rows_at(self, results: Mapping[str, RatePass], kind: int) -> np.ndarray:
        return self.rows.evaluate({a: r.sums[kind] for a, r in results.items()})

    def smoothed(self, theta: np.ndarray, anchor: np.ndarray, v_full: np.ndarray) -> tuple[float, np.ndarray, dict[str, RatePass], float]:
        """The smoothed bounded Lagrangian, its gradient in ``(w, b)``, the passes' results, and the exact ranking risk.

        The ranking risk is the mean pairwise hinge of the ROC-AUC surrogate at ``w`` (0
        without one). The last two evaluations are remembered: the solution L-BFGS returns
        was its last (or next to last) evaluation, so reading the cut there costs no pass.
        """
        key = (theta.tobytes(), anchor.tobytes(), v_full.tobytes())
        for known, out in self._recent:
            if known == key:
                return out
        results = self.passes(theta, anchor, v_full)
        value = 0.5 * self.lam * float(theta @ theta) + sum(r.value for r in results.values())
        value += float(v_full @ (self.rows.constant + sum(np.minimum(self.rows.coef[a], 0.0) @ r.sums[WEIGHT] for a, r in results.items())))
        grad = sum(r.grad for r in results.values())
        ranking_risk = 0.0
        if self.ranking is not None:
            auc_value, auc_grad = self.ranking.value_and_grad(self.weights(theta))
            value += auc_value
            grad[: self.n_features] += auc_grad
            ranking_risk = float(self.ranking.last["J"])
        grad[: self.n_features] *= self.inv_scale  # the chain rule through w = u / scale
        grad += self.lam * theta
        out = (value, grad, results, ranking_risk)
        self._recent = [(key, out), *self._recent[:1]]
        return out


@dataclasses.dataclass
class _Cut:
    v: np.ndarray
    value: float  # the smoothed Lagrangian at the inner solution: u_s, and (solved) l_s
    slope: np.ndarray  # g_s: the smoothed bounded constraint values there
    violation: float  # the largest exact-hinge bounded constraint value there
    theta: np.ndarray
    objective: float  # the bounded objective row there


def _next_multipliers(cuts: list[_Cut], low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, float]:
    """``argmax_v min_s (u_s + g_s.(v - v_s))`` over the box ``[low, high]``, and that maximum."""
    m = cuts[0].v.size
    # variables (v, z): maximize z s.t. z - g_s.v <= u_s - g_s.v_s
    A = np.array([np.concatenate([-c.slope, [1.0]]) for c in cuts])
    b = np.array([c.value - c.slope @ c.v for c in cuts])
    res = linprog(np.concatenate([np.zeros(m), [-1.0]]), A_ub=A, b_ub=b, bounds=[*zip(low, high), (None, None)], method="highs")
    if res.status != 0:  # pragma: no cover - the box keeps it bounded and feasible
        raise RuntimeError(f"multiplier LP failed: {res.message}")
    return np.asarray(res.x[:m]), float(-res.fun)


class _TrustRegion:
    """Where the next multipliers may go: a box of radius ``radius`` around the best dual point so far, in ``[0, V]^m``.

    Plain Kelley cutting planes jump to a corner of ``[0, V]^m`` whenever one cut's slope
    points there (at the first cut of every step, and whenever the current multipliers
    violate or over-satisfy a constraint). An inner problem at ``v = V`` is far from every
    other and costs about twice the evaluations of a nearby one (a9a: 230 against 100), and
    its cut says little. The box (a trust-region bundle method) keeps each step near the
    best point; it doubles whenever the step reaches its edge, so ``[0, V]^m`` is still
    searched, and the stopping test uses the cuts' maximum over the whole of ``[0, V]^m``,
    an upper bound on the dual whatever the box.
    """

    def __init__(self, start: np.ndarray, bound: float, radius: float) -> None:
        self.bound, self.radius = bound, np.maximum(radius, 0.5 * start)

    def step(self, cuts: list[_Cut]) -> tuple[np.ndarray, float]:
        """The next multipliers, and the cuts' maximum over ``[0, V]^m``."""
        zero, top = np.zeros_like(self.radius), np.full_like(self.radius, self.bound)
        _, upper = _next_multipliers(cuts, zero, top)
        center = max(cuts, key=lambda c: c.value).v
        low, high = np.maximum(center - self.radius, 0.0), np.minimum(center + self.radius, self.bound)
        v, _ = _next_multipliers(cuts, low, high)
        edge = ((v <= low + 1e-12) & (low > 0.0)) | ((v >= high - 1e-12) & (high < self.bound))
        self.radius = np.where(edge, 2.0 * self.radius, self.radius)
        return v, upper


def _solve_inner(problem: _Problem, theta: np.ndarray, anchor: np.ndarray, v_full: np.ndarray, max_iter: int, tol: float) -> tuple[np.ndarray, float]:
    res = minimize(lambda t: problem.smoothed(t, anchor, v_full)[:2], theta, jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "gtol": tol, "ftol": 1e3 * np.finfo(float).eps})
    return np.asarray(res.x), float(res.fun)


def fit_rates(
    datasets: Mapping[str, Any],
    objective: RateExpression | None,
    constraints: Sequence[Constraint],
    *,
    load_model: Any,
    lam: float | None = None,
    smoothing: float = 0.05,
    mm_steps: int = 8,
    max_cuts: int = 40,
    multiplier_bound: float = 100.0,
    tol: float = 1e-4,
    inner_max_iter: int = 200,
    inner_tol: float = 1e-6,
    feasibility_tol: float = 1e-6,
    threshold: str = "exact",
    ranking: bool = False,
    standardize: bool = False,
) -> RateFit:
    """Minimize the objective's rates under the constraints on the opened ``datasets`` (alias -> dataset).

    Parameters
    ----------
    datasets : mapping of str to LocalDataset or ShardedDataset
        The stores by alias; ``"train"`` is the training store.
    objective : RateExpression or None
        Rates to minimize (None: the regularizer alone, i.e. any feasible model, or the
        ranking risk with ``ranking``).
    constraints : sequence of Constraint
    load_model : callable
        ``path -> (coef, intercept)`` of a deployed model (churn).
    lam : float, optional
        L2 penalty on ``(w, b)``; default ``1 / n`` with ``n`` the training store's total weight (the paper's LIBLINEAR default).
    smoothing : float
        Huber width of the inner problem's hinges.
    mm_steps : int
        Majorization-minimization steps (the paper used 5; on a9a and adult the objective still falls after that).
    max_cuts : int
        Cutting-plane iterations per step.
    multiplier_bound : float
        ``V``: every multiplier lies in ``[0, V]``; a constraint whose multiplier reaches ``V``
        is traded against the objective at that price (and may end unsatisfied: reported).
    tol : float
        Cutting plane stops when its upper and lower bounds on the dual meet within ``tol``.
    threshold : {"exact", "ramp", "randomized"}
        ``"exact"``: keep the direction ``w`` of the ramp solution and choose the bias
        that minimizes the objective's *exact* rates subject to the constraints' exact
        rates on the training datasets (all thresholds along ``w``, from the merged
        sorted scores; O(n log n), moves 20 bytes a row); when no bias satisfies every
        constraint, the one with the smallest largest violation; among biases of equal
        exact objective (always, for the ranking risk, which no bias changes), the one
        nearest the ramp solution's. ``"ramp"``: the bias of the ramp solution as it is.
        ``"randomized"``: the ramp solution as the paper's randomized classifier (a row is
        positive with probability ``sigma(w.x - b)``); the reports are its expected rates.
    ranking : bool
        Also minimize the ROC-AUC surrogate on the training store: auc-smooth's mean
        pairwise hinge, Huberized with width ``smoothing`` (convex, so not majorized;
        its score and gradient passes are added to each evaluation, O(n log n)).
    standardize : bool
        Fit in coordinates ``u = w * scale`` (the training store's column scales, one extra
        pass), the penalty on ``u``: a model invariant to rescaling a column, and far
        fewer evaluations on raw columns of very different scales.
    """
    t0 = time.perf_counter()
    constraints = list(constraints)
    m = len(constraints)
    infos = {a: DataInfo.of(ds) for a, ds in datasets.items()}
    for alias, info in infos.items():
        if info.n_features != infos["train"].n_features:
            raise ParameterError(f"dataset {alias!r} ({info.path}) has {info.n_features} features, the training store {infos['train'].n_features}")
    plans = plan_stores(objective, constraints, infos, load_model)
    fit_id = uuid.uuid4().hex  # the workers keep each shard's cells and anchor margins under it (dpipe.reduce._rates)
    plans = {a: dataclasses.replace(p, layout=dataclasses.replace(p.layout, memo=(fit_id, a))) for a, p in plans.items()}
    weights = {a: ds.map_reduce(cell_weights, np.add, plans[a].layout) for a, ds in datasets.items()}
    rows = compile_rows(objective, constraints, plans, weights)
    n = float(weights["train"].sum())
    lam = 1.0 / max(n, 1.0) if lam is None else float(lam)
    scale = column_scales(datasets["train"]) if standardize else None
    problem = _Problem(datasets, plans, rows, lam, smoothing, ranking, scale)
    d = problem.n_features
    theta = np.zeros(d + 1)  # the paper starts from w = 0
    shortcut = None
    if ranking and objective is None and m and threshold == "exact":
        # else majorization starts at the unconstrained ranking solution (a better anchor than w = 0)
        shortcut, theta = _threshold_alone(problem, m, inner_max_iter, inner_tol, feasibility_tol)
    if shortcut is not None:
        best, cuts_total, steps = shortcut, 1, 0
    else:
        best, cuts_total = _majorization_minimization(problem, theta, m, mm_steps, max_cuts, multiplier_bound, tol, inner_max_iter,
                                                      inner_tol, feasibility_tol)
        steps = mm_steps
    theta = best.theta.copy()
    if threshold == "exact" and shortcut is None:
        theta[d] = _exact_bias(problem, problem.weights(theta), float(theta[d]), feasibility_tol)[0]
    v_full = np.concatenate([[1.0], best.v])
    results = problem.passes(theta, theta, v_full)  # the rates at the returned model (the ranking's passes once, below)
    exact, ramped = problem.rows_at(results, INDICATOR), problem.rows_at(results, RAMP)
    if problem.ranking is not None:  # the objective's row: 1 - training ROC-AUC (exact), and the pairwise hinge
        problem.ranking.value_and_grad(problem.weights(theta))
        exact[0], ramped[0] = 1.0 - problem.ranking.train_auc(), problem.ranking.last["J"]
    if threshold == "randomized":  # what the randomized classifier achieves in expectation: the ramp rates
        exact = ramped.copy() if problem.ranking is None else np.r_[exact[0], ramped[1:]]
    reports = [RateReport(text, float(exact[j]), float(ramped[j]), float(v_full[j]), bool(j == 0 or exact[j] <= feasibility_tol))
               for j, text in enumerate(rows.texts)]
    for r in reports[1:]:
        log.info("rates: %s: %s (value %+.4g, multiplier %.4g)", r.text, "holds" if r.satisfied else "NOT satisfied", r.value, r.multiplier)
    return RateFit(problem.weights(theta).copy(), float(theta[d]), reports, steps, cuts_total, problem.evaluations, time.perf_counter() - t0)


def _majorization_minimization(problem: _Problem, theta: np.ndarray, m: int, mm_steps: int, max_cuts: int, multiplier_bound: float,
                               tol: float, inner_max_iter: int, inner_tol: float, feasibility_tol: float) -> tuple[_Cut, int]:
    """Algorithm 1 with Algorithm 2 inside: the last step's chosen inner solution, and the number of cuts."""
    cuts_total = 0
    best: _Cut | None = None
    v = np.zeros(m)
    for step in range(mm_steps):
        anchor = theta.copy()
        cuts: list[_Cut] = []
        converged = False
        region = _TrustRegion(v, multiplier_bound, TRUST_RADIUS)  # v: the previous step's multipliers, a good start
        for _ in range(max_cuts + 1):
            v_full = np.concatenate([[1.0], v])
            theta, value = _solve_inner(problem, theta, anchor, v_full, inner_max_iter, inner_tol)
            _, _, results, ranking_risk = problem.smoothed(theta, anchor, v_full)
            smooth, exact = problem.bounded_rows(results, smoothed=True), problem.bounded_rows(results)
            cuts.append(_Cut(v.copy(), value, smooth[1:].copy(), float(exact[1:].max(initial=-np.inf)), theta.copy(), float(exact[0]) + ranking_risk))
            cuts_total += 1
            if m == 0 or converged:
                break
            v, top = region.step(cuts)
            low = max(c.value for c in cuts)  # each inner minimum lower-bounds the dual's maximum
            # once the bounds meet, one last inner solve at the multipliers that maximize the cuts (the dual optimum's
            # estimate): its solution is what the step converged to, not whichever earlier cut happened to be feasible
            converged = top - low <= tol * max(1.0, abs(low)) or len(cuts) >= max_cuts
        best = _choose(cuts, feasibility_tol)
        theta = best.theta.copy()
        v = best.v.copy()
        log.debug("rates: MM step %d: theta %s", step + 1, np.array2string(theta, precision=10))
        if log.isEnabledFor(VERBOSE):  # one line per step: the multipliers at -v, a short line (one terminal line) otherwise
            log.log(VERBOSE, "rates: MM step %d: %d cuts, bounded objective %.6g, largest bounded constraint %.3g, multipliers %s",
                    step + 1, len(cuts), best.objective, best.violation, np.array2string(v, precision=4))
        else:
            log.info("rates: MM step %d: %d cuts, objective %.6g, largest constraint %.3g", step + 1, len(cuts), best.objective, best.violation)
    assert best is not None
    return best, cuts_total


def _threshold_alone(problem: _Problem, m: int, inner_max_iter: int, inner_tol: float, feasibility_tol: float) -> tuple[_Cut | None, np.ndarray]:
    """The unconstrained ranking solution with a threshold meeting every exact constraint, if one exists; and that solution.

    The ROC-AUC surrogate does not depend on the bias. When some bias along the
    unconstrained minimizer ``w*`` meets every constraint, ``(w*, b)`` is optimal for the
    constrained problem too (no feasible model ranks better than ``w*``): no multiplier
    and no majorization are needed.
    """
    d = problem.n_features
    v_full = np.concatenate([[1.0], np.zeros(m)])
    theta, value = _solve_inner(problem, np.zeros(d + 1), np.zeros(d + 1), v_full, inner_max_iter, inner_tol)
    bias, feasible = _exact_bias(problem, problem.weights(theta), float(theta[d]), feasibility_tol)
    if not feasible:
        return None, theta
    log.info("rates: the unconstrained ROC-AUC direction meets every constraint at a threshold: no majorization needed")
    return _Cut(np.zeros(m), value, np.zeros(m), 0.0, np.r_[theta[:d], bias], 0.0), theta


def _exact_bias(problem: _Problem, w: np.ndarray, bias: float, feasibility_tol: float) -> tuple[float, bool]:
    """The bias along ``w`` with the best exact objective among those meeting every exact constraint (see ``threshold``),
    and whether one met them all.

    Predicted positive iff ``w.x > b``. Walking the merged scores from the top, each
    row switched to positive adds its weight times its cell's coefficient to every row
    of the problem; candidate biases sit between distinct scores.
    """
    runs, weights, gains = [], [], []
    for alias, ds in problem.datasets.items():
        for s_run, cells, v in ds.map_gather(sorted_scores_cells, w, problem.plans[alias].layout):
            runs.append(s_run)
            weights.append(v)
            gains.append(problem.rows.coef[alias][:, cells] * v)  # (rows, n): what each row adds when predicted positive
    s, order, _ = merge_runs(runs)  # one merge of every shard's sorted run, over all datasets
    gains = np.concatenate(gains, axis=1)[:, order] if gains else np.zeros((problem.rows.constant.size, 0))
    keep = np.concatenate(weights)[order] > 0 if weights else np.zeros(0, bool)  # a row of weight 0 must not place the threshold
    s, gains = s[keep][::-1], gains[:, keep][:, ::-1]  # descending: lowering b switches rows on in this order
    values = problem.rows.constant[:, None] + np.concatenate([np.zeros((gains.shape[0], 1)), np.cumsum(gains, axis=1)], axis=1)
    # values[:, k]: the top k rows positive; valid only where the k-th and (k+1)-th scores differ
    ends = np.concatenate([[True], s[:-1] > s[1:], [True]]) if s.size else np.array([True])
    candidates = np.flatnonzero(ends)
    vals = values[:, candidates]
    violation = vals[1:].max(axis=0) if vals.shape[0] > 1 else np.zeros(candidates.size)
    ok = violation <= feasibility_tol
    if s.size == 0:
        return bias, bool(ok.all())
    # the bias each candidate stands for: between the last row switched on and the next (beyond the ends: 1 further)
    upper, lower = np.r_[s[0] + 2.0, s], np.r_[s, s[-1] - 2.0]
    at = 0.5 * (upper[candidates] + lower[candidates])
    if ok.any():
        objective = np.where(ok, vals[0], np.inf)
        best = objective.min()
        ties = np.flatnonzero(objective <= best + 1e-12 * max(1.0, abs(best)))
        return float(at[ties[np.argmin(np.abs(at[ties] - bias))]]), True
    return float(at[np.argmin(violation)]), False


def _choose(cuts: list[_Cut], feasibility_tol: float) -> _Cut:
    """The step's solution: the last inner solution (at the multipliers the cutting plane converged to) when its
    bounded constraints hold; else, as Algorithm 2 returns, the feasible one with the highest dual value; else the
    least violating. Not "the best objective among all visited": that depends on the path the cuts took, and two
    runs whose sums differ in the last bit (a weighted store and its repeated rows) would part ways."""
    if cuts[-1].violation <= feasibility_tol:
        return cuts[-1]
    feasible = [c for c in cuts if c.violation <= feasibility_tol]
    if feasible:
        return max(feasible, key=lambda c: c.value)
    return min(cuts, key=lambda c: c.violation)


def deployed_model(path: str) -> tuple[np.ndarray, float]:
    """``(coef, intercept)`` of a saved dpipe model (its prediction: ``X coef + intercept > 0``)."""
    from ..model import LinearModel

    model = LinearModel.load(path)
    return np.asarray(model.coef, dtype=np.float64), float(model.intercept)


def fit_rate_family(datasets: Mapping[str, Any], params: Any, validate: Any = None) -> FitOutcome:
    """The rate family's fit for ``train``: ``datasets`` maps aliases (``"train"`` first) to opened datasets."""
    rates = RATE_OBJECTIVES[params.objective]
    fit = fit_rates(
        datasets, rates() if rates is not None else None, params.constraints, load_model=deployed_model, lam=params.lam,
        smoothing=params.smoothing, mm_steps=params.mm_steps, multiplier_bound=params.multiplier_bound, tol=params.eps,
        inner_max_iter=params.max_iter, inner_tol=params.tol, threshold=params.threshold_rule,
        ranking=params.objective in RANKING_OBJECTIVES, standardize=params.standardize,
    )
    held = all(r.satisfied for r in fit.reports[1:])
    unmet = [r.text for r in fit.reports[1:] if not r.satisfied]
    result = FitResult(
        x=np.concatenate([fit.coef, [fit.bias]]), fun=fit.reports[0].value, nit=fit.mm_steps, nfev=fit.evaluations,
        status=0 if held else 2, success=held,
        message="every constraint holds on the training data" if held else "NOT satisfied on the training data: " + "; ".join(unmet),
        time_solve=fit.seconds,
        info={"constraints": [dataclasses.asdict(r) for r in fit.reports[1:]], "objective_ramp": fit.reports[0].ramp_value,
              "cuts": fit.cuts, "standardized": bool(params.standardize), "datasets": {a: ds.store.path if getattr(ds, "store", None) is not None else "<in memory>" for a, ds in datasets.items()}},
    )
    if not held:
        warnings.warn(f"{params.objective}: constraint(s) not satisfied on the training data: {'; '.join(unmet)} "
                      "(achieved values in the model's fit record)", ConvergenceWarning, stacklevel=3)
    return FitOutcome(fit.coef, fit.intercept, result)
