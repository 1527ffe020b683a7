"""Per-shard sorted score summaries and gradient parts (worker side, pure).

One evaluation of a smoothed rank objective is two passes:

1. :func:`score_pass` computes ``s = X w`` (float64) and sorts each class; only the
   sorted scores (8 bytes per row, 16 with a weight column: each row's sample weight
   travels in the same order) go to the driver, which merges the shards' sorted runs,
   while the sort order stays in a small per-process memo;
2. the driver sends every shard its own per-example weights (8 bytes per row, in
   the shard's sorted order) and :func:`gradient_pass` returns ``X^T g`` (d floats),
   taking the order from the memo so ``X w`` is not recomputed. On a miss (the
   worker restarted, the task ran elsewhere) it recomputes the order from ``w``:
   both functions stay pure functions of (shard, parameters).

So one evaluation moves about 16 bytes per row (24 with weights) plus 8 d bytes per shard.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import NamedTuple

import numpy as np

from .._runs import stable_argsort
from ._finite import check_scores, check_weights

__all__ = ["ShardScores", "ClassRuns", "score_shard", "class_runs", "weighted_row_sum", "score_pass", "class_scores", "class_score_summary", "gradient_pass", "product_pass", "direction_pass",
           "gradient_squares_pass", "weighted_row_sums_and_squares"]


class ClassRuns(NamedTuple):
    """What a score pass returns for one shard: each class's scores in increasing order.

    ``pos_weight`` / ``neg_weight`` are the rows' sample weights in the same order
    (float64), or None when the shard has no weight column.
    """

    pos: np.ndarray
    neg: np.ndarray
    pos_weight: np.ndarray | None
    neg_weight: np.ndarray | None


@dataclasses.dataclass
class ShardScores:
    """Sorted scores of one shard, with the row of each.

    Between the two passes of an evaluation a worker keeps only the row order.

    Attributes
    ----------
    pos, neg : ndarray, float64
        Scores of the positive / negative rows in increasing order.
    pos_rows, neg_rows : ndarray, int64
        Row (within the shard) of every entry of ``pos`` / ``neg``.
    """

    pos: np.ndarray
    neg: np.ndarray
    pos_rows: np.ndarray
    neg_rows: np.ndarray


def score_shard(shard, w: np.ndarray) -> ShardScores:
    """Scores ``X w`` of one shard split by class and sorted.

    The sort need not be stable (the kernels give tied scores equal weights); it is,
    through :func:`dpipe._runs.stable_argsort`, which is faster than NumPy's unstable
    introsort on float64 here.
    """
    s = shard.block.matvec(w) if shard.n_rows else np.zeros(0)
    check_scores(shard, s)
    pos_rows = np.flatnonzero(shard.y > 0)
    neg_rows = np.flatnonzero(shard.y < 0)
    sp, sn = s[pos_rows], s[neg_rows]
    op, on = stable_argsort(sp), stable_argsort(sn)
    return ShardScores(sp[op], sn[on], pos_rows[op], neg_rows[on])


def weighted_row_sum(shard, pos_rows: np.ndarray, neg_rows: np.ndarray, g_pos: np.ndarray, g_neg: np.ndarray) -> np.ndarray:
    """``X^T g`` where row ``pos_rows[k]`` has weight ``g_pos[k]`` (likewise negatives)."""
    g = np.zeros(shard.n_rows)
    g[pos_rows] = g_pos
    g[neg_rows] = g_neg
    return shard.block.rmatvec(g) if shard.n_rows else np.zeros(shard.block.shape[1])


#: fit token -> {shard number: (pass key, row order)}: the order of each shard's latest score pass.
#: Only the order is kept (the scores went to the driver), as int32 rows within the shard:
#: 4 bytes per row of worker memory between the two passes, where the full ShardScores took 16.
#: A gradient pass only ever follows its fit's latest score pass, so one entry per shard and fit
#: is kept, for the :data:`_MEMO_FITS` latest fits (a forgotten order is recomputed, never wrong):
#: a worker holds at most 8 bytes per row of its shards, however many fits it has served.
_MEMO: collections.OrderedDict[str, dict[int, tuple[str, tuple[np.ndarray, np.ndarray]]]] = collections.OrderedDict()
_MEMO_FITS = 2
_MEMO_LOCK = threading.Lock()  # a process with several threads (a worker, the local engine) runs several shards at once


def _remember(key: str, shard_index: int, rows: tuple[np.ndarray, np.ndarray]) -> None:
    token = key.rsplit("-", 1)[0]
    with _MEMO_LOCK:
        _MEMO.setdefault(token, {})[shard_index] = (key, rows)
        _MEMO.move_to_end(token)
        while len(_MEMO) > _MEMO_FITS:
            _MEMO.popitem(last=False)


def _recall(key: str, shard_index: int, keep: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """The row order of score pass ``key`` on this shard (None: forgotten); ``keep`` leaves it for more passes at the same scores."""
    with _MEMO_LOCK:
        fit = _MEMO.get(key.rsplit("-", 1)[0], {})
        entry = fit.get(shard_index) if keep else fit.pop(shard_index, None)
    return entry[1] if entry is not None and entry[0] == key else None


def _order(shard, w: np.ndarray, key: str, keep: bool) -> tuple[np.ndarray, np.ndarray]:
    rows = _recall(key, shard.index, keep)
    if rows is None:  # forgotten (a restarted worker, a task run elsewhere): the order of w again
        sc = score_shard(shard, w)
        rows = (sc.pos_rows, sc.neg_rows)
        if keep:
            small = np.int32 if shard.n_rows < 2**31 else np.int64
            _remember(key, shard.index, (rows[0].astype(small), rows[1].astype(small)))
    return rows


def class_runs(shard, sc: ShardScores) -> ClassRuns:
    """A shard's sorted scores as the driver receives them: with each row's sample weight in the same order (float64), if any."""
    if shard.weight is None:
        return ClassRuns(sc.pos, sc.neg, None, None)
    check_weights(shard)
    v = shard.weight
    return ClassRuns(sc.pos, sc.neg, v[sc.pos_rows].astype(np.float64), v[sc.neg_rows].astype(np.float64))


def score_pass(shard, w: np.ndarray, key: str) -> ClassRuns:
    """Sorted positive and negative scores (and weights) of a shard; remembers the order under ``key`` (``"FIT-PASS"``)."""
    sc = score_shard(shard, w)
    small = np.int32 if shard.n_rows < 2**31 else np.int64
    _remember(key, shard.index, (sc.pos_rows.astype(small), sc.neg_rows.astype(small)))
    return class_runs(shard, sc)


def class_scores(shard, w: np.ndarray) -> ClassRuns:
    """Sorted positive and negative scores (and weights) of a shard, remembering nothing (a score-only pass)."""
    return class_runs(shard, score_shard(shard, w))


def class_score_summary(shard, w: np.ndarray, points: int) -> ClassRuns:
    """A shard's sorted scores per class, at most ``points`` a class: each class's sorted run cut into ``points`` blocks
    of (nearly) equal row counts, each block kept as its weighted mean score with the block's weight (a class of at
    most ``points`` rows is kept whole). The weights are always given (the row counts without a weight column).

    What a search along a ray needs of the scores' distribution (:func:`~dpipe.objectives.ray_minimum`), in
    ``16 * points`` bytes a class instead of 8 a row.
    """
    runs = class_runs(shard, score_shard(shard, w))
    pos, pos_weight = _summary(runs.pos, runs.pos_weight, points)
    neg, neg_weight = _summary(runs.neg, runs.neg_weight, points)
    return ClassRuns(pos, neg, pos_weight, neg_weight)


def _summary(scores: np.ndarray, weight: np.ndarray | None, points: int) -> tuple[np.ndarray, np.ndarray]:
    v = np.ones(scores.size) if weight is None else np.asarray(weight, dtype=np.float64)
    if scores.size <= points:
        return scores, v
    starts = np.linspace(0, scores.size, points + 1).astype(np.int64)[:-1]
    total = np.add.reduceat(v, starts)
    mass = np.add.reduceat(v * scores, starts)
    middle = scores[np.minimum(starts + np.diff(np.append(starts, scores.size)) // 2, scores.size - 1)]
    mean = np.divide(mass, total, out=middle.copy(), where=total > 0)  # a block of zero weight keeps its middle score
    return mean, total


def gradient_pass(shard, w: np.ndarray, key: str, g_pos: np.ndarray, g_neg: np.ndarray) -> np.ndarray:
    """``X^T g`` for the weights of the score pass ``key`` (the order recomputed from ``w`` if forgotten); the order is then dropped."""
    return weighted_row_sum(shard, *_order(shard, w, key, False), g_pos, g_neg)


def product_pass(shard, w: np.ndarray, key: str, g_pos: np.ndarray, g_neg: np.ndarray) -> np.ndarray:
    """:func:`gradient_pass` that keeps the order: for the gradient and the Hessian-vector products at one Newton iterate
    (with :func:`direction_pass`), until the fit's next score pass replaces it."""
    return weighted_row_sum(shard, *_order(shard, w, key, True), g_pos, g_neg)


def gradient_squares_pass(shard, w: np.ndarray, key: str, g_pos: np.ndarray, g_neg: np.ndarray, c_pos: np.ndarray,
                          c_neg: np.ndarray) -> np.ndarray:
    """:func:`product_pass` (it keeps the order) that also returns ``(X * X)^T c``, reading ``X`` once: shape ``(2, d)``.

    ``c`` is every row's curvature (the diagonal of the pairwise ``M``): the second row is
    the diagonal of ``X^T M X`` without the pairs' cross terms, Newton's Jacobi preconditioner.
    """
    return weighted_row_sums_and_squares(shard, *_order(shard, w, key, True), g_pos, g_neg, c_pos, c_neg)


def weighted_row_sums_and_squares(shard, pos_rows: np.ndarray, neg_rows: np.ndarray, g_pos: np.ndarray, g_neg: np.ndarray, c_pos: np.ndarray,
                                  c_neg: np.ndarray) -> np.ndarray:
    """``[X^T g, (X * X)^T c]`` (shape ``(2, d)``, reading ``X`` once) where row ``pos_rows[k]`` has ``g_pos[k]`` and ``c_pos[k]`` (likewise negatives)."""
    d = shard.block.shape[1]
    if not shard.n_rows:
        return np.zeros((2, d))
    g, c = np.zeros(shard.n_rows), np.zeros(shard.n_rows)
    g[pos_rows], g[neg_rows] = g_pos, g_neg
    c[pos_rows], c[neg_rows] = c_pos, c_neg
    return shard.block.rmatvec_squares(g, c)


def direction_pass(shard, w: np.ndarray, key: str, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``X d`` of the shard's positive and negative rows, in the sorted order of score pass ``key`` (no sort; kept)."""
    pos_rows, neg_rows = _order(shard, w, key, True)
    u = shard.block.matvec(d) if shard.n_rows else np.zeros(0)
    return u[pos_rows], u[neg_rows]
