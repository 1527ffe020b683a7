"""Driver-side kernels over merged sorted scores: smoothed ROCArea and PRBEP.

Scores arrive sorted in increasing order, one array per class. Each kernel has a
plain NumPy reference (binary searches and prefix sums) that the tests compare with;
the numba versions replace the searches by monotone two-pointer sweeps.

ROCArea (DESIGN.md): with ``u = 1 - s_i + s_j`` for a positive ``i`` and a negative
``j``, the Huberized hinge is ``h_t(u) = 0 (u <= 0), u^2 / (2t) (0 < u < t),
u - t/2 (u >= t)`` and its derivative ``clip(u / t, 0, 1)``. For every example the
kernels return ``gamma`` (the sum of the clipped derivatives over the other class)
and the total ``sum_ij h_t(u_ij)``, plus the exact hinge total
``sum_ij max(0, u_ij)`` (the t -> 0 limit), all in O(n) after sorting.

PRBEP (DESIGN.md): ``c_i = 1/n+ - 2 s_i / n`` on positives, ``c_j = 2 s_j / n`` on
negatives, ``beta = clip((c -+ theta) / mu, 0, 1)`` with the scalar ``theta``
balancing ``sum_P beta = sum_N beta``, found exactly on the sorted breakpoints.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "auc_gamma",
    "auc_gamma_reference",
    "prbep_beta",
    "prbep_risk_exact",
]


@numba.njit(nogil=True, cache=True)
def _auc_gamma(sp, sn, t):
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    cs_n = np.zeros(n_neg + 1)
    cs_n2 = np.zeros(n_neg + 1)
    for j in range(n_neg):
        cs_n[j + 1] = cs_n[j] + sn[j]
        cs_n2[j + 1] = cs_n2[j] + sn[j] * sn[j]
    cs_p = np.zeros(n_pos + 1)
    for i in range(n_pos):
        cs_p[i + 1] = cs_p[i] + sp[i]
    gp = np.empty(n_pos)
    gn = np.empty(n_neg)
    value = 0.0
    hinge = 0.0
    lo = 0  # first negative with s_j > a - 1      (u > 0)
    mid = 0  # first negative with s_j >= a - 1 + t (u >= t)
    for i in range(n_pos):
        a = sp[i]
        while lo < n_neg and sn[lo] <= a - 1.0:
            lo += 1
        while mid < n_neg and sn[mid] < a - 1.0 + t:
            mid += 1
        if mid < lo:
            mid = lo
        c_a = n_neg - mid
        c_b = mid - lo
        s_a = cs_n[n_neg] - cs_n[mid]
        s_b = cs_n[mid] - cs_n[lo]
        q_b = cs_n2[mid] - cs_n2[lo]
        one_a = 1.0 - a
        gp[i] = c_a + (c_b * one_a + s_b) / t
        value += c_a * (one_a - 0.5 * t) + s_a + (c_b * one_a * one_a + 2.0 * one_a * s_b + q_b) / (2.0 * t)
        hinge += (n_neg - lo) * one_a + (cs_n[n_neg] - cs_n[lo])
    lo = 0  # first positive with s_i > b + 1 - t (u < t): below it u >= t
    hi = 0  # first positive with s_i >= b + 1     (u <= 0)
    for j in range(n_neg):
        b = sn[j]
        while lo < n_pos and sp[lo] <= b + 1.0 - t:
            lo += 1
        while hi < n_pos and sp[hi] < b + 1.0:
            hi += 1
        if hi < lo:
            hi = lo
        c_b = hi - lo
        s_b = cs_p[hi] - cs_p[lo]
        gn[j] = lo + (c_b * (1.0 + b) - s_b) / t
    return gp, gn, value, hinge


def auc_gamma(sp: np.ndarray, sn: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Per-example weights of the smoothed pairwise hinge.

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing
        Scores of the positives and of the negatives.
    t : float
        Huber width (> 0).

    Returns
    -------
    gamma_pos : ndarray of shape (n+,)
        ``sum_j clip((1 - s_i + s_j) / t, 0, 1)`` per positive.
    gamma_neg : ndarray of shape (n-,)
        ``sum_i clip((1 - s_i + s_j) / t, 0, 1)`` per negative.
    value : float
        ``sum_ij h_t(1 - s_i + s_j)`` (not divided by n+ n-).
    hinge : float
        ``sum_ij max(0, 1 - s_i + s_j)``.
    """
    return _auc_gamma(np.ascontiguousarray(sp, dtype=np.float64), np.ascontiguousarray(sn, dtype=np.float64), float(t))


def auc_gamma_reference(sp: np.ndarray, sn: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """NumPy reference of :func:`auc_gamma`: binary searches and prefix sums."""
    sp, sn = np.asarray(sp, np.float64), np.asarray(sn, np.float64)
    cs_n = np.concatenate([[0.0], np.cumsum(sn)])
    cs_n2 = np.concatenate([[0.0], np.cumsum(sn * sn)])
    cs_p = np.concatenate([[0.0], np.cumsum(sp)])
    nn, npos = sn.size, sp.size
    lo = np.searchsorted(sn, sp - 1.0, side="right")
    mid = np.maximum(np.searchsorted(sn, sp - 1.0 + t, side="left"), lo)
    one_a = 1.0 - sp
    c_a, c_b = nn - mid, mid - lo
    s_a, s_b, q_b = cs_n[nn] - cs_n[mid], cs_n[mid] - cs_n[lo], cs_n2[mid] - cs_n2[lo]
    gp = c_a + (c_b * one_a + s_b) / t
    value = float(np.sum(c_a * (one_a - 0.5 * t) + s_a + (c_b * one_a**2 + 2 * one_a * s_b + q_b) / (2 * t)))
    hinge = float(np.sum((nn - lo) * one_a + cs_n[nn] - cs_n[lo]))
    lo_n = np.searchsorted(sp, sn + 1.0 - t, side="right")
    hi_n = np.maximum(np.searchsorted(sp, sn + 1.0, side="left"), lo_n)
    gn = lo_n + ((hi_n - lo_n) * (1.0 + sn) - (cs_p[hi_n] - cs_p[lo_n])) / t
    del npos
    return gp, gn, value, hinge


def _beta_sums(c: np.ndarray, cs: np.ndarray, lo_edge: np.ndarray, mu: float) -> np.ndarray:
    """``sum clip((c - x) / mu, 0, 1)`` over ``c`` (sorted increasing, prefix sums ``cs``) for every x."""
    n = c.size
    full = n - np.searchsorted(c, lo_edge + mu, side="left")  # c >= x + mu
    start = np.searchsorted(c, lo_edge, side="right")  # c > x
    stop = n - full
    return full + ((cs[stop] - cs[start]) - (stop - start) * lo_edge) / mu


def prbep_beta(sp: np.ndarray, sn: np.ndarray, n: int, mu: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Maximizer of the smoothed PRBEP risk and its value.

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing
        Scores of the positives and negatives.
    n : int
        Number of examples (n+ + n-).
    mu : float
        Smoothing (> 0).

    Returns
    -------
    beta_pos, beta_neg : ndarray
        In the order of ``sp`` and ``sn``.
    value : float
        ``sum c beta - mu/2 ||beta||^2`` at the maximizer.
    theta : float
        The balancing multiplier.
    """
    sp, sn = np.asarray(sp, np.float64), np.asarray(sn, np.float64)
    n_pos = sp.size
    cp = np.sort(1.0 / n_pos - 2.0 * sp / n)  # increasing
    cn = 2.0 * sn / n  # increasing
    cs_p = np.concatenate([[0.0], np.cumsum(cp)])
    cs_n = np.concatenate([[0.0], np.cumsum(-cn[::-1])])  # of -c_n, increasing order
    neg_cn = -cn[::-1]

    def f(theta: np.ndarray) -> np.ndarray:
        # sum_P clip((c_i - theta)/mu) - sum_N clip((c_j + theta)/mu) ; the latter = sum clip((theta - (-c_j))/mu)
        p = _beta_sums(cp, cs_p, theta, mu)
        # sum_N clip((theta + c_j)/mu, 0, 1) = n- - sum_N clip(((-c_j) + mu - theta)/mu, 0, 1) ... computed directly:
        q = sn.size - _beta_sums(neg_cn, cs_n, theta - mu, mu)
        return p - q

    breaks = np.unique(np.concatenate([cp - mu, cp, -cn, mu - cn]))
    fb = f(breaks)  # non-increasing
    k = int(np.searchsorted(-fb, 0.0, side="left"))  # first breakpoint with f <= 0
    if k == 0:
        theta = float(breaks[0])
    elif k >= breaks.size:
        theta = float(breaks[-1])
    else:
        f0, f1 = fb[k - 1], fb[k]
        x0, x1 = breaks[k - 1], breaks[k]
        theta = float(x1 if f0 == f1 else x0 + (x1 - x0) * f0 / (f0 - f1))
    bp = np.clip((1.0 / n_pos - 2.0 * sp / n - theta) / mu, 0.0, 1.0)
    bn = np.clip((2.0 * sn / n + theta) / mu, 0.0, 1.0)
    value = float((1.0 / n_pos - 2.0 * sp / n) @ bp + (2.0 * sn / n) @ bn - 0.5 * mu * (bp @ bp + bn @ bn))
    return bp, bn, value, theta


def prbep_risk_exact(sp: np.ndarray, sn: np.ndarray, n: int) -> float:
    """The non-smooth PRBEP risk: ``max_k`` (k largest ``c`` of each class), the mu -> 0 limit."""
    sp, sn = np.asarray(sp, np.float64), np.asarray(sn, np.float64)
    cp = np.sort(1.0 / sp.size - 2.0 * sp / n)[::-1]
    cn = np.sort(2.0 * sn / n)[::-1]
    k = min(cp.size, cn.size)
    totals = np.concatenate([[0.0], np.cumsum(cp[:k]) + np.cumsum(cn[:k])])
    return float(totals.max())
