"""The data passes every fit is made of, and the only place that runs them.

* :func:`class_moments` — per-class weighted moments, tree-reduced (one pass).
* :func:`column_scales` — per-feature scales by :func:`dpipe.reduce.unit_scales` (one pass).
* :class:`RankPasses` — the sorted-score pass and the gradient pass shared by the
  smoothed objectives, the cutting-plane oracles and (later) the rate constraints:
  :meth:`RankPasses.scores` merges every shard's sorted per-class scores into one
  :class:`MergedScores`; the caller computes per-example weights from it (a pure
  function: an objective or an oracle) and :meth:`RankPasses.gradient` returns
  ``X^T g`` with each shard's weights sent back to it.
* :func:`rank_summary` — exact rank metrics of a model (one pass).

Bytes moved by one score + gradient evaluation: 8 per row to the driver (the sorted
float64 scores; 16 with a weight column, whose values travel in the same order), 8
per row back (each row's weight), ``w`` (8 d) with every task and one d-vector per
shard. Objectives never see a dataset, a pass key or a byte count.

Where the order of each shard's sorted scores is kept between the score pass and the
passes that follow it at the same ``w`` depends on the dataset (``keeps_orders``): on the
workers, in a memo (shards held in memory: 4 bytes a row beside them), or on the driver
(streamed shards, :mod:`dpipe.reduce._driver_order`: 4 bytes a row more to the driver, and a
worker holds nothing per row between passes, which an out-of-core fit needs). Both give the
same bits.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np

from .._config import get_setting
from .._runs import MergedScores, merge_class_runs, merge_runs, scatter_runs
from ..exceptions import ParameterError
from ..metrics import RankSummary
from ..reduce import (
    ClassMoments,
    ColumnMoments,
    class_moments_of_shard,
    class_scores,
    class_totals_of_shard,
    column_moments_of_shard,
    gradient_pass,
    merge_column_moments,
    merge_moments,
    score_pass,
    shard_sorted_scores,
)
from ..reduce._driver_order import row_direction_pass, row_gradient_pass, row_gradient_squares_pass, row_product_pass, scores_with_order
from ..reduce._sorted import class_score_summary, direction_pass, gradient_squares_pass, product_pass
from ._range_newton import RangeNewton
from ._ranges import RangeExchange, resolve_exchange

if TYPE_CHECKING:
    from ._protocols import CurvedRangeRisk, CurvedRisk, Dataset, HostedDataset

__all__ = ["MergedScores", "RankPasses", "ClassTotals", "class_moments", "class_totals", "column_moments", "column_scales", "rank_summary",
           "SUMMARY_POINTS", "SUMMARY_MIN_POINTS"]

#: points a score summary (:meth:`RankPasses.score_summary`) keeps over every shard and both classes: 4 MB to the driver
#: whatever the rows; a search along a ray needs the scores' distribution to about 1 % (its tolerance), not every row
SUMMARY_POINTS = 2**18
#: points a shard's class keeps at least, however many shards
SUMMARY_MIN_POINTS = 1024


@dataclasses.dataclass
class _Scatter:
    """What the passes at one ``w`` need to send each shard its rows' values: the pass key of the workers' memo, each class's
    merge ``(order, lengths)``, and, where the driver keeps them (``rows``), each shard's class rows in sorted order."""

    key: str
    pos: tuple[np.ndarray, list[int]]
    neg: tuple[np.ndarray, list[int]]
    rows: list[tuple[np.ndarray, np.ndarray, int]] | None = None

    def per_shard(self, pos_values: np.ndarray, neg_values: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Values in the merged order, as each shard's runs (its sorted order)."""
        return list(zip(scatter_runs(np.asarray(pos_values, dtype=np.float64), *self.pos), scatter_runs(np.asarray(neg_values, dtype=np.float64), *self.neg)))

    def in_row_order(self, pos_values: np.ndarray, neg_values: np.ndarray) -> list[np.ndarray]:
        """Values in the merged order, as one array per shard in its row order (``rows`` kept on the driver)."""
        assert self.rows is not None
        out = []
        for (gp, gn), (pos_rows, neg_rows, n) in zip(self.per_shard(pos_values, neg_values), self.rows):
            g = np.zeros(n)
            g[pos_rows], g[neg_rows] = gp, gn
            out.append(g)
        return out

    def merged(self, per_row: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Per-row values of every shard (row order) in the merged order of each class (``rows`` kept on the driver)."""
        assert self.rows is not None
        if not per_row:
            return np.zeros(0), np.zeros(0)
        pos = np.concatenate([u[r[0]] for u, r in zip(per_row, self.rows)])[self.pos[0]]
        neg = np.concatenate([u[r[1]] for u, r in zip(per_row, self.rows)])[self.neg[0]]
        return pos, neg


def _merge(parts: list) -> tuple[MergedScores, tuple, tuple]:
    weighted = bool(parts) and parts[0].pos_weight is not None
    return merge_class_runs([p.pos for p in parts], [p.neg for p in parts], [p.pos_weight for p in parts] if weighted else None,
                            [p.neg_weight for p in parts] if weighted else None)


class RankPasses:
    """The score pass and the gradient pass over an opened dataset.

    Parameters
    ----------
    dataset : Dataset
        The training data (:class:`~dpipe.engine._protocols.Dataset`).

    Attributes
    ----------
    last : dict
        Seconds of the last score pass, merge and gradient pass, and the bytes moved.
    """

    def __init__(self, dataset: Dataset) -> None:
        self.ds = dataset
        self.n_features = int(dataset.n_features)
        self.passes = 0
        self.last: dict[str, float] = {}
        self._token = uuid.uuid4().hex
        self._pending: _Scatter | None = None
        self._w: np.ndarray | None = None
        #: where the orders of the remembered scores are kept: on the workers (the shards' memo) or here
        self._orders_here = getattr(dataset, "keeps_orders", "workers") == "driver"

    def range_exchange(self, risk: object) -> RangeExchange | None:
        """Evaluations of ``risk`` range by range on the workers (:mod:`._ranges`), or None where the driver merges (``dpipe.rank-exchange``)."""
        if resolve_exchange(self.ds, risk) != "workers":
            return None
        return RangeExchange(cast("HostedDataset", self.ds))  # "workers": the dataset has shard hosts

    def range_newton(self, risk: CurvedRangeRisk | CurvedRisk) -> RangeNewton | None:
        """Newton-CG's evaluations and Hessian-vector products of ``risk`` on the workers (:mod:`._range_newton`), or None
        where the driver merges: only when ``dpipe.rank-exchange`` is ``"workers"``.

        ``auto`` keeps Newton on the driver's route. Measured on 10^7 x 120 rows, 2 worker processes, persisted
        (7 Newton iterations, 41 CG steps either way): 84 s whole on the driver's route with workers peaking at
        3.3 GB, 90 s on the workers' route with 6.0 GB. The workers' route moves O(hosts) bytes through the
        driver instead of 16 a row per CG step, which a cluster of many workers needs, but it does not pay on two
        and its per-row memory is not yet in the memory model (:mod:`._memory`).
        """
        if get_setting("rank-exchange") != "workers" or resolve_exchange(self.ds, risk) != "workers":
            return None
        if not callable(getattr(risk, "range_curvature", None)):
            raise ParameterError(f"dpipe.rank-exchange='workers': {getattr(risk, 'name', risk)} has no range curvature for Newton-CG; use 'auto' or 'driver'")
        return RangeNewton(cast("HostedDataset", self.ds), cast("CurvedRangeRisk", risk))

    def scores(self, w: np.ndarray, *, remember: bool = True) -> MergedScores:
        """Merged sorted scores ``X w`` of every row (one pass).

        With ``remember`` the workers keep each shard's row order, so that the
        following :meth:`gradient` does not recompute ``X w``.
        """
        t0 = time.perf_counter()
        w = np.asarray(w, dtype=np.float64)
        self.passes += 1
        key = f"{self._token}-{self.passes}"
        rows = None
        if remember and self._orders_here:
            with_rows = self.ds.map_gather(scores_with_order, w)
            parts = [p[0] for p in with_rows]
            rows = [(p[1], p[2], p[1].size + p[2].size) for p in with_rows]
        elif remember:
            parts = self.ds.map_gather(score_pass, w, key)
        else:
            parts = self.ds.map_gather(class_scores, w)
        t1 = time.perf_counter()
        merged, pos, neg = _merge(parts)
        t2 = time.perf_counter()
        if remember:
            self._pending, self._w = _Scatter(key, pos, neg, rows), w
        weighted = merged.pos_weight is not None
        n = merged.pos.size + merged.neg.size
        per_row = (16 if weighted else 8) + (4 if rows is not None else 0)
        self.last = {"seconds_score": t1 - t0, "seconds_merge": t2 - t1, "bytes_moved": per_row * n + 8 * w.size * len(parts)}
        return merged

    def score_summary(self, w: np.ndarray) -> MergedScores:
        """Every class's scores ``X w`` summarized (one pass, :func:`~dpipe.reduce.class_score_summary`): at most
        :data:`SUMMARY_POINTS` points over all shards, each a block's mean score with the block's weight, merged in
        increasing order; exact where a shard's class has no more rows than its share of the points.

        What a search along a ray needs (:func:`~dpipe.objectives.ray_minimum`): its cost on the driver and the bytes
        moved do not grow with the rows (16 bytes a point, against 8 a row merged).
        """
        t0 = time.perf_counter()
        points = max(SUMMARY_MIN_POINTS, SUMMARY_POINTS // (2 * max(1, int(self.ds.n_shards))))
        parts = self.ds.map_gather(class_score_summary, np.asarray(w, dtype=np.float64), points)
        t1 = time.perf_counter()
        merged, _, _ = _merge(parts)
        self.last = {"seconds_score": t1 - t0, "seconds_merge": time.perf_counter() - t1,
                     "bytes_moved": 16 * (merged.pos.size + merged.neg.size) + 8 * int(np.size(w)) * len(parts)}
        return merged

    def gradient(self, g_pos: np.ndarray, g_neg: np.ndarray, *, keep: bool = False) -> np.ndarray:
        """``X^T g`` for per-example weights aligned with the last remembered :meth:`scores` (one pass).

        ``keep``: the scores' order stays with the workers (and this object) for the
        Hessian-vector products at the same ``w`` (:meth:`direction`, :meth:`product`).
        """
        if self._pending is None:
            raise RuntimeError("RankPasses.gradient needs a preceding scores(w, remember=True)")
        t0 = time.perf_counter()
        grad = self._row_sum(g_pos, g_neg, keep)
        if not keep:
            self._pending = None
        self.last["seconds_gradient"] = time.perf_counter() - t0
        return grad

    def gradient_and_squares(self, g_pos: np.ndarray, g_neg: np.ndarray, c_pos: np.ndarray, c_neg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`gradient` with ``keep`` and, in the same pass, ``(X * X)^T c`` for per-row values ``c`` (the rows' curvature):
        the diagonal Newton's Jacobi preconditioner needs, for a second d-vector back per shard."""
        if self._pending is None:
            raise RuntimeError("RankPasses.gradient_and_squares needs a preceding scores(w, remember=True)")
        t0 = time.perf_counter()
        pend, w = self._pending, self._w
        assert w is not None  # set with _pending
        if pend.rows is not None:
            per_row = list(zip(pend.in_row_order(g_pos, g_neg), pend.in_row_order(c_pos, c_neg)))
            both = np.asarray(self.ds.map_reduce_each(row_gradient_squares_pass, np.add, per_row), dtype=np.float64)
        else:
            per_shard = [(*g, *c) for g, c in zip(pend.per_shard(g_pos, g_neg), pend.per_shard(c_pos, c_neg))]
            both = np.asarray(self.ds.map_reduce_each(gradient_squares_pass, np.add, per_shard, w, pend.key), dtype=np.float64)
        self.last["bytes_moved"] = self.last.get("bytes_moved", 0) + 16 * (g_pos.size + g_neg.size) + 24 * w.size * self.ds.n_shards
        self.last["seconds_gradient"] = time.perf_counter() - t0
        return both[0], both[1]

    def _row_sum(self, g_pos: np.ndarray, g_neg: np.ndarray, keep: bool) -> np.ndarray:
        pend, w = self._pending, self._w
        assert pend is not None and w is not None  # the callers check _pending; _w is set with it
        if pend.rows is not None:
            per_row = [(g,) for g in pend.in_row_order(g_pos, g_neg)]
            grad = np.asarray(self.ds.map_reduce_each(row_product_pass if keep else row_gradient_pass, np.add, per_row), dtype=np.float64)
        else:
            per_shard = pend.per_shard(g_pos, g_neg)
            grad = np.asarray(self.ds.map_reduce_each(product_pass if keep else gradient_pass, np.add, per_shard, w, pend.key), dtype=np.float64)
        self.last["bytes_moved"] = self.last.get("bytes_moved", 0) + 8 * (g_pos.size + g_neg.size) + 16 * w.size * self.ds.n_shards  # w out, a d-vector back per shard
        return grad

    @property
    def kept(self) -> np.ndarray | None:
        """The ``w`` whose scores' order the workers keep (:meth:`gradient` with ``keep``), or None."""
        return None if self._pending is None else self._w

    def direction(self, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``X d`` of every positive and negative row in the merged order of the kept scores (one pass, no sort).

        Moves 8 bytes per row to the driver and ``d`` to every shard.
        """
        if self._pending is None:
            raise RuntimeError("RankPasses.direction needs the order kept by gradient(..., keep=True)")
        pend = self._pending
        d = np.asarray(d, dtype=np.float64)
        if pend.rows is not None:
            u_pos, u_neg = pend.merged(self.ds.map_gather(row_direction_pass, d))
        else:
            parts = self.ds.map_gather(direction_pass, self._w, pend.key, d)
            u_pos = np.concatenate([p[0] for p in parts])[pend.pos[0]] if parts else np.zeros(0)
            u_neg = np.concatenate([p[1] for p in parts])[pend.neg[0]] if parts else np.zeros(0)
        self.last = {"bytes_moved": 8 * (u_pos.size + u_neg.size) + 8 * self.n_features * self.ds.n_shards}
        return u_pos, u_neg

    def product(self, m_pos: np.ndarray, m_neg: np.ndarray) -> np.ndarray:
        """``X^T m`` for per-row values in the merged order of the kept scores (one pass; the order stays kept)."""
        if self._pending is None:
            raise RuntimeError("RankPasses.product needs the order kept by gradient(..., keep=True)")
        return self._row_sum(m_pos, m_neg, True)


def class_moments(dataset: Dataset) -> ClassMoments:
    """Per-class (weighted) count, mean and centred second moment of every row (one pass)."""
    return dataset.map_reduce(class_moments_of_shard, merge_moments)


class ClassTotals(NamedTuple):
    """Total sample weight per class (row counts without weights)."""

    positive: float
    negative: float
    #: no weights, or every weight a whole number
    integral: bool


def class_totals(dataset: Dataset) -> ClassTotals:
    """Total sample weight per class: from the manifest's counts when the store has no weight column, else one pass."""
    if not dataset.weighted and dataset.store is not None:
        return ClassTotals(float(dataset.store.manifest.n_positive), float(dataset.store.manifest.n_negative), True)
    neg, pos, fractional = dataset.map_reduce(class_totals_of_shard, np.add)
    return ClassTotals(float(pos), float(neg), fractional == 0)


def column_moments(dataset: Dataset) -> ColumnMoments:
    """Per-feature weight, mean and centred sum of squares of every row (weighted), one pass."""
    return dataset.map_reduce(column_moments_of_shard, merge_column_moments)


def column_scales(dataset: Dataset) -> np.ndarray:
    """Per-feature scales of every row (weighted; :func:`dpipe.reduce.unit_scales`), one pass."""
    return column_moments(dataset).scales()


def rank_summary(dataset: Dataset, coef: np.ndarray, intercept: float) -> RankSummary:
    """Scores of every row, sorted on the workers, merged on the driver into a :class:`RankSummary`.

    Moves 9 bytes per row (17 with a weight column).
    """
    parts = dataset.map_gather(shard_sorted_scores, np.asarray(coef, dtype=np.float64), float(intercept))
    s, order, _ = merge_runs([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])[order] if parts else np.zeros(0, np.int8)
    weight = None
    if parts and parts[0][2] is not None:
        weight = np.concatenate([p[2] for p in parts])[order][::-1]
    return RankSummary.from_sorted(s[::-1], y[::-1], weight_sorted=weight)
