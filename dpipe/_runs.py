"""Sorted runs: the one merge of per-shard sorted arrays, and the scatter back to the shards.

Every pass that sorts on the workers (the smoothed objectives' and the cutting
plane's score pass, evaluation, the rank summary) sends one increasing run per
shard; the driver merges them here and, where per-example weights go back to the
shards, scatters them with the same permutation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

__all__ = ["MergedScores", "merge_runs", "scatter_runs"]


def merge_runs(runs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Merge increasing runs: (merged values, permutation of the concatenation, run lengths).

    A stable sort of the concatenation: numpy's timsort finds the k runs and merges
    them in O(n log k). ``merged == concatenate(runs)[order]``.
    """
    lengths = [int(r.size) for r in runs]
    cat = np.concatenate(runs) if len(runs) else np.zeros(0)
    order = np.argsort(cat, kind="stable")
    return cat[order], order, lengths


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
        return float(self.pos_weight.sum()), float(self.neg_weight.sum())

    def scaled(self, alpha: float, shift: float = 0.0) -> MergedScores:
        """The scores of ``alpha w`` (plus a constant ``shift``): the order is unchanged for ``alpha > 0``."""
        return dataclasses.replace(self, pos=alpha * self.pos + shift, neg=alpha * self.neg + shift)
