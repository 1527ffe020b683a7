"""Smoothed ROCArea and PRBEP risks (Zhang, Saha and Vishwanathan): pure functions of merged scores.

Both objectives are ``J_mu(w) = lam/2 ||w||^2 + R_mu(w)`` where ``R_mu`` is a smoothed
multivariate risk that depends on the scores ``s = X w`` only through their order
within each class. A risk here is a pure object: :meth:`at` takes the merged sorted
scores of every row (:class:`dpipe._runs.MergedScores`, produced by the engine's score
pass) and returns the risk and each row's derivative ``dR/ds_i``; the engine's
gradient pass turns those into ``X^T g``. Risks never see a dataset.

Sample weights ``v`` (each row counting as ``v_i`` repeated rows): pairs weigh
``v_i v_j`` and the normalisations use the class weights ``W+``, ``W-`` instead of the
counts, so integer weights give exactly the risk of the repeated rows.

Smoothing defaults follow the paper: ``mu = epsilon / D`` with ``epsilon = 1e-3`` and
the prox-function ``1/2 ||beta||^2``. For ROCArea (``D = m / 2`` over the m pairs) this is
the Huber width ``t = m mu = 2 epsilon``; for PRBEP (``D = n / 2``) ``mu = 2 epsilon / n``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._runs import MergedScores, RangeInput
from ..exceptions import DPipeError
from ._auc_ranges import auc_gamma_range
from ._curvature import Curvature, searchsorted_sorted
from ._prbep_dual import DualScale, SortedClass, dual_breakpoints, dual_sums, dual_weights, exact_breakpoints, exact_sums
from ._range_curvature import RangeCurvature, huber_range_curvature
from ._rank_kernels import auc_gamma, prbep_beta, prbep_risk_exact
from ._risk import RiskAt

__all__ = ["SmoothedAUCRisk", "SmoothedPRBEPRisk", "PreconditionedObjective", "RayMinimum", "ray_minimum"]

#: relative step in ``alpha`` of :func:`ray_minimum`'s curvature
RAY_CURVATURE_STEP = 0.05


class RayMinimum(NamedTuple):
    """Where a smoothed objective is lowest along a ray ``alpha * direction``."""

    #: the minimizing scale (> 0)
    alpha: float
    #: second derivative of the smoothed risk (no ridge) along the ray at ``alpha``
    curvature: float


def _check_classes(name: str, s: MergedScores | tuple[float, float]) -> tuple[float, float]:
    wp, wn = s.class_weights if isinstance(s, MergedScores) else s
    if wp <= 0 or wn <= 0:
        missing = "positive" if wp <= 0 else "negative"
        raise DPipeError(f"the training data has no {missing} rows (weight {wn:g} negative, {wp:g} positive); {name} needs both classes")
    return wp, wn


class SmoothedAUCRisk:
    """``(1/m) sum_ij v_i v_j h_t(1 - s_i + s_j)`` over positive i, negative j, ``m = W+ W-``.

    ``h_t`` is the Huberized hinge of width ``t`` (uniform error <= t/2); ``t -> 0``
    gives SVM-perf's ROCArea risk (the mean pairwise hinge). The ranking ignores an
    intercept. O(n) on the sorted scores (:func:`auc_gamma`).

    Parameters
    ----------
    t : float
        Huber width (> 0).
    """

    name = "auc-smooth"

    def __init__(self, t: float) -> None:
        self.t = float(t)

    def at(self, s: MergedScores) -> RiskAt:
        """The risk and every row's derivative at the scores ``s``."""
        wp, wn = _check_classes(self.name, s)
        m = wp * wn
        gp, gn, value, hinge = auc_gamma(s.pos, s.neg, self.t, s.pos_weight, s.neg_weight)
        if s.weighted:
            gp, gn = gp * s.pos_weight, gn * s.neg_weight
        return RiskAt(value / m, hinge / m, -gp / m, gn / m)

    @property
    def halo(self) -> float:
        """Width of the halos a score range needs (:mod:`._auc_ranges`): the Huber width."""
        return self.t

    def at_range(self, r: RangeInput) -> RiskAt:
        """One score range's share (its own rows' derivatives, the sums over its own positives), not yet times :meth:`range_scale`.

        Summed over the ranges and scaled, the same as :meth:`at` on all the scores.
        """
        out = auc_gamma_range(r, self.t)
        gp, gn = out.gamma_pos, out.gamma_neg
        if r.vp is not None:
            assert r.vn is not None  # weights come for both classes
            gp, gn = gp * r.vp[r.own_pos_start:], gn * r.vn[: r.own_neg_stop]
        return RiskAt(out.value, out.hinge, -gp, gn)

    def range_scale(self, class_weights: tuple[float, float]) -> float:
        """The factor turning the ranges' summed shares into the risk: ``1 / (W+ W-)``."""
        wp, wn = _check_classes(self.name, class_weights)
        return 1.0 / (wp * wn)

    def range_curvature(self, r: RangeInput) -> RangeCurvature:
        """:meth:`curvature` on one score range's own rows (:func:`~._range_curvature.huber_range_curvature`), not yet times
        :meth:`range_scale`: what the workers' route of Newton-CG keeps for the Hessian-vector products at one iterate."""
        return huber_range_curvature(r, self.t)

    def curvature(self, s: MergedScores) -> Curvature:
        """The generalized Hessian in the scores at ``s`` (:class:`~dpipe.objectives._pairwise_l2.Curvature`), for Newton-CG.

        ``h_t'' = 1/t`` on the margins ``0 < 1 - s_i + s_j < t`` and 0 elsewhere: a positive's
        pairs in the quadratic piece are the negatives with ``s_i - 1 < s_j < s_i - 1 + t``, a
        negative's the positives with ``s_j + 1 - t < s_i < s_j + 1`` (four binary searches).
        """
        wp, wn = _check_classes(self.name, s)
        return Curvature.of_runs(
            s,
            searchsorted_sorted(s.neg, s.pos - 1.0, "right"), searchsorted_sorted(s.neg, s.pos - 1.0 + self.t, "left"),
            searchsorted_sorted(s.pos, s.neg + 1.0 - self.t, "right"), searchsorted_sorted(s.pos, s.neg + 1.0, "left"),
            1.0 / (self.t * wp * wn),
        )


class SmoothedPRBEPRisk:
    """``max_beta [sum v c beta - mu/2 sum v beta^2]`` (see DESIGN.md), ``W`` the total weight.

    ``c_i = 1/W+ - 2 s_i / W`` on positives, ``c_j = 2 s_j / W`` on negatives, ``beta``
    in [0, 1]^n with as much weight on positives as on negatives; ``dR/ds_i`` is
    ``-(2/W) y_i v_i beta_i``. ``mu -> 0`` gives the PRBEP risk, the maximum over
    labelings with as many false negatives as false positives of the structural hinge.

    Parameters
    ----------
    mu : float
        Smoothing (> 0).
    """

    name = "prbep-smooth"

    def __init__(self, mu: float) -> None:
        self.mu = float(mu)

    def at(self, s: MergedScores) -> RiskAt:
        """The risk and every row's derivative at the scores ``s``."""
        wp, wn = _check_classes(self.name, s)
        n = wp + wn
        bp, bn, value, _ = prbep_beta(s.pos, s.neg, n, self.mu, s.pos_weight, s.neg_weight)
        exact = prbep_risk_exact(s.pos, s.neg, n, s.pos_weight, s.neg_weight)
        scale = 2.0 / n
        if s.weighted:
            bp, bn = bp * s.pos_weight, bn * s.neg_weight
        return RiskAt(value, exact, -scale * bp, scale * bn)

    # -- evaluated on the workers through its two scalars (dpipe.objectives._prbep_dual) ----------------------------

    #: the scalars the workers' route searches: the smoothed risk's ``theta`` (a root) and the exact risk (a minimum)
    SCALARS = {"dual": "root", "exact": "min"}

    def dual_scale(self, class_weights: tuple[float, float]) -> DualScale:
        """``W`` and ``W+`` from the class weights (both classes needed)."""
        wp, wn = _check_classes(self.name, class_weights)
        return DualScale(wp + wn, wp)

    def scalar_grid(self, name: str, pos_scores: np.ndarray, neg_scores: np.ndarray, k: DualScale, size: int) -> np.ndarray:
        """A first grid for scalar ``name`` from sampled scores (each shard's first and last included): ``size``
        quantiles of the sampled breakpoints, and two points beyond every breakpoint."""
        cp, cn = 1.0 / k.Wp - 2.0 * pos_scores / k.W, 2.0 * neg_scores / k.W
        points = np.concatenate([cp, cp - self.mu, -cn, self.mu - cn] if name == "dual" else [cp, -cn])
        points = np.unique(points[np.isfinite(points)])
        inner = points[np.unique(np.linspace(0, points.size - 1, min(size, points.size)).round().astype(int))] if points.size else np.zeros(0)
        lo, hi = (points[0], points[-1]) if points.size else (0.0, 0.0)
        return np.concatenate([[lo - 1.0 - abs(lo) - self.mu], inner, [hi + 1.0 + abs(hi) + self.mu]])

    def scalar_sums(self, name: str, pos: SortedClass, neg: SortedClass, k: DualScale, grid: np.ndarray) -> tuple:
        """One shard's sums at the grid: ``dual``: (f, below, at_or_below); ``exact``: (g, slope, below, at_or_below)."""
        return dual_sums(pos, neg, k, self.mu, grid) if name == "dual" else exact_sums(pos, neg, k, grid)

    def scalar_breakpoints(self, name: str, pos: SortedClass, neg: SortedClass, k: DualScale, a: float, b: float, limit: int) -> np.ndarray | None:
        """One shard's breakpoints of scalar ``name``'s function strictly between ``a`` and ``b`` (None: more than ``limit``)."""
        if name == "dual":
            return dual_breakpoints(pos, neg, k, self.mu, a, b, limit)
        return exact_breakpoints(pos, neg, k, a, b, limit)

    def dual_weights(self, pos: SortedClass, neg: SortedClass, vp: np.ndarray | None, vn: np.ndarray | None, k: DualScale,
                     theta: float) -> tuple[np.ndarray, np.ndarray, float]:
        """One shard's ``dR/ds`` per row (sorted order) at the root ``theta``, and its share of the risk."""
        bp, bn, share = dual_weights(pos, neg, vp, vn, k, self.mu, theta)
        scale = 2.0 / k.W
        if vp is not None:
            bp, bn = bp * vp, bn * vn
        return -scale * bp, scale * bn, share

    @staticmethod
    def exact_from(lowest: float) -> float:
        """The exact risk from the lowest value of its convex dual seen by the search."""
        return float(lowest)


def ray_minimum(risk: Any, s: MergedScores, quad: float) -> RayMinimum:
    """The ``alpha > 0`` minimizing ``risk(alpha s) + quad/2 alpha^2``, and the risk's curvature there.

    ``s`` are the scores of a direction; those of ``alpha`` times it are ``alpha s``,
    and the risk needs only the sorted scores, so the search runs on the driver after
    one score pass. The risk is convex in ``alpha``: a bounded Brent search on
    ``log alpha`` (to 1 %), over 10 e-folds either side of the scale that gives the
    scores unit spread (about 10 kernel calls, O(n) each). ``curvature`` is
    ``d^2/dalpha^2 R_mu`` at the minimum (no ridge), by a central difference of
    +-5 % in ``alpha``: the risk is piecewise quadratic in ``alpha``, so the difference
    averages the curvature of the pairs near the margin rather than sampling one
    kink. 0 when no pair is in a quadratic piece.
    """
    spread = float(np.std(np.concatenate([s.pos, s.neg])))
    if not np.isfinite(spread) or spread <= 0:
        raise DPipeError(f"{risk.name}: every row scores the same along the starting direction; it cannot set the scale of the start")
    centre = -np.log(spread)

    def value(alpha: float) -> float:
        return risk.at(s.scaled(alpha)).value

    def along(log_alpha: float) -> float:
        a = np.exp(log_alpha)
        return value(a) + 0.5 * quad * a * a

    from scipy.optimize import minimize_scalar  # here: the Newton fits use this module's risks and never load scipy.optimize

    found = minimize_scalar(along, bounds=(centre - 10.0, centre + 10.0), method="bounded", options={"xatol": 1e-2})
    alpha, step = float(np.exp(found.x)), RAY_CURVATURE_STEP
    curvature = (value(alpha * (1 + step)) - 2.0 * value(alpha) + value(alpha * (1 - step))) / (alpha * step) ** 2
    return RayMinimum(alpha, max(float(curvature), 0.0))


class PreconditionedObjective:
    """An objective in the solver's coordinates ``u``, with ``w = T u``.

    ``J(u) = f(T u) + lam/2 sum_j p_j (T u)_j^2``: ``inner`` (an object with
    ``value_and_grad(w)``, usually a risk without ridge) plus a ridge with per-feature
    weights ``p`` on the raw weights ``w``. The gradient is ``T^T (grad f + lam p * w)``.
    ``T`` is a vector (a diagonal change of variables, O(d) per evaluation) or a d x d
    matrix (O(d^2), on the driver only). The minimizer in ``w`` does not depend on
    ``T``; L-BFGS's path does: with ``T`` close to the inverse square root of the
    Hessian it needs far fewer iterations.

    Parameters
    ----------
    inner : object with ``value_and_grad(w)`` and a ``last`` record
        Evaluated at ``w = T u``.
    transform : ndarray of shape (d,) or (d, d)
        ``T``.
    lam : float
        Weight of the added ridge.
    penalty : ndarray of shape (d,), optional
        Its per-feature weights ``p`` (default all 1).
    """

    def __init__(self, inner: Any, transform: np.ndarray, lam: float = 0.0, penalty: np.ndarray | None = None) -> None:
        self.inner = inner
        self.transform = np.asarray(transform, dtype=float)
        self.lam = float(lam)
        d = self.transform.shape[0]
        self.penalty = np.ones(d) if penalty is None else np.asarray(penalty, dtype=float)
        self.last: dict[str, Any] = {}

    def to_raw(self, u: np.ndarray) -> np.ndarray:
        """Raw-feature weights ``w = T u``."""
        return self.transform @ u if self.transform.ndim == 2 else self.transform * u

    def from_raw(self, w: np.ndarray) -> np.ndarray:
        """The solver's coordinates ``u`` of raw weights ``w``."""
        return np.linalg.solve(self.transform, w) if self.transform.ndim == 2 else w / self.transform

    def _pull_back(self, g: np.ndarray) -> np.ndarray:
        return self.transform.T @ g if self.transform.ndim == 2 else self.transform * g

    def ridge(self, w: np.ndarray) -> float:
        """The added ridge ``lam/2 sum_j p_j w_j^2`` at raw weights ``w``."""
        return 0.5 * self.lam * float(w @ (self.penalty * w))

    def value_and_grad(self, u: np.ndarray) -> tuple[float, np.ndarray]:
        """Value and gradient with respect to the solver's coordinates ``u``."""
        w = self.to_raw(u)
        f, g = self.inner.value_and_grad(w)
        reg = self.ridge(w)
        self.last = dict(self.inner.last, J=self.inner.last["J"] + reg, J_mu=self.inner.last["J_mu"] + reg)
        return f + reg, self._pull_back(g + self.lam * self.penalty * w)

    def train_auc(self) -> float:
        """Exact training ROC-AUC of the last evaluation."""
        return self.inner.train_auc()
