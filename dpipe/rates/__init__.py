"""Rates on datasets and constraints on them, for training under rate constraints.

Build constraints in code::

    from dpipe import rates
    fair = rates.positive_rate(group="Female") >= 0.8 * rates.positive_rate(group="Male")
    recall = rates.recall() >= 0.9

or parse the strings the command line takes (:func:`parse_constraint`)::

    rates.parse_constraint("positive_rate(group=Female) >= 0.8 * positive_rate(group=Male)")
"""

from ._expr import (
    RATES,
    Constraint,
    Dataset,
    RateExpression,
    Term,
    accuracy,
    churn,
    coverage,
    error_rate,
    f1_at_least,
    false_negative_rate,
    false_positive_rate,
    negative_rate,
    positive_rate,
    precision_at_least,
    recall,
    true_negative_rate,
    true_positive_rate,
)
from ._parse import parse_constraint, parse_objective
from ._report import ConstraintReport, RateMeasure

__all__ = [
    "Constraint", "Dataset", "RateExpression", "Term", "RATES", "parse_constraint", "parse_objective", "ConstraintReport", "RateMeasure",
    "positive_rate", "negative_rate", "true_positive_rate", "false_positive_rate", "false_negative_rate", "true_negative_rate",
    "error_rate", "accuracy", "recall", "coverage", "churn", "precision_at_least", "f1_at_least",
]
