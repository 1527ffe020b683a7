"""Worker-side reductions: pure functions of (shard, small parameters)."""

from ._moments import (
    ClassMoments,
    ColumnMoments,
    class_moments_of_shard,
    column_moments_of_shard,
    merge_column_moments,
    merge_moments,
    moments_reference,
    shard_moments,
)
from ._scores import shard_scores, shard_scores_labels, shard_sorted_scores
from ._sorted import ShardScores, class_scores, gradient_pass, score_pass, score_shard, weighted_row_sum

__all__ = [
    "ClassMoments",
    "ColumnMoments",
    "column_moments_of_shard",
    "merge_column_moments",
    "shard_moments",
    "class_moments_of_shard",
    "merge_moments",
    "moments_reference",
    "shard_scores",
    "shard_scores_labels",
    "shard_sorted_scores",
    "ShardScores",
    "score_shard",
    "score_pass",
    "class_scores",
    "gradient_pass",
    "weighted_row_sum",
]
