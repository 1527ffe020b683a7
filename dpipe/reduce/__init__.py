"""Worker-side reductions: pure functions of (shard, small parameters)."""

from ._moments import (
    unit_scales,
    ClassMoments,
    ColumnMoments,
    class_moments_of_shard,
    column_moments_of_shard,
    merge_column_moments,
    merge_moments,
    shard_moments,
)
from ._scores import class_totals_of_shard, shard_scores, shard_scores_labels, shard_sorted_scores
from ._sorted import ClassRuns, ShardScores, class_scores, gradient_pass, score_pass, score_shard, weighted_row_sum

__all__ = [
    "unit_scales",
    "ClassMoments",
    "ColumnMoments",
    "column_moments_of_shard",
    "merge_column_moments",
    "shard_moments",
    "class_moments_of_shard",
    "merge_moments",
    "shard_scores",
    "class_totals_of_shard",
    "shard_scores_labels",
    "shard_sorted_scores",
    "ShardScores",
    "ClassRuns",
    "score_shard",
    "score_pass",
    "class_scores",
    "gradient_pass",
    "weighted_row_sum",
]
