"""The generalized Hessian of a pairwise risk restricted to one score range: Newton-CG's products without the driver.

:class:`~dpipe.objectives._curvature.Curvature` needs every score merged in one place (its
windows index the merged classes, its prefix sums run over all of them). On the workers'
route (:mod:`dpipe.engine._newton_host`) a range holds its own rows, the halos
(:mod:`._auc_ranges`: the positives in ``[a_r - t, a_r)``, the negatives in
``[a_{r+1} - 1, a_{r+1} - 1 + t)``) and totals of the rows beyond. A row's window of pairs
in the quadratic zone then lies

* for the Huberized hinge of width ``t`` (``h'' = 1/t`` on margins in ``(0, t)``), inside the
  range's rows and halos: an own positive's negatives in ``(s_i - 1, s_i - 1 + t)``, an own
  negative's positives in ``(s_j + 1 - t, s_j + 1)`` (the halos are as wide as the zone);
* for the squared hinge (``h'' = 2`` on every margin ``> 0``, halos of width 0), in the
  range's rows and, for a positive, every negative above the range; for a negative, every
  positive below it: the totals.

So the range's prefix sums of ``v u`` get a frame (:func:`framed_prefix`): slot 0 is 0, slot 1
the total below the range (``head``), slot ``k + 2`` adds the range's row ``k``, and the last
slot adds the total above the range (``tail``). A window of the range's rows ``[a, b)`` is the
slots ``[a + 1, b + 1)``; a window that reaches below the range starts at slot 0, one that
reaches above it ends at the last slot. :meth:`RangeCurvature.apply` is then
:meth:`Curvature.apply <dpipe.objectives._curvature.Curvature.apply>`'s arithmetic on the range's own rows, with the
totals of ``v u`` beyond the range (sums over the other shards' rows, for every CG step).

The records are not divided by the class weights ``W+ W-`` (unknown on a range host): the
driver scales the summed products, as it scales the ranges' value shares and gradients.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from .._runs import RangeInput
from ._curvature import apply_class, searchsorted_sorted

__all__ = ["RangeCurvature", "framed_prefix", "huber_range_curvature", "squared_range_curvature"]


@numba.njit(cache=True, nogil=True)
def _framed_prefix(x: np.ndarray, v: np.ndarray, head: float, tail: float) -> np.ndarray:  # pragma: no cover - compiled
    n = x.size
    out = np.empty(n + 3)
    out[0] = 0.0
    out[1] = head
    acc = head
    weighted = v.size > 0
    for k in range(n):
        acc += v[k] * x[k] if weighted else x[k]
        out[k + 2] = acc
    out[n + 2] = acc + tail
    return out


def framed_prefix(x: np.ndarray, v: np.ndarray | None, head: float, tail: float) -> np.ndarray:
    """Prefix sums of ``v * x`` (``v`` None: of ``x``) framed by the totals below (``head``) and above (``tail``): length ``x.size + 3``.

    ``out[0] = 0``, ``out[1] = head``, ``out[k + 2] = head + sum(v x)[:k + 1]``, ``out[-1] = out[-2] + tail``.
    """
    return _framed_prefix(np.ascontiguousarray(x, dtype=np.float64), np.zeros(0) if v is None else np.ascontiguousarray(v, dtype=np.float64),
                          float(head), float(tail))


class RangeCurvature(NamedTuple):
    """Where a pairwise risk's generalized Hessian is not zero, for one range's own rows (module docstring).

    ``M u`` on an own positive is ``c v_i [u_i A_i - (Pn[pos_hi_i] - Pn[pos_lo_i])]`` with ``Pn`` the framed prefix
    sums of ``v u`` over the range's negatives (:func:`framed_prefix`), likewise on an own negative with the positives.
    """

    #: own positives' windows in the negatives' frame, own negatives' in the positives' frame
    pos_lo: np.ndarray
    pos_hi: np.ndarray
    neg_lo: np.ndarray
    neg_hi: np.ndarray
    #: ``c v_i A_i`` per own positive and ``c v_j C_j`` per own negative (the diagonal of ``M``, times ``W+ W-``)
    diag_pos: np.ndarray
    diag_neg: np.ndarray
    #: the range's weights, halos included (None: all 1)
    vp: np.ndarray | None
    vn: np.ndarray | None
    own_pos_start: int
    own_neg_stop: int
    #: ``h''`` on the zone
    scale: float
    #: whether windows reach beyond the range (the totals of ``v u`` count); False: :meth:`apply` ignores them
    totals: bool

    def apply(self, u_pos: np.ndarray, u_neg: np.ndarray, below_pos: float = 0.0, above_neg: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """``M u`` (times ``W+ W-``) on the own rows, for ``u`` on the range's rows (halos included, merged order).

        Parameters
        ----------
        u_pos, u_neg : ndarray
            ``u = X d`` of the range's positives and negatives, in the order of its scores.
        below_pos, above_neg : float
            ``sum v_i u_i`` over the positives below the range, ``sum v_j u_j`` over the negatives above it
            (:class:`~dpipe.reduce._ranges.DirectionPiece`'s totals, summed over the shards).

        Returns
        -------
        (ndarray, ndarray)
            One value per own positive, per own negative.
        """
        u_pos, u_neg = np.ascontiguousarray(u_pos, dtype=np.float64), np.ascontiguousarray(u_neg, dtype=np.float64)
        if not self.totals:  # windows inside the range: adding a total to every prefix would only cost precision
            below_pos = above_neg = 0.0
        Pn = framed_prefix(u_neg, self.vn, 0.0, above_neg)
        Pp = framed_prefix(u_pos, self.vp, below_pos, 0.0)
        none = np.zeros(0)
        p0, n1 = self.own_pos_start, self.own_neg_stop
        vp_own = none if self.vp is None else np.ascontiguousarray(self.vp[p0:])
        vn_own = none if self.vn is None else np.ascontiguousarray(self.vn[:n1])
        return (apply_class(u_pos[p0:], vp_own, Pn, self.pos_lo, self.pos_hi, self.diag_pos, self.scale),
                apply_class(u_neg[:n1], vn_own, Pp, self.neg_lo, self.neg_hi, self.diag_neg, self.scale))


def _of_windows(r: RangeInput, pos_lo: np.ndarray, pos_hi: np.ndarray, neg_lo: np.ndarray, neg_hi: np.ndarray, scale: float,
                totals: bool) -> RangeCurvature:
    """The record for windows in the frames; the diagonal from the framed weights (and the weight totals beyond the range)."""
    p0, n1 = int(r.own_pos_start), int(r.own_neg_stop)
    ones_p, ones_n = np.ones(r.sp.size), np.ones(r.sn.size)
    Wn = framed_prefix(ones_n if r.vn is None else r.vn, None, 0.0, r.above_neg_weight if totals else 0.0)
    Wp = framed_prefix(ones_p if r.vp is None else r.vp, None, r.below_pos_weight if totals else 0.0, 0.0)
    A, C = Wn[pos_hi] - Wn[pos_lo], Wp[neg_hi] - Wp[neg_lo]
    diag_pos = scale * (A if r.vp is None else r.vp[p0:] * A)
    diag_neg = scale * (C if r.vn is None else r.vn[:n1] * C)
    return RangeCurvature(pos_lo, pos_hi, neg_lo, neg_hi, diag_pos, diag_neg, r.vp, r.vn, p0, n1, float(scale), totals)


def huber_range_curvature(r: RangeInput, t: float) -> RangeCurvature:
    """The Huberized hinge's (width ``t``, ``h'' = 1/t``) curvature on range ``r``'s own rows: windows inside the range and its halos.

    The same four searches as :meth:`SmoothedAUCRisk.curvature <dpipe.objectives.SmoothedAUCRisk.curvature>`, on the range's rows.
    """
    a, b = r.sp[r.own_pos_start:], r.sn[: r.own_neg_stop]
    pos_lo = searchsorted_sorted(r.sn, a - 1.0, "right") + 1
    pos_hi = searchsorted_sorted(r.sn, a - 1.0 + t, "left") + 1
    neg_lo = searchsorted_sorted(r.sp, b + 1.0 - t, "right") + 1
    neg_hi = searchsorted_sorted(r.sp, b + 1.0, "left") + 1
    return _of_windows(r, pos_lo, pos_hi, neg_lo, neg_hi, 1.0 / t, False)


def squared_range_curvature(r: RangeInput) -> RangeCurvature:
    """The squared hinge's (``h'' = 2`` on every active pair) curvature on range ``r``'s own rows.

    An own positive pairs with the range's negatives above ``s_i - 1`` and every negative above
    the range; an own negative with the range's positives below ``s_j + 1`` and every positive
    below the range (:meth:`SquaredPairwiseHinge.curvature <dpipe.objectives.SquaredPairwiseHinge.curvature>`'s windows).
    """
    a, b = r.sp[r.own_pos_start:], r.sn[: r.own_neg_stop]
    pos_lo = searchsorted_sorted(r.sn, a - 1.0, "right") + 1
    pos_hi = np.full(a.size, r.sn.size + 2, dtype=np.int64)  # through the last slot: the negatives above the range
    neg_lo = np.zeros(b.size, dtype=np.int64)  # from slot 0: the positives below the range
    neg_hi = searchsorted_sorted(r.sp, b + 1.0, "left") + 1
    return _of_windows(r, pos_lo, pos_hi, neg_lo, neg_hi, 2.0, True)
