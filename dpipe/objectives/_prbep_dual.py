"""PRBEP's risks through one scalar each: sums over a shard's sorted scores that a driver adds up.

The smoothed risk (:class:`~._smooth.SmoothedPRBEPRisk`) gives every row
``beta = clip((c - theta) / mu, 0, 1)`` (positives; ``clip((c + theta) / mu, 0, 1)`` for
negatives) with ``c = 1/W+ - 2 s / W`` on positives, ``c = 2 s / W`` on negatives, and
``theta`` the root of

    f(theta) = sum_P v beta - sum_N v beta,

decreasing and piecewise linear, with breakpoints ``c - mu`` and ``c`` (positives),
``-c`` and ``mu - c`` (negatives). Once ``theta`` is known each row's ``beta`` is local. The
exact risk (``mu -> 0``) is ``max_m P(m) + N(m)`` over the mass ``m`` paired (``P``, ``N``:
the summed ``c`` of the ``m`` largest of each class), which by conjugate duality is

    min_tau g(tau),   g(tau) = sum_P v (c - tau)_+ + sum_N v (c + tau)_+,

convex and piecewise linear with breakpoints ``c`` (positives) and ``-c`` (negatives);
its minimum is at a breakpoint where the slope ``V_N(c > -tau) - V_P(c > tau)`` turns
non-negative.

Every function here takes one shard's sorted scores per class (:class:`SortedClass`)
and is O(grid x log rows): a driver finds both scalars by evaluating the sums of all
shards on a grid, narrowing the bracket, and at the end listing the few breakpoints
left inside it (:mod:`dpipe.engine._ranges`). The results are those of
:func:`~._rank_kernels.prbep_beta` and :func:`~._rank_kernels.prbep_risk_exact` up to
float64 rounding.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np

__all__ = ["SortedClass", "DualScale", "dual_sums", "exact_sums", "dual_breakpoints", "exact_breakpoints", "dual_weights"]


class SortedClass(NamedTuple):
    """One class of one shard: scores increasing, with prefix sums (length + 1)."""

    s: np.ndarray
    #: prefix sums of the weights (None: unweighted, the counts)
    cum_w: np.ndarray | None
    #: prefix sums of the weighted scores
    cum_s: np.ndarray

    def weight(self, i: np.ndarray) -> np.ndarray:
        """Weight of ``s[:i]`` for every index in ``i``."""
        return i.astype(np.float64) if self.cum_w is None else self.cum_w[i]

    @property
    def total(self) -> float:
        """The class's weight on this shard."""
        return float(self.weight(np.array([self.s.size]))[0])


class DualScale(NamedTuple):
    """The data's totals that define ``c``: ``W`` (all rows) and ``W+`` (positives)."""

    W: float
    Wp: float


def _between(c: SortedClass, lo: np.ndarray, hi: np.ndarray, lo_side: Literal["left", "right"], hi_side: Literal["left", "right"]) -> tuple[np.ndarray, np.ndarray]:
    """Weight and weighted score sum of the rows with ``lo < s < hi`` (sides as in searchsorted)."""
    i = np.searchsorted(c.s, lo, side=lo_side)
    j = np.maximum(np.searchsorted(c.s, hi, side=hi_side), i)
    return c.weight(j) - c.weight(i), c.cum_s[j] - c.cum_s[i]


def _count_above(c: SortedClass, x: np.ndarray, strict: bool) -> np.ndarray:
    """Rows with ``s > x`` (``strict``) or ``s >= x``."""
    return c.s.size - np.searchsorted(c.s, x, side="right" if strict else "left")


def dual_sums(pos: SortedClass, neg: SortedClass, k: DualScale, mu: float, thetas: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``f(theta)`` of this shard at every ``theta``, and the number of breakpoints below / at or below each.

    Returns ``(f, below, at_or_below)``.
    """
    th = np.asarray(thetas, dtype=np.float64)
    half = k.W / 2.0
    # positives: beta = 1 for s <= u1, 0 for s >= u0, (1/W+ - theta - 2 s / W) / mu between
    u1, u0 = (1.0 / k.Wp - th - mu) * half, (1.0 / k.Wp - th) * half
    i1 = np.searchsorted(pos.s, u1, side="right")
    dw, ds = _between(pos, u1, u0, "right", "left")
    sum_p = pos.weight(i1) + ((1.0 / k.Wp - th) * dw - ds / half) / mu
    # negatives: beta = 0 for s <= l0, 1 for s >= l1, (2 s / W + theta) / mu between
    l0, l1 = -th * half, (mu - th) * half
    j1 = np.searchsorted(neg.s, l1, side="left")
    dw, ds = _between(neg, l0, l1, "right", "left")
    sum_n = (neg.total - neg.weight(j1)) + (ds / half + th * dw) / mu
    f = sum_p - sum_n

    def count(strict: bool) -> np.ndarray:  # breakpoints < theta (strict) or <= theta
        return (_count_above(pos, (1.0 / k.Wp - th) * half, strict) + _count_above(pos, (1.0 / k.Wp - th - mu) * half, strict)
                + _count_above(neg, -th * half, strict) + _count_above(neg, (mu - th) * half, strict))

    return f, count(True), count(False)


def exact_sums(pos: SortedClass, neg: SortedClass, k: DualScale, taus: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``g(tau)`` of this shard at every ``tau``, its slope, and the breakpoints below / at or below each.

    Returns ``(g, slope, below, at_or_below)``; the slope is ``V_N(c > -tau) - V_P(c > tau)``.
    """
    ta = np.asarray(taus, dtype=np.float64)
    half = k.W / 2.0
    q = (1.0 / k.Wp - ta) * half  # positives with c > tau: s < q
    i = np.searchsorted(pos.s, q, side="left")
    wp_above = pos.weight(i)
    g_p = (1.0 / k.Wp - ta) * wp_above - pos.cum_s[i] / half
    r = -ta * half  # negatives with c > -tau: s > r
    j = np.searchsorted(neg.s, r, side="right")
    wn_above = neg.total - neg.weight(j)
    g_n = (neg.cum_s[-1] - neg.cum_s[j]) / half + ta * wn_above
    below = _count_above(pos, q, True) + _count_above(neg, r, True)
    at_or_below = _count_above(pos, q, False) + _count_above(neg, r, False)
    return g_p + g_n, wn_above - wp_above, below, at_or_below


def _inside(values: list[np.ndarray], a: float, b: float, limit: int) -> np.ndarray | None:
    v = np.concatenate(values) if values else np.zeros(0)
    v = np.unique(v[(v > a) & (v < b)])  # tied breakpoints count once
    return v if v.size <= limit else None


def _slice(c: SortedClass, lo: float, hi: float) -> np.ndarray:
    i, j = np.searchsorted(c.s, [lo, hi], side="left")
    return c.s[max(0, i - 1): min(c.s.size, j + 1)]  # one more each side: rounding of the bounds; _inside filters exactly


def dual_breakpoints(pos: SortedClass, neg: SortedClass, k: DualScale, mu: float, a: float, b: float, limit: int) -> np.ndarray | None:
    """The distinct breakpoints of ``f`` strictly between ``a`` and ``b`` on this shard, or None when more than ``limit``."""
    half = k.W / 2.0
    c_hi = _slice(pos, (1.0 / k.Wp - b) * half, (1.0 / k.Wp - a) * half)  # c in (a, b)
    c_lo = _slice(pos, (1.0 / k.Wp - b - mu) * half, (1.0 / k.Wp - a - mu) * half)  # c - mu in (a, b)
    n_lo = _slice(neg, -b * half, -a * half)  # -c in (a, b)
    n_hi = _slice(neg, (mu - b) * half, (mu - a) * half)  # mu - c in (a, b)
    return _inside([1.0 / k.Wp - c_hi / half, (1.0 / k.Wp - c_lo / half) - mu, -(n_lo / half), mu - n_hi / half], a, b, limit)


def exact_breakpoints(pos: SortedClass, neg: SortedClass, k: DualScale, a: float, b: float, limit: int) -> np.ndarray | None:
    """The distinct breakpoints of ``g`` strictly between ``a`` and ``b`` on this shard, or None when more than ``limit``."""
    half = k.W / 2.0
    cp = 1.0 / k.Wp - _slice(pos, (1.0 / k.Wp - b) * half, (1.0 / k.Wp - a) * half) / half
    return _inside([cp, -(_slice(neg, -b * half, -a * half) / half)], a, b, limit)


def dual_weights(pos: SortedClass, neg: SortedClass, vp: np.ndarray | None, vn: np.ndarray | None, k: DualScale, mu: float,
                 theta: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Every row's ``beta`` at ``theta`` (in the sorted order) and this shard's share of the risk ``sum v (c beta - mu/2 beta^2)``."""
    cp = 1.0 / k.Wp - 2.0 * pos.s / k.W
    cn = 2.0 * neg.s / k.W
    bp = np.clip((cp - theta) / mu, 0.0, 1.0)
    bn = np.clip((cn + theta) / mu, 0.0, 1.0)
    tp, tn = cp * bp - 0.5 * mu * bp * bp, cn * bn - 0.5 * mu * bn * bn
    value = float(tp.sum() if vp is None else vp @ tp) + float(tn.sum() if vn is None else vn @ tn)
    return bp, bn, value
