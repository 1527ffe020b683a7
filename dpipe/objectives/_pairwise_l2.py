"""The squared pairwise hinge (liblinear-ranksvm's L2-loss RankSVM): value, gradient and generalized Hessian in the scores.

``R(s) = (1/P) sum_{i in P, j in N} v_i v_j max(0, 1 - s_i + s_j)^2`` with ``P = W+ W-``
(the class weights; the counts without weights), a pure function of the merged sorted
scores like :class:`~dpipe.objectives.SmoothedAUCRisk`. Trained as
``J(w) = lam/2 ||w||^2 + R(X w)``, it is liblinear-ranksvm's ``0.5 ||w||^2 + C sum (...)^2``
(binary labels, one query) scaled by ``1 / (C n+ n-)``: the same minimizer for
``lam = 1 / (C n+ n-)``.

A pair is active when ``s_j > s_i - 1``: with both classes sorted, a positive's active
negatives are a suffix of the negatives (from ``lo_i``) and a negative's active positives
a prefix of the positives (up to ``hi_j``). With the sums over the active partners
(``A_i = sum v_j``, ``B_i = sum v_j s_j``, ``Q_i = sum v_j s_j^2`` for a positive;
``C_j = sum v_i``, ``D_j = sum v_i s_i`` for a negative):

* ``R = (1/P) sum_i v_i [(1 - s_i)^2 A_i + 2 (1 - s_i) B_i + Q_i]``;
* ``dR/ds_i = -(2/P) v_i [(1 - s_i) A_i + B_i]`` and ``dR/ds_j = (2/P) v_j [(1 + s_j) C_j - D_j]``;
* the generalized Hessian in ``s`` applied to ``u`` (:class:`Curvature`):
  ``(M u)_i = (2/P) v_i [u_i A_i - E_i]``, ``E_i = sum_active v_j u_j``, and
  ``(M u)_j = (2/P) v_j [u_j C_j - F_j]``, ``F_j = sum_active v_i u_i``.

The windows depend on ``s`` only: :meth:`SquaredPairwiseHinge.curvature` finds them once per
Newton iterate (two binary searches, O(n log n)) and each Hessian-vector product is then
O(n) prefix sums in the known order (:meth:`Curvature.apply`), no sort. The Hessian of
``J`` is ``lam I + X^T M X``.

Score ranges (the workers' route, :mod:`dpipe.engine._ranges`): range ``r`` owns the positives
in ``[a_r, a_{r+1})`` and the negatives in ``[a_r - 1, a_{r+1} - 1)``. Every negative above the
range is active for every own positive and every positive below it for every own negative, so a
range needs no halo (width 0), only totals of the rows beyond: the negatives' weight, weighted
score sum and sum of squares above, the positives' weight and weighted score sum below
(:meth:`SquaredPairwiseHinge.at_range`, :meth:`SquaredPairwiseHinge.range_curvature`).
"""

from __future__ import annotations

import numpy as np

from .._runs import MergedScores, RangeInput
from ..exceptions import DPipeError
from ._curvature import Curvature, prefix_sums, searchsorted_sorted, suffix_sums
from ._range_curvature import RangeCurvature, squared_range_curvature
from ._risk import RiskAt
from ._smooth import SmoothedAUCRisk

__all__ = ["SquaredPairwiseHinge", "liblinear_lam", "auc_risk"]


def liblinear_lam(C: float, n_pos: float, n_neg: float) -> float:
    """``lam`` of :class:`SquaredPairwiseHinge` for liblinear-ranksvm's ``-c C`` on ``n_pos`` x ``n_neg`` pairs (unweighted)."""
    return 1.0 / (float(C) * float(n_pos) * float(n_neg))


class SquaredPairwiseHinge:
    """``(1/P) sum_ij v_i v_j max(0, 1 - s_i + s_j)^2`` over positive i, negative j (see the module docstring).

    The ranking ignores an intercept. ``exact`` in :meth:`at` is the pairwise hinge (SVM-perf's
    ROCArea risk), for comparison with the other AUC surrogates.
    """

    name = "auc"

    def _windows(self, s: MergedScores) -> tuple[float, np.ndarray, np.ndarray]:
        wp, wn = s.class_weights
        if wp <= 0 or wn <= 0:
            missing = "positive" if wp <= 0 else "negative"
            raise DPipeError(f"the training data has no {missing} rows (weight {wn:g} negative, {wp:g} positive); {self.name} needs both classes")
        lo = searchsorted_sorted(s.neg, s.pos - 1.0, "right")  # active: s_j > s_i - 1
        hi = searchsorted_sorted(s.pos, s.neg + 1.0, "left")  # active: s_i < s_j + 1
        return 2.0 / (wp * wn), lo, hi

    def at(self, s: MergedScores) -> RiskAt:
        """The risk and every row's derivative at the scores ``s`` (sorted order)."""
        scale, lo, hi = self._windows(s)
        vp = np.ones(s.pos.size) if s.pos_weight is None else s.pos_weight
        vn = np.ones(s.neg.size) if s.neg_weight is None else s.neg_weight
        A, B, Q = suffix_sums(vn)[lo], suffix_sums(vn * s.neg)[lo], suffix_sums(vn * s.neg * s.neg)[lo]
        C, D = prefix_sums(vp)[hi], prefix_sums(vp * s.pos)[hi]
        a = 1.0 - s.pos
        per_pos = np.maximum(a * a * A + 2.0 * a * B + Q, 0.0)  # sum_j v_j (a_i + s_j)^2 >= 0; rounding may dip below
        value = 0.5 * scale * float(vp @ per_pos)
        g_pos = -scale * vp * (a * A + B)
        g_neg = scale * vn * ((1.0 + s.neg) * C - D)
        hinge = 0.5 * scale * float(vp @ (a * A + B))  # sum_ij v_i v_j max(0, 1 - s_i + s_j) / P
        return RiskAt(value, hinge, g_pos, g_neg)

    #: width of the halos a score range needs (:mod:`dpipe.engine._ranges`): none, the totals beyond the range suffice
    halo = 0.0

    def at_range(self, r: RangeInput) -> RiskAt:
        """One score range's share (the sums over its own positives) and its own rows' derivatives, not yet times
        :meth:`range_scale`; summed over the ranges and scaled, :meth:`at` on all the scores (module docstring)."""
        p0, n1 = int(r.own_pos_start), int(r.own_neg_stop)
        vp = np.ones(r.sp.size) if r.vp is None else r.vp
        vn = np.ones(r.sn.size) if r.vn is None else r.vn
        a_s, b_s = r.sp[p0:], r.sn[:n1]
        lo = searchsorted_sorted(r.sn, a_s - 1.0, "right")  # active: s_j > s_i - 1, and every negative above the range
        A = suffix_sums(vn)[lo] + r.above_neg_weight
        B = suffix_sums(vn * r.sn)[lo] + r.above_neg_sum
        Q = suffix_sums(vn * r.sn * r.sn)[lo] + r.above_neg_square
        hi = searchsorted_sorted(r.sp, b_s + 1.0, "left")  # active: s_i < s_j + 1, and every positive below the range
        C = prefix_sums(vp)[hi] + r.below_pos_weight
        D = prefix_sums(vp * r.sp)[hi] + r.below_pos_sum
        a = 1.0 - a_s
        vp_own, vn_own = vp[p0:], vn[:n1]
        per_pos = np.maximum(a * a * A + 2.0 * a * B + Q, 0.0)  # as in at()
        return RiskAt(float(vp_own @ per_pos), float(vp_own @ (a * A + B)), -2.0 * vp_own * (a * A + B), 2.0 * vn_own * ((1.0 + b_s) * C - D))

    def range_scale(self, class_weights: tuple[float, float]) -> float:
        """The factor turning the ranges' summed shares into the risk: ``1 / (W+ W-)``."""
        wp, wn = class_weights
        if wp <= 0 or wn <= 0:
            missing = "positive" if wp <= 0 else "negative"
            raise DPipeError(f"the training data has no {missing} rows (weight {wn:g} negative, {wp:g} positive); {self.name} needs both classes")
        return 1.0 / (wp * wn)

    def range_curvature(self, r: RangeInput) -> RangeCurvature:
        """:meth:`curvature` on one score range's own rows (:func:`~._range_curvature.squared_range_curvature`), not yet
        times :meth:`range_scale`."""
        return squared_range_curvature(r)

    def curvature(self, s: MergedScores) -> Curvature:
        """The active windows at the scores ``s`` (``h'' = 2`` on every active pair), for :meth:`Curvature.apply`."""
        scale, lo, hi = self._windows(s)
        return Curvature.of_runs(s, lo, np.full(s.pos.size, s.neg.size), np.zeros(s.neg.size, dtype=hi.dtype), hi, scale)


def auc_risk(width: float | None) -> SmoothedAUCRisk | SquaredPairwiseHinge:
    """auc's pairwise loss: the hinge Huberized over ``width`` (surrogate ``'huber-hinge'``), or the squared hinge (no width)."""
    return SquaredPairwiseHinge() if width is None else SmoothedAUCRisk(width)
