"""Worker-side reductions: pure functions of (shard, small parameters).

The names are imported from their modules on first use.
"""

from .._lazy import attach

#: exported name -> the private module that defines it
_LAZY = {
    "unit_scales": "._moments",
    "ClassMoments": "._moments",
    "ColumnMoments": "._moments",
    "column_moments_of_shard": "._moments",
    "merge_column_moments": "._moments",
    "shard_moments": "._moments",
    "class_moments_of_shard": "._moments",
    "merge_moments": "._moments",
    "shard_scores": "._scores",
    "class_totals_of_shard": "._scores",
    "shard_scores_labels": "._scores",
    "shard_sorted_scores": "._scores",
    "ShardScores": "._sorted",
    "ClassRuns": "._sorted",
    "score_shard": "._sorted",
    "score_pass": "._sorted",
    "class_scores": "._sorted",
    "class_score_summary": "._sorted",
    "gradient_pass": "._sorted",
    "weighted_row_sum": "._sorted",
}

__all__ = [*_LAZY]
__getattr__, __dir__ = attach(__name__, _LAZY)
