"""Driver-side kernels over merged sorted scores: smoothed ROCArea and PRBEP.

Scores arrive sorted in increasing order, one array per class. Each kernel has a
plain NumPy reference (binary searches and prefix sums) in :mod:`dpipe.testing` that
the tests compare with; the numba versions replace the searches by monotone
two-pointer sweeps.

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

Sample weights (optional ``vp``, ``vn``, non-negative, aligned with ``sp``, ``sn``):
a weight acts as the row repeated that many times. ROCArea: ``gamma_pos[i] = sum_j
vn_j clip(u_ij / t, 0, 1)`` and ``gamma_neg[j] = sum_i vp_i clip(u_ij / t, 0, 1)``
(not multiplied by the row's own weight), ``value`` and ``hinge`` sum ``vp_i vn_j``
times the pair's term; the prefix counts, sums and sums of squares become weighted
prefix sums. PRBEP: ``n`` is the total weight ``W`` and ``n+`` becomes ``Wp = sum
vp``; ``beta`` keeps its per-unit form, ``theta`` balances ``sum_P v beta = sum_N v
beta`` and ``value`` is ``sum v (c beta - mu/2 beta^2)``. Without weights the
kernels run the unweighted code unchanged (separate numba functions), so their
results are bit for bit those of the unweighted version. Weights are not
validated here beyond their lengths: negative or non-finite weights are the
caller's to refuse.
"""

from __future__ import annotations

import numba
import numpy as np

from ._curvature import prefix_sums, searchsorted_sorted

__all__ = [
    "auc_gamma",
    "auc_gamma_part",
    "prbep_beta",
    "prbep_risk_exact",
    "pairs_right",
    "sorted_auc",
]


def _auc_gamma(sp, sn, t, p0, n1, above_w, above_s, below_w):
    """The unweighted kernel's arrays made in NumPy (the prefix sums in the kernel's order: ``np.cumsum`` adds in
    order), then :func:`_auc_gamma_sweep`: a kernel that allocates nothing compiles in half the time (0.28 s
    against 0.55 s here), and this is the first kernel the default fit compiles."""
    cs_n, cs_n2, cs_p = prefix_sums(sn), prefix_sums(sn * sn), prefix_sums(sp)
    gp, gn = np.empty(sp.shape[0] - p0), np.empty(n1)
    value, hinge = _auc_gamma_sweep(sp, sn, t, p0, n1, above_w, above_s, below_w, cs_n, cs_n2, cs_p, gp, gn)
    return gp, gn, value, hinge


@numba.njit(nogil=True, cache=True)
def _auc_gamma_sweep(sp, sn, t, p0, n1, above_w, above_s, below_w, cs_n, cs_n2, cs_p, gp, gn):
    # gamma and value of the positives from p0 on, gamma of the negatives before n1 (all: 0, n_neg);
    # above_w / above_s: weight and score sum of negatives above sn (slope 1 for every positive), below_w: positives below sp;
    # cs_n, cs_n2, cs_p: prefix sums of sn, sn^2, sp
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    value = 0.0
    hinge = 0.0
    lo = 0  # first negative with s_j > a - 1      (u > 0)
    mid = 0  # first negative with s_j >= a - 1 + t (u >= t)
    for i in range(p0, n_pos):
        a = sp[i]
        while lo < n_neg and sn[lo] <= a - 1.0:
            lo += 1
        while mid < n_neg and sn[mid] < a - 1.0 + t:
            mid += 1
        if mid < lo:
            mid = lo
        c_a = (n_neg - mid) + above_w
        c_b = mid - lo
        s_a = (cs_n[n_neg] - cs_n[mid]) + above_s
        s_b = cs_n[mid] - cs_n[lo]
        q_b = cs_n2[mid] - cs_n2[lo]
        one_a = 1.0 - a
        gp[i - p0] = c_a + (c_b * one_a + s_b) / t
        value += c_a * (one_a - 0.5 * t) + s_a + (c_b * one_a * one_a + 2.0 * one_a * s_b + q_b) / (2.0 * t)
        hinge += ((n_neg - lo) + above_w) * one_a + ((cs_n[n_neg] - cs_n[lo]) + above_s)
    lo = 0  # first positive with s_i > b + 1 - t (u < t): below it u >= t
    hi = 0  # first positive with s_i >= b + 1     (u <= 0)
    for j in range(n1):
        b = sn[j]
        while lo < n_pos and sp[lo] <= b + 1.0 - t:
            lo += 1
        while hi < n_pos and sp[hi] < b + 1.0:
            hi += 1
        if hi < lo:
            hi = lo
        c_b = hi - lo
        s_b = cs_p[hi] - cs_p[lo]
        gn[j] = (lo + below_w) + (c_b * (1.0 + b) - s_b) / t
    return value, hinge


def _scores(s: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(s, dtype=np.float64)


def _class_weights(sp: np.ndarray, sn: np.ndarray, vp, vn) -> tuple[np.ndarray, np.ndarray] | None:
    """``None`` without weights; else both as contiguous float64 (a missing one is all ones).

    Raises ``ValueError`` when a weight array does not match its scores in length.
    """
    if vp is None and vn is None:
        return None
    out = []
    for v, s, vname, sname in ((vp, sp, "vp", "sp"), (vn, sn, "vn", "sn")):
        if v is None:
            out.append(np.ones(s.shape[0]))
            continue
        v = np.ascontiguousarray(v, dtype=np.float64)
        if v.ndim != 1 or v.shape[0] != s.shape[0]:
            raise ValueError(f"the weights {vname} must be one per score of {sname}: got shape {v.shape} for {s.shape[0]} scores")
        out.append(v)
    return out[0], out[1]


@numba.njit(nogil=True, cache=True)
def _auc_gamma_w(sp, sn, t, vp, vn, p0, n1, above_w, above_s, below_w):
    # _auc_gamma with the counts, sums and sums of squares weighted
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    cw_n = np.zeros(n_neg + 1)
    cs_n = np.zeros(n_neg + 1)
    cs_n2 = np.zeros(n_neg + 1)
    for j in range(n_neg):
        w = vn[j]
        ws = w * sn[j]
        cw_n[j + 1] = cw_n[j] + w
        cs_n[j + 1] = cs_n[j] + ws
        cs_n2[j + 1] = cs_n2[j] + ws * sn[j]
    cw_p = np.zeros(n_pos + 1)
    cs_p = np.zeros(n_pos + 1)
    for i in range(n_pos):
        cw_p[i + 1] = cw_p[i] + vp[i]
        cs_p[i + 1] = cs_p[i] + vp[i] * sp[i]
    w_neg = cw_n[n_neg]
    gp = np.empty(n_pos - p0)
    gn = np.empty(n1)
    value = 0.0
    hinge = 0.0
    lo = 0  # first negative with s_j > a - 1      (u > 0)
    mid = 0  # first negative with s_j >= a - 1 + t (u >= t)
    for i in range(p0, n_pos):
        a = sp[i]
        while lo < n_neg and sn[lo] <= a - 1.0:
            lo += 1
        while mid < n_neg and sn[mid] < a - 1.0 + t:
            mid += 1
        if mid < lo:
            mid = lo
        c_a = (w_neg - cw_n[mid]) + above_w
        c_b = cw_n[mid] - cw_n[lo]
        s_a = (cs_n[n_neg] - cs_n[mid]) + above_s
        s_b = cs_n[mid] - cs_n[lo]
        q_b = cs_n2[mid] - cs_n2[lo]
        one_a = 1.0 - a
        gp[i - p0] = c_a + (c_b * one_a + s_b) / t
        value += vp[i] * (c_a * (one_a - 0.5 * t) + s_a + (c_b * one_a * one_a + 2.0 * one_a * s_b + q_b) / (2.0 * t))
        hinge += vp[i] * (((w_neg - cw_n[lo]) + above_w) * one_a + ((cs_n[n_neg] - cs_n[lo]) + above_s))
    lo = 0  # first positive with s_i > b + 1 - t (u < t): below it u >= t
    hi = 0  # first positive with s_i >= b + 1     (u <= 0)
    for j in range(n1):
        b = sn[j]
        while lo < n_pos and sp[lo] <= b + 1.0 - t:
            lo += 1
        while hi < n_pos and sp[hi] < b + 1.0:
            hi += 1
        if hi < lo:
            hi = lo
        c_b = cw_p[hi] - cw_p[lo]
        s_b = cs_p[hi] - cs_p[lo]
        gn[j] = (cw_p[lo] + below_w) + (c_b * (1.0 + b) - s_b) / t
    return gp, gn, value, hinge


def auc_gamma(
    sp: np.ndarray, sn: np.ndarray, t: float, vp: np.ndarray | None = None, vn: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Per-example weights of the smoothed pairwise hinge.

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing
        Scores of the positives and of the negatives.
    t : float
        Huber width (> 0).
    vp, vn : ndarray, float64, optional
        Non-negative sample weights in the order of ``sp`` and ``sn`` (a weight acts
        as the row repeated that many times; a missing one of the two is all ones).
        Without both, the unweighted kernel runs.

    Returns
    -------
    gamma_pos : ndarray of shape (n+,)
        ``sum_j vn_j clip((1 - s_i + s_j) / t, 0, 1)`` per positive (not multiplied
        by ``vp_i``; ``vn = 1`` without weights).
    gamma_neg : ndarray of shape (n-,)
        ``sum_i vp_i clip((1 - s_i + s_j) / t, 0, 1)`` per negative.
    value : float
        ``sum_ij vp_i vn_j h_t(1 - s_i + s_j)`` (not divided by ``Wp Wn``).
    hinge : float
        ``sum_ij vp_i vn_j max(0, 1 - s_i + s_j)``.

    Raises
    ------
    ValueError
        A weight array does not have one weight per score.
    """
    sp, sn = _scores(sp), _scores(sn)
    weights = _class_weights(sp, sn, vp, vn)
    if weights is None:
        return _auc_gamma(sp, sn, float(t), 0, sn.shape[0], 0.0, 0.0, 0.0)
    return _auc_gamma_w(sp, sn, float(t), *weights, 0, sn.shape[0], 0.0, 0.0, 0.0)


def auc_gamma_part(
    sp: np.ndarray, sn: np.ndarray, t: float, own_pos_start: int, own_neg_stop: int, vp: np.ndarray | None = None, vn: np.ndarray | None = None,
    above_neg_weight: float = 0.0, above_neg_sum: float = 0.0, below_pos_weight: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """:func:`auc_gamma` for the positives from ``own_pos_start`` on and the negatives before ``own_neg_stop`` only.

    ``gamma_pos`` has ``sp.size - own_pos_start`` entries, ``gamma_neg`` ``own_neg_stop``;
    ``value`` and ``hinge`` sum over those positives' pairs; the kernel of one score
    range (:mod:`._auc_ranges`). Negatives not in ``sn`` that score above every
    ``sp - 1 + t`` (total weight ``above_neg_weight``, weighted score sum
    ``above_neg_sum``) and positives below every ``sn + 1 - t`` (``below_pos_weight``)
    count in the same sweep. With the defaults each entry is computed exactly as
    :func:`auc_gamma` computes it on the same arrays.
    """
    sp, sn = _scores(sp), _scores(sn)
    p0, n1 = int(own_pos_start), int(own_neg_stop)
    if not (0 <= p0 <= sp.shape[0] and 0 <= n1 <= sn.shape[0]):
        raise ValueError(f"own rows out of bounds: positives from {p0} of {sp.shape[0]}, negatives before {n1} of {sn.shape[0]}")
    weights = _class_weights(sp, sn, vp, vn)
    totals = (float(above_neg_weight), float(above_neg_sum), float(below_pos_weight))
    if weights is None:
        return _auc_gamma(sp, sn, float(t), p0, n1, *totals)
    return _auc_gamma_w(sp, sn, float(t), *weights, p0, n1, *totals)


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


@numba.njit(nogil=True, cache=True)
def _prbep_f_w(x, cp, cw_p, cs_p, ncn, cw_n, cs_n, mu):
    # sum_P v beta - sum_N v beta at theta = x, term for term as the weighted reference computes it
    lp = np.searchsorted(cp, x, side="right")
    up = np.searchsorted(cp, x + mu, side="left")
    p = (cw_p[cp.shape[0]] - cw_p[up]) + ((cs_p[up] - cs_p[lp]) - (cw_p[up] - cw_p[lp]) * x) / mu
    xn = x - mu
    ln = np.searchsorted(ncn, xn, side="right")
    un = np.searchsorted(ncn, xn + mu, side="left")
    w_neg = cw_n[ncn.shape[0]]
    q = w_neg - ((w_neg - cw_n[un]) + ((cs_n[un] - cs_n[ln]) - (cw_n[un] - cw_n[ln]) * xn) / mu)
    return p - q


@numba.njit(nogil=True, cache=True)
def _prbep_beta_w(sp, sn, n, mu, vp, vn):
    """:func:`_prbep_beta` with weighted prefix sums in ``f`` and a weighted value."""
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    # Wp summed in the order of increasing c (the prefix sums' order: cw_p[n_pos] == w_pos)
    w_pos = 0.0
    for i in range(n_pos):
        w_pos += vp[n_pos - 1 - i]
    inv_pos = 1.0 / w_pos
    # c on positives and -c on negatives, both increasing (a vectorized pass each), then
    # the prefix sums of v and v c in that order (two independent chains in one pass)
    cp = np.empty(n_pos)
    cw_p = np.empty(n_pos + 1)
    cs_p = np.empty(n_pos + 1)
    cw_p[0] = 0.0
    cs_p[0] = 0.0
    acc_w = 0.0
    acc_s = 0.0
    for i in range(n_pos):
        cp[i] = inv_pos - 2.0 * sp[n_pos - 1 - i] / n
    for i in range(n_pos):
        v = vp[n_pos - 1 - i]
        acc_w += v
        acc_s += v * cp[i]
        cw_p[i + 1] = acc_w
        cs_p[i + 1] = acc_s
    ncn = np.empty(n_neg)
    cw_n = np.empty(n_neg + 1)
    cs_n = np.empty(n_neg + 1)
    cw_n[0] = 0.0
    cs_n[0] = 0.0
    acc_w = 0.0
    acc_s = 0.0
    for j in range(n_neg):
        ncn[j] = -(2.0 * sn[n_neg - 1 - j] / n)
    for j in range(n_neg):
        v = vn[n_neg - 1 - j]
        acc_w += v
        acc_s += v * ncn[j]
        cw_n[j + 1] = acc_w
        cs_n[j + 1] = acc_s

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
            if _prbep_f_w(_breakpoint(arr, shift, mid), cp, cw_p, cs_p, ncn, cw_n, cs_n, mu) <= 0.0:
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
        theta = last
    else:
        x0 = 0.0
        have0 = False
        for s in range(4):
            arr = cp if s < 2 else ncn
            shift = -mu if s == 0 else (mu if s == 3 else 0.0)
            lo, hi = 0, arr.shape[0]
            while lo < hi:
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
            f0 = _prbep_f_w(x0, cp, cw_p, cs_p, ncn, cw_n, cs_n, mu)
            f1 = _prbep_f_w(x1, cp, cw_p, cs_p, ncn, cw_n, cs_n, mu)
            if f0 <= 0.0:
                theta = x0
            else:
                theta = x1 if f0 == f1 else x0 + (x1 - x0) * f0 / (f0 - f1)

    # beta from the stored c (theta - (-c) is c + theta exactly) in vectorized passes,
    # then the weighted sums in index order
    bp = np.empty(n_pos)
    bn = np.empty(n_neg)
    for i in range(n_pos):
        bp[i] = min(max((cp[n_pos - 1 - i] - theta) / mu, 0.0), 1.0)
    for j in range(n_neg):
        bn[j] = min(max((theta - ncn[n_neg - 1 - j]) / mu, 0.0), 1.0)
    cb = 0.0
    bb = 0.0
    for i in range(n_pos):
        vb = vp[i] * bp[i]
        cb += cp[n_pos - 1 - i] * vb
        bb += bp[i] * vb
    for j in range(n_neg):
        vb = vn[j] * bn[j]
        cb -= ncn[n_neg - 1 - j] * vb
        bb += bn[j] * vb
    value = cb - 0.5 * mu * bb
    return bp, bn, value, theta


def prbep_beta(
    sp: np.ndarray, sn: np.ndarray, n: float, mu: float, vp: np.ndarray | None = None, vn: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, float, float]:
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
    n : int or float
        Number of examples (n+ + n-); with weights, the total weight
        ``W = sum vp + sum vn``.
    mu : float
        Smoothing (> 0).
    vp, vn : ndarray, float64, optional
        Non-negative sample weights in the order of ``sp`` and ``sn`` (a missing one
        of the two is all ones; ``sum vp`` > 0). A weight acts as the row repeated
        that many times: ``n+`` becomes ``Wp = sum vp``, so ``c_i = 1/Wp - 2 s_i/W``
        and ``c_j = 2 s_j / W``, and the maximizer of ``sum v (c beta - mu/2 beta^2)``
        over ``[0, 1]^n`` with ``sum_P v beta = sum_N v beta`` keeps the per-unit form
        ``beta = clip((c -+ theta) / mu, 0, 1)`` (a zero-weight row gets that formula's
        value too). Without both, the unweighted kernel runs.

    Returns
    -------
    beta_pos, beta_neg : ndarray
        In the order of ``sp`` and ``sn``; per unit of weight (not multiplied by it).
    value : float
        ``sum v (c beta - mu/2 beta^2)`` at the maximizer (``v = 1`` without weights).
    theta : float
        The balancing multiplier.

    Raises
    ------
    ValueError
        A weight array does not have one weight per score.

    Notes
    -----
    ``f`` is evaluated at breakpoints bit for bit as in :func:`dpipe.testing.prbep_beta_reference`,
    and both take the first breakpoint with ``f <= 0`` (the left end of a zero plateau
    of ``f``), the breakpoint before it and the same interpolation, so ``beta`` and
    ``theta`` are identical wherever the computed ``f`` is monotone. Rounding can make
    it cross zero more than once only where ``f`` is flat at zero up to rounding
    (slope 0 means no ``beta`` is fractional); the two binary searches may then stop
    at different crossings, and ``theta`` differs while ``beta`` moves by rounding
    only. ``value`` sums in index order rather than through BLAS, so it agrees with
    the reference to rounding.
    """
    sp, sn = _scores(sp), _scores(sn)
    weights = _class_weights(sp, sn, vp, vn)
    if weights is None:
        return _prbep_beta(sp, sn, int(n), float(mu))
    return _prbep_beta_w(sp, sn, float(n), float(mu), *weights)


@numba.njit(nogil=True, cache=True)
def _prbep_risk_exact_w(sp, sn, n, vp, vn):
    # greedy LP: pair the largest remaining c of each class mass for mass; c_i + c_j only
    # decreases along the sweep, so the running total is concave in the mass and its
    # maximum is where the pair sum turns negative
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    w_pos = 0.0
    for i in range(n_pos):
        w_pos += vp[i]
    inv_pos = 1.0 / w_pos
    i = 0  # positives from the lowest score (largest c)
    j = n_neg - 1  # negatives from the highest score (largest c)
    rem_p = vp[0] if n_pos > 0 else 0.0
    rem_n = vn[j] if n_neg > 0 else 0.0
    total = 0.0
    best = 0.0
    while i < n_pos and j >= 0:
        if rem_p <= 0.0:
            i += 1
            if i < n_pos:
                rem_p = vp[i]
            continue
        if rem_n <= 0.0:
            j -= 1
            if j >= 0:
                rem_n = vn[j]
            continue
        pair = (inv_pos - 2.0 * sp[i] / n) + 2.0 * sn[j] / n
        if pair <= 0.0:
            break
        d = min(rem_p, rem_n)
        total += d * pair
        if total > best:
            best = total
        rem_p -= d
        rem_n -= d
    return best


def prbep_risk_exact(
    sp: np.ndarray, sn: np.ndarray, n: float, vp: np.ndarray | None = None, vn: np.ndarray | None = None
) -> float:
    """The non-smooth PRBEP risk: ``max_k`` (k largest ``c`` of each class), the mu -> 0 limit.

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing
        Scores of the positives and negatives.
    n : int or float
        Number of examples (n+ + n-); with weights, the total weight ``W``.
    vp, vn : ndarray, float64, optional
        Non-negative sample weights in the order of ``sp`` and ``sn`` (a missing one
        of the two is all ones; ``sum vp`` > 0), with ``c`` as in :func:`prbep_beta`.
        The risk is then the linear program ``max sum v c beta`` over fractional
        labelings ``beta`` in ``[0, 1]^n`` with ``sum_P v beta = sum_N v beta``, solved
        greedily in O(n): the largest ``c`` of each class are paired mass for mass
        while their sum is positive (at most one row per class ends fractional). For
        integer weights it equals the unweighted risk of the rows repeated.

    Returns
    -------
    float
        ``max_k sum`` of the ``k`` largest ``c`` of each class (weighted: the LP's maximum).

    Raises
    ------
    ValueError
        A weight array does not have one weight per score.
    """
    sp, sn = np.asarray(sp, np.float64), np.asarray(sn, np.float64)
    weights = _class_weights(sp, sn, vp, vn)
    if weights is not None:
        return float(_prbep_risk_exact_w(_scores(sp), _scores(sn), float(n), *weights))
    k = min(sp.size, sn.size)
    # c decreases along sp and increases along sn: the k largest without sorting
    cp = 1.0 / sp.size - 2.0 * sp[:k] / n
    cn = 2.0 * sn[sn.size - k :][::-1] / n
    totals = np.concatenate([[0.0], np.cumsum(cp) + np.cumsum(cn)])
    return float(totals.max())


def pairs_right(sp: np.ndarray, sn: np.ndarray, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> float:
    """``sum_i vp_i (W-(s_j < s_i) + W-(s_j = s_i) / 2)``: the weight of the (positive, negative) pairs ranked right, ties
    half, of two runs sorted increasing, in one sweep that allocates nothing.

    Unweighted (both weights None) the sum is of half-integers, exact in float64 below 2^52 pairs, so counting a range's
    positives against each shard's negatives apart gives the count of the merged negatives. Weighted, a negative run's
    weights are added in its order.
    """
    sp, sn = _scores(sp), _scores(sn)
    if (vp is None) != (vn is None):
        raise ValueError("pairs_right: weights for both classes or neither")
    if vp is None or vn is None:
        return float(_pairs_right(sp, sn, sp, sn, False))
    vp, vn = np.ascontiguousarray(vp, dtype=np.float64), np.ascontiguousarray(vn, dtype=np.float64)
    if vp.shape != sp.shape or vn.shape != sn.shape:
        raise ValueError("pairs_right: one weight per score")
    return float(_pairs_right(sp, sn, vp, vn, True))


@numba.njit(nogil=True, cache=True)
def _pairs_right(sp, sn, vp, vn, weighted):  # pragma: no cover - compiled
    n_neg = sn.shape[0]
    below = 0.0
    w_lt = 0.0  # weight of the negatives before lt
    w_le = 0.0  # weight of the negatives before le
    lt = 0  # first negative with s_j >= s_i
    le = 0  # first negative with s_j > s_i
    for i in range(sp.shape[0]):
        a = sp[i]
        while lt < n_neg and sn[lt] < a:
            w_lt += vn[lt] if weighted else 1.0
            lt += 1
        if le < lt:
            le = lt
            w_le = w_lt
        while le < n_neg and sn[le] <= a:
            w_le += vn[le] if weighted else 1.0
            le += 1
        below += (vp[i] if weighted else 1.0) * (w_lt + 0.5 * (w_le - w_lt))
    return below


@numba.njit(nogil=True, cache=True)
def _sorted_auc_w(sp, sn, vp, vn):
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    cw_n = np.zeros(n_neg + 1)
    for j in range(n_neg):
        cw_n[j + 1] = cw_n[j] + vn[j]
    w_pos = 0.0
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
        below += vp[i] * (cw_n[lt] + 0.5 * (cw_n[le] - cw_n[lt]))
        w_pos += vp[i]
    return below / (w_pos * cw_n[n_neg])


def sorted_auc(sp: np.ndarray, sn: np.ndarray, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> float:
    """Exact ROC-AUC (ties count half) of class scores sorted increasing, in O(n).

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing
        Scores of the positives and of the negatives (both non-empty).
    vp, vn : ndarray, float64, optional
        Non-negative sample weights in the order of ``sp`` and ``sn`` (a missing one
        of the two is all ones; each class of positive total weight). The AUC is then
        ``sum_ij vp_i vn_j ([s_i > s_j] + [s_i == s_j] / 2) / (Wp Wn)``, as
        ``sklearn.metrics.roc_auc_score(y, s, sample_weight=v)``.

    Raises
    ------
    ValueError
        A weight array does not have one weight per score.
    """
    sp, sn = _scores(sp), _scores(sn)
    weights = _class_weights(sp, sn, vp, vn)
    if weights is None:  # every positive's negatives below it, and half its ties: exact in integers
        below2 = int(searchsorted_sorted(sn, sp, "left").sum()) + int(searchsorted_sorted(sn, sp, "right").sum())
        return below2 / 2 / (sp.shape[0] * sn.shape[0])
    return float(_sorted_auc_w(sp, sn, *weights))
