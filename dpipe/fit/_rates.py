"""The rate family's fit: rate objectives under rate constraints (Goh et al., Problem 2).

minimize ``lam/2 ||w||^2 + objective rates`` subject to ``constraint rates <= 0``, every
indicator replaced by the ramp ``sigma(w.x - b)``. This module builds the problem from the
parameters (the stores' cell plans, the compiled rows, ``lam``, the column scales, auc-rate's
ranking term), runs the solver (:func:`dpipe.solvers.solve_rates`: majorization-minimization,
the multipliers' cutting plane, the inner problems, the exact threshold; the mathematics and
the stopping rules are in :mod:`dpipe.solvers._rate_solver`) and reports every row of the
problem at the returned model (:class:`RateReport`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..engine import RankPasses, class_totals, column_scales
from ..exceptions import ConvergenceWarning, DPipeError, ParameterError
from ..model._linear import deployed_model
from ..rates._cells import DataInfo, compile_rows, plan_stores
from ..rates._expr import Constraint, RateExpression
from ..rates._intervals import constraint_report
from ..rates._report import ConstraintReport
from ..reduce._rates import INDICATOR, RAMP, cell_predictions, cell_weights
from ..solvers import FitResult, RateProblem, solve_rates
from ..solvers._rate_threshold import exact_bias
from ._outcome import FitOutcome
from ._params import default_lam, fit_lam
from ._records import RateParams
from ._registry import OBJECTIVES

if TYPE_CHECKING:
    from ..engine._protocols import CurvedRisk, Dataset, ScoreRisk
    from ._newton import PairwiseNewtonObjective
    from ._smooth import SmoothedObjective

#: the validation rule's default one-sided confidence that a constraint holds on the held-out rows (measured:
#: ``python -m bench rate-generalization``)
VALIDATION_CONFIDENCE = 0.95

__all__ = ["RateReport", "RateFit", "fit_rates", "fit_rate_family", "objective_rates"]

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
    """The result of :func:`fit_rates`.

    ``mm_steps``: majorization-minimization steps run (0: a threshold of the unconstrained
    ranking met every constraint); ``cuts``: inner problems solved; ``evaluations``: passes
    (one per store each); ``settled``: MM stopped on its rule, not at ``mm_steps``;
    ``hess_products``: Newton's Hessian-vector products; ``inner_at_limit``: inner problems
    stopped at ``max_iter``.
    """

    coef: np.ndarray
    bias: float
    reports: list[RateReport]
    mm_steps: int
    cuts: int
    evaluations: int
    seconds: float
    settled: bool = True
    hess_products: int = 0
    inner_at_limit: int = 0
    #: every constraint on the training rows with its 95 % interval, verdict and rates (:mod:`dpipe.rates._intervals`)
    intervals: list[ConstraintReport] = dataclasses.field(default_factory=list)
    #: the same on the validation rows that set the threshold, or None (the training rows did)
    validation: list[ConstraintReport] | None = None
    #: the ridge the fit used: ``lam`` as given, else 1 / n (the training store's rows)
    lam: float = 0.0

    @property
    def intercept(self) -> float:
        """dpipe's convention: the score is ``X coef + intercept`` (the paper's ``w.x - b``)."""
        return -self.bias


def objective_rates(objective: str) -> tuple[RateExpression | None, Callable[[float], ScoreRisk] | None]:
    """What the rate objective minimizes besides ``lam/2 ||(w, b)||^2``, from its registry entry: the rates on the training
    store (:attr:`~dpipe.fit.Objective.rates`; None: none) and the ranking risk from its width (:attr:`~dpipe.fit.Objective.risk`,
    auc-rate's ROC-AUC surrogate; None: none)."""
    spec = OBJECTIVES[objective]
    rates = None if spec.rates is None else spec.rates.load()()
    ranking: Callable[[float], ScoreRisk] | None = None if spec.risk is None else spec.load_risk()
    return rates, ranking


def fit_rates(
    datasets: Mapping[str, Dataset],
    p: RateParams,
    *,
    load_model: Any,
    validation: Mapping[str, Any] | None = None,
    feasibility_tol: float = 1e-6,
    inner_solver: str = "lbfgs",
    max_cuts: int = 40,
) -> RateFit:
    """Minimize the rate objective ``p.objective`` under ``p.constraints`` on the opened ``datasets`` (alias -> dataset).

    What it minimizes is its registry entry's (:func:`objective_rates`): its rates, and auc-rate's ranking risk (auc-smooth's
    mean pairwise hinge, Huberized with width ``smoothing``: convex, so not majorized; its score and gradient passes are
    added to each evaluation, O(n log n)); every option is the record's (:func:`dpipe.fit.resolve`, documented in
    :data:`dpipe.fit.PARAMS`): ``lam`` (None: the objective's data default, :func:`~dpipe.fit._params.default_lam`, on the
    training rows' total weight; ``C`` is turned into ``lam`` by the caller, on the whole training store), ``smoothing``,
    ``mm_steps``, ``multiplier_bound``, ``eps``, ``tol``, ``max_iter``, ``threshold_rule``, ``standardize``, ``slack``,
    ``confidence`` (None: :data:`VALIDATION_CONFIDENCE` under the validation rule, else 0.5).

    Parameters
    ----------
    datasets : mapping of str to LocalDataset or ShardedDataset
        The stores by alias; ``"train"`` is the training store.
    p : RateParams
        The resolved parameters.
    load_model : callable
        ``path -> (coef, intercept)`` of a deployed model (churn).
    validation : mapping of str to LocalDataset, ShardedDataset or DatasetPart, optional
        The validation rows of some datasets (by alias): the exact threshold is chosen so that
        the constraints hold on them (on ``datasets`` for the aliases left out), while the
        direction and the multipliers come from ``datasets`` (the validation rule, after
        Cotter et al. 2019). Needs ``threshold_rule="exact"``.
    feasibility_tol : float
        A constraint holds at ``value <= feasibility_tol``.
    inner_solver : {"lbfgs", "newton"}
        The inner problems' solver: L-BFGS (measured faster, see :mod:`dpipe.solvers._rate_solver`) or TRON.
    max_cuts : int
        Cuts of the multipliers' cutting plane per majorization step at most.

    Notes
    -----
    ``threshold_rule``: ``"exact"`` keeps the direction ``w`` of the ramp solution and chooses the bias
    that minimizes the objective's *exact* rates subject to the constraints' exact
    rates on the training datasets (all thresholds along ``w``, from the merged
    sorted scores; O(n log n), moves 20 bytes a row); when no bias satisfies every
    constraint, the one with the smallest largest violation; among biases of equal
    exact objective (always, for the ranking risk, which no bias changes), the one
    nearest the ramp solution's. ``"ramp"``: the bias of the ramp solution as it is.
    ``"randomized"``: the ramp solution as the paper's randomized classifier (a row is
    positive with probability ``sigma(w.x - b)``); the reports are its expected rates.
    ``eps`` is the outer loops' relative tolerance: the multipliers' cutting plane stops when its
    bounds on the dual meet within ``eps max(1, |D|)``; majorization-minimization when a
    step lowers the dual estimate ``D`` by at most ``eps |D|``. ``tol`` is the inner problems'
    relative tolerance: ``max|g| <= tol (1 + sum v) max|g_0|`` (gradients in column-scaled
    coordinates, ``g_0`` at the fit's start). ``standardize`` fits in coordinates ``u = w * scale``
    (the training store's column scales), the penalty on ``u``; either way the column scales
    (one pass) precondition the inner solver. ``slack`` and ``confidence``: the exact threshold
    meets every constraint with ``value + z se <= -slack`` on the rows that set it, ``z`` the
    standard normal's ``confidence`` quantile and ``se`` the delta method's standard error over the cells.
    """
    t0 = time.perf_counter()
    objective, ranking = objective_rates(p.objective)
    smoothing, mm_steps, multiplier_bound, eps, tol, max_iter = p.smoothing, p.mm_steps, p.multiplier_bound, p.eps, p.tol, p.max_iter
    threshold, standardize, slack, confidence = p.threshold_rule, p.standardize, p.slack, _confidence(p, validation or {})
    name = f"{p.objective}: "
    constraints: list[Constraint] = list(p.constraints)
    infos = {a: DataInfo.of(ds) for a, ds in datasets.items()}
    for alias, info in infos.items():
        if info.n_features != infos["train"].n_features:
            raise ParameterError(f"dataset {alias!r} ({info.path}) has {info.n_features} features, the training store {infos['train'].n_features}")
    plans = plan_stores(objective, constraints, infos, load_model)
    fit_id = uuid.uuid4().hex  # the workers keep each shard's cells and anchor margins under it (dpipe.reduce._rates)
    plans = {a: dataclasses.replace(plan, layout=dataclasses.replace(plan.layout, memo=(fit_id, a))) for a, plan in plans.items()}
    weights = {a: ds.map_reduce(cell_weights, np.add, plans[a].layout) for a, ds in datasets.items()}
    rows = compile_rows(objective, constraints, plans, weights)
    n = float(weights["train"].sum())
    lam = default_lam(OBJECTIVES[p.objective], n, infos["train"].n_features) if p.lam is None else float(p.lam)
    scale = column_scales(datasets["train"])
    newton = inner_solver == "newton"
    ranking_term: PairwiseNewtonObjective | SmoothedObjective | None = None
    if ranking is not None:  # the ROC-AUC surrogate on the training store: convex already (no majorization), its own two passes
        if newton:
            from ._newton import PairwiseNewtonObjective

            ranking_term = PairwiseNewtonObjective(RankPasses(datasets["train"]), cast("CurvedRisk", ranking(smoothing)), 0.0)
        else:
            from ._smooth import SmoothedObjective

            ranking_term = SmoothedObjective(RankPasses(datasets["train"]), ranking(smoothing))
    problem = RateProblem(datasets, plans, rows, lam, smoothing, ranking_term, scale if standardize else None, curvature=newton)
    d = problem.n_features
    # the inner solver's coordinates: standardized (a preconditioner, not another problem) unless theta is already
    pre = np.ones(d + 1) if standardize else np.r_[1.0 / scale, 1.0]
    from scipy.stats import norm

    z = max(0.0, float(norm.ppf(confidence)))
    if (validation or slack or z) and threshold != "exact":
        raise ParameterError(f"{name}the validation rule and slack set the exact threshold; threshold_rule={threshold!r} keeps the ramp "
                             "solution's bias: use threshold_rule='exact'")
    solution = solve_rates(problem, mm_steps=mm_steps, eps=eps, tol=tol, max_iter=max_iter, multiplier_bound=multiplier_bound,
                           feasibility_tol=feasibility_tol, threshold=threshold, preconditioner=pre, inner_solver=inner_solver,
                           max_cuts=max_cuts, name=name, margin=slack, z=0.0 if validation else z)
    theta = solution.theta
    validated = None
    if validation:  # the threshold that meets the constraints on the validation rows (aliases without any: their own rows)
        vdatasets = {a: validation.get(a, ds) for a, ds in datasets.items()}
        vplans = {a: dataclasses.replace(plan, layout=dataclasses.replace(plan.layout, memo=(fit_id + "-validation", a))) for a, plan in plans.items()}
        vrows = compile_rows(objective, constraints, vplans, {a: ds.map_reduce(cell_weights, np.add, vplans[a].layout) for a, ds in vdatasets.items()})
        theta[d], _ = exact_bias(vdatasets, vplans, vrows, problem.weights(theta), float(theta[d]), feasibility_tol, slack, z)
        validated = _measured(vdatasets, vplans, vrows, constraints, problem.weights(theta), -float(theta[d]), False, feasibility_tol)
    v_full = np.concatenate([[1.0], solution.v])
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
    measured = _measured(datasets, plans, rows, constraints, problem.weights(theta), -float(theta[d]), threshold == "randomized", feasibility_tol)
    intervals = [c.fitted(r.value, r.ramp_value, r.multiplier) for r, c in zip(reports[1:], measured)]
    return RateFit(problem.weights(theta).copy(), float(theta[d]), reports, solution.mm_steps, solution.cuts, problem.evaluations,
                   time.perf_counter() - t0, solution.settled, problem.hess_products, solution.inner_at_limit, intervals, validated, lam)


def _measured(datasets: Mapping[str, Dataset], plans: Mapping[str, Any], rows: Any, constraints: Sequence[Constraint], coef: np.ndarray,
              intercept: float, randomized: bool, tolerance: float) -> list[ConstraintReport]:
    """Every constraint of the model ``(coef, intercept)`` on ``datasets``, with its interval and verdict (one pass each);
    each holds up to the fit's feasibility ``tolerance``."""
    if not constraints:
        return []
    sums = {a: ds.map_reduce(cell_predictions, np.add, coef, intercept, plans[a].layout, randomized) for a, ds in datasets.items()}
    return [dataclasses.replace(c, tolerance=tolerance) for c in constraint_report(constraints, rows, plans, sums)]


def _confidence(params: RateParams, validation: Mapping[str, Dataset]) -> float:
    """``confidence`` as given, else :data:`VALIDATION_CONFIDENCE` under the validation rule and 0.5 (the point value) without."""
    if params.confidence is not None:
        return float(params.confidence)
    return VALIDATION_CONFIDENCE if validation else 0.5


def fit_rate_family(datasets: Mapping[str, Dataset], params: RateParams, validate: Any = None,
                    constraint_validation: Mapping[str, Dataset] | None = None) -> FitOutcome:
    """The rate family's fit for ``train``: ``datasets`` maps aliases (``"train"`` first) to opened datasets;
    ``constraint_validation`` maps some of them to opened validation stores (the validation rule, with
    ``params.validation_fraction`` holding out a seeded share of the others)."""
    from ..engine._split import DatasetPart, RowSplit

    totals = class_totals(datasets["train"])  # up front, not after the fit: the training metrics rank one class against the other
    if totals.positive <= 0 or totals.negative <= 0:
        missing = "positive" if totals.positive <= 0 else "negative"
        raise DPipeError(f"the training data has no {missing} rows (weight {totals.negative:g} negative, {totals.positive:g} positive); "
                         f"{params.objective} needs both classes")
    validation = dict(constraint_validation or {})
    if params.validation_fraction is not None:
        split = RowSplit(params.validation_fraction, params.validation_seed)
        for alias in list(datasets):
            if alias not in validation:
                validation[alias] = DatasetPart(datasets[alias], split, "validation")
                datasets = {**datasets, alias: DatasetPart(datasets[alias], split, "fit")}
    fitted = params
    if params.C is not None:  # C's lam from the whole training store's class weights (lam="auto" is refused for the rate objectives)
        fitted = dataclasses.replace(params, lam=fit_lam(params, totals.positive, totals.negative, int(datasets["train"].n_features)))
    fit = fit_rates(datasets, fitted, load_model=deployed_model, validation=validation or None)
    where = "the validation rows" if fit.validation is not None else "the training data"
    deciding = fit.validation if fit.validation is not None else fit.intervals
    unmet = [c.text for c in deciding if not c.holds]
    held = not unmet
    info = {"objective_ramp": fit.reports[0].ramp_value, "lam": fit.lam,
            "slack": params.slack, "cuts": fit.cuts, "mm_settled": fit.settled, "inner_at_max_iter": fit.inner_at_limit, "standardized": bool(params.standardize),
            "datasets": {a: ds.store.path if ds.store is not None else "<in memory>" for a, ds in datasets.items()}}
    if fit.validation is not None:
        where_is = lambda ds: ds.store.path if ds.store is not None else "<in memory>"  # noqa: E731
        info["validation"] = {a: (f"{params.validation_fraction:g} of {where_is(ds)} (seed {params.validation_seed})" if isinstance(ds, DatasetPart)
                                  else where_is(ds)) for a, ds in validation.items()}
    result = FitResult(
        x=np.concatenate([fit.coef, [fit.bias]]), fun=fit.reports[0].value, nit=fit.mm_steps, nfev=fit.evaluations,
        status=0 if held else 2, success=held,
        message=f"every constraint holds on {where}" if held else f"NOT satisfied on {where}: " + "; ".join(unmet),
        time_solve=fit.seconds, info=info, constraints=fit.intervals, constraints_validation=fit.validation,
    )
    if not held:
        warnings.warn(f"{params.objective}: constraint(s) not satisfied on {where}: {'; '.join(unmet)} "
                      "(achieved values in the model's fit record)", ConvergenceWarning, stacklevel=3)
    return FitOutcome(fit.coef, fit.intercept, result)
