"""A pairwise risk as TRON's objective: value, gradient and Hessian-vector products through the engine's passes.

``J(w) = lam/2 ||w||^2 + R(X w)`` for a risk with ``at(scores)`` and ``curvature(scores)``
(auc's surrogates: :class:`~dpipe.objectives.SmoothedAUCRisk`, the Huberized hinge, whose curvature
sits on the pairs in its quadratic piece, and :class:`~dpipe.objectives.SquaredPairwiseHinge`). Per Newton iteration: one score pass
(sort and merge) for the trial point, whose merged scores give the value; when the
step is accepted, one gradient pass that keeps each shard's order on its worker. Per CG
step, at that fixed ``w``: one pass for ``X d`` in the kept order (no sort), O(n) prefix
sums on the driver (:meth:`Curvature.apply`), one pass for ``X^T (M X d)``. Bytes per CG
step: 8 per row each way, as for an evaluation, and no sort or merge.

On the workers' route (``dpipe.rank-exchange``, chosen as for auc-smooth:
:func:`~dpipe.engine._ranges.resolve_exchange`) the shard hosts evaluate by score range, keep
each range's curvature at the iterate and apply it per CG step among themselves
(:mod:`dpipe.engine._range_newton`): per CG step the driver sends ``d`` to every host and gets
one d-vector per shard back, whatever the rows. The fit's history records each iteration's
last CG step's bytes through the driver (``bytes_moved_cg``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..engine import HostsLost, MergedScores, RankPasses, class_totals, column_moments
from ..exceptions import DPipeError
from ..objectives import train_auc as merged_auc
from ..solvers import minimize_tron
from ._early_stopping import early_stopping
from ._outcome import FitOutcome, WarmStart
from ._params import fit_lam
from ._records import SmoothParams
from ._registry import OBJECTIVES

if TYPE_CHECKING:
    from ..engine._protocols import CurvedRisk, Dataset
    from ..objectives import Curvature, RiskAt

__all__ = ["PairwiseNewtonObjective", "fit_newton", "curved_risk", "AUTO_STANDARDIZE_RMS", "JACOBI_MIX"]

log = logging.getLogger("dpipe.fit")


#: ``standardize=None`` (auto) standardizes when some column's root mean square exceeds this: columns that are not on a
#: unit scale (counts, amounts, raw measurements), where a relative gradient rule and a Euclidean trust region stop far
#: from the minimum (adult's raw columns: test AUC 0.782 raw, 0.9045 standardized, converged 0.9045); binary, min-max
#: scaled and standardized columns stay raw (a9a, w8a, kdd99 with SVM-perf's preprocessing: 1.6e-4 to 3.9e-4 better raw)
AUTO_STANDARDIZE_RMS = 1.5
#: weight of the Hessian's diagonal in Newton's preconditioner, against its mean (the rest). Measured with
#: ``precondition`` none, this mix at 0.5 and 0.8, and the diagonal alone, on a9a, w8a, covtype, kdd99 (both tasks),
#: Reuters: 0.5 took 21-31 % fewer CG steps on a9a, w8a and covtype at as many Newton iterations or fewer, and as many on the
#: others; the diagonal alone took the fewest CG steps but up to twice the Newton iterations (each one a sort)
JACOBI_MIX = 0.5


def curved_risk(objective: str) -> Callable[[float | None], CurvedRisk]:
    """The objective's pairwise risk from its width, with its curvature (its registry entry's :attr:`~dpipe.fit.Objective.risk`;
    an objective trained by ``"newton"`` names one with ``at`` and ``curvature``)."""
    make: Callable[[float | None], CurvedRisk] = OBJECTIVES[objective].load_risk()
    return make


class _Trial(NamedTuple):
    """The last scored point: its merged scores and risk (the driver's route) or its value on the workers (their route)."""

    w: np.ndarray
    value: float
    scores: MergedScores | None
    at: RiskAt | None


class PairwiseNewtonObjective:
    """``lam/2 ||u||^2 + R(X w)``, ``w = u / scale``, with the three calls of :class:`~dpipe.solvers.NewtonObjective`.

    Without ``scale`` ``u = w``: liblinear-ranksvm's objective. With the columns' scales the
    solver works on standardized features and the ridge on standardized weights (a model
    that does not change when a column is rescaled); the passes still read raw rows.

    Where ``dpipe.rank-exchange`` sends the risk to the workers (:meth:`RankPasses.range_newton`),
    the evaluations, gradients and Hessian-vector products run range by range on the shard
    hosts (:class:`~dpipe.engine.RangeNewton`: no per-row data through the driver); a host lost
    part way sends the rest of the fit to the driver's route, as L-BFGS's
    :class:`~dpipe.fit._smooth.SmoothedObjective` does.

    Parameters
    ----------
    passes : RankPasses
        The dataset's passes.
    risk : CurvedRisk
        ``at(MergedScores) -> RiskAt`` and ``curvature(MergedScores) -> Curvature`` (:class:`~dpipe.engine._protocols.CurvedRisk`).
    lam : float
        Weight of the ridge.
    scale : ndarray, optional
        Per-feature scales (:func:`~dpipe.engine.column_scales`); the coordinates are ``u = w * scale``.
    jacobi : bool
        Offer TRON a diagonal preconditioner (:meth:`preconditioner`), taken in the gradient pass.

    Attributes
    ----------
    last : dict
        The last evaluation's exact risk, passes' timings and bytes, and the last CG step's bytes through the driver
        (``bytes_moved_cg``); counts of passes.
    """

    def __init__(self, passes: RankPasses, risk: CurvedRisk, lam: float, scale: np.ndarray | None = None, *, jacobi: bool = False) -> None:
        self.passes = passes
        self.jacobi = bool(jacobi)
        self._diagonal: np.ndarray | None = None
        self.inv_scale = None if scale is None else 1.0 / np.asarray(scale, dtype=np.float64)
        self.risk = risk
        self.lam = float(lam)
        self.last: dict[str, Any] = {}
        self.cg_last: dict[str, float] = {}
        self.hess_products = 0
        self._trial: _Trial | None = None  # the last scored w
        self._point: np.ndarray | None = None  # where the Hessian is taken
        self._scores: MergedScores | None = None
        self._curvature: Curvature | None = None
        self._ranges = passes.range_newton(risk)  # None: the driver merges the scores

    @property
    def exchange(self) -> str:
        """Where the scores are merged and weighed: ``"workers"`` (by score range) or ``"driver"``."""
        return "driver" if self._ranges is None else "workers"

    def _lost(self, error: HostsLost) -> None:
        log.warning("%s; the driver merges the scores from now on", error)
        self._ranges = None
        self._trial = None

    def _evaluate(self, w: np.ndarray) -> _Trial:
        if self._trial is not None and np.array_equal(self._trial.w, w):
            return self._trial
        if self._ranges is not None:
            try:
                ev = self._ranges.value(w)
            except HostsLost as error:
                self._lost(error)
            else:
                self.last = {"J": ev.exact, "J_mu": ev.value, **self._ranges.last, **self.cg_last}
                self._trial = _Trial(np.array(w, dtype=np.float64), ev.value, None, None)
                return self._trial
        s = self.passes.scores(w)
        t0 = time.perf_counter()
        at = self.risk.at(s)
        self.last = {"J": at.exact, "J_mu": at.value, **self.passes.last, "seconds_kernel": time.perf_counter() - t0, **self.cg_last}
        self._trial = _Trial(np.array(w, dtype=np.float64), at.value, s, at)
        return self._trial

    def to_raw(self, u: np.ndarray) -> np.ndarray:
        """The raw-feature weights ``w`` of the coordinates ``u``."""
        u = np.asarray(u, dtype=np.float64)
        return u if self.inv_scale is None else u * self.inv_scale

    def value(self, u: np.ndarray) -> float:
        """The objective at ``u`` (one score pass)."""
        return self._evaluate(self.to_raw(u)).value + 0.5 * self.lam * float(u @ u)

    def value_and_grad(self, u: np.ndarray) -> tuple[float, np.ndarray]:
        """Value and gradient at ``u`` (the score pass of :meth:`value` reused), which becomes the Hessian's point.

        With ``jacobi`` the gradient pass also sums every row's curvature times its squared
        features (:meth:`preconditioner`), reading the shards once.
        """
        trial = self._evaluate(self.to_raw(u))
        if self._ranges is not None:
            try:
                grad, squares = self._ranges.gradient(trial.w, squares=self.jacobi)
            except HostsLost as error:
                self._lost(error)
                trial = self._evaluate(trial.w)
            else:
                self.last["bytes_moved"] = self._ranges.last["bytes_moved"]
                if squares is not None:
                    self._diagonal = self.lam + self.to_raw(self.to_raw(squares))
                self._point, self._scores, self._curvature = trial.w, None, None
                return trial.value + 0.5 * self.lam * float(u @ u), self.to_raw(grad) + self.lam * u
        s, at = trial.scores, trial.at
        assert s is not None and at is not None  # the driver's route scored it
        curvature = self.risk.curvature(s)
        if self.jacobi:
            grad, squares = self.passes.gradient_and_squares(at.g_pos, at.g_neg, curvature.diag_pos, curvature.diag_neg)
            self._diagonal = self.lam + self.to_raw(self.to_raw(squares))
        else:
            grad = self.passes.gradient(at.g_pos, at.g_neg, keep=True)
        self._point, self._scores, self._curvature = trial.w, s, curvature
        return at.value + 0.5 * self.lam * float(u @ u), self.to_raw(grad) + self.lam * u  # the chain rule through w = u / scale

    def preconditioner(self) -> np.ndarray | None:
        """Diagonal preconditioner at the last :meth:`value_and_grad` point, or None (``jacobi`` off).

        ``D = lam + S^2 sum_r M_rr x_r^2`` is the Hessian's diagonal without the pairs' cross
        terms (``-2 sum_ij M_ij x_ik x_jk``, which would need every pair); TRON gets
        ``(1 - a) mean(D) + a D`` with ``a =`` :data:`JACOBI_MIX`, LIBLINEAR's mix of the
        diagonal with the identity made scale-free.
        """
        if not self.jacobi:
            return None
        D = self._diagonal
        if D is None:
            raise RuntimeError("PairwiseNewtonObjective.preconditioner needs a preceding value_and_grad")
        return (1.0 - JACOBI_MIX) * float(D.mean()) + JACOBI_MIX * D

    def hess_vec(self, d: np.ndarray) -> np.ndarray:
        """``(lam I + S X^T M X S) d``, ``S = diag(1 / scale)``, at the point of the last :meth:`value_and_grad`.

        The driver's route: two passes, no sort, O(n) prefix sums here. The workers': three host
        calls, the prefix sums on the range hosts (:meth:`RangeNewton.hess_product`).
        """
        if self._point is None:
            raise RuntimeError("PairwiseNewtonObjective.hess_vec needs a preceding value_and_grad")
        self.hess_products += 1
        if self._ranges is not None:
            try:
                product = self._ranges.hess_product(self._point, self.to_raw(d))
            except HostsLost as error:
                self._lost(error)
            else:
                self.cg_last = {"bytes_moved_cg": self._ranges.last_cg["bytes_moved"], "bytes_exchanged_cg": self._ranges.last_cg["bytes_exchanged"]}
                return self.to_raw(product) + self.lam * np.asarray(d, dtype=np.float64)
        kept = self.passes.kept
        if self._curvature is None or kept is None or not np.array_equal(kept, self._point):
            # a rejected trial point was scored since (its order is not this one's), or the workers' route held the point
            s = self.passes.scores(self._point)
            self._trial = None
            if self._curvature is None:
                self._scores, self._curvature = s, self.risk.curvature(s)
        u_pos, u_neg = self.passes.direction(self.to_raw(d))
        assert self._curvature is not None  # set with _point, or just above
        m_pos, m_neg = self._curvature.apply(u_pos, u_neg)
        product = self.passes.product(m_pos, m_neg)
        self.cg_last = {"bytes_moved_cg": float(self.passes.last["bytes_moved"])}
        return self.to_raw(product) + self.lam * np.asarray(d, dtype=np.float64)

    def train_auc(self) -> float:
        """Exact (weighted) training ROC-AUC at the Hessian's point."""
        if self._scores is None and self._ranges is not None:
            try:
                return float(self._ranges.train_auc())
            except HostsLost as error:
                self._lost(error)
        if self._scores is None:
            assert self._point is not None  # train_auc follows a value_and_grad
            self._scores = self.passes.scores(self._point, remember=False)
        return merged_auc(self._scores)


def fit_newton(ds: Dataset, p: SmoothParams, validate: Callable[[np.ndarray, float], dict[str, float]] | None = None,
               warm: WarmStart | None = None) -> FitOutcome:
    """Fit ``lam/2 ||u||^2 + R(X w)`` by trust-region Newton-CG (:func:`~dpipe.solvers.minimize_tron`) from ``w = 0``.

    ``u = w`` on raw features, ``w * scale`` standardized (``standardize``; auto: when some
    column's root mean square exceeds :data:`AUTO_STANDARDIZE_RMS`, one column pass). Per Newton iteration one score pass (and, when the step is taken, one gradient pass that
    keeps each shard's order); per CG step two passes in that order, no sort
    (:class:`~dpipe.fit._newton.PairwiseNewtonObjective`). Stops at
    ``||g|| <= eps ||g(0)||`` (``eps``, LIBLINEAR's rule; default 3e-4, measured: ``python -m bench stopping``).
    """
    t0 = time.perf_counter()
    positive, negative, _ = class_totals(ds)
    if positive <= 0 or negative <= 0:
        missing = "positive" if positive <= 0 else "negative"
        raise DPipeError(f"the training data has no {missing} rows (weight {negative:g} negative, {positive:g} positive); {p.objective} needs both classes")
    standardize, scale = p.standardize, None
    if standardize is not False:  # True, or None (auto): one column pass
        columns = column_moments(ds)
        if standardize is None:
            standardize = bool(columns.root_mean_square.max(initial=0.0) > AUTO_STANDARDIZE_RMS)
            log.info("%s: standardize=auto: %s (largest column root mean square %.3g)", p.objective, standardize,
                     columns.root_mean_square.max(initial=0.0))
        scale = columns.scales() if standardize else None
    lam = fit_lam(p, positive, negative, int(ds.n_features))
    objective = PairwiseNewtonObjective(RankPasses(ds), curved_risk(p.objective)(p.smoothing), lam, scale,
                                        jacobi=p.precondition != "none")
    t_setup = time.perf_counter() - t0
    raw_validate = None if validate is None else (lambda u, intercept=0.0: validate(objective.to_raw(u), intercept))

    def monitor(u: np.ndarray) -> dict[str, Any]:
        rec: dict[str, Any] = {k: v for k, v in objective.last.items() if k not in ("sp", "sn")}
        rec["train_auc"] = objective.train_auc()
        if raw_validate is not None:
            rec.update(raw_validate(u))
        return rec

    stopping = early_stopping(p, raw_validate)
    start, reference = np.zeros(int(ds.n_features)), None
    if warm is not None:  # a path's next lam: from the last solution, stopping relative to the gradient at w = 0
        start = warm.coef * scale if scale is not None else np.array(warm.coef, dtype=np.float64)
        reference = warm.grad_norm if warm.grad_norm is not None else float(np.linalg.norm(objective.value_and_grad(np.zeros(start.size))[1]))
    assert p.eps is not None  # Newton's stopping rule applies to this route
    result = minimize_tron(objective, start, eps=p.eps, max_iter=p.max_iter, name=f"{p.objective}: ", monitor=monitor,
                           callback=stopping, gnorm_ref=reference)
    result.time_data = t_setup
    result.info.update(solver="newton", exchange=objective.exchange, lam=lam, hess_products=objective.hess_products, precondition="diagonal" if objective.jacobi else "none",
                       J=result.history[-1].get("J") if result.history else None)
    if stopping is not None:  # the best iterate by the validation metric
        stopping.finish(result)
    result.info.update(standardized=bool(standardize), setup_passes=[] if p.standardize is False else ["column moments"])
    return FitOutcome(objective.to_raw(result.x), 0.0, result)
