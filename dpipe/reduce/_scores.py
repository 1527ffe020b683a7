"""Per-shard scores for evaluation and prediction (worker side, pure)."""

from __future__ import annotations

import numpy as np

from ._finite import check_scores, check_weights

__all__ = ["shard_scores", "shard_scores_labels", "shard_sorted_scores", "class_totals_of_shard"]


def shard_scores(shard, coef: np.ndarray, intercept: float) -> np.ndarray:
    """Scores ``X @ coef + intercept`` of one shard in float64, row order kept.

    Raises :class:`~dpipe.exceptions.ShardValueError` at a non-finite feature or sample weight.
    """
    with np.errstate(invalid="ignore", over="ignore"):  # an inf feature times a zero coefficient: the check below names it
        s = shard.block.matvec(coef) + intercept if shard.n_rows else np.zeros(0)
    check_scores(shard, s)
    check_weights(shard)
    return s


def shard_scores_labels(shard, coef: np.ndarray, intercept: float) -> tuple[np.ndarray, np.ndarray]:
    """Scores and labels of one shard, row order kept (for prediction files)."""
    return shard_scores(shard, coef, intercept), shard.y


def shard_sorted_scores(shard, coef: np.ndarray, intercept: float) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Scores of one shard sorted in increasing order, with their labels and sample weights.

    The driver merges the sorted runs of all shards (a merge, not a fresh sort) to
    compute exact rank metrics. Moves 9 bytes per row (17 with a weight column).
    """
    s = shard_scores(shard, coef, intercept)
    order = np.argsort(s, kind="stable")
    weight = None if shard.weight is None else shard.weight[order].astype(np.float64)
    return s[order], shard.y[order], weight


def class_totals_of_shard(shard) -> np.ndarray:
    """``[W-, W+, F]``: the negative and positive rows' total sample weight (their counts without weights) and the number of fractional weights."""
    check_weights(shard)
    v = np.ones(shard.n_rows) if shard.weight is None else shard.weight.astype(np.float64)
    pos = shard.y > 0
    return np.array([v[~pos].sum(), v[pos].sum(), float(np.count_nonzero(v != np.round(v)))])
