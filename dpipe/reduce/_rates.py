"""The rate-constraint pass over one shard (worker side, pure): the majorized Lagrangian's value and
gradient, and per-cell sums of the rates (Goh et al., Algorithm 1).

Every row falls in one *cell*: its label, its group and, for each deployed model of the
fit, that model's prediction. A rate term of a constraint is a signed coefficient per
cell on the ramp ``sigma(z) = clip(1/2 + z, 0, 1)`` of the row's margin
``z = w.x - b``. At the anchor model ``(w', b')`` of the current majorization step,
``sigma(z)`` is bounded above by the hinge ``max(0, 1/2 + z)`` where ``z' <= 1/2`` and by
the constant 1 elsewhere; ``1 - sigma(z) = sigma(-z)`` by ``max(0, 1/2 - z)`` where
``z' >= -1/2``, else 1. Both bounds touch the ramp at ``z = z'``. For multipliers ``v``
the Lagrangian's per-cell coefficients of the two bounds, ``P`` and ``N``, travel with
the task (a few numbers per cell); the pass returns the smoothed Lagrangian (each
hinge Huberized with width ``t``: below the hinge by at most ``t/2``), its gradient in
``(w, b)``, and per cell the weighted sums of both bounds (exact hinges), of the ramp,
of the indicator ``1[z > 0]`` and of the weights. Nothing O(n) leaves the worker.

**Curvature** (for Newton, :func:`rate_hessian_pass`): the smoothed Lagrangian is piecewise
quadratic in ``z``; its second derivative is ``D_r = v_r (P_c [0 < 1/2 + z < t] + N_c
[0 < 1/2 - z < t]) / t`` (each term where its bound is a hinge), non-zero only on the rows
in a Huber zone (a few percent of them at ``t = 0.05``). The generalized Hessian in
``(w, b)`` is ``[X, -1]^T D [X, -1]``. A pass with ``keep`` leaves those rows and their
``D`` in the fit's memo; a Hessian-vector product then reads only them (``d`` floats each
way per shard, no pass over the other rows).
"""

from __future__ import annotations

import collections
import dataclasses
import threading

import numba
import numpy as np

from .._ramp import ramp
from ._finite import check_scores, check_weights

__all__ = ["CellLayout", "RatePass", "rate_pass", "rate_hessian_pass", "curvature_rows", "row_cells", "cell_weights", "cell_predictions", "sorted_scores_cells", "huber", "ramp"]


@dataclasses.dataclass(frozen=True)
class CellLayout:
    """How a store's rows map to cells: ``label bit + 2 * group + 2 * n_groups * (deployed predictions as bits)``.

    Attributes
    ----------
    n_groups : int
        Values of the store's group column (1 without one).
    baselines : tuple of (ndarray, float)
        ``(coef, intercept)`` of each deployed model whose predictions split the rows.
    memo : (str, str), optional
        ``(fit id, store alias)``: the process that scores a shard keeps its rows' cells
        and its margins at the current anchor for this fit (:func:`rate_pass`); None: no memo.
    """

    n_groups: int = 1
    baselines: tuple[tuple[np.ndarray, float], ...] = ()
    memo: tuple[str, str] | None = dataclasses.field(default=None, compare=False)

    @property
    def n_cells(self) -> int:
        return 2 * self.n_groups * 2 ** len(self.baselines)

    def cell(self, label: int, group: int = 0, predictions: tuple[int, ...] = ()) -> int:
        """The cell of a row with this label (+1 / -1), group code and deployed predictions (+1 / -1 each)."""
        bits = sum((1 << k) for k, p in enumerate(predictions) if p > 0)
        return int(label > 0) + 2 * group + 2 * self.n_groups * bits


def row_cells(shard, layout: CellLayout) -> np.ndarray:
    """The cell of every row of ``shard`` (int64)."""
    cells = (shard.y > 0).astype(np.int64)
    if layout.n_groups > 1:
        cells += 2 * shard.group.astype(np.int64)
    for k, (coef, intercept) in enumerate(layout.baselines):
        cells += (2 * layout.n_groups << k) * (shard.block.matvec(coef) + intercept > 0)
    return cells


def huber(u: np.ndarray, t: float) -> np.ndarray:
    """The hinge ``max(0, u)`` smoothed: ``0`` below 0, ``u^2 / (2t)`` up to ``t``, ``u - t/2`` above."""
    return np.where(u <= 0, 0.0, np.where(u < t, u * u / (2.0 * t), u - 0.5 * t))


@dataclasses.dataclass
class RatePass:
    """What one shard (or, merged, a store) returns.

    Attributes
    ----------
    value : float
        Smoothed majorized Lagrangian ``sum_rows v_x (P U_p + N U_n)``.
    grad : ndarray of shape (d + 1,)
        Its gradient in ``w``, then in ``b``.
    sums : ndarray of shape (7, n_cells)
        Per cell, weighted sums of: the positive-side bound (exact hinge or 1), the
        negative-side bound, both bounds smoothed as in ``value``, the ramp ``sigma(z)``,
        the indicator ``1[z > 0]``, the weight (rows :data:`BOUND_POSITIVE` ... :data:`WEIGHT`).
    """

    value: float
    grad: np.ndarray
    sums: np.ndarray

    def __add__(self, other: RatePass) -> RatePass:
        return RatePass(self.value + other.value, self.grad + other.grad, self.sums + other.sums)


#: rows of :attr:`RatePass.sums`
BOUND_POSITIVE, BOUND_NEGATIVE, SMOOTH_POSITIVE, SMOOTH_NEGATIVE, RAMP, INDICATOR, WEIGHT = range(7)
_N_SUMS = 7


class _RowMemo:
    """What :func:`rate_pass` keeps per shard between the evaluations of one fit: the rows' cells (fixed for the fit;
    with a deployed model, a pass over ``X`` each) and the margins at the anchor (fixed for a majorization step).
    1-2 bytes a row for the cells, 8 for the margins, in the process that holds the shard: within the memory model's
    ``ROW_BYTES`` (24) for the rate objectives; auc-rate also keeps the ranking passes' row order (34 in all). With
    Newton, the curvature rows of the last :data:`_CURVATURES` points (12 bytes per row in a Huber zone)."""

    __slots__ = ("cells", "anchor", "z_anchor", "curvatures")

    def __init__(self) -> None:
        self.cells: np.ndarray | None = None
        self.anchor: bytes | None = None
        self.z_anchor: np.ndarray | None = None
        self.curvatures: list[tuple[bytes, tuple[np.ndarray, np.ndarray]]] = []


#: curvature entries a shard's memo keeps: the Newton iterate's and rejected trial points'
_CURVATURES = 3


#: fit id -> {(store alias, shard number): memo}; the latest _MEMO_FITS fits (a forgotten memo is recomputed, never wrong)
_MEMO: collections.OrderedDict[str, dict[tuple[str, int], _RowMemo]] = collections.OrderedDict()
_MEMO_FITS = 2
_MEMO_LOCK = threading.Lock()  # a worker with several threads runs several shards' tasks at once


def _row_memo(layout: CellLayout, shard) -> _RowMemo | None:
    if layout.memo is None:
        return None
    fit, alias = layout.memo
    with _MEMO_LOCK:
        entries = _MEMO.setdefault(fit, {})
        _MEMO.move_to_end(fit)
        while len(_MEMO) > _MEMO_FITS:
            _MEMO.popitem(last=False)
        return entries.setdefault((alias, int(shard.index)), _RowMemo())


def _cells(shard, layout: CellLayout) -> np.ndarray:
    """:func:`row_cells` in the smallest integer type, kept in the fit's memo (a deployed model's predictions cost a
    pass over ``X``; every pass of the fit needs the same cells)."""
    memo = _row_memo(layout, shard)
    if memo is not None and memo.cells is not None and memo.cells.size == shard.n_rows:
        return memo.cells
    n = layout.n_cells
    cells = row_cells(shard, layout).astype(np.int8 if n <= 127 else np.int16 if n <= 32767 else np.int32)
    if memo is not None:
        memo.cells = cells
    return cells


def _anchor_key(anchor: tuple[np.ndarray, float]) -> bytes:
    return np.asarray(anchor[0], dtype=np.float64).tobytes() + np.float64(anchor[1]).tobytes()


def _point_key(coef: np.ndarray, intercept: float, anchor: tuple[np.ndarray, float], positive: np.ndarray, negative: np.ndarray,
               smoothing: float) -> bytes:
    """What a shard's curvature depends on: the model, the anchor, the multipliers' per-cell coefficients and the width."""
    return b"".join((np.asarray(coef, dtype=np.float64).tobytes(), np.float64(intercept).tobytes(), _anchor_key(anchor),
                     np.asarray(positive, dtype=np.float64).tobytes(), np.asarray(negative, dtype=np.float64).tobytes(),
                     np.float64(smoothing).tobytes()))


def _margins(shard, coef: np.ndarray, intercept: float, anchor: tuple[np.ndarray, float], memo: _RowMemo | None) -> tuple[np.ndarray, np.ndarray]:
    """``z = X coef - intercept`` and the anchor's margins (kept in the memo for the step)."""
    key = _anchor_key(anchor)
    if memo is not None and memo.anchor == key and memo.z_anchor is not None and memo.z_anchor.size == shard.n_rows:
        z, z_anchor = shard.block.matvec(coef), memo.z_anchor
    else:
        z, z_anchor = shard.block.matvec_pair(coef, anchor[0])
        z_anchor -= anchor[1]
        if memo is not None:
            memo.anchor, memo.z_anchor, memo.curvatures = key, z_anchor, []
    z -= intercept
    return z, z_anchor


def rate_pass(shard, coef: np.ndarray, intercept: float, anchor: tuple[np.ndarray, float], layout: CellLayout,
              positive: np.ndarray, negative: np.ndarray, smoothing: float, keep: bool = False) -> RatePass:
    """The majorized Lagrangian at ``(coef, intercept)`` on one shard (see the module docstring).

    Parameters
    ----------
    shard : Shard
    coef, intercept : the model; margins ``z = X coef - intercept``.
    anchor : (ndarray, float)
        The majorization step's model ``(w', b')``.
    layout : CellLayout
    positive, negative : ndarray of shape (n_cells,)
        Per-cell coefficients ``P``, ``N`` (>= 0) of the two bounds.
    smoothing : float
        Huber width ``t`` of the value and gradient (the per-cell bound sums use the exact hinge).
    keep : bool
        Also keep this point's curvature rows in the fit's memo (``layout.memo``) for
        :func:`rate_hessian_pass`.
    """
    d = shard.block.shape[1]
    n_cells = layout.n_cells
    if shard.n_rows == 0:
        return RatePass(0.0, np.zeros(d + 1), np.zeros((_N_SUMS, n_cells)))
    memo = _row_memo(layout, shard)
    z, z_anchor = _margins(shard, coef, intercept, anchor, memo)
    check_scores(shard, z)
    check_weights(shard)
    cells = _cells(shard, layout)
    v = np.ones(shard.n_rows) if shard.weight is None else shard.weight.astype(np.float64)
    sums = np.zeros((_N_SUMS, n_cells))
    dz = np.empty(shard.n_rows)
    value = _rate_rows(z, z_anchor, cells, v, np.asarray(positive, dtype=np.float64), np.asarray(negative, dtype=np.float64),
                       float(smoothing), sums, dz)
    grad = np.empty(d + 1)
    grad[:d] = shard.block.rmatvec(dz)
    grad[d] = -dz.sum()
    if keep and memo is not None:
        entry = (_point_key(coef, intercept, anchor, positive, negative, smoothing), curvature_rows(z, z_anchor, cells, v, positive, negative, smoothing))
        with _MEMO_LOCK:
            memo.curvatures = [entry, *(c for c in memo.curvatures if c[0] != entry[0])][:_CURVATURES]
    return RatePass(value, grad, sums)


def curvature_rows(z: np.ndarray, z_anchor: np.ndarray, cells: np.ndarray, v: np.ndarray, positive: np.ndarray, negative: np.ndarray,
                   smoothing: float) -> tuple[np.ndarray, np.ndarray]:
    """The rows with a non-zero second derivative ``D_r`` (see the module docstring) and ``D_r`` there: ``(rows int32, D float64)``."""
    P, N = np.asarray(positive, dtype=np.float64), np.asarray(negative, dtype=np.float64)
    t = float(smoothing)
    up, un = 0.5 + z, 0.5 - z
    curv = np.zeros(z.size)
    on = (z_anchor <= 0.5) & (up > 0.0) & (up < t)
    curv[on] += P[cells[on]]
    on = (z_anchor >= -0.5) & (un > 0.0) & (un < t)
    curv[on] += N[cells[on]]
    rows = np.flatnonzero(curv > 0.0)
    return rows.astype(np.int32 if z.size < 2**31 else np.int64), curv[rows] * v[rows] / t


def rate_hessian_pass(shard, coef: np.ndarray, intercept: float, anchor: tuple[np.ndarray, float], layout: CellLayout,
                      positive: np.ndarray, negative: np.ndarray, smoothing: float, direction: np.ndarray) -> np.ndarray:
    """The generalized Hessian of one shard's smoothed Lagrangian at ``(coef, intercept)`` times ``direction`` (``d + 1``:
    ``w`` then ``b``), i.e. ``[X, -1]^T D [X, -1] direction`` (see the module docstring).

    Reads only the curvature rows a :func:`rate_pass` with ``keep`` left in the memo for
    this point; on a miss (no memo, another process, a later point) they are recomputed
    from the same arguments (a pass over ``X``), so the result never depends on the memo.
    """
    d = shard.block.shape[1]
    out = np.zeros(d + 1)
    if shard.n_rows == 0:
        return out
    memo = _row_memo(layout, shard)
    key = _point_key(coef, intercept, anchor, positive, negative, smoothing)
    found = None
    if memo is not None:
        with _MEMO_LOCK:
            found = next((c[1] for c in memo.curvatures if c[0] == key), None)
    if found is None or (found[0].size and found[0][-1] >= shard.n_rows):
        z, z_anchor = _margins(shard, coef, intercept, anchor, memo)
        check_weights(shard)
        v = np.ones(shard.n_rows) if shard.weight is None else shard.weight.astype(np.float64)
        found = curvature_rows(z, z_anchor, _cells(shard, layout), v, positive, negative, smoothing)
        if memo is not None:
            with _MEMO_LOCK:
                memo.curvatures = [(key, found), *memo.curvatures][:_CURVATURES]
    rows, D = found
    direction = np.asarray(direction, dtype=np.float64)
    return shard.block.rows_product(rows, D, direction[:d], float(direction[d]))


@numba.njit(nogil=True, cache=True)
def _rate_rows(z, z_anchor, cells, v, P, N, t, sums, dz):
    """The per-row part of :func:`rate_pass` in one loop (its NumPy reference: ``rate_rows_reference`` in dpipe.testing)."""
    value = 0.0
    for r in range(z.size):
        c, w = cells[r], v[r]
        up, un = 0.5 + z[r], 0.5 - z[r]
        d = 0.0
        if z_anchor[r] <= 0.5:  # the hinge, not the constant 1, bounds sigma(z)
            bp = up if up > 0.0 else 0.0
            sp = 0.0 if up <= 0.0 else (up * up / (2.0 * t) if up < t else up - 0.5 * t)
            d += P[c] * (0.0 if up <= 0.0 else (up / t if up < t else 1.0))
        else:
            bp = 1.0
            sp = 1.0
        if z_anchor[r] >= -0.5:  # likewise for 1 - sigma(z) = sigma(-z)
            bn = un if un > 0.0 else 0.0
            sn = 0.0 if un <= 0.0 else (un * un / (2.0 * t) if un < t else un - 0.5 * t)
            d -= N[c] * (0.0 if un <= 0.0 else (un / t if un < t else 1.0))
        else:
            bn = 1.0
            sn = 1.0
        value += w * (P[c] * sp + N[c] * sn)
        dz[r] = w * d
        sums[0, c] += w * bp
        sums[1, c] += w * bn
        sums[2, c] += w * sp
        sums[3, c] += w * sn
        sums[4, c] += w * min(1.0, max(0.0, up))
        sums[5, c] += w * (1.0 if z[r] > 0.0 else 0.0)
        sums[6, c] += w
    return value


def cell_weights(shard, layout: CellLayout) -> np.ndarray:
    """Weighted row count of every cell of ``shard`` (the dataset sizes a fit needs first)."""
    check_weights(shard)
    v = None if shard.weight is None else shard.weight.astype(np.float64)
    return np.bincount(_cells(shard, layout), weights=v, minlength=layout.n_cells).astype(np.float64)


def sorted_scores_cells(shard, coef: np.ndarray, layout: CellLayout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``X coef`` of one shard sorted increasing, with each row's cell and weight (for exact thresholding; 20 bytes a row)."""
    s = shard.block.matvec(coef) if shard.n_rows else np.zeros(0)
    check_scores(shard, s)
    check_weights(shard)
    order = np.argsort(s, kind="stable")
    v = np.ones(shard.n_rows) if shard.weight is None else shard.weight.astype(np.float64)
    return s[order], _cells(shard, layout)[order].astype(np.int32), v[order]


def cell_predictions(shard, coef: np.ndarray, intercept: float, layout: CellLayout, randomized: bool = False) -> np.ndarray:
    """Per cell: the weight, the weight predicted positive (``X coef + intercept > 0``; with ``randomized``, the
    expected weight, each row positive with probability ``ramp(score)``) and the squared weights (for the effective
    sample size of the rates' intervals, :mod:`dpipe.rates._intervals`); shape (3, n_cells)."""
    s = shard.block.matvec(coef) + intercept if shard.n_rows else np.zeros(0)
    check_scores(shard, s)
    check_weights(shard)
    cells = row_cells(shard, layout)
    v = np.ones(shard.n_rows) if shard.weight is None else shard.weight.astype(np.float64)
    positive = ramp(s) if randomized else (s > 0)
    return np.stack([np.bincount(cells, weights=v, minlength=layout.n_cells), np.bincount(cells, weights=v * positive, minlength=layout.n_cells),
                     np.bincount(cells, weights=v * v, minlength=layout.n_cells)])
