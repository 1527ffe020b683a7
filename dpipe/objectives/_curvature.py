"""The generalized Hessian of a pairwise risk in the scores, as Newton-CG applies it (:class:`Curvature`)."""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from .._runs import MergedScores

__all__ = ["Curvature", "prefix_sums", "suffix_sums", "searchsorted_sorted", "apply_class"]


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


#: at most this many values in all, :func:`searchsorted_sorted` takes NumPy's bisections (few queries always do: they read
#: less than a merge): under 0.3 ms a call, and the first run after an install need not compile the merge (0.2 s).
#: Measured here (2026-12-07), bisections against the merge: 24,000 + 8,000 values 0.21 / 0.02 ms, 10^6 + 3x10^5
#: 10.9 / 3.9 ms.
NUMPY_MERGE_MAX = 2**16


def searchsorted_sorted(a: np.ndarray, q: np.ndarray, side: str = "left") -> np.ndarray:
    """``np.searchsorted(a, q, side)`` for queries ``q`` in non-decreasing order, in one merge of the two sorted arrays:
    O(len(a) + len(q)) instead of O(len(q) log len(a)) (a Newton step finds every row's window of pairs this way);
    NumPy's own for few queries or few values in all (:data:`NUMPY_MERGE_MAX`)."""
    a, q = np.ascontiguousarray(a, dtype=np.float64), np.ascontiguousarray(q, dtype=np.float64)
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', not {side!r}")
    if q.size * max(1, a.size.bit_length()) < a.size or a.size + q.size <= NUMPY_MERGE_MAX:
        return np.searchsorted(a, q, side=side)  # type: ignore[call-overload]  # side is checked above
    return _merge_positions(a, q, side == "right")


@numba.njit(cache=True, nogil=True)
def _merge_positions(a: np.ndarray, q: np.ndarray, right: bool) -> np.ndarray:  # pragma: no cover - compiled
    out = np.empty(q.size, dtype=np.int64)
    i = 0
    for k in range(q.size):
        x = q[k]
        if right:
            while i < a.size and a[i] <= x:
                i += 1
        else:
            while i < a.size and a[i] < x:
                i += 1
        out[k] = i
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
        """``M u`` for ``u`` aligned with the sorted positives and negatives: O(n), one fused pass per class
        (:func:`apply_class`: the arithmetic of :func:`dpipe.testing._references.curvature_apply_reference`, in its
        order, so the same bits)."""
        u_pos, u_neg = np.ascontiguousarray(u_pos, dtype=np.float64), np.ascontiguousarray(u_neg, dtype=np.float64)
        none = np.zeros(0)  # no weights
        vp = none if self.vp is None else self.vp
        vn = none if self.vn is None else self.vn
        Pn = prefix_sums(u_neg if self.vn is None else vn * u_neg)  # np.cumsum adds in order: apply_class's sums
        Pp = prefix_sums(u_pos if self.vp is None else vp * u_pos)
        return (apply_class(u_pos, vp, Pn, self.pos_lo, self.pos_hi, self.diag_pos, self.scale),
                apply_class(u_neg, vn, Pp, self.neg_lo, self.neg_hi, self.diag_neg, self.scale))


def apply_class(u: np.ndarray, v: np.ndarray, other: np.ndarray, lo: np.ndarray, hi: np.ndarray, diag: np.ndarray,
                scale: float) -> np.ndarray:
    """One class's ``M u``: ``diag u - scale v (other[hi] - other[lo])`` (``v`` empty: no weights), ``other`` the other
    class's prefix sums; in one fused pass (the kernel allocates nothing: it compiles faster)."""
    out = np.empty(u.size)
    _apply_class(u, v, other, lo, hi, diag, float(scale), out)
    return out


@numba.njit(cache=True, nogil=True)
def _apply_class(u, v, other, lo, hi, diag, scale, out):  # pragma: no cover - compiled
    weighted = v.size > 0
    for k in range(u.size):
        e = other[hi[k]] - other[lo[k]]
        out[k] = diag[k] * u[k] - scale * (v[k] * e if weighted else e)
