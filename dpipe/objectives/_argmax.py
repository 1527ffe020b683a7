"""Loss-augmented argmax oracles of the multivariate SVM (SVM-perf, Joachims 2005).

The 1-slack cutting-plane solver needs, at the current ``w``, the most violated
constraint ``ybar = argmax_{y'} [Delta(y, y') + w.(Psi(x, y') - Psi(x, y))]`` over the
admissible labelings ``y'``. The maximum depends on the data only through the scores
``s = X w``, which the driver holds per class, sorted increasing: ``sp`` (the ``n+``
positives) and ``sn`` (the ``n-`` negatives); ``n = n+ + n-``, ``m = n+ n-``.

Every oracle returns a :class:`MostViolated` record:

``loss``
    ``Delta(y, ybar)`` as a fraction in ``[0, 1]``.
``coef_pos``, ``coef_neg``
    ``Psi(x, ybar) - Psi(x, y) = sum_i coef_i x_i`` with the coefficients in the
    order of ``sp`` and ``sn`` (the caller scatters them back to rows). This is the
    subgradient of ``max_{y'} [Delta + w.(Psi(x, y') - Psi(x, y))]`` in ``w``, i.e. the
    linear term of the cutting plane ``xi >= loss + w.(sum_i coef_i x_i)``.
``value``
    The maximum itself, ``loss + sum_i coef_i s_i``, computed from the scores (sums
    in a different order from that dot product, so the two agree to rounding).

Conventions (normalisations)
----------------------------
Contingency-table losses (error rate, F1, PRBEP, Prec@k, Rec@k). The paper's joint
feature map is ``Psi(x, y') = sum_i y'_i x_i`` with ``y' in {-1, +1}^n``; dpipe uses it
scaled by ``1 / (2n)``::

    Psi(x, y') = (1 / (2n)) sum_i y'_i x_i,   coef_i = (ybar_i - y_i) / (2n),

so ``coef = -1/n`` on positives that ``ybar`` labels negative (false negatives),
``+1/n`` on negatives that ``ybar`` labels positive (false positives), ``0`` elsewhere.
With this scale the error-rate oracle's ``value`` is the mean hinge
``(1/n) sum_i max(0, 1 - y_i s_i)``: the paper's Theorem 3 (``Err = 2 (b + c)``, unscaled
``Psi``) divided by ``2n``, and SVM-perf's documented equivalence with SVM-light
(``C_light = C_perf * 100 / n`` for the error-rate loss). The same scale is used for
every contingency-table loss. (The smoothed PRBEP objective of ``_rank_kernels``
follows Zhang et al., whose ``c_i`` carry ``2 s_i / n``: the same risk with ``w``
doubled.) A different scale ``alpha`` of ``Psi`` is equivalent to training ``alpha w``
with the regulariser divided by ``alpha^2``: it moves ``C``, not the set of solutions.

ROCArea. Each positive/negative pair ``(i, j)`` gets ``ybar_ij in {-1, +1}``; dpipe
writes ``z_ij = (1 - ybar_ij) / 2 in {0, 1}`` ("pair ordered wrongly") and uses

    Delta = (1/m) sum_ij z_ij,    Psi(x, ybar) - Psi(x, y) = -(1/m) sum_ij z_ij (x_i - x_j),

i.e. the paper's pairwise ``Psi`` scaled by ``1 / (2m)``. The pairs decouple, so the
maximum is the mean pairwise hinge ``(1/m) sum_ij max(0, 1 - (s_i - s_j))`` -- the
SVM-perf ROCArea objective of DESIGN.md -- and ``coef`` is ``-(#violated pairs of i) / m``
on a positive, ``+(#violated pairs of j) / m`` on a negative. (The paper's Algorithm 3
shifts the scores by ``-+1/4`` because its unscaled ``Psi`` puts a factor 2 on ``w``.)

Percent. SVM-perf reports every loss in percent (``100 Delta``) and its ``C`` multiplies
the slack in those units, so its objective ``(1/2)||w||^2 + C xi_perf`` is
``(1/2)||w||^2 + 100 C value`` here: ``lambda = 1 / (100 C)`` in
``lambda/2 ||w||^2 + value``, and its epsilon (in percent) is ``100 x`` the epsilon on
``value``. The oracles never multiply by 100.

Tie rules. Where two labelings give the same value, an example or pair is flipped only
when that strictly increases the value (a ROCArea pair with ``s_j > s_i - 1``, an
error-rate positive with ``s < 1`` or negative with ``s > -1``), and the scans over
contingency tables keep the smallest count that attains the maximum. Among tied scores
the flipped examples are the first (positives) or last (negatives) in the given order.

Losses and admissible labelings (``a`` = TP, ``b`` = FP, ``c`` = FN, ``d`` = TN of
``ybar``):

error rate   ``(b + c) / n``, all labelings; decomposes per example.
F1           ``1 - 2a / (2a + b + c)``, all labelings. With ``n+ >= 1`` the
             denominator is ``>= n+ > 0``; ``a = 0`` gives F1 = 0 (loss 1), including
             the all-negative labeling whose precision is 0/0 -- as SVM-perf and as
             :func:`dpipe.metrics.f1_score` (zero division gives 0). ``n+ = 0`` is
             rejected.
PRBEP        ``1 - a / n+`` over labelings with exactly ``n+`` predicted positives
             (``a + b = a + c``, precision = recall), i.e. ``#FP = #FN = k`` and the
             loss is ``k / n+``.
Prec@k       ``1 - a / k`` over labelings with exactly ``k`` predicted positives,
             ``1 <= k <= n``.
Rec@k        ``1 - a / n+`` over labelings with exactly ``k`` predicted positives,
             ``1 <= k <= n``. SVM-perf's default ``k`` is ``n+ / 2`` for Prec@k and
             ``2 n+`` for Rec@k (the paper's Rec@2p); the oracles take ``k`` as given.
             The restricted maximum can be negative when ``k != n+``; the solver's
             slack is ``max(0, value)``.

Algorithms. For fixed ``(a, b)`` the best labeling flips the ``c = n+ - a``
lowest-scoring positives and the ``b`` highest-scoring negatives, so
``H(a, b) = Delta(a, b) + (T(b) - B(c)) / n`` with ``T(b)`` the sum of the ``b`` largest
negative scores (concave in ``b``) and ``B(c)`` the sum of the ``c`` smallest positive
scores (convex in ``c``). Prec@k, Rec@k and PRBEP fix ``a + b`` and are concave along
that line: a binary search on the (exactly non-increasing, see below) increments finds
the best count. F1 is concave in ``b`` for each ``a`` (``Delta = 1 - 2a / (b + n+ + a)``
is concave increasing in ``b``): one binary search per ``a``, ``O(n+ log n-)``. The
increments are computed in closed form from monotone pieces, and correctly rounded
arithmetic is monotone, so the computed increments are non-increasing too and the
binary searches are exact for them. ROCArea is Algorithm 3 without its sort (the
inputs are sorted): one merge sweep, ``O(n)``.

Each kernel has a plain NumPy reference in :mod:`dpipe.testing`: the pairwise
``O(m)`` form for ROCArea, the per-example form for the error rate, and Algorithm 2
over all ``O(n+ n-)`` contingency tables
(:func:`dpipe.testing.contingency_argmax_reference`) for the others. Data moved: the two
sorted score arrays in, two coefficient arrays of the same sizes out (8 bytes per row
each way).

Sample weights
--------------
Every oracle takes optional per-row weights ``vp``, ``vn`` (finite, ``>= 0``, aligned
with ``sp`` and ``sn`` in their sorted order; a missing one is all ones). A row of
weight ``v`` counts as ``v`` repeated rows: for integer weights the result is the
unweighted oracle's on the ``np.repeat``-expanded data, with a row's coefficient the
SUM of its copies' coefficients (``coef`` is in weighted units: a flipped row of
weight ``v`` gets ``-+v / W``) and the same ``loss`` and ``value``. The counts become
weights: ``n -> W = Wp + Wn``, ``n+ -> Wp = sum vp``, ``n- -> Wn = sum vn``,
``m -> Wp Wn``, and TP/FP/FN/TN are weights of rows. With ``vp = vn = None`` the
unweighted kernels run unchanged.

* ROCArea and error rate decompose over pairs / rows: exact for any real weights
  (a pair ``(i, j)`` counts ``vp_i vn_j``).
* PRBEP, Prec@k, Rec@k: ``k`` (``Wp`` for PRBEP) is the total weight of the rows
  predicted positive, any real ``0 < k <= W``. The loss is linear in the weighted
  counts under a linear constraint, so the maximum is taken over fractional
  labelings (a row may be flipped in part): the greedy scan flips a prefix of the
  positives and a suffix of the negatives with at most one split row per class. The
  value is concave piecewise linear in the FP weight with breakpoints at the rows'
  cumulative weights, so for integer weights and integer ``k`` it is attained at an
  integer count: the expansion's maximum. One merge scan, ``O(n)``.
* F1 is not linear in the counts and has no canonical real-weight extension (its
  fractional relaxation can exceed the expansion's maximum for integer weights), so
  it takes integer-valued weights only (``ParameterError`` otherwise, and
  ``W <= 2**53``). For a fixed FP count ``b`` the value is strictly convex in the TP
  count ``a`` while ``a`` stays inside one positive row (the loss ``-2a/(a + b + Wp)``
  is convex, the score sum linear), so only the ``n+ + 1`` row boundaries need a
  visit; for each, the best integer ``b`` is found by a bisection over the negative
  rows and then over the copies inside one row: ``O(n+ (log n- + log max vn))``,
  never ``O(W)``.

Zero-weight rows are skipped by the scans and get coefficient 0.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from .._validation import check_int
from ..exceptions import ParameterError

__all__ = [
    "MostViolated",
    "rocarea_argmax",
    "error_rate_argmax",
    "prbep_argmax",
    "prec_at_k_argmax",
    "rec_at_k_argmax",
    "f1_argmax",
]


class MostViolated(NamedTuple):
    """The most violated constraint at the current scores.

    Attributes
    ----------
    loss : float
        ``Delta(y, ybar)``, a fraction in ``[0, 1]`` (SVM-perf prints ``100 * loss``).
    value : float
        ``max_{y'} [Delta(y, y') + w.(Psi(x, y') - Psi(x, y))]``; equals
        ``loss + coef_pos @ sp + coef_neg @ sn`` up to rounding.
    coef_pos : ndarray of shape (n+,)
        Coefficients of ``Psi(x, ybar) - Psi(x, y)`` on the positives, in the order of
        ``sp`` (all ``<= 0``).
    coef_neg : ndarray of shape (n-,)
        The same on the negatives, in the order of ``sn`` (all ``>= 0``).
    """

    loss: float
    value: float
    coef_pos: np.ndarray
    coef_neg: np.ndarray


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def _sorted_finite(x):
    n = x.shape[0]
    if n == 0:
        return True
    if not (np.isfinite(x[0]) and np.isfinite(x[n - 1])):
        return False
    for i in range(n - 1):
        if not (x[i] <= x[i + 1]):  # also catches NaN
            return False
    return True


def _scores(x: np.ndarray, name: str, owner: str) -> np.ndarray:
    arr = np.ascontiguousarray(x, dtype=np.float64)
    if arr.ndim != 1 or not _sorted_finite(arr):
        raise ParameterError(
            f"The {name!r} parameter of {owner} must be a 1-d array of finite scores sorted in increasing order. "
            f"Got an array of shape {arr.shape} that is not."
        )
    return arr


def _check_classes(sp: np.ndarray, sn: np.ndarray, owner: str, need_pos: bool, need_neg: bool) -> None:
    if (need_pos and sp.size == 0) or (need_neg and sn.size == 0) or sp.size + sn.size == 0:
        need = "both classes" if need_pos and need_neg else ("a positive" if need_pos else "an example")
        raise ParameterError(f"{owner} needs {need}; got {sp.size} positive and {sn.size} negative scores")


def _weights(v, s: np.ndarray, name: str, sname: str, owner: str) -> np.ndarray:
    if v is None:
        return np.ones(s.shape[0])
    try:
        arr = np.ascontiguousarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"The {name!r} parameter of {owner} must be a 1-d array of sample weights. Got {type(v).__name__}.") from None
    if arr.ndim != 1 or arr.shape[0] != s.shape[0]:
        raise ParameterError(
            f"The {name!r} parameter of {owner} must hold one weight per score of {sname!r} (in its sorted order): "
            f"got weights of shape {arr.shape} for {s.shape[0]} scores."
        )
    if not (np.all(np.isfinite(arr)) and np.all(arr >= 0.0)):
        raise ParameterError(f"The {name!r} parameter of {owner} must hold finite non-negative sample weights.")
    return arr


def _sample_weights(sp, sn, vp, vn, owner: str, need_pos: bool, need_neg: bool) -> tuple[np.ndarray, np.ndarray]:
    wp, wn = _weights(vp, sp, "vp", "sp", owner), _weights(vn, sn, "vn", "sn", owner)
    tp, tn = float(wp.sum()), float(wn.sum())
    if (need_pos and not tp > 0) or (need_neg and not tn > 0) or not tp + tn > 0:
        need = "both classes" if need_pos and need_neg else ("a positive" if need_pos else "an example")
        raise ParameterError(f"{owner} needs {need} of positive weight; got total weight {tp:g} positive and {tn:g} negative")
    return wp, wn


def _integer_weights(vp: np.ndarray, vn: np.ndarray, owner: str) -> None:
    for name, v in (("vp", vp), ("vn", vn)):
        bad = np.flatnonzero(v != np.floor(v))
        if bad.size:
            i = int(bad[0])
            raise ParameterError(
                f"{owner}: the f1 loss takes integer sample weights (a weighted labeling counts repeated rows); "
                f"got {float(v[i])!r} in {name!r} at index {i}."
            )
    if float(vp.sum()) + float(vn.sum()) > 2.0**53:
        raise ParameterError(f"{owner}: the total sample weight must be at most 2**53 (exact integer counts).")


def _weighted_k(k, total: float, owner: str) -> float:
    msg = (
        f"The 'k' parameter of {owner} must be a number in the range (0, {total!r}] (the total weight of the "
        f"predicted positives, with sample weights). Got {k!r} instead."
    )
    if isinstance(k, bool):
        raise ParameterError(msg)
    try:
        kf = float(k)
    except (TypeError, ValueError):
        raise ParameterError(msg) from None
    if not (kf > 0.0 and kf <= total * (1.0 + 1e-9)):  # slack: W summed in another order
        raise ParameterError(msg)
    return kf


# ---------------------------------------------------------------------------
# ROCArea
# ---------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def _rocarea_argmax(sp, sn):
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    m = float(n_pos) * float(n_neg)
    suf = np.zeros(n_neg + 1)  # suf[j] = sum sn[j:]
    for j in range(n_neg - 1, -1, -1):
        suf[j] = suf[j + 1] + sn[j]
    coef_pos = np.empty(n_pos)
    coef_neg = np.empty(n_neg)
    # pair (i, j) is violated iff sn[j] > sp[i] - 1: a suffix of sn for each positive,
    # a prefix of sp for each negative; both boundaries move monotonically
    lo = 0
    swapped = 0
    total = 0.0
    for i in range(n_pos):
        t = sp[i] - 1.0
        while lo < n_neg and not (sn[lo] > t):
            lo += 1
        cnt = n_neg - lo
        swapped += cnt
        coef_pos[i] = -cnt / m
        total += cnt * (1.0 - sp[i]) + suf[lo]
    p = 0
    for j in range(n_neg):
        b = sn[j]
        while p < n_pos and sp[p] - 1.0 < b:
            p += 1
        coef_neg[j] = p / m
    return swapped / m, total / m, coef_pos, coef_neg


@numba.njit(nogil=True, cache=True)
def _rocarea_argmax_w(sp, sn, vp, vn):
    # as _rocarea_argmax with pair (i, j) counted vp[i] vn[j] times
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    suf_w = np.zeros(n_neg + 1)  # suf_w[j] = sum vn[j:]
    suf_s = np.zeros(n_neg + 1)  # suf_s[j] = sum (vn sn)[j:]
    for j in range(n_neg - 1, -1, -1):
        suf_w[j] = suf_w[j + 1] + vn[j]
        suf_s[j] = suf_s[j + 1] + vn[j] * sn[j]
    w_pos = 0.0
    for i in range(n_pos):
        w_pos += vp[i]
    m = w_pos * suf_w[0]
    coef_pos = np.empty(n_pos)
    coef_neg = np.empty(n_neg)
    lo = 0
    swapped = 0.0
    total = 0.0
    for i in range(n_pos):
        t = sp[i] - 1.0
        while lo < n_neg and not (sn[lo] > t):
            lo += 1
        cnt = suf_w[lo]
        swapped += vp[i] * cnt
        coef_pos[i] = -(vp[i] * cnt) / m
        total += vp[i] * (cnt * (1.0 - sp[i]) + suf_s[lo])
    p = 0
    pw = 0.0
    for j in range(n_neg):
        b = sn[j]
        while p < n_pos and sp[p] - 1.0 < b:
            pw += vp[p]
            p += 1
        coef_neg[j] = vn[j] * pw / m
    return min(1.0, swapped / m), total / m, coef_pos, coef_neg


@numba.njit(nogil=True, cache=True)
def _rocarea_part(sp, sn, vp, vn, p0, n1, above_w, above_s, below_w):
    # _rocarea_argmax_w's sweeps, not normalised, for the positives from p0 on and the negatives before n1,
    # with negatives above sn (weight above_w, weighted score sum above_s) and positives below sp (below_w)
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    suf_w = np.zeros(n_neg + 1)
    suf_s = np.zeros(n_neg + 1)
    for j in range(n_neg - 1, -1, -1):
        suf_w[j] = suf_w[j + 1] + vn[j]
        suf_s[j] = suf_s[j + 1] + vn[j] * sn[j]
    coef_pos = np.empty(n_pos - p0)
    coef_neg = np.empty(n1)
    lo = 0
    swapped = 0.0
    total = 0.0
    for i in range(p0, n_pos):
        t = sp[i] - 1.0
        while lo < n_neg and not (sn[lo] > t):
            lo += 1
        cnt = suf_w[lo] + above_w
        swapped += vp[i] * cnt
        coef_pos[i - p0] = -(vp[i] * cnt)
        total += vp[i] * (cnt * (1.0 - sp[i]) + (suf_s[lo] + above_s))
    p = 0
    pw = below_w
    for j in range(n1):
        b = sn[j]
        while p < n_pos and sp[p] - 1.0 < b:
            pw += vp[p]
            p += 1
        coef_neg[j] = vn[j] * pw
    return swapped, total, coef_pos, coef_neg


def rocarea_argmax_part(r) -> tuple[float, float, np.ndarray, np.ndarray]:
    """The ROCArea oracle on one score range (:class:`dpipe._runs.RangeInput`, halos of width 0), not divided by ``m``.

    Returns the swapped-pair weight and the risk's total over the range's own positives
    and the plane coefficients of its own rows, each ``m = W+ W-`` times what
    :func:`rocarea_argmax` gives for them on all the scores (pairs ``s_j > s_i - 1``,
    as there).
    """
    vp = np.ones(r.sp.size) if r.vp is None else np.ascontiguousarray(r.vp, dtype=np.float64)
    vn = np.ones(r.sn.size) if r.vn is None else np.ascontiguousarray(r.vn, dtype=np.float64)
    return _rocarea_part(np.ascontiguousarray(r.sp, dtype=np.float64), np.ascontiguousarray(r.sn, dtype=np.float64), vp, vn,
                         int(r.own_pos_start), int(r.own_neg_stop), float(r.above_neg_weight), float(r.above_neg_sum), float(r.below_pos_weight))


def rocarea_argmax(sp: np.ndarray, sn: np.ndarray, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """Most violated constraint of the ROCArea loss (Algorithm 3), one O(n) sweep.

    The pairs decouple: pair ``(i, j)`` is labelled wrongly (``z_ij = 1``) iff that
    adds ``(1 - (s_i - s_j)) / m > 0``, computed as ``s_j > s_i - 1``. For sorted inputs
    the violated negatives of a positive are a suffix of ``sn`` and the violated
    positives of a negative a prefix of ``sp``, found by two monotone pointers (the
    merge that Algorithm 3 does after its sort).

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing, finite
        Scores of the positives and of the negatives (both non-empty).
    vp, vn : ndarray, float64, optional
        Sample weights aligned with ``sp`` and ``sn`` (``>= 0``, each class of positive
        total). Pair ``(i, j)`` counts ``vp_i vn_j``; ``m = Wp Wn``. Exact for real
        weights.

    Returns
    -------
    MostViolated
        ``loss`` is the fraction of pairs with ``s_i - s_j < 1``; ``value`` the mean
        pairwise hinge ``(1/m) sum_ij max(0, 1 - s_i + s_j)`` (sums of suffix sums);
        ``coef_pos[i] = -#{j : s_j > s_i - 1} / m``,
        ``coef_neg[j] = #{i : s_i - 1 < s_j} / m`` (weighted: ``-vp_i sum{vn_j : ...} / m``
        and ``vn_j sum{vp_i : ...} / m``).
    """
    owner = "rocarea_argmax"
    sp, sn = _scores(sp, "sp", owner), _scores(sn, "sn", owner)
    _check_classes(sp, sn, owner, True, True)
    if vp is None and vn is None:
        loss, value, cp, cn = _rocarea_argmax(sp, sn)
    else:
        vp, vn = _sample_weights(sp, sn, vp, vn, owner, True, True)
        loss, value, cp, cn = _rocarea_argmax_w(sp, sn, vp, vn)
    return MostViolated(float(loss), float(value), cp, cn)


# ---------------------------------------------------------------------------
# contingency tables: shared pieces
# ---------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def _table_result(sp, sn, b, c, loss):
    # flip the c lowest positives and the b highest negatives; value from the scores
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    n = float(n_pos + n_neg)
    coef_pos = np.zeros(n_pos)
    coef_neg = np.zeros(n_neg)
    sum_fn = 0.0
    for i in range(c):
        coef_pos[i] = -1.0 / n
        sum_fn += sp[i]
    sum_fp = 0.0
    for j in range(n_neg - 1, n_neg - 1 - b, -1):
        coef_neg[j] = 1.0 / n
        sum_fp += sn[j]
    return loss, loss + (sum_fp - sum_fn) / n, coef_pos, coef_neg


# ---------------------------------------------------------------------------
# error rate
# ---------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def _error_rate_argmax(sp, sn):
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    c = 0
    while c < n_pos and sp[c] < 1.0:  # 1 - s > 0
        c += 1
    b = 0
    while b < n_neg and sn[n_neg - 1 - b] > -1.0:  # 1 + s > 0
        b += 1
    n = float(n_pos + n_neg)
    coef_pos = np.zeros(n_pos)
    coef_neg = np.zeros(n_neg)
    total = 0.0
    for i in range(c):
        coef_pos[i] = -1.0 / n
        total += 1.0 - sp[i]
    for j in range(n_neg - b, n_neg):
        coef_neg[j] = 1.0 / n
        total += 1.0 + sn[j]
    return (b + c) / n, total / n, coef_pos, coef_neg


@numba.njit(nogil=True, cache=True)
def _error_rate_argmax_w(sp, sn, vp, vn):
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    c = 0
    while c < n_pos and sp[c] < 1.0:
        c += 1
    b = 0
    while b < n_neg and sn[n_neg - 1 - b] > -1.0:
        b += 1
    w = 0.0
    for i in range(n_pos):
        w += vp[i]
    for j in range(n_neg):
        w += vn[j]
    coef_pos = np.zeros(n_pos)
    coef_neg = np.zeros(n_neg)
    flipped = 0.0
    total = 0.0
    for i in range(c):
        coef_pos[i] = -vp[i] / w
        flipped += vp[i]
        total += vp[i] * (1.0 - sp[i])
    for j in range(n_neg - b, n_neg):
        coef_neg[j] = vn[j] / w
        flipped += vn[j]
        total += vn[j] * (1.0 + sn[j])
    return min(1.0, flipped / w), total / w, coef_pos, coef_neg


def error_rate_argmax(sp: np.ndarray, sn: np.ndarray, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """Most violated constraint of the error-rate loss ``(FP + FN) / n``.

    The loss and ``Psi`` decompose over examples: a positive is flipped iff
    ``1 - s_i > 0``, a negative iff ``1 + s_j > 0``, and ``value`` is the mean hinge
    ``(1/n) sum_i max(0, 1 - y_i s_i)`` (the classical SVM objective term).

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing, finite
        Scores of the positives and of the negatives (``n+ + n- >= 1``).
    vp, vn : ndarray, float64, optional
        Sample weights aligned with ``sp`` and ``sn`` (``>= 0``, ``W > 0``): the
        weighted mean hinge, exact for real weights.

    Returns
    -------
    MostViolated
        ``coef`` is ``-1/n`` on positives with ``s < 1``, ``+1/n`` on negatives with
        ``s > -1``, ``0`` elsewhere (weighted: ``-+v_i / W``).
    """
    owner = "error_rate_argmax"
    sp, sn = _scores(sp, "sp", owner), _scores(sn, "sn", owner)
    _check_classes(sp, sn, owner, False, False)
    if vp is None and vn is None:
        loss, value, cp, cn = _error_rate_argmax(sp, sn)
    else:
        vp, vn = _sample_weights(sp, sn, vp, vn, owner, False, False)
        loss, value, cp, cn = _error_rate_argmax_w(sp, sn, vp, vn)
    return MostViolated(float(loss), float(value), cp, cn)


# ---------------------------------------------------------------------------
# fixed number of predicted positives: Prec@k, Rec@k, PRBEP
# ---------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def _fixed_count_argmax(sp, sn, k, recall):
    # exactly k predicted positives; b = FP, a = k - b, c = FN = n+ - k + b.
    # Delta = b / k (precision) or c / n+ (recall); both step by a constant in b.
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    n = float(n_pos + n_neg)
    step = 1.0 / n_pos if recall else 1.0 / k
    c0 = n_pos - k
    lo = max(0, k - n_pos)
    hi = min(k, n_neg)
    # H(b + 1) - H(b) = step + (sn[n- - 1 - b] - sp[c0 + b]) / n is non-increasing in
    # b: count the positive increments by bisection
    while lo < hi:
        mid = (lo + hi) >> 1
        if step + (sn[n_neg - 1 - mid] - sp[c0 + mid]) / n > 0.0:
            lo = mid + 1
        else:
            hi = mid
    b = lo
    c = c0 + b
    loss = c / n_pos if recall else b / k
    return _table_result(sp, sn, b, c, loss)


@numba.njit(nogil=True, cache=True)
def _table_result_w(sp, sn, vp, vn, b, c, w, loss):
    # flip weight c of the lowest positives and weight b of the highest negatives (at
    # most one row of each class in part); value from the scores
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    coef_pos = np.zeros(n_pos)
    coef_neg = np.zeros(n_neg)
    sum_fn = 0.0
    cum = 0.0
    for i in range(n_pos):
        if not (cum < c):
            break
        nxt = cum + vp[i]
        f = vp[i] if nxt <= c else c - cum
        if f > 0.0:
            coef_pos[i] = -f / w
            sum_fn += f * sp[i]
        cum = nxt
    sum_fp = 0.0
    cum = 0.0
    for j in range(n_neg - 1, -1, -1):
        if not (cum < b):
            break
        nxt = cum + vn[j]
        f = vn[j] if nxt <= b else b - cum
        if f > 0.0:
            coef_neg[j] = f / w
            sum_fp += f * sn[j]
        cum = nxt
    return loss, loss + (sum_fp - sum_fn) / w, coef_pos, coef_neg


@numba.njit(nogil=True, cache=True)
def _fixed_count_argmax_w(sp, sn, vp, vn, k, recall):
    # weights >= 0 (zero-weight rows are stepped over). Predicted-positive weight k; b = FP weight, c = FN weight =
    # Wp - k + b. H(b) is concave piecewise linear: slope step + (sn_t - sp_i) / W on
    # the stretch where the t-th highest negative and the i-th lowest positive are the
    # rows being flipped, breakpoints at their cumulative weights. Walk the merged
    # breakpoints while the slope is positive (the smallest maximizer).
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    pc = np.zeros(n_pos + 1)  # pc[i] = weight of the i lowest positives
    for i in range(n_pos):
        pc[i + 1] = pc[i] + vp[i]
    nc = np.zeros(n_neg + 1)  # nc[t] = weight of the t highest negatives
    for t in range(n_neg):
        nc[t + 1] = nc[t] + vn[n_neg - 1 - t]
    w_pos, w_neg = pc[n_pos], nc[n_neg]
    w = w_pos + w_neg
    if k < 0.0:  # PRBEP: k = Wp
        k = w_pos
    step = 1.0 / w_pos if recall else 1.0 / k
    c0 = w_pos - k
    hi = min(k, w_neg)
    b = min(max(0.0, k - w_pos), hi)
    t = 0
    while t < n_neg and nc[t + 1] <= b:
        t += 1
    i = 0
    while i < n_pos and pc[i + 1] - c0 <= b:
        i += 1
    while b < hi and t < n_neg and i < n_pos:
        if not (step + (sn[n_neg - 1 - t] - sp[i]) / w > 0.0):
            break
        b = min(nc[t + 1], pc[i + 1] - c0, hi)
        while t < n_neg and nc[t + 1] <= b:
            t += 1
        while i < n_pos and pc[i + 1] - c0 <= b:
            i += 1
    c = max(0.0, c0 + b)
    loss = c / w_pos if recall else b / k
    return _table_result_w(sp, sn, vp, vn, b, c, w, min(1.0, max(0.0, loss)))


def _fixed_count(sp, sn, k, recall: bool, owner: str, vp=None, vn=None) -> MostViolated:
    sp, sn = _scores(sp, "sp", owner), _scores(sn, "sn", owner)
    _check_classes(sp, sn, owner, recall, False)
    if vp is None and vn is None:
        k = check_int(k, "k", owner, low=1, high=sp.size + sn.size)
        loss, value, cp, cn = _fixed_count_argmax(sp, sn, k, recall)
        return MostViolated(float(loss), float(value), cp, cn)
    vp, vn = _sample_weights(sp, sn, vp, vn, owner, recall, False)
    k = _weighted_k(k, float(vp.sum() + vn.sum()), owner)
    loss, value, cp, cn = _fixed_count_argmax_w(sp, sn, vp, vn, k, recall)
    return MostViolated(float(loss), float(value), cp, cn)


def prbep_argmax(sp: np.ndarray, sn: np.ndarray, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """Most violated constraint of the PRBEP loss: exactly ``n+`` predicted positives.

    Precision equals recall iff ``#FP = #FN = k``; the loss is ``k / n+`` and
    ``H(k) = k / n+ + (sum of the k largest sn - sum of the k smallest sp) / n`` is
    concave in ``k`` (one scan of SVM-perf's ``n+ x n-`` loop suffices; here a
    bisection on its increments, then an O(k) sum).

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing, finite
        Scores of the positives (non-empty) and of the negatives.
    vp, vn : ndarray, float64, optional
        Sample weights aligned with ``sp`` and ``sn`` (``>= 0``, ``Wp > 0``): exactly
        ``Wp`` predicted-positive weight, FP weight = FN weight = ``k``, loss ``k / Wp``,
        maximized over fractional labelings (see the module docstring).

    Returns
    -------
    MostViolated
        ``coef = -1/n`` on the ``k`` lowest positives, ``+1/n`` on the ``k`` highest
        negatives (``k`` the smallest maximizer); weighted: ``-+(flipped weight) / W``.
    """
    owner = "prbep_argmax"
    sp, sn = _scores(sp, "sp", owner), _scores(sn, "sn", owner)
    _check_classes(sp, sn, owner, True, False)
    if vp is None and vn is None:
        loss, value, cp, cn = _fixed_count_argmax(sp, sn, sp.size, False)
        return MostViolated(float(loss), float(value), cp, cn)
    vp, vn = _sample_weights(sp, sn, vp, vn, owner, True, False)
    loss, value, cp, cn = _fixed_count_argmax_w(sp, sn, vp, vn, -1.0, False)  # k = Wp
    return MostViolated(float(loss), float(value), cp, cn)


def prec_at_k_argmax(sp: np.ndarray, sn: np.ndarray, k: float, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """Most violated constraint of the Prec@k loss ``1 - TP / k``, exactly ``k`` predicted positives.

    With ``b`` false positives, ``TP = k - b`` and ``FN = n+ - k + b``; the value
    ``b / k + (sum of the b largest sn - sum of the FN smallest sp) / n`` is concave in
    ``b`` on ``[max(0, k - n+), min(k, n-)]``: bisection on its increments.

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing, finite
        Scores of the positives and of the negatives.
    k : int (float with sample weights)
        Number of predicted positives, ``1 <= k <= n``; with sample weights the total
        weight of the predicted positives, ``0 < k <= W``.
    vp, vn : ndarray, float64, optional
        Sample weights aligned with ``sp`` and ``sn`` (``>= 0``, ``W > 0``): loss
        ``FP weight / k``, maximized over fractional labelings (see the module
        docstring).

    Returns
    -------
    MostViolated
        ``coef = -1/n`` on the ``FN`` lowest positives, ``+1/n`` on the ``b`` highest
        negatives (``b`` the smallest maximizer); weighted: ``-+(flipped weight) / W``.
    """
    return _fixed_count(sp, sn, k, False, "prec_at_k_argmax", vp, vn)


def rec_at_k_argmax(sp: np.ndarray, sn: np.ndarray, k: float, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """Most violated constraint of the Rec@k loss ``1 - TP / n+``, exactly ``k`` predicted positives.

    As :func:`prec_at_k_argmax` with the loss ``FN / n+`` (concave in ``b`` likewise).

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing, finite
        Scores of the positives (non-empty) and of the negatives.
    k : int (float with sample weights)
        Number of predicted positives, ``1 <= k <= n`` (SVM-perf's Rec@2p: ``2 n+``);
        with sample weights the total weight of the predicted positives, ``0 < k <= W``.
    vp, vn : ndarray, float64, optional
        Sample weights aligned with ``sp`` and ``sn`` (``>= 0``, ``Wp > 0``): loss
        ``FN weight / Wp``, maximized over fractional labelings.

    Returns
    -------
    MostViolated
        As for :func:`prec_at_k_argmax`.
    """
    return _fixed_count(sp, sn, k, True, "rec_at_k_argmax", vp, vn)


# ---------------------------------------------------------------------------
# F1
# ---------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def _f1_argmax(sp, sn):
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    n = float(n_pos + n_neg)
    bot = np.zeros(n_pos + 1)  # bot[c] = sum of the c smallest sp
    for i in range(n_pos):
        bot[i + 1] = bot[i] + sp[i]
    top = np.zeros(n_neg + 1)  # top[b] = sum of the b largest sn
    for j in range(n_neg):
        top[j + 1] = top[j] + sn[n_neg - 1 - j]
    best = -np.inf
    best_b = 0
    best_c = n_pos
    best_loss = 1.0
    for a in range(n_pos + 1):
        c = n_pos - a
        base = n_pos + a  # 2a + c; Delta(b) = (b + c) / (b + base)
        two_a = 2.0 * a
        # H(a, b + 1) - H(a, b) = 2a / ((b + base)(b + base + 1)) + sn[n- - 1 - b] / n,
        # non-increasing in b: the first b with a non-positive increment maximizes
        lo = 0
        hi = n_neg
        while lo < hi:
            mid = (lo + hi) >> 1
            q = float(mid + base)
            if two_a / (q * (q + 1.0)) + sn[n_neg - 1 - mid] / n > 0.0:
                lo = mid + 1
            else:
                hi = mid
        b = lo
        loss = (b + c) / float(b + base)
        v = loss + (top[b] - bot[c]) / n
        if v > best:
            best = v
            best_b = b
            best_c = c
            best_loss = loss
    loss, _, coef_pos, coef_neg = _table_result(sp, sn, best_b, best_c, best_loss)
    return loss, best, coef_pos, coef_neg


@numba.njit(nogil=True, cache=True)
def _f1_argmax_w(sp, sn, vp, vn):
    # integer-valued weights >= 0 (rows repeated vp[i], vn[j] times). a = TP, b = FP,
    # c = FN are integer counts of repeated rows. For fixed b, H is strictly convex in a
    # while a stays inside one positive row, so only c = pc[r] (whole rows flipped) is
    # visited. For fixed a the increments in b are those of _f1_argmax on the repeated
    # negatives: bisection over the rows (at their first copy), then over the copies of
    # the last row with a positive increment.
    n_pos, n_neg = sp.shape[0], sn.shape[0]
    pc = np.zeros(n_pos + 1, dtype=np.int64)  # pc[r] = count of the r lowest positive rows
    bot = np.zeros(n_pos + 1)  # bot[r] = their score sum
    for i in range(n_pos):
        pc[i + 1] = pc[i] + np.int64(vp[i])
        bot[i + 1] = bot[i] + vp[i] * sp[i]
    nc = np.zeros(n_neg + 1, dtype=np.int64)  # nc[t] = count of the t highest negative rows
    top = np.zeros(n_neg + 1)  # top[t] = their score sum
    last = np.empty(n_neg + 1, dtype=np.int64)  # last[t] = last row < t of positive weight (-1: none)
    last[0] = -1
    for t in range(n_neg):
        v = vn[n_neg - 1 - t]
        nc[t + 1] = nc[t] + np.int64(v)
        top[t + 1] = top[t] + v * sn[n_neg - 1 - t]
        last[t + 1] = t if v > 0 else last[t]
    w_pos = pc[n_pos]
    n = float(w_pos + nc[n_neg])
    best = -np.inf
    best_b = np.int64(0)  # the type of b below (numba unifies them to int64 either way)
    best_c = w_pos
    best_loss = 1.0
    for r in range(n_pos, -1, -1):  # a increasing
        if r < n_pos and vp[r] == 0:  # the same table as r + 1
            continue
        c = pc[r]
        a = w_pos - c
        base = w_pos + a  # 2a + c
        two_a = 2.0 * a
        # first negative row whose first copy has a non-positive increment (a zero-weight
        # row's test bounds the next row's from above and keeps the tests monotone)
        lo = 0
        hi = n_neg
        while lo < hi:
            mid = (lo + hi) >> 1
            q = float(nc[mid] + base)
            if two_a / (q * (q + 1.0)) + sn[n_neg - 1 - mid] / n > 0.0:
                lo = mid + 1
            else:
                hi = mid
        t = last[lo]
        if t < 0:
            b = np.int64(0)
            top_b = 0.0
        else:
            # the maximizer lies among the copies of row t (top order): b in (nc[t], nc[t + 1]]
            s = sn[n_neg - 1 - t]
            blo = nc[t] + 1
            bhi = nc[t + 1]
            while blo < bhi:
                mid = (blo + bhi) >> 1
                q = float(mid + base)
                if two_a / (q * (q + 1.0)) + s / n > 0.0:
                    blo = mid + 1
                else:
                    bhi = mid
            b = blo
            top_b = top[t] + (b - nc[t]) * s
        loss = (b + c) / float(b + base)
        v = loss + (top_b - bot[r]) / n
        if v > best:
            best = v
            best_b = b
            best_c = c
            best_loss = loss
    loss, _, coef_pos, coef_neg = _table_result_w(sp, sn, vp, vn, float(best_b), float(best_c), n, best_loss)
    return loss, best, coef_pos, coef_neg


def f1_argmax(sp: np.ndarray, sn: np.ndarray, vp: np.ndarray | None = None, vn: np.ndarray | None = None) -> MostViolated:
    """Most violated constraint of the F1 loss ``1 - 2TP / (2TP + FP + FN)``, O(n+ log n-).

    Algorithm 2 visits every contingency table ``(a, b)`` (``a`` = TP, ``b`` = FP). For
    fixed ``a`` the loss ``1 - 2a / (b + n+ + a)`` is concave and non-decreasing in
    ``b`` and the sum of the ``b`` largest negative scores is concave, so
    ``H(a, .)`` is concave: its maximizer is the first ``b`` whose increment is not
    positive, found by bisection. The best of the ``n+ + 1`` row maxima is the answer
    (the smallest ``a``, then the smallest ``b``, among exact ties).

    Parameters
    ----------
    sp, sn : ndarray, float64, sorted increasing, finite
        Scores of the positives (non-empty) and of the negatives.
    vp, vn : ndarray, float64, optional
        Integer-valued sample weights aligned with ``sp`` and ``sn`` (``>= 0``,
        ``Wp > 0``, ``W <= 2**53``): a row of weight ``v`` is ``v`` repeated rows and the
        result is the expansion's, computed in ``O(n+ (log n- + log max vn))``. Any
        non-integer weight raises :class:`~dpipe.exceptions.ParameterError` (F1 is not
        linear in the counts: no fractional labeling extends it canonically).

    Returns
    -------
    MostViolated
        ``coef = -1/n`` on the ``n+ - a`` lowest positives, ``+1/n`` on the ``b``
        highest negatives; weighted: ``-+(flipped copies) / W``.

    Notes
    -----
    ``a = 0`` makes F1 = 0 (loss 1) whatever ``b`` is, also for ``b = 0`` where the
    precision is 0/0 (SVM-perf's and :func:`dpipe.metrics.f1_score`'s convention).
    """
    owner = "f1_argmax"
    sp, sn = _scores(sp, "sp", owner), _scores(sn, "sn", owner)
    _check_classes(sp, sn, owner, True, False)
    if vp is None and vn is None:
        loss, value, cp, cn = _f1_argmax(sp, sn)
        return MostViolated(float(loss), float(value), cp, cn)
    vp, vn = _sample_weights(sp, sn, vp, vn, owner, True, False)
    _integer_weights(vp, vn, owner)
    loss, value, cp, cn = _f1_argmax_w(sp, sn, vp, vn)
    return MostViolated(float(loss), float(value), cp, cn)
