"""The threshold with the fewest training errors, found from per-range counts: the driver never holds every score.

:meth:`dpipe.metrics.RankSummary.best_threshold` merges every row's score on the
driver (9 bytes a row). Here three passes find the same threshold with O(shards x
ranges) bytes plus the rows of the few ranges that can hold it:

1. each shard takes :data:`SAMPLE_SIZE` order statistics of its scores (in the intervals
   still searched), merged pairwise on the workers into at most :data:`MAX_SAMPLE` (a
   quantile sketch); the driver cuts the intervals into at most :data:`MAX_RANGES` ranges
   at its quantiles;
2. each shard counts, per range, its positives' and negatives' weight, its rows and its
   lowest and highest score, summed pairwise on the workers; the driver has the errors at
   every range boundary, and a lower bound on the errors of any cut inside a range
   (``max(E_above - W+, E_below - W-)``); the ranges whose bound does not exceed the best
   error found are the next intervals;
3. once those hold at most :data:`MAX_GATHER` rows, the shards send those rows and the
   driver tries every cut inside them.

So the driver receives O(:data:`MAX_RANGES`) numbers per level and at most
:data:`MAX_GATHER` rows, whatever the number of rows or shards (a level divides the
rows searched by about :data:`MAX_RANGES`: two levels for 10^9 rows).

The cut is chosen as :meth:`~dpipe.metrics.RankSummary.best_threshold` chooses it:
"positive iff score > t", ``t`` midway between consecutive distinct scores, the highest
of equally good cuts. Without weights the errors are counts, and the result is exactly
``best_threshold``'s; with weights they are sums of float64 weights added in another
order, equal to rounding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..reduce._scores import shard_scores

if TYPE_CHECKING:
    from ._protocols import Dataset

__all__ = ["MAX_GATHER", "MAX_LEVELS", "MAX_RANGES", "MAX_SAMPLE", "SAMPLE_SIZE", "ThresholdSearch", "best_threshold_on_ranges"]

#: order statistics of its scores each shard sends in the first pass
SAMPLE_SIZE = 256
#: ranges the score line is cut into (fewer when there are fewer distinct sampled scores)
MAX_RANGES = 1024
#: sampled scores kept when two shards' samples are merged
MAX_SAMPLE = 4 * MAX_RANGES
#: rows the driver gathers to try every cut in the last intervals
MAX_GATHER = 16384
#: levels of intervals at most (then the rows are gathered whatever their number)
MAX_LEVELS = 6


def _weights(shard: Any) -> np.ndarray:
    return np.ones(shard.n_rows) if shard.weight is None else np.asarray(shard.weight, dtype=np.float64)


def _inside(s: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """Whether each score lies in one of the disjoint, sorted intervals ``[[lo, hi], ...]``."""
    at = np.searchsorted(intervals[:, 0], s, side="right") - 1
    return (at >= 0) & (s <= intervals[np.maximum(at, 0), 1])


def sample_scores(shard: Any, coef: np.ndarray, intercept: float, intervals: np.ndarray) -> np.ndarray:
    """Pass 1 (on a worker): :data:`SAMPLE_SIZE` evenly spaced order statistics of the shard's scores in ``intervals``
    (rows of positive weight; min and max included)."""
    s = shard_scores(shard, coef, intercept)
    s = np.sort(s[_inside(s, intervals) & (_weights(shard) > 0)])
    if s.size <= SAMPLE_SIZE:
        return s
    return s[np.linspace(0, s.size - 1, SAMPLE_SIZE).round().astype(np.int64)]


def merge_samples(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two sorted samples as one, thinned to :data:`MAX_SAMPLE` evenly spaced order statistics (min and max kept)."""
    c = np.sort(np.concatenate([a, b]))
    if c.size <= MAX_SAMPLE:
        return c
    return c[np.linspace(0, c.size - 1, MAX_SAMPLE).round().astype(np.int64)]


def range_counts(shard: Any, coef: np.ndarray, intercept: float, cuts: np.ndarray) -> np.ndarray:
    """Pass 2 (on a worker): per range ``[cuts[r-1], cuts[r])``, ``[W+, W-, rows, lowest score, highest score]`` of the rows of
    positive weight, shape (R, 5)."""
    s = shard_scores(shard, coef, intercept)
    w = _weights(shard)
    held = w > 0  # a row of weight 0 places no cut (RankSummary drops scores of zero total weight)
    s, w, pos = s[held], w[held], np.asarray(shard.y)[held] > 0
    r = np.searchsorted(cuts, s, side="right")
    R = cuts.size + 1
    out = np.empty((R, 5))
    out[:, 0] = np.bincount(r, weights=np.where(pos, w, 0.0), minlength=R)
    out[:, 1] = np.bincount(r, weights=np.where(pos, 0.0, w), minlength=R)
    out[:, 2] = np.bincount(r, minlength=R)
    out[:, 3], out[:, 4] = np.inf, -np.inf
    np.minimum.at(out[:, 3], r, s)
    np.maximum.at(out[:, 4], r, s)
    return out


def merge_counts(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two shards' :func:`range_counts` as one: weights and rows added, the lowest and highest scores kept."""
    return np.column_stack([a[:, :3] + b[:, :3], np.minimum(a[:, 3], b[:, 3]), np.maximum(a[:, 4], b[:, 4])])


def interval_rows(shard: Any, coef: np.ndarray, intercept: float, intervals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pass 3 (on a worker): scores, labels (+1 / -1) and weights of the shard's rows of positive weight in ``intervals``."""
    s = shard_scores(shard, coef, intercept)
    w = _weights(shard)
    keep = _inside(s, intervals) & (w > 0)
    return s[keep], np.asarray(shard.y)[keep], w[keep]


class ThresholdSearch:
    """The result of :func:`best_threshold_on_ranges`, read as a :class:`~dpipe.metrics.RankSummary` is by threshold calibration."""

    def __init__(self, threshold: float, errors: float, positive: float, negative: float, weighted: bool, rows_gathered: int, levels: int) -> None:
        self.threshold, self.errors, self.weighted = threshold, errors, weighted
        self.positive, self.negative = positive, negative
        #: rows whose scores the driver received in the last pass, and the levels of intervals searched
        self.rows_gathered, self.levels = rows_gathered, levels

    def best_threshold(self) -> tuple[float, float] | tuple[float, int]:
        """``(threshold, errors)``, as :meth:`RankSummary.best_threshold`."""
        return self.threshold, (float(self.errors) if self.weighted else int(round(self.errors)))

    def class_masses(self) -> tuple[float, float] | tuple[int, int]:
        """``(positives, negatives)``: counts without weights, weight sums with them."""
        if self.weighted:
            return self.positive, self.negative
        return int(round(self.positive)), int(round(self.negative))


def _cut(upper: float | None, lower: float | None) -> float:
    """The cut between two consecutive distinct scores (None: no score on that side), as ``RankSummary.best_threshold`` places it."""
    if upper is None:  # nothing positive: the highest score
        return float(lower) if lower is not None else 0.0
    if lower is None:  # everything positive
        return float(upper) - 1.0 - abs(float(upper))
    t = 0.5 * (upper + lower)
    return t if lower <= t < upper else float(lower)


class _Interval(NamedTuple):
    """Scores ``[lo, hi]`` still searched, with what lies outside: negatives' weight above, positives' below, the nearest scores."""

    lo: float
    hi: float
    fp_above: float
    fn_below: float
    upper: float | None
    lower: float | None
    rows: float


def _cuts_for(intervals: list[_Interval], samples: np.ndarray) -> np.ndarray:
    """Range cuts: each interval's edges, and up to its share of :data:`MAX_RANGES` sampled scores inside it."""
    share = max(1, MAX_RANGES // max(1, len(intervals)))
    cuts = []
    for iv in intervals:
        inside = samples[(samples > iv.lo) & (samples <= iv.hi)]
        if inside.size > share:
            inside = inside[np.linspace(0, inside.size - 1, share).round().astype(np.int64)]
        cuts += [np.array([iv.lo]), inside, np.array([np.nextafter(iv.hi, np.inf)])]
    return np.unique(np.concatenate(cuts))


def best_threshold_on_ranges(dataset: Dataset, coef: np.ndarray, intercept: float) -> ThresholdSearch:
    """The cut with the fewest (weighted) training errors of ``dataset``'s scores under ``(coef, intercept)`` (see the module docstring)."""
    coef = np.asarray(coef, dtype=np.float64)
    intercept = float(intercept)
    intervals = [_Interval(-np.inf, np.inf, 0.0, 0.0, None, None, np.inf)]
    best = (np.inf, np.inf, 0.0)  # (errors, -threshold, threshold): the fewest errors, then the highest threshold
    totals = None
    levels = 0
    while intervals and sum(iv.rows for iv in intervals) > MAX_GATHER and levels < MAX_LEVELS:
        levels += 1
        bounds = np.array([[iv.lo, iv.hi] for iv in intervals])
        samples = np.unique(dataset.map_reduce(sample_scores, merge_samples, coef, intercept, bounds))
        cuts = _cuts_for(intervals, samples)
        table = dataset.map_reduce(range_counts, merge_counts, coef, intercept, cuts)
        if totals is None:
            totals = (float(table[:, 0].sum()), float(table[:, 1].sum()))
        following = []
        for iv in intervals:
            first, stop = np.searchsorted(cuts, [iv.lo, np.nextafter(iv.hi, np.inf)], side="right")
            rows = table[first:stop][::-1]  # the interval's ranges, highest scores first
            rows = rows[rows[:, 2] > 0]
            if not rows.size:
                continue
            Wp, Wn, n, lo, hi = rows.T
            # errors with the k highest ranges positive, k = 0..K
            boundary = iv.fp_above + np.concatenate([[0.0], np.cumsum(Wn)]) + np.concatenate([np.cumsum(Wp[::-1])[::-1], [0.0]]) + iv.fn_below
            K = rows.shape[0]
            for k in range(K + 1):
                t = _cut(lo[k - 1] if k else iv.upper, hi[k] if k < K else iv.lower)
                best = min(best, (float(boundary[k]), -t, t))
            bound = np.maximum(boundary[:-1] - Wp, boundary[1:] - Wn)
            for k in np.flatnonzero((bound <= best[0]) & (lo < hi)).tolist():  # one distinct score: no cut inside
                following.append(_Interval(float(lo[k]), float(hi[k]), float(iv.fp_above + Wn[:k].sum()), float(iv.fn_below + Wp[k + 1:].sum()),
                                           float(lo[k - 1]) if k else iv.upper, float(hi[k + 1]) if k + 1 < K else iv.lower, float(n[k])))
        intervals = sorted((iv for iv in following if min(iv.fp_above, iv.fn_below) <= best[0]), key=lambda iv: iv.lo)  # _inside bisects them
    gathered = 0
    if intervals:
        bounds = np.array([[iv.lo, iv.hi] for iv in intervals])
        parts = dataset.map_gather(interval_rows, coef, intercept, bounds)
        s = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        w = np.concatenate([p[2] for p in parts])
        gathered = int(s.size)
        if totals is None:  # no level ran: these are every row
            totals = (float(w[y > 0].sum()), float(w[y <= 0].sum()))
        for iv in intervals:
            inside = (s >= iv.lo) & (s <= iv.hi)
            distinct, inverse = np.unique(-s[inside], return_inverse=True)  # decreasing scores
            distinct = -distinct
            yk, wk = y[inside], w[inside]
            p = np.bincount(inverse, weights=np.where(yk > 0, wk, 0.0), minlength=distinct.size)
            q = np.bincount(inverse, weights=np.where(yk > 0, 0.0, wk), minlength=distinct.size)
            top = iv.fp_above + float(p.sum()) + iv.fn_below  # nothing of the interval positive
            errs = top + np.concatenate([[0.0], np.cumsum(q)]) - np.concatenate([[0.0], np.cumsum(p)])
            for i in range(distinct.size + 1):  # after the i highest distinct scores of the interval
                upper = float(distinct[i - 1]) if i else iv.upper
                lower = float(distinct[i]) if i < distinct.size else iv.lower
                t = _cut(upper, lower)
                best = min(best, (float(errs[i]), -t, t))
    errors, _, threshold = best
    positive, negative = totals if totals is not None else (0.0, 0.0)
    return ThresholdSearch(threshold, errors, positive, negative, bool(dataset.weighted), gathered, levels)
