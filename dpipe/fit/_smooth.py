"""The smoothed family by L-BFGS (auc-smooth, prbep-smooth; auc with ``solver="lbfgs"``): one score pass and one
gradient pass per evaluation. ``auc``'s default solver, trust-region Newton-CG, is :mod:`dpipe.fit._newton`."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine import HostsLost, MergedScores, RankPasses, class_moments, class_totals, column_scales
from ..exceptions import DPipeError, ParameterError
from ..objectives import PreconditionedObjective, RayMinimum, ray_minimum, train_auc
from ..reduce import ClassMoments
from ..solvers import CONTINUATION_START, MOMENT_PRECONDITION_MAX_FEATURES, fit_auc_moment, fit_smooth, moment_preconditioner
from ._early_stopping import early_stopping
from ._outcome import FitOutcome, WarmStart
from ._params import fit_lam
from ._records import SmoothParams
from ._registry import OBJECTIVES

if TYPE_CHECKING:
    from ..engine._protocols import Dataset, ScoreRisk

__all__ = ["fit_smoothed", "default_smoothing", "SmoothedObjective", "smoothed_objective", "score_risk"]

log = logging.getLogger("dpipe.fit")

#: the options that use the auc-moment ray, and what to use instead when the data has no such direction
MOMENT_RAY_FALLBACKS = {"init='auc-moment'": "init='zeros'", "precondition='moments'": "precondition='diagonal'"}


def score_risk(objective: str) -> Callable[[float | None], ScoreRisk]:
    """The smoothed objective's risk from its smoothing width (its registry entry's :attr:`~dpipe.fit.Objective.risk`)."""
    make: Callable[[float | None], ScoreRisk] = OBJECTIVES[objective].load_risk()
    return make


def default_smoothing(objective: str, total_weight: float, epsilon: float, scale: float) -> float:
    """The paper's ``mu = epsilon / D`` (times ``scale``) in the objective's own unit: its entry's
    :attr:`~dpipe.fit.Objective.width` (ROCArea's Huber width ``2 epsilon``, PRBEP's ``2 epsilon / n``)."""
    width = OBJECTIVES[objective].width
    if width is None:
        raise DPipeError(f"objective {objective!r} declares no default smoothing width (Objective.width); give smoothing=")
    return width(total_weight, epsilon, scale)


class SmoothedObjective:
    """``value_and_grad(w)`` of a smoothed risk through the engine's two passes (no ridge).

    Parameters
    ----------
    passes : RankPasses
        The dataset's score and gradient passes.
    risk : SmoothedAUCRisk or SmoothedPRBEPRisk
        A pure function of the merged scores.
    """

    def __init__(self, passes: RankPasses, risk: ScoreRisk) -> None:
        self.passes = passes
        self.risk = risk
        self.last: dict[str, Any] = {}
        self._scores: MergedScores | None = None
        self._w: np.ndarray | None = None  # the last evaluated weights (the workers' route scores them again if it must)
        self._ranges = passes.range_exchange(risk)  # None: the driver merges the scores

    @property
    def exchange(self) -> str:
        """Where the scores are merged and weighed: ``"workers"`` (by score range) or ``"driver"``."""
        return "driver" if self._ranges is None else "workers"

    def value_and_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """Smoothed risk and its gradient; records the exact risk and timings in ``last``."""
        if self._ranges is not None:
            try:
                self._w = np.array(w, dtype=np.float64)  # a copy: train_auc may score it again
                ev = self._ranges.evaluate(w, self.risk)
            except HostsLost as error:
                log.warning("%s; the driver merges the scores from now on", error)
                self._ranges = None
            else:
                self._scores = None
                self.last = {"J": ev.exact, "J_mu": ev.value, **self._ranges.last}
                return ev.value, ev.gradient
        s = self.passes.scores(w)
        t0 = time.perf_counter()
        at = self.risk.at(s)
        t1 = time.perf_counter()
        grad = self.passes.gradient(at.g_pos, at.g_neg)
        self._scores = s
        self.last = {"J": at.exact, "J_mu": at.value, **self.passes.last, "seconds_kernel": t1 - t0}
        return at.value, grad

    def train_auc(self) -> float:
        """Exact (weighted) training ROC-AUC of the last evaluated scores."""
        if self._scores is None and self._ranges is not None:
            try:
                return float(self._ranges.train_auc())
            except HostsLost as error:
                log.warning("%s; the driver merges the scores from now on", error)
                self._ranges = None
                assert self._w is not None  # the workers' route evaluated it
                self._scores = self.passes.scores(self._w, remember=False)
        assert self._scores is not None  # train_auc follows a value_and_grad
        return train_auc(self._scores)


def smoothed_objective(
    passes: RankPasses, objective: str, smoothing: float | None, lam: float, transform: np.ndarray | None = None, penalty: np.ndarray | None = None
) -> PreconditionedObjective:
    """``u -> R_mu(T u) + lam/2 sum_j p_j (T u)_j^2`` with value and gradient through the engine's two passes.

    What the smoothed family's L-BFGS minimizes (``T = 1``, ``p = 1``: SVM-perf's objective
    on raw features in raw coordinates); also what benchmarks time per evaluation.
    """
    T = np.ones(passes.n_features) if transform is None else transform
    return PreconditionedObjective(SmoothedObjective(passes, score_risk(objective)(smoothing)), T, lam, penalty)


def _moment_ray(moments: ClassMoments, passes: RankPasses, risk: Any, scale: np.ndarray, quad_weights: np.ndarray, lam: float, ridge: float,
                uses: tuple[str, ...]) -> tuple[np.ndarray, RayMinimum, dict[str, Any]]:
    """The auc-moment closed-form direction and the smoothed objective's minimum along it (one pass, a score summary).

    The direction ``(S+ + S- + ridge I)^-1 (mu+ - mu-)`` (standardized coordinates,
    returned on raw features with unit standardized norm) is the moment model's
    ranking. The risk plus the ridge ``lam/2 sum p_j w_j^2`` is minimized along
    it (:func:`ray_minimum`) on a summary of the scores (:meth:`RankPasses.score_summary`:
    at most 2^18 weighted points, whatever the rows), which also measures the risk's curvature there: the
    minimum is ``init="auc-moment"``'s start, the curvature sets
    ``precondition="moments"``'s scale.
    """
    try:
        coef, _, moment_fit = fit_auc_moment(moments, ridge=ridge)
    except DPipeError as error:
        raise DPipeError(f"{' and '.join(uses)}: {error}; use {' and '.join(MOMENT_RAY_FALLBACKS[u] for u in uses)}") from error
    direction = coef / np.linalg.norm(coef * scale)
    ray = ray_minimum(risk, passes.score_summary(direction), lam * float(direction @ (quad_weights * direction)))
    log.info("the auc-moment direction (moment ranking loss %.4g): the objective is lowest at %.4g times it, curvature %.4g there",
             moment_fit.info["rank_loss"], ray.alpha, ray.curvature)
    return direction, ray, {"init_rank_loss": moment_fit.info["rank_loss"]}


def _resolve_auto(p: SmoothParams, d: int) -> tuple[str, str | None]:
    """``precondition`` and ``init`` with "auto" resolved for ``d`` features."""
    precondition = p.precondition
    if precondition == "auto":
        precondition = "moments" if d <= MOMENT_PRECONDITION_MAX_FEATURES else ("none" if p.standardize else "diagonal")
    elif precondition == "moments" and d > MOMENT_PRECONDITION_MAX_FEATURES:
        raise ParameterError(
            f"precondition='moments' factors a d x d matrix on the driver; this store has {d} features, more than "
            f"{MOMENT_PRECONDITION_MAX_FEATURES}. Use precondition='diagonal'."
        )
    init = p.init
    if init == "auto":
        init = "auc-moment" if precondition == "moments" else "zeros"
    elif init == "auc-moment" and d > MOMENT_PRECONDITION_MAX_FEATURES:
        raise ParameterError(
            f"init='auc-moment' needs the d x d class moments on the driver; this store has {d} features, more than "
            f"{MOMENT_PRECONDITION_MAX_FEATURES}. Use init='zeros'."
        )
    return precondition, init


@dataclasses.dataclass(frozen=True)
class _Coordinates:
    """L-BFGS's coordinates ``u`` (``w = transform u``) and its start, as the setup before it settles them."""

    preconditioner: str
    init: str | None
    transform: np.ndarray
    start: np.ndarray
    info: dict[str, Any]


def _moment_uses(init: str | None, preconditioner: str) -> tuple[str, ...]:
    """The options of this fit that use the auc-moment ray (keys of :data:`MOMENT_RAY_FALLBACKS`)."""
    return tuple(u for u, on in zip(MOMENT_RAY_FALLBACKS, (init == "auc-moment", preconditioner == "moments")) if on)


def _check_ridge_used(p: SmoothParams, uses: tuple[str, ...], init: str | None, preconditioner: str) -> None:
    """A :class:`ParameterError` when ``ridge`` is given and no auc-moment direction (the only use of it) is."""
    if "ridge" in p.given and not uses:
        raise ParameterError(f"The 'ridge' parameter of {p.owner} applies to {p.objective} only through the auc-moment direction "
                             f"(init='auc-moment' or precondition='moments'), which this fit does not use (init={init!r}, precondition={preconditioner!r}).")


def _class_weights(ds: Dataset, p: SmoothParams, uses: tuple[str, ...], setup_passes: list[str]) -> tuple[ClassMoments | None, float, float]:
    """The class moments (when the auc-moment ray is used; else None) and the positive and negative weight; both classes required."""
    moments = None
    if uses:
        moments = class_moments(ds)
        setup_passes.append("class moments")
        negative, positive = (float(v) for v in moments.weight)
    else:
        positive, negative, _ = class_totals(ds)
    if positive <= 0 or negative <= 0:
        missing = "positive" if positive <= 0 else "negative"
        raise DPipeError(f"the training data has no {missing} rows (weight {negative:g} negative, {positive:g} positive); {p.objective} needs both classes")
    return moments, positive, negative


def _smoothing_width(p: SmoothParams, total_weight: float) -> float | None:
    """The smoothing width: as given, else the objective's default (:func:`default_smoothing`); None for auc (not smoothed)."""
    width = p.smoothing
    if width is None and (p.epsilon is not None or p.smoothing is not None):  # auc: neither applies
        assert p.epsilon is not None and p.mu_scale is not None  # both apply where epsilon does (auc has neither)
        width = default_smoothing(p.objective, total_weight, p.epsilon, p.mu_scale)
    return width


def _feature_scales(ds: Dataset, p: SmoothParams, d: int, preconditioner: str, moments: ClassMoments | None, setup_passes: list[str]) -> np.ndarray:
    """The ``d`` features' scales (ones unless standardized or preconditioned): the moments' when there are, else a column pass."""
    if not (p.standardize or preconditioner != "none"):
        return np.ones(d)
    scale: np.ndarray  # the lazy exports' (reduce's, engine's) results, typed where they enter
    if moments is not None:
        scale = moments.scales()
        return scale
    scale = column_scales(ds)
    setup_passes.append("column scales")
    return scale


def _moment_coordinates(plain: _Coordinates, moments: ClassMoments, passes: RankPasses, p: SmoothParams, scale: np.ndarray, penalty: np.ndarray,
                        lam: float, width: float | None, uses: tuple[str, ...], setup_passes: list[str]) -> _Coordinates:
    """``plain`` with the auc-moment ray's start (``init="auc-moment"``) and whitening (``precondition="moments"``).

    When the data has no moment direction and only the defaults chose it, the coordinates that need none
    (:func:`_without_moment_ray`); when an option given chose it, the error.
    """
    first_width = width * CONTINUATION_START if p.continuation and width is not None else width  # fit_smooth's first stage
    assert p.ridge is not None  # it applies to the smoothed objectives' L-BFGS route, this one (not to Newton's)
    try:
        direction, ray, info_ray = _moment_ray(moments, passes, score_risk(p.objective)(first_width), scale, penalty, lam, p.ridge, uses)
    except DPipeError as error:
        explicit = {"init='auc-moment'": p.init != "auto", "precondition='moments'": p.precondition != "auto"}
        if any(explicit[u] for u in uses):
            raise
        return _without_moment_ray(error, p, scale, plain)
    setup_passes.append("ray scores")
    start, transform, info = plain.start, plain.transform, dict(plain.info)
    if plain.init == "auc-moment":
        start = ray.alpha * direction
        info.update(info_ray, init_scale=ray.alpha)
    if plain.preconditioner == "moments":
        curvature = ray.curvature
        if curvature <= 0:  # no pair in a quadratic piece along the ray: any positive scale will do, L-BFGS rescales after one step
            curvature = max(lam, 1e-12)
        transform = moment_preconditioner(moments, scale, penalty, lam, curvature)
        info.update(precondition_curvature=curvature)
    return dataclasses.replace(plain, start=start, transform=transform, info=info)


def _without_moment_ray(error: DPipeError, p: SmoothParams, scale: np.ndarray, plain: _Coordinates) -> _Coordinates:
    """The defaults chose the moment ray, and this data has none: fall back to what needs no moment direction (logged)."""
    preconditioner = "none" if p.standardize else "diagonal"
    log.warning("%s; the defaults fall back to precondition=%r, init='zeros'", error, preconditioner)
    return dataclasses.replace(plain, preconditioner=preconditioner, init="zeros", transform=1.0 / scale)


def _warm_start(warm: WarmStart | None, coordinates: PreconditionedObjective, start: np.ndarray) -> tuple[np.ndarray, float | None]:
    """The start and the gradient norm stopping is relative to: a path's next ``lam`` starts from the last solution, relative
    to the gradient at this fit's own start (evaluated here unless the path knows it); a cold fit from ``start`` (None)."""
    if warm is None:
        return start, None
    reference = warm.grad_norm if warm.grad_norm is not None else float(np.linalg.norm(coordinates.value_and_grad(coordinates.from_raw(start))[1]))
    return np.array(warm.coef, dtype=np.float64), reference


def fit_smoothed(ds: Dataset, p: SmoothParams, validate: Callable[[np.ndarray, float], dict[str, float]] | None = None,
                 warm: WarmStart | None = None) -> FitOutcome:
    """Fit a smoothed rank objective on an opened dataset (two passes per evaluation).

    The objective is ``R_mu(w) + lam/2 sum_j p_j w_j^2`` with ``p = 1`` (SVM-perf's) or,
    with ``standardize``, ``p = scale^2`` (the ridge on standardized weights). L-BFGS
    runs in coordinates ``u`` with ``w = T u``: ``T = 1``, ``1 / scale`` with
    ``standardize`` or ``precondition="diagonal"``, the whitening matrix of
    :func:`moment_preconditioner` with ``precondition="moments"``. With
    ``init="auc-moment"`` or ``precondition="moments"`` a moments pass and one score
    pass come first; the moments also give the feature scales (no column pass).

    Parameters
    ----------
    ds : Dataset
        The opened training dataset.
    p : SmoothParams
        The resolved record (:func:`dpipe.fit.resolve`).
    validate : callable, optional
        ``validate(coef, intercept)``: the validation metrics of an iterate (the fit history; early stopping).
    warm : WarmStart, optional
        A regularization path's last solution, this fit's start.

    Returns
    -------
    FitOutcome
        The coefficients on raw features (no intercept: the threshold is calibrated after) and the solver's result.
    """
    d = int(ds.n_features)
    passes = RankPasses(ds)
    preconditioner, init = _resolve_auto(p, d)
    setup_passes: list[str] = []  # the data passes before L-BFGS, in order
    uses = _moment_uses(init, preconditioner)
    _check_ridge_used(p, uses, init, preconditioner)
    t0 = time.perf_counter()
    moments, positive, negative = _class_weights(ds, p, uses, setup_passes)
    lam = fit_lam(p, positive, negative, d)
    width = _smoothing_width(p, positive + negative)
    scale = _feature_scales(ds, p, d, preconditioner, moments, setup_passes)
    penalty = scale**2 if p.standardize else np.ones(d)
    transform = 1.0 / scale if p.standardize or preconditioner == "diagonal" else np.ones(d)
    setup = _Coordinates(preconditioner, init, transform, np.zeros(d), {"init_scale": None})
    if moments is not None:
        setup = _moment_coordinates(setup, moments, passes, p, scale, penalty, lam, width, uses, setup_passes)
    t_setup = time.perf_counter() - t0
    if setup_passes:
        log.info("%s before L-BFGS: %.3f s", ", ".join(setup_passes), t_setup)

    def make(width: float | None) -> PreconditionedObjective:
        return smoothed_objective(passes, p.objective, width, lam, setup.transform, penalty)

    coordinates = make(width)  # the change of variables does not depend on the width
    w_validate = None if validate is None else (lambda u: validate(coordinates.to_raw(u), 0.0))
    stopping = early_stopping(p, validate)
    start, reference = _warm_start(warm, coordinates, setup.start)
    assert p.memory is not None and p.tol is not None  # L-BFGS's options: they apply to this route
    result = fit_smooth(
        make, coordinates.from_raw(start), width, grad_reference=reference, memory=p.memory, max_iter=p.max_iter, tol=p.tol,
        continuation=bool(p.continuation), continuation_factor=p.continuation_factor or 10.0, validate=w_validate, name=f"{p.objective}: ",
        whitened=setup.preconditioner == "moments", callback=stopping,
    )
    result.time_data = t_setup
    result.info.update(lam=lam, standardized=bool(p.standardize), preconditioner=setup.preconditioner, init=setup.init, setup_passes=setup_passes,
                       **setup.info)
    if stopping is not None:  # the best iterate by the validation metric
        stopping.finish(result)
    return FitOutcome(coordinates.to_raw(result.x), 0.0, result)
