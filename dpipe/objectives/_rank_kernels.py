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
balancing ``sum_P beta = sum_N beta``, found exactly on the sorted breakpoints
(the reference evaluates all of them; the numba version bisects each of the four
sorted breakpoint sequences).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "auc_gamma",
    "auc_gamma_reference",
    "prbep_beta",
    "prbep_beta_reference",
    "prbep_risk_exact",
    "sorted_auc",
    "sorted_auc_reference",
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


@numba.njit(nogil=True, cache=True)
def _breakpoint(arr, shift, i):
    # element i of the breakpoint sequence arr + shift (no addition for shift 0: keeps -0.0)
    return arr[i] if shift == 0.0 else arr[i] + shift


@numba.njit(nogil=True, cache=True)
def _prbep_f(x, cp, cs_p, ncn, cs_n, mu):
    # sum_P beta - sum_N beta at theta = x, term for term as the reference computes it
    n_pos, n_neg = cp.shape[0], ncn.shape[0]
    lp = np.searchsorted(cp, x, side="right")
    up = np.searchsorted(cp, x + mu, side="left")
    p = (n_pos - up) + ((cs_p[up] - cs_p[lp]) - (up - lp) * x) / mu
    xn = x - mu
    ln = np.searchsorted(ncn, xn, side="right")
    un = np.searchsorted(ncn, xn + mu, side="left")
    q = n_neg - ((n_neg - un) + ((cs_n[un] - cs_n[ln]) - (un - ln) * xn) / mu)
    return p - q


@numba.njit(nogil=True, cache=True)
def _prbep_beta(sp, sn, n, mu):
    """Root of ``f`` by bisection inside each of its four sorted breakpoint sequences.

    ``f`` is evaluated at breakpoints exactly as in the reference (same prefix sums,
    same index ranges), so the bracketing breakpoints and ``theta`` agree bit for bit
    wherever the computed ``f`` is monotone.
    """
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    inv_pos = 1.0 / n_pos
    # c on positives and -c on negatives, both increasing: the scores reversed
    cp = np.empty(n_pos)
    for i in range(n_pos):
        cp[i] = inv_pos - 2.0 * sp[n_pos - 1 - i] / n
    ncn = np.empty(n_neg)
    for j in range(n_neg):
        ncn[j] = -(2.0 * sn[n_neg - 1 - j] / n)
    cs_p = np.zeros(n_pos + 1)
    for i in range(n_pos):
        cs_p[i + 1] = cs_p[i] + cp[i]
    cs_n = np.zeros(n_neg + 1)
    for j in range(n_neg):
        cs_n[j + 1] = cs_n[j] + ncn[j]

    # the breakpoint sequences c_i - mu, c_i (positives), -c_j, mu - c_j (negatives)
    # are each sorted: x1 = first breakpoint of all with f <= 0, x0 = the one before it
    x1 = 0.0
    have1 = False
    last = -np.inf
    for s in range(4):
        arr = cp if s < 2 else ncn
        shift = -mu if s == 0 else (mu if s == 3 else 0.0)
        m = arr.shape[0]
        if m == 0:
            continue
        lo, hi = 0, m
        while lo < hi:
            mid = (lo + hi) >> 1
            if _prbep_f(_breakpoint(arr, shift, mid), cp, cs_p, ncn, cs_n, mu) <= 0.0:
                hi = mid
            else:
                lo = mid + 1
        if lo < m:
            v = _breakpoint(arr, shift, lo)
            if not have1 or v < x1:
                x1 = v
                have1 = True
        last = max(last, _breakpoint(arr, shift, m - 1))
    if not have1:
        theta = last  # f > 0 everywhere (no negatives): the last breakpoint, as the reference
    else:
        x0 = 0.0
        have0 = False
        for s in range(4):
            arr = cp if s < 2 else ncn
            shift = -mu if s == 0 else (mu if s == 3 else 0.0)
            lo, hi = 0, arr.shape[0]
            while lo < hi:  # count of breakpoints < x1
                mid = (lo + hi) >> 1
                if _breakpoint(arr, shift, mid) < x1:
                    lo = mid + 1
                else:
                    hi = mid
            if lo > 0:
                v = _breakpoint(arr, shift, lo - 1)
                if not have0 or v > x0:
                    x0 = v
                    have0 = True
        if not have0:
            theta = x1
        else:
            f0 = _prbep_f(x0, cp, cs_p, ncn, cs_n, mu)
            f1 = _prbep_f(x1, cp, cs_p, ncn, cs_n, mu)
            if f0 <= 0.0:
                theta = x0  # f rounded non-monotone between the bisections: stay in the bracket
            else:
                theta = x1 if f0 == f1 else x0 + (x1 - x0) * f0 / (f0 - f1)

    bp = np.empty(n_pos)
    bn = np.empty(n_neg)
    cb_p = 0.0
    bb_p = 0.0
    for i in range(n_pos):
        c = inv_pos - 2.0 * sp[i] / n
        b = min(max((c - theta) / mu, 0.0), 1.0)
        bp[i] = b
        cb_p += c * b
        bb_p += b * b
    cb_n = 0.0
    bb_n = 0.0
    for j in range(n_neg):
        c = 2.0 * sn[j] / n
        b = min(max((c + theta) / mu, 0.0), 1.0)
        bn[j] = b
        cb_n += c * b
        bb_n += b * b
    value = cb_p + cb_n - 0.5 * mu * (bb_p + bb_n)
    return bp, bn, value, theta


def prbep_beta(sp: np.ndarray, sn: np.ndarray, n: int, mu: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Maximizer of the smoothed PRBEP risk and its value.

    ``f(theta) = sum_P beta - sum_N beta`` is non-increasing and piecewise linear with
    breakpoints ``c_i - mu, c_i`` (positives) and ``-c_j, mu - c_j`` (negatives). The
    four breakpoint sequences are each sorted (the scores reversed), so bisecting each
    with O(log n) evaluations of ``f`` (binary searches into prefix sums) brackets the
    root between consecutive breakpoints without sorting or merging them; ``theta``
    interpolates on that linear piece. O(n) in all (the prefix sums and ``beta``).

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing
        Scores of the positives and negatives (both non-empty, or ``sn`` empty).
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

    Notes
    -----
    ``f`` is evaluated at breakpoints bit for bit as in :func:`prbep_beta_reference`,
    and both take the first breakpoint with ``f <= 0`` (the left end of a zero plateau
    of ``f``), the breakpoint before it and the same interpolation, so ``beta`` and
    ``theta`` are identical wherever the computed ``f`` is monotone. Rounding can make
    it cross zero more than once only where ``f`` is flat at zero up to rounding
    (slope 0 means no ``beta`` is fractional); the two binary searches may then stop
    at different crossings, and ``theta`` differs while ``beta`` moves by rounding
    only. ``value`` sums in index order rather than through BLAS, so it agrees with
    the reference to rounding.
    """
    return _prbep_beta(np.ascontiguousarray(sp, dtype=np.float64), np.ascontiguousarray(sn, dtype=np.float64), int(n), float(mu))


def prbep_beta_reference(sp: np.ndarray, sn: np.ndarray, n: int, mu: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """NumPy reference of :func:`prbep_beta`: ``f`` at every distinct breakpoint.

    The breakpoints are sorted with ``np.unique``; ``f`` comes from binary searches and
    prefix sums at all of them, and a binary search on those values brackets the root,
    which is interpolated on its linear piece.

    Parameters
    ----------
    sp, sn, n, mu
        As for :func:`prbep_beta`.

    Returns
    -------
    beta_pos, beta_neg, value, theta
        As for :func:`prbep_beta`.
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
    """The non-smooth PRBEP risk: ``max_k`` (k largest ``c`` of each class), the mu -> 0 limit.

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing
        Scores of the positives and negatives.
    n : int
        Number of examples (n+ + n-).

    Returns
    -------
    float
        ``max_k sum`` of the ``k`` largest ``c`` of each class.
    """
    sp, sn = np.asarray(sp, np.float64), np.asarray(sn, np.float64)
    k = min(sp.size, sn.size)
    # c decreases along sp and increases along sn: the k largest without sorting
    cp = 1.0 / sp.size - 2.0 * sp[:k] / n
    cn = 2.0 * sn[sn.size - k :][::-1] / n
    totals = np.concatenate([[0.0], np.cumsum(cp) + np.cumsum(cn)])
    return float(totals.max())


@numba.njit(nogil=True, cache=True)
def _sorted_auc(sp, sn):
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    below = 0.0
    lt = 0  # first negative with s_j >= s_i
    le = 0  # first negative with s_j > s_i
    for i in range(n_pos):
        a = sp[i]
        while lt < n_neg and sn[lt] < a:
            lt += 1
        if le < lt:
            le = lt
        while le < n_neg and sn[le] <= a:
            le += 1
        below += lt + 0.5 * (le - lt)
    return below / (n_pos * n_neg)


def sorted_auc(sp: np.ndarray, sn: np.ndarray) -> float:
    """Exact ROC-AUC (ties count half) of class scores sorted increasing, in O(n).

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing
        Scores of the positives and of the negatives (both non-empty).
    """
    return float(_sorted_auc(np.ascontiguousarray(sp, dtype=np.float64), np.ascontiguousarray(sn, dtype=np.float64)))


def sorted_auc_reference(sp: np.ndarray, sn: np.ndarray) -> float:
    """NumPy reference of :func:`sorted_auc` (two binary searches per positive)."""
    lo = np.searchsorted(sn, sp, side="left")
    hi = np.searchsorted(sn, sp, side="right")
    return float((lo.sum() + 0.5 * (hi - lo).sum()) / (sp.size * sn.size))
