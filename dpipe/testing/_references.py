"""Plain NumPy references of dpipe's numba kernels and oracles, for tests and benchmarks only.

Production modules never import this one: the numba kernels of
:mod:`dpipe.reduce._linalg`, :mod:`dpipe.reduce._moments`,
:mod:`dpipe.objectives._rank_kernels` and :mod:`dpipe.objectives._argmax` are checked
against these slower, simpler forms (binary searches and prefix sums, pair matrices,
Algorithm 2 over all contingency tables).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from .._runs import RangeInput
from ..exceptions import ParameterError
from ..io import _svmlight as _svm
from ..objectives._argmax import MostViolated, _integer_weights
from ..objectives._curvature import Curvature, prefix_sums
from ..objectives._rank_kernels import _class_weights
from ..reduce._moments import ClassMoments

__all__ = [
    "split_into_ranges",
    "parse_block_reference",
    "matvec_reference",
    "rmatvec_reference",
    "rate_rows_reference",
    "moments_reference",
    "auc_gamma_reference",
    "prbep_beta_reference",
    "sorted_auc_reference",
    "rocarea_argmax_reference",
    "error_rate_argmax_reference",
    "prbep_argmax_reference",
    "prec_at_k_argmax_reference",
    "rec_at_k_argmax_reference",
    "f1_argmax_reference",
    "contingency_argmax_reference",
    "squared_hinge_reference",
    "huber_hinge_reference",
    "TABLE_LOSSES",
    "huber_derivative",
    "merge_sketches",
    "curvature_apply_reference",
]


def curvature_apply_reference(c: Curvature, u_pos: np.ndarray, u_neg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`dpipe.objectives._curvature.Curvature.apply` in NumPy: prefix sums, then each row's run of the other class."""
    Pn = prefix_sums(u_neg if c.vn is None else c.vn * u_neg)
    Pp = prefix_sums(u_pos if c.vp is None else c.vp * u_pos)
    E, F = Pn[c.pos_hi] - Pn[c.pos_lo], Pp[c.neg_hi] - Pp[c.neg_lo]
    m_pos = c.diag_pos * u_pos - c.scale * (E if c.vp is None else c.vp * E)
    m_neg = c.diag_neg * u_neg - c.scale * (F if c.vn is None else c.vn * F)
    return m_pos, m_neg


# ---------------------------------------------------------------------------
# float64 products (dpipe.reduce._linalg)
# ---------------------------------------------------------------------------
def matvec_reference(X: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NumPy reference of :meth:`~dpipe.reduce._block.FeatureBlock.matvec`, bitwise: the same sums in the same order.

    Lane ``j`` of :data:`~dpipe.reduce._linalg.LANES` adds ``x_k w_k`` over the columns
    ``k = j (mod LANES)`` in increasing ``k``; the lanes are then added in halves
    (``lane[j] + lane[j + h]``, ``h = LANES / 2, ..., 1``).
    """
    from ..reduce._linalg import LANES

    X, w = np.asarray(X, dtype=np.float64), np.asarray(w, dtype=np.float64)
    lanes = np.zeros((LANES, X.shape[0]))
    for k in range(X.shape[1]):
        lanes[k % LANES] += X[:, k] * w[k]
    h = LANES // 2
    while h >= 1:
        lanes[:h] = lanes[:h] + lanes[h : 2 * h]
        h //= 2
    return lanes[0]


def rmatvec_reference(X: np.ndarray, g: np.ndarray) -> np.ndarray:
    """NumPy reference of :meth:`~dpipe.reduce._block.FeatureBlock.rmatvec`."""
    return np.asarray(X, dtype=np.float64).T @ np.asarray(g, dtype=np.float64)


def rate_rows_reference(z: np.ndarray, z_anchor: np.ndarray, cells: np.ndarray, v: np.ndarray, P: np.ndarray, N: np.ndarray,
                        t: float, n_cells: int) -> tuple[float, np.ndarray, np.ndarray]:
    """NumPy reference of the per-row kernel of :func:`~dpipe.reduce._rates.rate_pass`: ``(value, sums, dz)``."""
    from ..reduce._rates import huber, ramp

    up, un = 0.5 + z, 0.5 - z
    p_on, n_on = z_anchor <= 0.5, z_anchor >= -0.5
    bound_p, bound_n = np.where(p_on, np.maximum(up, 0.0), 1.0), np.where(n_on, np.maximum(un, 0.0), 1.0)
    smooth_p, smooth_n = np.where(p_on, huber(up, t), 1.0), np.where(n_on, huber(un, t), 1.0)
    Pc, Nc = P[cells], N[cells]
    value = float(np.dot(v, Pc * smooth_p + Nc * smooth_n))
    dz = v * (Pc * np.where(p_on, huber_derivative(up, t), 0.0) - Nc * np.where(n_on, huber_derivative(un, t), 0.0))
    rows = (bound_p, bound_n, smooth_p, smooth_n, ramp(z), (z > 0).astype(np.float64), None)
    sums = np.stack([np.bincount(cells, weights=v if r is None else v * r, minlength=n_cells) for r in rows])
    return value, sums, dz


# ---------------------------------------------------------------------------
# class moments (dpipe.reduce._moments)
# ---------------------------------------------------------------------------
def moments_reference(X: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None) -> ClassMoments:
    """NumPy reference of :func:`~dpipe.reduce._moments.shard_moments`: one pass over all rows (two-pass formula in float64)."""
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    out = ClassMoments.empty(d)
    for c, label in ((0, -1), (1, 1)):
        m = y == label
        out.count[c] = int(m.sum())
        if not m.any():
            continue
        Xc = X[m]
        v = np.ones(Xc.shape[0]) if weight is None else np.asarray(weight, np.float64)[m]
        out.weight[c] = v.sum()
        if out.weight[c] == 0:
            continue
        out.mean[c] = (v @ Xc) / out.weight[c]
        C = Xc - out.mean[c]
        out.m2[c] = (C * v[:, None]).T @ C
    return out


# ---------------------------------------------------------------------------
# sorted-score kernels (dpipe.objectives._rank_kernels)
# ---------------------------------------------------------------------------
def auc_gamma_reference(
    sp: np.ndarray, sn: np.ndarray, t: float, vp: np.ndarray | None = None, vn: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """NumPy reference of :func:`~dpipe.objectives._rank_kernels.auc_gamma`: binary searches and (weighted) prefix sums."""
    sp, sn = np.asarray(sp, np.float64), np.asarray(sn, np.float64)
    weights = _class_weights(sp, sn, vp, vn)
    if weights is not None:
        return _auc_gamma_reference_w(sp, sn, float(t), *weights)
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


def _auc_gamma_reference_w(sp, sn, t, vp, vn):
    cw_n = np.concatenate([[0.0], np.cumsum(vn)])
    cs_n = np.concatenate([[0.0], np.cumsum(vn * sn)])
    cs_n2 = np.concatenate([[0.0], np.cumsum(vn * sn * sn)])
    cw_p = np.concatenate([[0.0], np.cumsum(vp)])
    cs_p = np.concatenate([[0.0], np.cumsum(vp * sp)])
    lo = np.searchsorted(sn, sp - 1.0, side="right")
    mid = np.maximum(np.searchsorted(sn, sp - 1.0 + t, side="left"), lo)
    one_a = 1.0 - sp
    c_a, c_b = cw_n[-1] - cw_n[mid], cw_n[mid] - cw_n[lo]
    s_a, s_b, q_b = cs_n[-1] - cs_n[mid], cs_n[mid] - cs_n[lo], cs_n2[mid] - cs_n2[lo]
    gp = c_a + (c_b * one_a + s_b) / t
    value = float(vp @ (c_a * (one_a - 0.5 * t) + s_a + (c_b * one_a**2 + 2 * one_a * s_b + q_b) / (2 * t)))
    hinge = float(vp @ ((cw_n[-1] - cw_n[lo]) * one_a + cs_n[-1] - cs_n[lo]))
    lo_n = np.searchsorted(sp, sn + 1.0 - t, side="right")
    hi_n = np.maximum(np.searchsorted(sp, sn + 1.0, side="left"), lo_n)
    gn = cw_p[lo_n] + ((cw_p[hi_n] - cw_p[lo_n]) * (1.0 + sn) - (cs_p[hi_n] - cs_p[lo_n])) / t
    return gp, gn, value, hinge


def _beta_sums(c: np.ndarray, cs: np.ndarray, lo_edge: np.ndarray, mu: float) -> np.ndarray:
    """``sum clip((c - x) / mu, 0, 1)`` over ``c`` (sorted increasing, prefix sums ``cs``) for every x."""
    n = c.size
    full = n - np.searchsorted(c, lo_edge + mu, side="left")  # c >= x + mu
    start = np.searchsorted(c, lo_edge, side="right")  # c > x
    stop = n - full
    return full + ((cs[stop] - cs[start]) - (stop - start) * lo_edge) / mu


def _beta_sums_w(c: np.ndarray, cw: np.ndarray, cs: np.ndarray, lo_edge: np.ndarray, mu: float) -> np.ndarray:
    """``sum v clip((c - x) / mu, 0, 1)`` for every x: ``cw``, ``cs`` prefix sums of ``v`` and ``v c``."""
    stop = np.searchsorted(c, lo_edge + mu, side="left")  # c >= x + mu from here
    start = np.searchsorted(c, lo_edge, side="right")  # c > x
    return (cw[-1] - cw[stop]) + ((cs[stop] - cs[start]) - (cw[stop] - cw[start]) * lo_edge) / mu


def prbep_beta_reference(
    sp: np.ndarray, sn: np.ndarray, n: float, mu: float, vp: np.ndarray | None = None, vn: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """NumPy reference of :func:`~dpipe.objectives._rank_kernels.prbep_beta`: ``f`` at every distinct breakpoint.

    The breakpoints are sorted with ``np.unique``; ``f`` comes from binary searches and
    prefix sums at all of them, and a binary search on those values brackets the root,
    which is interpolated on its linear piece. With weights, ``f`` sums weighted
    prefix sums in the order of increasing ``c`` (as the numba kernel does).

    Parameters
    ----------
    sp, sn, n, mu, vp, vn
        As for :func:`~dpipe.objectives._rank_kernels.prbep_beta`.

    Returns
    -------
    beta_pos, beta_neg, value, theta
        As for :func:`~dpipe.objectives._rank_kernels.prbep_beta`.
    """
    sp, sn = np.asarray(sp, np.float64), np.asarray(sn, np.float64)
    weights = _class_weights(sp, sn, vp, vn)
    if weights is not None:
        return _prbep_beta_reference_w(sp, sn, float(n), float(mu), *weights)
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


def _breakpoint_root(breaks: np.ndarray, fb: np.ndarray) -> float:
    """First breakpoint with ``f <= 0`` and the one before it; ``theta`` on that linear piece."""
    k = int(np.searchsorted(-fb, 0.0, side="left"))
    if k == 0:
        return float(breaks[0])
    if k >= breaks.size:
        return float(breaks[-1])
    f0, f1 = fb[k - 1], fb[k]
    x0, x1 = breaks[k - 1], breaks[k]
    return float(x1 if f0 == f1 else x0 + (x1 - x0) * f0 / (f0 - f1))


def _prbep_beta_reference_w(sp, sn, n, mu, vp, vn):
    wp, wn = vp[::-1], vn[::-1]  # in the order of increasing c, resp. -c
    cw_p = np.concatenate([[0.0], np.cumsum(wp)])
    cw_n = np.concatenate([[0.0], np.cumsum(wn)])
    inv_pos = 1.0 / cw_p[-1]
    cp = inv_pos - 2.0 * sp[::-1] / n  # increasing (sp increasing)
    neg_cn = -(2.0 * sn[::-1] / n)  # increasing
    cs_p = np.concatenate([[0.0], np.cumsum(wp * cp)])
    cs_n = np.concatenate([[0.0], np.cumsum(wn * neg_cn)])

    def f(theta: np.ndarray) -> np.ndarray:
        # sum_P v clip((c_i - theta)/mu) - sum_N v clip((c_j + theta)/mu); clip((c_j + theta)/mu) = 1 - clip((-c_j - (theta - mu))/mu)
        return _beta_sums_w(cp, cw_p, cs_p, theta, mu) - (cw_n[-1] - _beta_sums_w(neg_cn, cw_n, cs_n, theta - mu, mu))

    breaks = np.unique(np.concatenate([cp - mu, cp, neg_cn, mu + neg_cn]))
    theta = _breakpoint_root(breaks, f(breaks))
    c_pos, c_neg = inv_pos - 2.0 * sp / n, 2.0 * sn / n
    bp = np.clip((c_pos - theta) / mu, 0.0, 1.0)
    bn = np.clip((c_neg + theta) / mu, 0.0, 1.0)
    value = float((vp * c_pos) @ bp + (vn * c_neg) @ bn - 0.5 * mu * ((vp * bp) @ bp + (vn * bn) @ bn))
    return bp, bn, value, theta


def sorted_auc_reference(sp: np.ndarray, sn: np.ndarray, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> float:
    """NumPy reference of :func:`~dpipe.objectives._rank_kernels.sorted_auc` (two binary searches per positive)."""
    weights = _class_weights(np.asarray(sp), np.asarray(sn), vp, vn)
    lo = np.searchsorted(sn, sp, side="left")
    hi = np.searchsorted(sn, sp, side="right")
    if weights is not None:
        vp, vn = weights
        cw = np.concatenate([[0.0], np.cumsum(vn)])
        return float(vp @ (cw[lo] + 0.5 * (cw[hi] - cw[lo])) / (vp.sum() * cw[-1]))
    return float((lo.sum() + 0.5 * (hi - lo).sum()) / (sp.size * sn.size))


# ---------------------------------------------------------------------------
# loss-augmented argmax oracles (dpipe.objectives._argmax)
# ---------------------------------------------------------------------------
TABLE_LOSSES = ("error", "f1", "prbep", "prec@k", "rec@k")
"""Names of the contingency-table losses known to :func:`contingency_argmax_reference`."""


def rocarea_argmax_reference(sp: np.ndarray, sn: np.ndarray, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """NumPy reference of :func:`~dpipe.objectives._argmax.rocarea_argmax`: the ``n+ x n-`` pair matrix.

    Each pair is maximized on its own: ``z_ij = 1`` iff ``s_j > s_i - 1`` (the same
    predicate as the kernel), ``value = (1/m) sum_ij z_ij (1 - s_i + s_j)``; with sample
    weights every pair term is multiplied by ``vp_i vn_j`` and ``m = Wp Wn``.
    """
    sp, sn = np.asarray(sp, np.float64), np.asarray(sn, np.float64)
    if vp is not None or vn is not None:
        wp = np.ones(sp.size) if vp is None else np.asarray(vp, np.float64)
        wn = np.ones(sn.size) if vn is None else np.asarray(vn, np.float64)
        m = wp.sum() * wn.sum()
        z = sn[None, :] > (sp[:, None] - 1.0)
        ww = wp[:, None] * wn[None, :]
        value = float(np.sum(np.where(z, ww * (1.0 - sp[:, None] + sn[None, :]), 0.0)) / m)
        loss = min(1.0, float(np.sum(np.where(z, ww, 0.0)) / m))
        return MostViolated(loss, value, -wp * (z @ wn) / m, wn * (wp @ z) / m)
    m = sp.size * sn.size
    z = sn[None, :] > (sp[:, None] - 1.0)
    value = float(np.sum(np.where(z, 1.0 - sp[:, None] + sn[None, :], 0.0)) / m)
    return MostViolated(float(z.sum() / m), value, -z.sum(axis=1) / m, z.sum(axis=0) / m)


def error_rate_argmax_reference(sp: np.ndarray, sn: np.ndarray, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """NumPy reference of :func:`~dpipe.objectives._argmax.error_rate_argmax`: the per-example (weighted) hinge."""
    sp, sn = np.asarray(sp, np.float64), np.asarray(sn, np.float64)
    if vp is not None or vn is not None:
        wp = np.ones(sp.size) if vp is None else np.asarray(vp, np.float64)
        wn = np.ones(sn.size) if vn is None else np.asarray(vn, np.float64)
        w = wp.sum() + wn.sum()
        hp, hn = 1.0 - sp, 1.0 + sn
        fp, fn = hn > 0, hp > 0
        value = float((np.sum(np.where(fn, wp * hp, 0.0)) + np.sum(np.where(fp, wn * hn, 0.0))) / w)
        loss = float((wp[fn].sum() + wn[fp].sum()) / w)
        return MostViolated(loss, value, np.where(fn, -wp / w, 0.0), np.where(fp, wn / w, 0.0))
    n = sp.size + sn.size
    hp, hn = 1.0 - sp, 1.0 + sn
    fp, fn = hn > 0, hp > 0
    value = float((np.sum(np.where(fn, hp, 0.0)) + np.sum(np.where(fp, hn, 0.0))) / n)
    return MostViolated(float((fp.sum() + fn.sum()) / n), value, np.where(fn, -1.0 / n, 0.0), np.where(fp, 1.0 / n, 0.0))


def _coef_from_table(n_pos: int, n_neg: int, b: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    n = n_pos + n_neg
    cp = np.zeros(n_pos)
    cp[:c] = -1.0 / n
    cn = np.zeros(n_neg)
    cn[n_neg - b :] = 1.0 / n
    return cp, cn


# ---------------------------------------------------------------------------
# Algorithm 2: the naive reference over all contingency tables
# ---------------------------------------------------------------------------
def _table_loss(loss: str, a: int, b: np.ndarray, n_pos: int, n_neg: int, k: float | None) -> np.ndarray:
    """Delta for the tables ``(a, b, n+ - a, n- - b)``; NaN where ``y'`` is not admissible."""
    c = n_pos - a
    n = n_pos + n_neg
    b = b.astype(np.float64)
    if loss == "error":
        return (b + c) / n
    if loss == "f1":
        den = 2.0 * a + b + c
        return 1.0 - np.divide(2.0 * a, den, out=np.zeros_like(b), where=den > 0)
    if loss == "prbep":
        return np.where(a + b == n_pos, 1.0 - a / n_pos, np.nan)
    if loss == "prec@k":
        assert k is not None  # the @k losses come with k
        return np.where(a + b == k, 1.0 - a / k, np.nan)
    if loss == "rec@k":
        return np.where(a + b == k, 1.0 - a / n_pos, np.nan)
    raise ParameterError(f"The 'loss' parameter of contingency_argmax_reference must be one of {TABLE_LOSSES}. Got {loss!r} instead.")


def _weighted_contingency_reference(sp, sn, loss: str, k, vp, vn) -> MostViolated:
    """Weighted Algorithm 2 over candidate tables (see contingency_argmax_reference)."""
    wp = np.ones(sp.size) if vp is None else np.asarray(vp, np.float64)
    wn = np.ones(sn.size) if vn is None else np.asarray(vn, np.float64)
    tp, tn = float(wp.sum()), float(wn.sum())
    w = tp + tn
    # cumulative weights and score sums: positives from the bottom, negatives from the top
    pc = np.concatenate([[0.0], np.cumsum(wp)])
    bot = np.concatenate([[0.0], np.cumsum(wp * sp)])
    wn_top, sn_top = wn[::-1], sn[::-1]
    nc = np.concatenate([[0.0], np.cumsum(wn_top)])
    top = np.concatenate([[0.0], np.cumsum(wn_top * sn_top)])

    def flipped_sum(x, cum, sums):  # best score sum of weight x: linear between rows
        return np.interp(x, cum, sums)

    if loss == "error":
        cs = np.unique(pc)[::-1]  # a = Wp - c increasing
        bs = np.unique(nc)
        tables = [(c, bs) for c in cs]
    elif loss == "f1":
        _integer_weights(wp, wn, "contingency_argmax_reference")
        tables = [(float(c), np.arange(int(round(tn)) + 1, dtype=np.float64)) for c in range(int(round(tp)), -1, -1)]
    elif loss in ("prbep", "prec@k", "rec@k"):
        kk = tp if loss == "prbep" else float(k)
        c0 = tp - kk
        hi = min(kk, tn)
        lo = min(max(0.0, kk - tp), hi)
        bs = np.concatenate([[lo, hi], nc, pc - c0])
        bs = np.unique(bs[(bs >= lo) & (bs <= hi)])
        tables = [(None, bs)]
    else:
        raise ParameterError(f"The 'loss' parameter of contingency_argmax_reference must be one of {TABLE_LOSSES}. Got {loss!r} instead.")
    best, best_b, best_c, best_loss = -np.inf, np.nan, np.nan, np.nan
    for c, bs in tables:
        if c is None:  # fixed predicted-positive weight
            cs = np.maximum(0.0, c0 + bs)
            delta = np.clip(cs / tp if loss == "rec@k" else bs / kk, 0.0, 1.0)
        else:
            cs = np.full(bs.shape, c)
            a = tp - c
            if loss == "error":
                delta = (bs + c) / w
            else:
                delta = (bs + c) / (bs + tp + a)  # 1 - 2a / (2a + b + c)
        vals = delta + (flipped_sum(bs, nc, top) - flipped_sum(cs, pc, bot)) / w
        j = int(np.argmax(vals))
        if vals[j] > best:
            best, best_b, best_c, best_loss = float(vals[j]), float(bs[j]), float(cs[j]), float(delta[j])
    cp = -np.clip(best_c - pc[:-1], 0.0, wp) / w
    cn = (np.clip(best_b - nc[:-1], 0.0, wn_top) / w)[::-1]
    return MostViolated(best_loss, best, cp, cn)


def contingency_argmax_reference(
    sp: np.ndarray,
    sn: np.ndarray,
    loss: str,
    k: float | None = None,
    vp: np.ndarray | None = None,
    vn: np.ndarray | None = None,
) -> MostViolated:
    """Algorithm 2 (Joachims 2005): the best labeling of every contingency table.

    For each ``a`` (TP) and ``b`` (FP), the best labeling in that table flips the
    ``n+ - a`` lowest positives and the ``b`` highest negatives; its value is
    ``Delta(a, b, c, d) + (sum of those negatives - sum of those positives) / n``
    (cumulative sums, the paper's ``O(n^2)`` rewrite). All ``(n+ + 1)(n- + 1)`` tables
    are evaluated, rows (``a``) in a loop and columns (``b``) as a vector; the first
    maximum in (``a``, ``b``) order is kept.

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing
        Scores of the positives and of the negatives.
    loss : {"error", "f1", "prbep", "prec@k", "rec@k"}
        The contingency-table loss (see :mod:`dpipe.objectives._argmax`).
    k : int, optional
        Number of predicted positives, for ``"prec@k"`` and ``"rec@k"`` (with sample
        weights: their total weight).
    vp, vn : ndarray, optional
        Sample weights (see :mod:`dpipe.objectives._argmax`). A table is then a pair of weights
        ``(c, b)`` (FN, FP), its best labeling flips weight ``c`` of the lowest
        positives and ``b`` of the highest negatives (one row of each class in part),
        and the score sums are interpolated linearly between the rows' cumulative
        weights. Candidates: for the error rate every pair of row boundaries (the value
        is concave piecewise linear in ``b`` and in ``c``); for PRBEP / Prec@k / Rec@k
        the FP weights at the row boundaries of either class and the two ends of the
        admissible range; for F1 (integer weights only) every integer table
        ``(Wp + 1) x (Wn + 1)``, i.e. Algorithm 2 on the expanded data. The first
        maximum is kept (``a``, then ``b`` increasing).

    Returns
    -------
    MostViolated
    """
    sp, sn = np.asarray(sp, np.float64), np.asarray(sn, np.float64)
    if vp is not None or vn is not None:
        return _weighted_contingency_reference(sp, sn, loss, k, vp, vn)
    n_pos, n_neg = sp.size, sn.size
    n = n_pos + n_neg
    bot = np.concatenate([[0.0], np.cumsum(sp)])
    top = np.concatenate([[0.0], np.cumsum(sn[::-1])])
    bs = np.arange(n_neg + 1)
    best, best_a, best_b, best_loss = -np.inf, -1, -1, np.nan
    for a in range(n_pos + 1):
        delta = _table_loss(loss, a, bs, n_pos, n_neg, k)
        vals = delta + (top - bot[n_pos - a]) / n
        vals = np.where(np.isnan(delta), -np.inf, vals)
        j = int(np.argmax(vals))
        if vals[j] > best:
            best, best_a, best_b, best_loss = float(vals[j]), a, j, float(delta[j])
    if best_a < 0:
        raise ParameterError(f"no admissible labeling for loss {loss!r} with k={k!r}, n+={n_pos}, n-={n_neg}")
    cp, cn = _coef_from_table(n_pos, n_neg, best_b, n_pos - best_a)
    return MostViolated(best_loss, best, cp, cn)


def prbep_argmax_reference(sp: np.ndarray, sn: np.ndarray, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """Algorithm 2 reference of :func:`~dpipe.objectives._argmax.prbep_argmax`."""
    return contingency_argmax_reference(sp, sn, "prbep", None, vp, vn)


def prec_at_k_argmax_reference(sp: np.ndarray, sn: np.ndarray, k: float, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """Algorithm 2 reference of :func:`~dpipe.objectives._argmax.prec_at_k_argmax`."""
    return contingency_argmax_reference(sp, sn, "prec@k", k, vp, vn)


def rec_at_k_argmax_reference(sp: np.ndarray, sn: np.ndarray, k: float, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """Algorithm 2 reference of :func:`~dpipe.objectives._argmax.rec_at_k_argmax`."""
    return contingency_argmax_reference(sp, sn, "rec@k", k, vp, vn)


def f1_argmax_reference(sp: np.ndarray, sn: np.ndarray, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """Algorithm 2 reference of :func:`~dpipe.objectives._argmax.f1_argmax`: all ``O(n+ n-)`` tables (``O(Wp Wn)`` weighted)."""
    return contingency_argmax_reference(sp, sn, "f1", None, vp, vn)


_IDX = re.compile(rb"\d+")


def parse_block_reference(data: bytes, first_line: int = 1, path: str = "<bytes>") -> _svm.SvmBlock:
    """Plain-Python parser with the same grammar, results and errors as :func:`dpipe.io._svmlight.parse_block`.

    Slow; used by the tests to check the numba kernel.
    """
    labels: list[float] = []
    indptr = [0]
    indices: list[int] = []
    values: list[float] = []
    lines: list[int] = []
    for k, raw in enumerate(bytes(data).split(b"\n")):
        lineno = first_line + k
        toks = raw.split(b"#", 1)[0].split()
        if not toks:
            continue
        if not _svm._NUM.fullmatch(toks[0]):
            raise _svm._error(_svm.ERR_LABEL, path, lineno, toks[0])
        prev = -1
        for t in toks[1:]:
            if t.startswith(b"qid:"):
                raise _svm._error(_svm.ERR_QID, path, lineno, t)
            i, sep, v = t.partition(b":")
            if not sep or not _IDX.fullmatch(i):
                raise _svm._error(_svm.ERR_FEATURE, path, lineno, t)
            idx = int(i)
            if idx > _svm.MAX_INDEX:
                raise _svm._error(_svm.ERR_BIG, path, lineno, t)
            if not _svm._NUM.fullmatch(v):
                raise _svm._error(_svm.ERR_VALUE, path, lineno, t)
            if idx <= prev:
                raise _svm._error(_svm.ERR_ORDER, path, lineno, t)
            indices.append(idx)
            values.append(float(v))
            prev = idx
        labels.append(float(toks[0]))
        indptr.append(len(indices))
        lines.append(lineno)
    block = _svm.SvmBlock(
        np.array(labels, dtype=np.float64),
        np.array(indptr, dtype=np.int64),
        np.array(indices, dtype=np.int32),
        np.array(values, dtype=np.float64),
        np.array(lines, dtype=np.int64),
    )
    _svm._check_finite(block, path)
    return block


def split_into_ranges(sp: np.ndarray, sn: np.ndarray, splitters: np.ndarray, t: float,
                      vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> list:
    """Cut merged sorted scores into the :class:`RangeInput` of every range (the reference for a distributed cut).

    ``splitters`` increasing; range ``r`` owns the positives in ``[a_r, a_{r+1})`` and the
    negatives in ``[a_r - 1, a_{r+1} - 1)``.
    """
    a = np.concatenate([[-np.inf], np.asarray(splitters, dtype=np.float64), [np.inf]])
    wp = np.ones(sp.size) if vp is None else np.asarray(vp, dtype=np.float64)
    wn = np.ones(sn.size) if vn is None else np.asarray(vn, dtype=np.float64)
    cwp = np.concatenate([[0.0], np.cumsum(wp)])
    cwn, csn = np.concatenate([[0.0], np.cumsum(wn)]), np.concatenate([[0.0], np.cumsum(wn * sn)])
    csp, cqn = np.concatenate([[0.0], np.cumsum(wp * sp)]), np.concatenate([[0.0], np.cumsum(wn * sn * sn)])
    out = []
    for lo, hi in zip(a[:-1], a[1:]):
        p0, p1, p_own = np.searchsorted(sp, [lo - t, hi, lo], side="left")
        n0, n1, n_own = np.searchsorted(sn, [lo - 1.0, hi - 1.0 + t, hi - 1.0], side="left")
        out.append(RangeInput(
            sp[p0:p1], sn[n0:n1], int(p_own - p0), int(n_own - n0),
            below_pos_weight=float(cwp[p0]),
            above_neg_weight=float(cwn[-1] - cwn[n1]), above_neg_sum=float(csn[-1] - csn[n1]),
            vp=None if vp is None else wp[p0:p1], vn=None if vn is None else wn[n0:n1],
            below_pos_sum=float(csp[p0]), above_neg_square=float(cqn[-1] - cqn[n1]),
        ))
    return out


# ---------------------------------------------------------------------------
# the squared pairwise hinge (dpipe.objectives._pairwise_l2), O(n^2)
# ---------------------------------------------------------------------------
class SquaredHingeReference(NamedTuple):
    """``J(w) = lam/2 ||w||^2 + (1/P) sum_ij v_i v_j max(0, 1 - s_i + s_j)^2`` by the pairs: value, gradient, Hessian products."""

    fun: Callable[[np.ndarray], float]
    grad: Callable[[np.ndarray], np.ndarray]
    hessp: Callable[[np.ndarray, np.ndarray], np.ndarray]
    #: ``lam + sum_r M_rr x_r^2``: the Hessian's diagonal without the pairs' cross terms (Newton's Jacobi preconditioner)
    row_diagonal: Callable[[np.ndarray], np.ndarray]


def _pairwise_reference(X: np.ndarray, y: np.ndarray, lam: float, weight: np.ndarray | None, loss: Callable[[np.ndarray], np.ndarray],
                        slope: Callable[[np.ndarray], np.ndarray], curvature: Callable[[np.ndarray], np.ndarray]) -> SquaredHingeReference:
    """``lam/2 ||w||^2 + (1/P) sum_ij v_i v_j loss(1 - s_i + s_j)`` by the pairs, from the loss of a margin, its slope and curvature."""
    X = np.asarray(X, dtype=np.float64)
    v = np.ones(y.size) if weight is None else np.asarray(weight, dtype=np.float64)
    P, N = np.flatnonzero(y > 0), np.flatnonzero(y < 0)
    pair = v[P][:, None] * v[N][None, :] / (v[P].sum() * v[N].sum())

    def margins(w: np.ndarray) -> np.ndarray:
        s = X @ w
        return 1.0 - s[P][:, None] + s[N][None, :]

    def fun(w: np.ndarray) -> float:
        return 0.5 * lam * float(w @ w) + float((pair * loss(margins(w))).sum())

    def grad(w: np.ndarray) -> np.ndarray:
        m = pair * slope(margins(w))  # d loss / d s_j; minus that for s_i
        g = np.zeros(y.size)
        g[P], g[N] = -m.sum(axis=1), m.sum(axis=0)
        return lam * w + X.T @ g

    def hessp(w: np.ndarray, d: np.ndarray) -> np.ndarray:
        act = pair * curvature(margins(w))
        u = X @ d
        mu = np.zeros(y.size)
        mu[P] = act.sum(axis=1) * u[P] - act @ u[N]
        mu[N] = act.sum(axis=0) * u[N] - act.T @ u[P]
        return lam * d + X.T @ mu

    def row_diagonal(w: np.ndarray) -> np.ndarray:
        act = pair * curvature(margins(w))
        c = np.zeros(y.size)
        c[P], c[N] = act.sum(axis=1), act.sum(axis=0)
        return lam + (X * X).T @ c

    return SquaredHingeReference(fun, grad, hessp, row_diagonal)


def squared_hinge_reference(X: np.ndarray, y: np.ndarray, lam: float, weight: np.ndarray | None = None) -> SquaredHingeReference:
    """The squared pairwise hinge objective on dense ``X`` (float64), every positive-negative pair spelt out."""
    return _pairwise_reference(X, y, lam, weight, lambda m: np.maximum(0.0, m) ** 2, lambda m: 2.0 * np.maximum(0.0, m),
                               lambda m: 2.0 * (m > 0))


def huber_hinge_reference(X: np.ndarray, y: np.ndarray, lam: float, t: float, weight: np.ndarray | None = None) -> SquaredHingeReference:
    """auc's Huber surrogate (auc-smooth's risk) on dense ``X``, every pair spelt out: with the margin ``m = 1 - s_i + s_j``,
    a pair costs 0 for ``m <= 0``, ``m^2 / (2 t)`` for ``0 < m < t`` and ``m - t/2`` beyond; ``lam/2 ||w||^2`` added."""
    return _pairwise_reference(X, y, lam, weight, lambda m: np.where(m <= 0, 0.0, np.where(m < t, m * m / (2.0 * t), m - 0.5 * t)),
                               lambda m: np.clip(m / t, 0.0, 1.0), lambda m: ((m > 0) & (m < t)) / t)


def huber_derivative(u: np.ndarray, t: float) -> np.ndarray:
    """Derivative of :func:`dpipe.reduce._rates.huber`: ``clip(u / t, 0, 1)`` (the references' own)."""
    return np.clip(u / t, 0.0, 1.0)


def merge_sketches(sketches: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One :func:`dpipe.reduce._ranges.sketch` of several: per class at most ``size + 1`` keys, the smallest and the largest kept, the counts adding up.

    A kept key stands for the rows of the keys up to the next kept one.
    """
    out = []
    for k, c in ((0, 1), (2, 3)):
        keys = np.concatenate([s[k] for s in sketches]) if sketches else np.zeros(0)
        counts = np.concatenate([s[c] for s in sketches]) if sketches else np.zeros(0)
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        if keys.size > size + 1:
            before = np.concatenate([[0.0], np.cumsum(counts)])  # rows before each key
            at = np.searchsorted(before[:-1], before[-1] * np.arange(size) / size, side="right") - 1
            at = np.unique(np.append(np.maximum(at, 0), keys.size - 1))
            keys, counts = keys[at], np.diff(np.append(before[at], before[-1]))
        out += [keys, counts]
    return out[0], out[1], out[2], out[3]
