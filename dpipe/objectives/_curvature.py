"""The generalized Hessian of a pairwise risk in the scores, as Newton-CG applies it (:class:`Curvature`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._runs import MergedScores

__all__ = ["Curvature", "prefix_sums", "suffix_sums"]


def suffix_sums(a: np.ndarray) -> np.ndarray:
    """``out[k] = sum(a[k:])``, length ``a.size + 1`` (``out[-1] = 0``)."""
    out = np.zeros(a.size + 1)
    if a.size:
        np.cumsum(a[::-1], out=out[-2::-1])
    return out


def prefix_sums(a: np.ndarray) -> np.ndarray:
    """``out[k] = sum(a[:k])``, length ``a.size + 1``."""
    out = np.zeros(a.size + 1)
    np.cumsum(a, out=out[1:])
    return out


class Curvature(NamedTuple):
    """Where a pairwise risk's generalized Hessian is not zero, at one set of scores: what every Hessian-vector product
    there reuses.

    For a risk ``(1/P) sum_ij v_i v_j h(1 - s_i + s_j)`` whose ``h''`` is a constant ``c`` on an interval of margins (and
    0 elsewhere), the pairs with ``h'' = c`` are, for every positive, a run ``[pos_lo_i, pos_hi_i)`` of the sorted
    negatives and, for every negative, a run ``[neg_lo_j, neg_hi_j)`` of the sorted positives. ``M u`` is then
    ``(c/P) v_i [u_i A_i - sum_run v_j u_j]`` on positives and ``(c/P) v_j [u_j C_j - sum_run v_i u_i]`` on negatives.
    """

    #: every positive's run in the sorted negatives, and every negative's in the sorted positives
    pos_lo: np.ndarray
    pos_hi: np.ndarray
    neg_lo: np.ndarray
    neg_hi: np.ndarray
    #: ``(c/P) v_i A_i`` per positive and ``(c/P) v_j C_j`` per negative: the diagonal of ``M``
    diag_pos: np.ndarray
    diag_neg: np.ndarray
    #: the weights (None: all 1) and ``c/P``
    vp: np.ndarray | None
    vn: np.ndarray | None
    scale: float

    @classmethod
    def of_runs(cls, s: MergedScores, pos_lo: np.ndarray, pos_hi: np.ndarray, neg_lo: np.ndarray, neg_hi: np.ndarray, scale: float) -> Curvature:
        """The record for these runs (the diagonal from the runs' weights)."""
        vp, vn = s.pos_weight, s.neg_weight
        Pn = prefix_sums(np.ones(s.neg.size) if vn is None else vn)
        Pp = prefix_sums(np.ones(s.pos.size) if vp is None else vp)
        A, C = Pn[pos_hi] - Pn[pos_lo], Pp[neg_hi] - Pp[neg_lo]
        return cls(pos_lo, pos_hi, neg_lo, neg_hi, scale * (A if vp is None else vp * A), scale * (C if vn is None else vn * C), vp, vn, scale)

    def apply(self, u_pos: np.ndarray, u_neg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``M u`` for ``u`` aligned with the sorted positives and negatives: O(n)."""
        Pn = prefix_sums(u_neg if self.vn is None else self.vn * u_neg)
        Pp = prefix_sums(u_pos if self.vp is None else self.vp * u_pos)
        E, F = Pn[self.pos_hi] - Pn[self.pos_lo], Pp[self.neg_hi] - Pp[self.neg_lo]
        m_pos = self.diag_pos * u_pos - self.scale * (E if self.vp is None else self.vp * E)
        m_neg = self.diag_neg * u_neg - self.scale * (F if self.vn is None else self.vn * F)
        return m_pos, m_neg
