"""Sorted runs: the one merge of per-shard sorted arrays, the scatter back to the shards, and the sort itself.

Every pass that sorts on the workers (the smoothed objectives' and the cutting
plane's score pass, evaluation, the rank summary) sends one increasing run per
shard; the driver (or, range by range, a worker: :mod:`dpipe.engine._ranges`) merges
them here and, where per-example weights go back to the shards, scatters them with
the same permutation.

:func:`stable_argsort` is NumPy's stable argsort of float64, bit for bit, about twice
as fast: it sorts 64-bit integers made of the score's order-preserving bit pattern, cut
to make room for the row's index below it (NumPy's integer sort is vectorized), then
puts the rows whose cut patterns are equal in value order (a run of exact ties, the
common case, is left as it is: in index order). In NumPy alone, no numba kernel to
compile: on normal scores (2026-12-07, this 2-core machine) 8,000 take 0.22 ms against
0.21 ms for the numba kernels it replaced and 0.41 ms for NumPy's stable argsort;
131,579 take 6.1 / 5.6 / 12.8 ms, 10^6 64 / 63 / 123 ms, 5x10^6 0.41 / 0.36 / 0.79 s
(1,319 near-ties put in order there); the kernels took 1.8 s to compile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["MergedScores", "RangeInput", "merge_runs", "merge_class_runs", "scatter_runs", "stable_argsort"]


_SIGN = np.uint64(1) << np.uint64(63)


def stable_argsort(x: np.ndarray) -> np.ndarray:
    """``np.argsort(x, kind="stable")`` of float64 values without NaN (module docstring), bit for bit, faster.

    Parameters
    ----------
    x : ndarray of shape (n,)
        Values to order (converted to float64; no NaN).

    Returns
    -------
    ndarray of shape (n,), int64
        The permutation that sorts ``x``; ties (``-0.0 == 0.0`` included) keep their input order.
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    n = x.size
    if n < 2:
        return np.arange(n, dtype=np.int64)
    shift = np.uint64(max(1, (n - 1).bit_length()))
    # the order-preserving pattern of each float64 (every bit flipped for < 0, the sign bit set for >= 0), its low
    # `shift` bits replaced by the row's index; + 0.0: -0.0 becomes 0.0, as equal in the key as in value
    keys = (x + 0.0).view(np.uint64)
    flip = (keys.view(np.int64) >> np.int64(63)).view(np.uint64)  # all ones for < 0, else 0
    flip |= _SIGN
    keys ^= flip
    del flip
    keys >>= shift
    keys <<= shift
    keys |= np.arange(n, dtype=np.uint64)
    keys.sort()
    order = (keys & ((np.uint64(1) << shift) - np.uint64(1))).view(np.int64)
    keys >>= shift  # what is left of each value's pattern: equal for ties and for near-ties (equal to 64 - shift bits)
    # a run of equal cut patterns is in index order: right for ties; where a near-tie's values are out of order, a
    # stable sort of that run's values (found in one vectorized test; each run located by bisection, keys are sorted)
    xs = x[order]
    unordered = np.flatnonzero((keys[1:] == keys[:-1]) & (xs[1:] < xs[:-1]))
    del xs
    done = 0
    for k in unordered.tolist():
        if k < done:
            continue
        i, j = int(np.searchsorted(keys, keys[k], "left")), int(np.searchsorted(keys, keys[k], "right"))
        group = order[i:j]
        order[i:j] = group[np.argsort(x[group], kind="stable")]
        done = j
    return order


#: runs above which :func:`merge_runs` sorts the packed keys instead of letting NumPy's timsort merge the runs (the same
#: permutation either way). Measured with NumPy 2.4 on this machine (2026-12-07, medians of 5, random normal runs), timsort
#: against the packed keys: 16 runs x 10^5 0.048 / 0.116 s, 76 x 131,579 (a 10^7-row store's shards) 0.48 / 0.92 s,
#: 128 x 50,000 0.35 / 0.57 s, 200 x 5,000 0.058 / 0.060 s, 500 x 2,000 0.066 / 0.059 s, 1,000 x 1,000 0.072 / 0.060 s.
#: (An earlier NumPy measured the packed keys ahead from about 12 runs: 76 runs of 5e6 scores 0.18 against 0.29 s.)
TIMSORT_MAX_RUNS = 256


def merge_runs(runs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Merge increasing runs: (merged values, permutation of the concatenation, run lengths).

    A stable sort of the concatenation: NumPy's timsort, which merges a few runs in
    O(n log k), or :func:`stable_argsort` beyond :data:`TIMSORT_MAX_RUNS` runs (the same
    permutation): ``merged == concatenate(runs)[order]``.
    """
    lengths = [int(r.size) for r in runs]
    cat = np.concatenate(runs) if len(runs) else np.zeros(0)
    order = np.argsort(cat, kind="stable") if len(runs) <= TIMSORT_MAX_RUNS else stable_argsort(cat)
    return cat[order], order, lengths


def merge_class_runs(pos: Sequence[np.ndarray], neg: Sequence[np.ndarray], pos_weight: Sequence[np.ndarray] | None = None,
                     neg_weight: Sequence[np.ndarray] | None = None) -> tuple[MergedScores, tuple[np.ndarray, list[int]], tuple[np.ndarray, list[int]]]:
    """Each class's runs merged (:func:`merge_runs`), their weights in the same order: the scores and each class's ``(order, lengths)``."""
    sp, op, lp = merge_runs(pos)
    sn, on, ln = merge_runs(neg)
    vp = vn = None
    if pos_weight is not None:
        assert neg_weight is not None  # both classes' weights or neither
        vp = np.concatenate(pos_weight)[op] if len(pos_weight) else np.zeros(0)
        vn = np.concatenate(neg_weight)[on] if len(neg_weight) else np.zeros(0)
    return MergedScores(sp, sn, vp, vn), (op, lp), (on, ln)


def scatter_runs(values: np.ndarray, order: np.ndarray, lengths: Sequence[int]) -> list[np.ndarray]:
    """Inverse of :func:`merge_runs` for values aligned with the merged array: one array per run."""
    out = np.empty_like(values)
    out[order] = values
    return np.split(out, np.cumsum(lengths)[:-1]) if len(lengths) else []


@dataclasses.dataclass(frozen=True, eq=False)
class MergedScores:
    """Every row's score, per class, in increasing order, with the rows' sample weights.

    Attributes
    ----------
    pos, neg : ndarray, float64
        Scores of the positive / negative rows, increasing.
    pos_weight, neg_weight : ndarray or None
        Their sample weights in the same order; None without a weight column.
    """

    pos: np.ndarray
    neg: np.ndarray
    pos_weight: np.ndarray | None = None
    neg_weight: np.ndarray | None = None

    @property
    def weighted(self) -> bool:
        """Whether the rows carry sample weights."""
        return self.pos_weight is not None

    @property
    def class_weights(self) -> tuple[float, float]:
        """``(W+, W-)``: total weight of the positives and of the negatives (counts without weights)."""
        if self.pos_weight is None:
            return float(self.pos.size), float(self.neg.size)
        assert self.neg_weight is not None  # both classes' weights or neither
        return float(self.pos_weight.sum()), float(self.neg_weight.sum())

    def scaled(self, alpha: float, shift: float = 0.0) -> MergedScores:
        """The scores of ``alpha w`` (plus a constant ``shift``): the order is unchanged for ``alpha > 0``."""
        return dataclasses.replace(self, pos=alpha * self.pos + shift, neg=alpha * self.neg + shift)


class RangeInput(NamedTuple):
    """The scores one range of a range-partitioned pass needs (:mod:`dpipe.objectives._auc_ranges`), sorted increasing; weights in the same order, or None."""

    #: positives in ``[a_r - t, a_{r+1})``: the halo first, the own ones from ``own_pos_start``
    sp: np.ndarray
    #: negatives in ``[a_r - 1, a_{r+1} - 1 + t)``: the own ones up to ``own_neg_stop``, then the halo
    sn: np.ndarray
    own_pos_start: int
    own_neg_stop: int
    #: total weight of the positives below ``a_r - t``
    below_pos_weight: float
    #: total weight, and weighted sum of scores, of the negatives at or above ``a_{r+1} - 1 + t``
    above_neg_weight: float
    above_neg_sum: float
    vp: np.ndarray | None = None
    vn: np.ndarray | None = None
    #: weighted score sum of the positives below ``a_r - t`` (the squared hinge's negatives pair with all of them)
    below_pos_sum: float = 0.0
    #: weighted sum of squared scores of the negatives at or above ``a_{r+1} - 1 + t`` (the squared hinge's value)
    above_neg_square: float = 0.0
