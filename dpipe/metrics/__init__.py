"""Evaluation metrics of binary classifiers (exact, single-sort implementations)."""

from ._exact import (
    RankSummary,
    accuracy_score,
    binary_metrics,
    f1_score,
    prbep_score,
    precision_at_k,
    precision_score,
    recall_at_k,
    recall_score,
    resolve_k,
    roc_auc_score,
    roc_curve_points,
)

__all__ = [
    "RankSummary",
    "roc_auc_score",
    "prbep_score",
    "precision_at_k",
    "recall_at_k",
    "accuracy_score",
    "precision_score",
    "recall_score",
    "f1_score",
    "binary_metrics",
    "roc_curve_points",
    "resolve_k",
]
