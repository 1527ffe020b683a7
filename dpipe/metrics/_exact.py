"""Exact binary classification metrics computed from one sort of the scores.

Every ranking metric here (ROC-AUC, PRBEP, precision / recall at k, the ROC
curve) and every threshold metric (accuracy, precision, recall, F1) is a function
of one small summary of the data: the distinct score values in decreasing order
and, for each distinct value, how many positive and negative rows carry it.  That
summary is a :class:`RankSummary`.  It is built by one stable ``argsort`` (so every
ranking metric costs O(n log n), never O(n^2)); summaries of disjoint parts of a
data set can be merged exactly (:meth:`RankSummary.merge`), which is what the
distributed evaluation does with per-shard summaries; and a summary can be built
from scores that are already sorted (:meth:`RankSummary.from_sorted`).  The public
functions below are thin wrappers around it.

Conventions
-----------
Labels
    ``y`` holds -1 / +1, or 0 / 1, or booleans; +1 / 1 / True is the positive
    class.  Mixing -1 and 0 is an error.
Scores
    Real numbers (``+-inf`` allowed, NaN is an error), larger means "more
    positive".  They are converted to float64.
Ties
    Ranking metrics treat tied scores without favouring either class: AUC counts
    a tied positive / negative pair as one half, and top-k metrics (PRBEP,
    precision / recall at k) count a tied group that straddles the cut-off
    fractionally -- the value is the expectation of the metric over all random
    orders of the tied rows.
Thresholds
    A row is *predicted positive* iff ``s > threshold`` (strictly; default 0.0,
    i.e. the sign of a linear model's decision function, a score of exactly 0
    being predicted negative).
Zero division
    As scikit-learn's default: precision with no predicted positive, recall with
    no positive label and F1 with neither are 0.0 (no warning is emitted).

Notes
-----
The per-distinct-score reduction is vectorised NumPy (``np.add.reduceat`` on the
sorted labels); the sort dominates the cost, so a numba kernel would not help and
none is used.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validation import check_number
from ..exceptions import ParameterError

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
]


# ---------------------------------------------------------------------------
# input checking
# ---------------------------------------------------------------------------
def _as_positive_mask(y: ArrayLike, owner: str) -> np.ndarray:
    """Return a bool array (True = positive) from -1/+1, 0/1 or bool labels."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ParameterError(f"{owner}: y must be 1-dimensional, got an array of shape {arr.shape}")
    if arr.dtype == np.bool_:
        return arr
    if arr.dtype.kind not in "iuf":
        raise ParameterError(f"{owner}: y must hold -1/+1, 0/1 or bool labels, got dtype {arr.dtype}")
    pos = arr == 1
    neg1 = arr == -1
    zero = arr == 0
    bad = ~(pos | neg1 | zero)
    if bad.any():
        i = int(np.argmax(bad))
        raise ParameterError(f"{owner}: label {arr[i].item()!r} at index {i} is not one of -1, +1 (or 0, 1)")
    if neg1.any() and zero.any():
        i, j = int(np.argmax(neg1)), int(np.argmax(zero))
        raise ParameterError(f"{owner}: y mixes -1 (index {i}) and 0 (index {j}) labels; use -1/+1 or 0/1")
    return pos


def _as_scores(s: ArrayLike, owner: str, name: str = "s") -> np.ndarray:
    arr = np.asarray(s)
    if arr.ndim != 1:
        raise ParameterError(f"{owner}: {name} must be 1-dimensional, got an array of shape {arr.shape}")
    if arr.dtype.kind not in "biuf":
        raise ParameterError(f"{owner}: {name} must hold real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    nan = np.isnan(arr)
    if nan.any():
        raise ParameterError(f"{owner}: {name} is NaN at index {int(np.argmax(nan))}")
    return arr


def _check_inputs(y: ArrayLike, s: ArrayLike, owner: str) -> tuple[np.ndarray, np.ndarray]:
    pos = _as_positive_mask(y, owner)
    scores = _as_scores(s, owner)
    if pos.shape[0] != scores.shape[0]:
        raise ParameterError(f"{owner}: y has {pos.shape[0]} rows but s has {scores.shape[0]}")
    if pos.shape[0] == 0:
        raise ParameterError(f"{owner}: y and s are empty")
    return pos, scores


def _check_threshold(threshold: Any, owner: str) -> float:
    return check_number(threshold, "threshold", owner)


def _resolve_k(k: Any, n: int, owner: str) -> int:
    """``k`` as a row count: an int in [1, n], or a float in (0, 1) = ceil(k * n)."""
    msg = f"The 'k' parameter of {owner} must be an int in the range [1, {n}] or a float in the range (0.0, 1.0). Got {k!r} instead."
    if isinstance(k, (bool, np.bool_)):
        raise ParameterError(msg)
    if isinstance(k, (int, np.integer)):
        k = int(k)
        if not 1 <= k <= n:
            raise ParameterError(msg)
        return k
    if isinstance(k, (float, np.floating)):
        f = float(k)
        if not (0.0 < f < 1.0):  # also rejects NaN
            raise ParameterError(msg)
        x = f * n
        r = round(x)
        # 0.1 * 30 == 3.0000000000000004: do not let float noise add one row.
        kk = r if abs(x - r) <= 1e-9 * max(1.0, x) else math.ceil(x)
        return min(n, max(1, int(kk)))
    raise ParameterError(msg)


def _single_class_error(owner: str, n_neg: int, n_pos: int) -> ParameterError:
    return ParameterError(
        f"{owner} is undefined when y holds a single class (got {n_neg} negative and {n_pos} positive labels)"
    )


def _ratio(num: int, den: int) -> float:
    """``num / den`` correctly rounded, 0.0 when ``den == 0``."""
    return 0.0 if den == 0 else int(num) / int(den)


# ---------------------------------------------------------------------------
# the summary
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class RankSummary:
    """Positive / negative counts per distinct score, scores in decreasing order.

    Every metric of this module is a function of this summary.  Build it with
    :meth:`from_scores` (sorts), :meth:`from_sorted` (scores already sorted, e.g.
    merged from sorted shards) or :meth:`merge` (combine summaries of disjoint
    parts of a data set; the result is exactly the summary of their union).

    Attributes
    ----------
    scores : ndarray of shape (m,), float64
        Distinct score values, strictly decreasing.
    pos, neg : ndarray of shape (m,), int64
        Number of positive / negative rows whose score is ``scores[i]``.
    """

    scores: np.ndarray
    pos: np.ndarray
    neg: np.ndarray

    # -- construction ---------------------------------------------------------
    @classmethod
    def from_scores(cls, y: ArrayLike, s: ArrayLike) -> RankSummary:
        """Summarise labels ``y`` and scores ``s`` (unsorted) with one stable sort."""
        pos, scores = _check_inputs(y, s, "RankSummary.from_scores")
        return _summarise_checked(pos, scores)

    @classmethod
    def from_sorted(cls, s_sorted_desc: ArrayLike, y_sorted: ArrayLike) -> RankSummary:
        """Summarise scores already sorted in non-increasing order and their labels.

        Raises
        ------
        ParameterError
            The scores are not in non-increasing order, or the inputs are invalid.
        """
        owner = "RankSummary.from_sorted"
        pos = _as_positive_mask(y_sorted, owner)
        scores = _as_scores(s_sorted_desc, owner, "s_sorted_desc")
        if pos.shape[0] != scores.shape[0]:
            raise ParameterError(f"{owner}: y_sorted has {pos.shape[0]} rows but s_sorted_desc has {scores.shape[0]}")
        up = scores[1:] > scores[:-1]
        if up.any():
            i = int(np.argmax(up))
            raise ParameterError(f"{owner}: s_sorted_desc is not in non-increasing order at index {i + 1}")
        return _reduce_sorted(scores, pos.astype(np.int64), (~pos).astype(np.int64))

    @classmethod
    def merge(cls, parts: Iterable[RankSummary]) -> RankSummary:
        """Exact summary of the union of the data sets summarised by ``parts``."""
        parts = list(parts)
        if not parts:
            return cls(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
        if len(parts) == 1:
            return parts[0]
        scores = np.concatenate([p.scores for p in parts])
        pos = np.concatenate([p.pos for p in parts])
        neg = np.concatenate([p.neg for p in parts])
        # Each part is a sorted run; the stable sort (timsort) merges the runs.
        order = np.argsort(-scores, kind="stable")
        return _reduce_sorted(scores[order], pos[order], neg[order])

    # -- counts ---------------------------------------------------------------
    @property
    def n_positive(self) -> int:
        """Number of positive rows."""
        return int(self.pos.sum())

    @property
    def n_negative(self) -> int:
        """Number of negative rows."""
        return int(self.neg.sum())

    @property
    def n(self) -> int:
        """Number of rows."""
        return self.n_positive + self.n_negative

    def _require_both_classes(self, owner: str) -> tuple[int, int]:
        n_pos, n_neg = self.n_positive, self.n_negative
        if n_pos == 0 or n_neg == 0:
            raise _single_class_error(owner, n_neg, n_pos)
        return n_pos, n_neg

    # -- ranking metrics ------------------------------------------------------
    def roc_auc(self) -> float:
        """Area under the ROC curve, tied positive / negative pairs counting 1/2."""
        n_pos, n_neg = self._require_both_classes("roc_auc_score")
        # positives ranked strictly above each distinct score
        above = np.cumsum(self.pos) - self.pos
        if n_pos * n_neg < 2**61:
            # exact integer arithmetic: 2 * (#pairs won) + (#pairs tied)
            twice = int(np.dot(self.neg, 2 * above + self.pos))
            return _ratio(twice, 2 * n_pos * n_neg)
        won = float(np.dot(self.neg.astype(np.float64), above + 0.5 * self.pos))
        return won / n_pos / n_neg

    def _positives_in_top(self, k: int) -> tuple[int, int]:
        """Expected positives among the top ``k`` rows as ``(numerator, denominator)``.

        The tied group straddling the cut-off contributes in proportion to the
        share of it that falls inside the top ``k``.
        """
        counts = self.pos + self.neg
        cum = np.cumsum(counts)
        g = int(np.searchsorted(cum, k, side="left"))  # first group reaching k
        before = int(cum[g - 1]) if g else 0
        pos_before = int(self.pos[:g].sum())
        cnt = int(counts[g])
        return pos_before * cnt + int(self.pos[g]) * (k - before), cnt

    def precision_at_k(self, k: int | float) -> float:
        """Expected precision of the top-``k`` rows (ties broken at random)."""
        kk = _resolve_k(k, self.n, "precision_at_k")
        num, den = self._positives_in_top(kk)
        return _ratio(num, den * kk)

    def recall_at_k(self, k: int | float) -> float:
        """Expected recall of the top-``k`` rows (0.0 when there is no positive)."""
        kk = _resolve_k(k, self.n, "recall_at_k")
        num, den = self._positives_in_top(kk)
        return _ratio(num, den * self.n_positive)

    def prbep(self) -> float:
        """Precision (= recall) of the top ``n_positive`` rows, ties counted fractionally."""
        n_pos, _ = self._require_both_classes("prbep_score")
        num, den = self._positives_in_top(n_pos)
        return _ratio(num, den * n_pos)

    def roc_curve(self) -> tuple[np.ndarray, np.ndarray]:
        """``(fpr, tpr)``: one point per distinct score, from (0, 0) to (1, 1)."""
        n_pos, n_neg = self._require_both_classes("roc_curve_points")
        fpr = np.concatenate([[0.0], np.cumsum(self.neg) / n_neg])
        tpr = np.concatenate([[0.0], np.cumsum(self.pos) / n_pos])
        return fpr, tpr

    # -- threshold metrics ----------------------------------------------------
    def confusion(self, threshold: float = 0.0) -> tuple[int, int, int, int]:
        """``(tp, fp, fn, tn)`` of the rule "positive iff score > threshold"."""
        t = _check_threshold(threshold, "RankSummary.confusion")
        m = self.scores.shape[0]
        above = m - int(np.searchsorted(self.scores[::-1], t, side="right"))
        tp = int(self.pos[:above].sum())
        fp = int(self.neg[:above].sum())
        return tp, fp, self.n_positive - tp, self.n_negative - fp

    def best_threshold(self) -> tuple[float, int]:
        """Threshold minimizing the training errors (FP + FN) of "positive iff score > threshold".

        Cuts fall midway between consecutive distinct scores; the first of equally
        good cuts (highest threshold) wins.

        Returns
        -------
        (threshold, errors)
        """
        n_pos = self.n_positive
        errors = np.concatenate([[n_pos], np.cumsum(self.neg) + n_pos - np.cumsum(self.pos)])
        j = int(np.argmin(errors))  # predict the j highest distinct scores positive
        sc = self.scores
        if j == 0:
            t = float(sc[0]) if sc.size else 0.0
        elif j == sc.size:
            t = float(sc[-1]) - 1.0 - abs(float(sc[-1]))
        else:
            t = 0.5 * (float(sc[j - 1]) + float(sc[j]))
            if not float(sc[j]) <= t < float(sc[j - 1]):  # midpoint rounded onto an end
                t = float(sc[j])
        return t, int(errors[j])

    def metrics(self, threshold: float = 0.0, k: int | float | None = None) -> dict[str, float | int]:
        """All metrics; see :func:`binary_metrics`."""
        n_pos = self.n_positive
        auc = self.roc_auc()  # raises on a single class
        kk = n_pos if k is None else _resolve_k(k, self.n, "binary_metrics")
        num, den = self._positives_in_top(kk)
        tp, fp, fn, tn = self.confusion(threshold)
        return {
            "n": self.n,
            "n_positive": n_pos,
            "roc_auc": auc,
            "prbep": self.prbep(),
            "accuracy": _ratio(tp + tn, self.n),
            "precision": _ratio(tp, tp + fp),
            "recall": _ratio(tp, tp + fn),
            "f1": _ratio(2 * tp, 2 * tp + fp + fn),
            "k": kk,
            "prec_at_k": _ratio(num, den * kk),
            "rec_at_k": _ratio(num, den * n_pos),
        }


def _reduce_sorted(scores: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> RankSummary:
    """Collapse rows with equal scores; ``scores`` is non-increasing."""
    n = scores.shape[0]
    if n == 0:
        return RankSummary(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
    # compare with != (not diff) so that +-inf runs are grouped too
    starts = np.flatnonzero(np.concatenate([[True], scores[1:] != scores[:-1]]))
    return RankSummary(
        scores=scores[starts],
        pos=np.add.reduceat(pos, starts).astype(np.int64, copy=False),
        neg=np.add.reduceat(neg, starts).astype(np.int64, copy=False),
    )


def _summarise_checked(pos: np.ndarray, scores: np.ndarray) -> RankSummary:
    order = np.argsort(-scores, kind="stable")
    p = pos[order].astype(np.int64)
    return _reduce_sorted(scores[order], p, 1 - p)


def _summarise(y: ArrayLike, s: ArrayLike, owner: str) -> RankSummary:
    pos, scores = _check_inputs(y, s, owner)
    return _summarise_checked(pos, scores)


def _confusion(y: ArrayLike, s: ArrayLike, threshold: float, owner: str) -> tuple[int, int, int, int]:
    """O(n) ``(tp, fp, fn, tn)`` without sorting."""
    pos, scores = _check_inputs(y, s, owner)
    t = _check_threshold(threshold, owner)
    pred = scores > t
    tp = int(np.count_nonzero(pred & pos))
    fp = int(np.count_nonzero(pred)) - tp
    n_pos = int(np.count_nonzero(pos))
    return tp, fp, n_pos - tp, pos.shape[0] - n_pos - fp


# ---------------------------------------------------------------------------
# public functions
# ---------------------------------------------------------------------------
def roc_auc_score(y: ArrayLike, s: ArrayLike) -> float:
    """Exact area under the ROC curve.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores; larger means more likely positive.

    Returns
    -------
    float
        The probability that a random positive scores above a random negative,
        a tie counting one half.  Computed in O(n log n) by one stable sort.

    Raises
    ------
    ParameterError
        A class is absent, or the inputs are invalid.
    """
    return _summarise(y, s, "roc_auc_score").roc_auc()


def prbep_score(y: ArrayLike, s: ArrayLike) -> float:
    """Precision / recall break-even point.

    The precision of the ``n_pos`` highest-scored rows, ``n_pos`` being the number
    of positives; there precision equals recall.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.

    Returns
    -------
    float

    Raises
    ------
    ParameterError
        A class is absent, or the inputs are invalid.

    Notes
    -----
    When tied scores straddle the cut-off, the tied group counts fractionally:
    if ``j`` of its ``c`` rows fall in the top ``n_pos`` and it holds ``p``
    positives, it contributes ``p * j / c`` positives.  This is the expected
    value of the metric when ties are broken uniformly at random.
    """
    return _summarise(y, s, "prbep_score").prbep()


def precision_at_k(y: ArrayLike, s: ArrayLike, k: int | float) -> float:
    """Precision of the ``k`` highest-scored rows.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    k : int or float
        An int in ``[1, n]``, or a float in ``(0, 1)`` meaning ``ceil(k * n)``
        rows.

    Returns
    -------
    float
        Positives among the top ``k``, divided by ``k``.  A tied group at the
        cut-off counts fractionally (expected value under random tie breaking,
        see :func:`prbep_score`).

    Raises
    ------
    ParameterError
        ``k`` is out of range, or the inputs are invalid.
    """
    return _summarise(y, s, "precision_at_k").precision_at_k(k)


def recall_at_k(y: ArrayLike, s: ArrayLike, k: int | float) -> float:
    """Recall of the ``k`` highest-scored rows.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    k : int or float
        An int in ``[1, n]``, or a float in ``(0, 1)`` meaning ``ceil(k * n)``
        rows.

    Returns
    -------
    float
        Positives among the top ``k`` divided by the number of positives (0.0
        when there is none).  Ties at the cut-off count fractionally, as in
        :func:`precision_at_k`.

    Raises
    ------
    ParameterError
        ``k`` is out of range, or the inputs are invalid.
    """
    return _summarise(y, s, "recall_at_k").recall_at_k(k)


def accuracy_score(y: ArrayLike, s: ArrayLike, threshold: float = 0.0) -> float:
    """Accuracy of the predictions "positive iff ``s > threshold``".

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores (e.g. a linear model's decision function).
    threshold : float, default=0.0
        Rows with ``s > threshold`` (strictly) are predicted positive.

    Returns
    -------
    float
    """
    tp, fp, fn, tn = _confusion(y, s, threshold, "accuracy_score")
    return _ratio(tp + tn, tp + fp + fn + tn)


def precision_score(y: ArrayLike, s: ArrayLike, threshold: float = 0.0) -> float:
    """Precision of the predictions "positive iff ``s > threshold``".

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    threshold : float, default=0.0
        Rows with ``s > threshold`` (strictly) are predicted positive.

    Returns
    -------
    float
        ``tp / (tp + fp)``; 0.0 when nothing is predicted positive.
    """
    tp, fp, _, _ = _confusion(y, s, threshold, "precision_score")
    return _ratio(tp, tp + fp)


def recall_score(y: ArrayLike, s: ArrayLike, threshold: float = 0.0) -> float:
    """Recall of the predictions "positive iff ``s > threshold``".

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    threshold : float, default=0.0
        Rows with ``s > threshold`` (strictly) are predicted positive.

    Returns
    -------
    float
        ``tp / (tp + fn)``; 0.0 when there is no positive label.
    """
    tp, _, fn, _ = _confusion(y, s, threshold, "recall_score")
    return _ratio(tp, tp + fn)


def f1_score(y: ArrayLike, s: ArrayLike, threshold: float = 0.0) -> float:
    """F1 score of the predictions "positive iff ``s > threshold``".

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    threshold : float, default=0.0
        Rows with ``s > threshold`` (strictly) are predicted positive.

    Returns
    -------
    float
        ``2 tp / (2 tp + fp + fn)``; 0.0 when there is neither a positive label
        nor a positive prediction.
    """
    tp, fp, fn, _ = _confusion(y, s, threshold, "f1_score")
    return _ratio(2 * tp, 2 * tp + fp + fn)


def binary_metrics(
    y: ArrayLike, s: ArrayLike, threshold: float = 0.0, k: int | float | None = None
) -> dict[str, float | int]:
    """Every metric of this module from a single sort.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    threshold : float, default=0.0
        Threshold of the accuracy / precision / recall / F1 predictions
        (positive iff ``s > threshold``).
    k : int or float, optional
        Cut-off of ``prec_at_k`` / ``rec_at_k`` (see :func:`precision_at_k`);
        default the number of positives (then ``prec_at_k == prbep``).

    Returns
    -------
    dict
        Keys ``n``, ``n_positive``, ``roc_auc``, ``prbep``, ``accuracy``,
        ``precision``, ``recall``, ``f1``, ``k`` (the resolved row count),
        ``prec_at_k`` and ``rec_at_k``.

    Raises
    ------
    ParameterError
        A class is absent (AUC and PRBEP are undefined), or a parameter is
        invalid.
    """
    summary = _summarise(y, s, "binary_metrics")
    _check_threshold(threshold, "binary_metrics")
    return summary.metrics(threshold=threshold, k=k)


def roc_curve_points(y: ArrayLike, s: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Points of the ROC curve, for plotting.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.

    Returns
    -------
    fpr, tpr : ndarray of shape (m + 1,)
        False and true positive rates of the rules "positive iff s >= v" for
        every distinct score ``v`` in decreasing order, preceded by (0, 0); the
        last point is (1, 1).  The trapezoidal area under them is
        :func:`roc_auc_score`.

    Raises
    ------
    ParameterError
        A class is absent, or the inputs are invalid.
    """
    return _summarise(y, s, "roc_curve_points").roc_curve()
