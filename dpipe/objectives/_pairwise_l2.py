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
* the generalized Hessian in ``s`` applied to ``u``:
  ``(M u)_i = (2/P) v_i [u_i A_i - E_i]``, ``E_i = sum_active v_j u_j``, and
  ``(M u)_j = (2/P) v_j [u_j C_j - F_j]``, ``F_j = sum_active v_i u_i``.

The windows depend on ``s`` only: :meth:`SquaredPairwiseHinge.curvature` finds them once per
Newton iterate (two binary searches, O(n log n)) and each Hessian-vector product is then
O(n) prefix sums in the known order (:meth:`Curvature.apply`), no sort. The Hessian of
``J`` is ``lam I + X^T M X``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._runs import MergedScores
from ..exceptions import DPipeError
from ._smooth import RiskAt

__all__ = ["SquaredPairwiseHinge", "Curvature", "liblinear_lam"]


def liblinear_lam(C: float, n_pos: float, n_neg: float) -> float:
    """``lam`` of :class:`SquaredPairwiseHinge` for liblinear-ranksvm's ``-c C`` on ``n_pos`` x ``n_neg`` pairs (unweighted)."""
    return 1.0 / (float(C) * float(n_pos) * float(n_neg))


def _suffix(a: np.ndarray) -> np.ndarray:
    """``out[k] = sum(a[k:])``, length ``a.size + 1`` (``out[-1] = 0``)."""
    out = np.zeros(a.size + 1)
    if a.size:
        np.cumsum(a[::-1], out=out[-2::-1])
    return out


def _prefix(a: np.ndarray) -> np.ndarray:
    """``out[k] = sum(a[:k])``, length ``a.size + 1``."""
    out = np.zeros(a.size + 1)
    np.cumsum(a, out=out[1:])
    return out


class Curvature(NamedTuple):
    """The active windows at one set of scores: what every Hessian-vector product there reuses."""

    #: first active negative of every positive (in the sorted negatives)
    lo: np.ndarray
    #: number of active positives of every negative (a prefix of the sorted positives)
    hi: np.ndarray
    #: ``(2/P) v_i A_i`` per positive and ``(2/P) v_j C_j`` per negative: the diagonal of ``M``
    diag_pos: np.ndarray
    diag_neg: np.ndarray
    #: the weights (None: all 1) and ``2/P``
    vp: np.ndarray | None
    vn: np.ndarray | None
    scale: float

    def apply(self, u_pos: np.ndarray, u_neg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``M u`` for ``u`` aligned with the sorted positives and negatives: O(n)."""
        wu_neg = u_neg if self.vn is None else self.vn * u_neg
        wu_pos = u_pos if self.vp is None else self.vp * u_pos
        E = _suffix(wu_neg)[self.lo]
        F = _prefix(wu_pos)[self.hi]
        m_pos = self.diag_pos * u_pos - self.scale * (E if self.vp is None else self.vp * E)
        m_neg = self.diag_neg * u_neg - self.scale * (F if self.vn is None else self.vn * F)
        return m_pos, m_neg


class SquaredPairwiseHinge:
    """``(1/P) sum_ij v_i v_j max(0, 1 - s_i + s_j)^2`` over positive i, negative j (see the module docstring).

    The ranking ignores an intercept. ``exact`` in :meth:`at` is the pairwise hinge (SVM-perf's
    ROCArea risk), for comparison with the other AUC surrogates.
    """

    name = "auc-squared-hinge"

    def _windows(self, s: MergedScores) -> tuple[float, np.ndarray, np.ndarray]:
        wp, wn = s.class_weights
        if wp <= 0 or wn <= 0:
            missing = "positive" if wp <= 0 else "negative"
            raise DPipeError(f"the training data has no {missing} rows (weight {wn:g} negative, {wp:g} positive); {self.name} needs both classes")
        lo = np.searchsorted(s.neg, s.pos - 1.0, side="right")  # active: s_j > s_i - 1
        hi = np.searchsorted(s.pos, s.neg + 1.0, side="left")  # active: s_i < s_j + 1
        return 2.0 / (wp * wn), lo, hi

    def at(self, s: MergedScores) -> RiskAt:
        """The risk and every row's derivative at the scores ``s`` (sorted order)."""
        scale, lo, hi = self._windows(s)
        vp = np.ones(s.pos.size) if s.pos_weight is None else s.pos_weight
        vn = np.ones(s.neg.size) if s.neg_weight is None else s.neg_weight
        A, B, Q = _suffix(vn)[lo], _suffix(vn * s.neg)[lo], _suffix(vn * s.neg * s.neg)[lo]
        C, D = _prefix(vp)[hi], _prefix(vp * s.pos)[hi]
        a = 1.0 - s.pos
        per_pos = np.maximum(a * a * A + 2.0 * a * B + Q, 0.0)  # sum_j v_j (a_i + s_j)^2 >= 0; rounding may dip below
        value = 0.5 * scale * float(vp @ per_pos)
        g_pos = -scale * vp * (a * A + B)
        g_neg = scale * vn * ((1.0 + s.neg) * C - D)
        hinge = 0.5 * scale * float(vp @ (a * A + B))  # sum_ij v_i v_j max(0, 1 - s_i + s_j) / P
        return RiskAt(value, hinge, g_pos, g_neg)

    def curvature(self, s: MergedScores) -> Curvature:
        """The active windows at the scores ``s``, for :meth:`Curvature.apply` (O(n log n) once)."""
        scale, lo, hi = self._windows(s)
        vp, vn = s.pos_weight, s.neg_weight
        A = _suffix(np.ones(s.neg.size) if vn is None else vn)[lo]
        C = _prefix(np.ones(s.pos.size) if vp is None else vp)[hi]
        diag_pos = scale * A if vp is None else scale * vp * A
        diag_neg = scale * C if vn is None else scale * vn * C
        return Curvature(lo, hi, diag_pos, diag_neg, vp, vn, scale)
