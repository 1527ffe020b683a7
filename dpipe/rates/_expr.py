"""Rates, their linear combinations and constraints on them (Goh et al., "Satisfying real-world goals
with dataset constraints", Table 2).

A *dataset* is a store (by its alias, ``"train"`` unless named) or a subset of one: by
label, by the value of its group column, or by the prediction of a saved (deployed)
model. On a dataset ``D`` and a linear model ``f(x) = w.x - b``, the positive rate is
``s_p(D) = (1/|D|) sum_{x in D} v_x 1[f(x) > 0]`` (``v_x`` the sample weight, 1 without
weights). Every goal of the paper is a linear combination of *row means* of that
kind — the mean over ``D`` of ``1[s f(x) > 0]`` where the sign ``s`` of a row is fixed
by the term: ``+1`` (positive rate), ``-1`` (negative rate), minus the row's label
(error rate) or minus the deployed model's prediction (churn). Ratio metrics
(precision, F1) are multiplied out into such combinations of *counts* (appendix B).

Everything here is symbolic; :mod:`dpipe.rates._cells` turns it into per-row
coefficients for given stores.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable
from typing import Literal

from ..exceptions import ParameterError

__all__ = [
    "Dataset", "Term", "RateExpression", "Constraint",
    "positive_rate", "negative_rate", "true_positive_rate", "false_positive_rate", "false_negative_rate", "true_negative_rate",
    "error_rate", "accuracy", "recall", "coverage", "churn", "precision_at_least", "f1_at_least", "RATES", "RATIOS",
]

#: how a term's row sign is set: "positive" (+1), "negative" (-1), "error" (minus the row's label), "churn" (minus the deployed model's prediction)
Side = Literal["positive", "negative", "error", "churn"]


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A store, or the rows of it with a label, a group value and/or a deployed model's prediction.

    Parameters
    ----------
    on : str
        Alias of the store (``"train"``: the store being trained on).
    label : {+1, -1} or None
        Only the rows of this label.
    group : str or None
        Only the rows of this value of the store's group column (as ingested).
    baseline : str or None
        Path of a saved dpipe model; with ``baseline_label`` only the rows it predicts so.
    baseline_label : {+1, -1} or None
        The deployed model's prediction selected (needs ``baseline``).
    """

    on: str = "train"
    label: int | None = None
    group: str | None = None
    baseline: str | None = None
    baseline_label: int | None = None

    def __post_init__(self) -> None:
        for name in ("label", "baseline_label"):
            value = getattr(self, name)
            if value not in (None, 1, -1):
                raise ParameterError(f"The {name!r} parameter of a rate must be +1, -1 or None. Got {value!r} instead.")
        if self.baseline_label is not None and self.baseline is None:
            raise ParameterError("The 'baseline_label' parameter of a rate needs 'baseline' (the deployed model).")

    def describe(self) -> str:
        parts = [] if self.on == "train" else [f"on={self.on}"]
        if self.label is not None:
            parts.append(f"label={self.label:+d}")
        if self.group is not None:
            parts.append(f"group={self.group}")
        if self.baseline_label is not None:
            parts.append(f"baseline={self.baseline_label:+d}")
        return ", ".join(parts)


@dataclasses.dataclass(frozen=True)
class Term:
    """``coef`` times the weighted mean (or, with ``count``, the weighted sum) over ``dataset`` of ``1[s f(x) > 0]``."""

    dataset: Dataset
    side: Side
    coef: float = 1.0
    count: bool = False
    baseline: str | None = None  # the deployed model of a churn term

    def scaled(self, factor: float) -> Term:
        return dataclasses.replace(self, coef=self.coef * factor)


def _as_expression(value: object) -> RateExpression:
    if isinstance(value, RateExpression):
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return RateExpression((), float(value))
    raise TypeError(f"a rate expression combines rates and numbers, not {type(value).__name__}")


@dataclasses.dataclass(frozen=True)
class RateExpression:
    """A linear combination of rate terms plus a constant; compare it with ``<=`` / ``>=`` to get a :class:`Constraint`."""

    terms: tuple[Term, ...]
    constant: float = 0.0
    text: str = ""

    def __add__(self, other: object) -> RateExpression:
        o = _as_expression(other)
        return RateExpression(self.terms + o.terms, self.constant + o.constant)

    __radd__ = __add__

    def __neg__(self) -> RateExpression:
        return self * -1.0

    def __sub__(self, other: object) -> RateExpression:
        return self + (-_as_expression(other))

    def __rsub__(self, other: object) -> RateExpression:
        return _as_expression(other) - self

    def __mul__(self, factor: object) -> RateExpression:
        if not isinstance(factor, numbers.Real) or isinstance(factor, bool):
            raise TypeError("rates can be multiplied by numbers only (a product of rates is not linear)")
        return RateExpression(tuple(t.scaled(float(factor)) for t in self.terms), self.constant * float(factor))

    __rmul__ = __mul__

    def __truediv__(self, divisor: object) -> RateExpression:
        if not isinstance(divisor, numbers.Real) or isinstance(divisor, bool) or divisor == 0:
            raise TypeError("rates can be divided by non-zero numbers only (a ratio of rates is written multiplied out)")
        return self * (1.0 / float(divisor))

    def __le__(self, other: object) -> Constraint:
        return Constraint(self - _as_expression(other))

    def __ge__(self, other: object) -> Constraint:
        return Constraint(_as_expression(other) - self)

    @property
    def is_constant(self) -> bool:
        return all(t.coef == 0 for t in self.terms)

    def __str__(self) -> str:
        return self.text or " + ".join(f"{t.coef:g}*{t.side}({t.dataset.describe()})" for t in self.terms) + (f" + {self.constant:g}" if self.constant else "")


@dataclasses.dataclass(frozen=True)
class Constraint:
    """``expression <= 0``: a linear combination of rates bounded above (``>=`` is flipped into this form).

    Attributes
    ----------
    expression : RateExpression
        The left-hand side minus the right-hand side.
    text : str
        How the user wrote it (for reports and errors).
    """

    expression: RateExpression
    text: str = ""

    def named(self, text: str) -> Constraint:
        return dataclasses.replace(self, text=text)

    def __str__(self) -> str:
        return self.text or f"{self.expression} <= 0"

    def __bool__(self) -> bool:
        raise TypeError("a rate constraint has no truth value; pass it to train(constraints=[...])")


def _term(side: Side, dataset: Dataset, count: bool = False, baseline: str | None = None) -> RateExpression:
    return RateExpression((Term(dataset, side, 1.0, count, baseline),))


def positive_rate(*, on: str = "train", label: int | None = None, group: str | None = None) -> RateExpression:
    """Fraction of the rows of the dataset predicted positive (coverage when unlabelled)."""
    return _term("positive", Dataset(on, label, group))


def negative_rate(*, on: str = "train", label: int | None = None, group: str | None = None) -> RateExpression:
    """Fraction of the rows of the dataset predicted negative."""
    return _term("negative", Dataset(on, label, group))


def true_positive_rate(*, on: str = "train", group: str | None = None) -> RateExpression:
    """Recall: the positive rate on the positive rows."""
    return positive_rate(on=on, label=1, group=group)


def false_positive_rate(*, on: str = "train", group: str | None = None) -> RateExpression:
    """The positive rate on the negative rows."""
    return positive_rate(on=on, label=-1, group=group)


def false_negative_rate(*, on: str = "train", group: str | None = None) -> RateExpression:
    """The negative rate on the positive rows."""
    return negative_rate(on=on, label=1, group=group)


def true_negative_rate(*, on: str = "train", group: str | None = None) -> RateExpression:
    """The negative rate on the negative rows."""
    return negative_rate(on=on, label=-1, group=group)


def error_rate(*, on: str = "train", group: str | None = None) -> RateExpression:
    """Fraction of the rows whose prediction differs from their label."""
    return _term("error", Dataset(on, None, group))


def accuracy(*, on: str = "train", group: str | None = None) -> RateExpression:
    """``1 - error_rate``."""
    return 1.0 - error_rate(on=on, group=group)


recall = true_positive_rate
coverage = positive_rate


def churn(baseline: str, *, on: str = "train", group: str | None = None) -> RateExpression:
    """Fraction of the rows whose prediction differs from the saved model ``baseline``'s (churn against the deployed model)."""
    return _term("churn", Dataset(on, None, group, baseline), baseline=baseline)


def _count(side: Side, on: str, label: int, group: str | None) -> RateExpression:
    return _term(side, Dataset(on, label, group), count=True)


def precision_at_least(target: float, *, on: str = "train", group: str | None = None) -> Constraint:
    """``precision >= target`` multiplied out: ``(1 - target) #TP - target #FP >= 0`` (appendix B)."""
    tp, fp = _count("positive", on, 1, group), _count("positive", on, -1, group)
    return ((1.0 - target) * tp - target * fp) >= 0.0


def f1_at_least(target: float, *, on: str = "train", group: str | None = None) -> Constraint:
    """``F1 >= target`` multiplied out: ``2 (1 - target) #TP - target (#FP + #FN) >= 0``."""
    tp, fp, fn = _count("positive", on, 1, group), _count("positive", on, -1, group), _count("negative", on, 1, group)
    return (2.0 * (1.0 - target) * tp - target * (fp + fn)) >= 0.0


#: the rates a constraint string may name, with the keyword arguments each takes
RATES: dict[str, Callable[..., RateExpression]] = {
    "positive_rate": positive_rate, "coverage": coverage, "negative_rate": negative_rate,
    "true_positive_rate": true_positive_rate, "recall": recall, "false_positive_rate": false_positive_rate,
    "false_negative_rate": false_negative_rate, "true_negative_rate": true_negative_rate,
    "error_rate": error_rate, "accuracy": accuracy, "churn": churn,
}
#: the ratios of rates a constraint string may bound from below (``precision(...) >= 0.8``), each multiplied out into a
#: constraint on counts by its function of the bound
RATIOS: dict[str, Callable[..., Constraint]] = {"precision": precision_at_least, "f1": f1_at_least}
