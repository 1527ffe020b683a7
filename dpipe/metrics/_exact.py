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
Sample weights
    Every function takes ``sample_weight`` (finite, non-negative; default none).
    A weighted row counts as if it were repeated ``w_i`` times, so integer
    weights give exactly the metrics of the repeated rows: the summary's
    ``pos`` / ``neg`` become float64 sums of weights, AUC weighs each
    positive / negative pair by ``w_+ * w_-``, the confusion counts are weight
    sums (as scikit-learn's ``sample_weight``), and a class whose weight sums
    to 0 counts as absent.  Rows of weight 0 are dropped from the ranking (as
    scikit-learn's ROC curve does) but still counted in ``n`` / ``n_positive``.
    Without weights the counts stay int64 and the arithmetic exact.
The cut-off ``k`` of precision / recall at k
    ``k`` is only ever a count: a number of rows, an int in ``[1, n]``; with
    sample weights a number of rows counted in weight units, i.e. a positive
    float ``k <= total weight`` selecting the top rows whose total weight is
    ``k`` (a row straddling the cut-off counts in part, like a straddling tied
    group).  A fraction is given separately, as ``k_fraction``: a fraction of
    the positives, ``k = round(k_fraction * n_positive)`` rows (at least 1; the
    training rule of SVM-perf's ``--p``), with weights ``k = k_fraction *
    weight_positive``.  ``k`` and ``k_fraction`` exclude each other; when
    neither is given, :func:`binary_metrics` uses the number (weight) of
    positives, where precision at k equals PRBEP.

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
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from .._ramp import ramp
from .._runs import merge_runs
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
    "resolve_k",
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


def _as_weights(w: ArrayLike, n: int, owner: str, name: str = "sample_weight", against: str = "y") -> np.ndarray:
    """Validated float64 sample weights: 1-D, ``n`` rows, finite, non-negative."""
    arr = np.asarray(w)
    if arr.ndim != 1:
        raise ParameterError(f"{owner}: {name} must be 1-dimensional, got an array of shape {arr.shape}")
    if arr.dtype.kind not in "biuf":
        raise ParameterError(f"{owner}: {name} must hold real numbers, got dtype {arr.dtype}")
    if arr.shape[0] != n:
        raise ParameterError(f"{owner}: {name} has {arr.shape[0]} rows but {against} has {n}")
    arr = arr.astype(np.float64, copy=False)
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.argmax(bad))
        raise ParameterError(f"{owner}: {name} must be finite, got {arr[i].item()!r} at index {i}")
    bad = arr < 0
    if bad.any():
        i = int(np.argmax(bad))
        raise ParameterError(f"{owner}: {name} must be non-negative, got {arr[i].item()!r} at index {i}")
    return arr


def _check_inputs(
    y: ArrayLike, s: ArrayLike, owner: str, sample_weight: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    pos = _as_positive_mask(y, owner)
    scores = _as_scores(s, owner)
    if pos.shape[0] != scores.shape[0]:
        raise ParameterError(f"{owner}: y has {pos.shape[0]} rows but s has {scores.shape[0]}")
    if pos.shape[0] == 0:
        raise ParameterError(f"{owner}: y and s are empty")
    w = None if sample_weight is None else _as_weights(sample_weight, pos.shape[0], owner)
    return pos, scores, w


def _check_threshold(threshold: Any, owner: str) -> float:
    return check_number(threshold, "threshold", owner)


def _ratio(num: int | float, den: int | float) -> float:
    """``num / den`` correctly rounded, 0.0 when ``den == 0``.

    Python ints divide exactly rounded whatever their size; floats (weight sums)
    divide as floats.
    """
    if den == 0:
        return 0.0
    if isinstance(num, (int, np.integer)) and isinstance(den, (int, np.integer)):
        return int(num) / int(den)
    return float(num) / float(den)


def resolve_k(k: Any, k_fraction: Any, *, positive: float, total: float, integral: bool, owner: str) -> int | float:
    """The one rule for the cut-off of Prec@k / Rec@k, in training and in evaluation.

    ``k`` is a number of rows predicted positive; ``k_fraction`` is k as a fraction of the
    positives (SVM-perf's ``-p``); exactly one is given. Rows are counted in weight units
    with sample weights (a row of weight v counts as v rows). While every weight is a
    whole number (or there are none) k is a whole number of rows: ``k`` must be an int
    and ``k_fraction`` gives ``max(1, round(k_fraction * positives))``, so integer weights
    give the k of the repeated rows. With fractional weights ``k`` may be any amount in
    ``(0, total]`` and ``k_fraction`` gives ``k_fraction * positives``, unrounded.

    Parameters
    ----------
    k, k_fraction : number or None
        As given by the user.
    positive, total : float
        The positives' and all rows' count (total weight with sample weights).
    integral : bool
        No weights, or every weight a whole number.
    owner : str
        Who asks, for the messages.
    """
    unit = "rows" if integral else "rows, counted in weight units"
    if k is not None and k_fraction is not None:
        raise ParameterError(
            f"The 'k' and 'k_fraction' parameters of {owner} exclude each other: give k (a number of {unit}) "
            "or k_fraction (a fraction of the positives), not both."
        )
    if k_fraction is not None:
        f = check_number(k_fraction, "k_fraction", owner, 0.0, math.inf)
        if positive == 0:
            raise ParameterError(f"The 'k_fraction' parameter of {owner} is a fraction of the positives, which are {positive!r}.")
        if integral:
            kf: int | float = max(1, int(round(f * positive)))
            ok = kf <= total
        else:
            kf = f * positive
            ok = kf <= total * (1.0 + 1e-12)
            kf = min(kf, total)
        if not ok:
            raise ParameterError(f"The 'k_fraction' parameter of {owner} gives k = {f!r} x {positive!r} positives = {kf!r}, more than "
                                 f"the {total!r} {unit}.")
        return kf
    if integral:
        msg = f"The 'k' parameter of {owner} must be an int in the range [1, {int(total)}] (a number of {unit}). Got {k!r} instead."
    else:
        msg = (f"The 'k' parameter of {owner} must be a number in the range (0, {total!r}]: with fractional sample weights k "
               f"counts rows in weight units (the top rows whose total weight is k). Got {k!r} instead.")
    if k is None:
        raise ParameterError(msg + " Give k, or k_fraction (a fraction of the positives).")
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer, float, np.floating)):
        raise ParameterError(msg)
    if not integral:
        v = float(k)
        if not (0.0 < v <= total * (1.0 + 1e-12)):  # also rejects NaN
            raise ParameterError(msg)
        return min(v, total)
    if isinstance(k, (float, np.floating)) and not float(k).is_integer():
        raise ParameterError(msg + " k is a count of rows: use k_fraction for a fraction of the positives "
                             "(e.g. k_fraction=0.01 is 1% of the number of positives).")
    kk = int(k)
    if not 1 <= kk <= total:
        raise ParameterError(msg)
    return kk


# ---------------------------------------------------------------------------
# the summary
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class RankSummary:
    """Positive / negative counts (or weights) per distinct score, scores in decreasing order.

    Every metric of this module is a function of this summary.  Build it with
    :meth:`from_scores` (sorts), :meth:`from_sorted` (scores already sorted, e.g.
    merged from sorted shards) or :meth:`merge` (combine summaries of disjoint
    parts of a data set; the result is exactly the summary of their union).

    Attributes
    ----------
    scores : ndarray of shape (m,), float64
        Distinct score values, strictly decreasing.
    pos, neg : ndarray of shape (m,), int64, or float64 with sample weights
        Number (without sample weights) or total sample weight (with them) of
        the positive / negative rows whose score is ``scores[i]``.  Weighted
        summaries hold no group of zero total weight.
    n_rows_positive, n_rows_negative : int or None
        Row counts of a weighted summary (rows of weight 0 included); None when
        ``pos`` / ``neg`` are the counts themselves.
    """

    scores: np.ndarray
    pos: np.ndarray
    neg: np.ndarray
    n_rows_positive: int | None = None
    n_rows_negative: int | None = None

    # -- construction ---------------------------------------------------------
    @classmethod
    def from_scores(cls, y: ArrayLike, s: ArrayLike, sample_weight: ArrayLike | None = None) -> RankSummary:
        """Summarise labels ``y`` and scores ``s`` (unsorted) with one stable sort.

        ``sample_weight`` (finite, non-negative) makes ``pos`` / ``neg`` float64
        sums of weights.
        """
        pos, scores, w = _check_inputs(y, s, "RankSummary.from_scores", sample_weight)
        return _summarise_checked(pos, scores, w)

    @classmethod
    def from_sorted(
        cls, s_sorted_desc: ArrayLike, y_sorted: ArrayLike, weight_sorted: ArrayLike | None = None
    ) -> RankSummary:
        """Summarise scores already sorted in non-increasing order, their labels and (optionally) sample weights.

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
        w = None
        if weight_sorted is not None:
            w = _as_weights(weight_sorted, pos.shape[0], owner, "weight_sorted (the sample_weight of the sorted rows)", "y_sorted")
        up = scores[1:] > scores[:-1]
        if up.any():
            i = int(np.argmax(up))
            raise ParameterError(f"{owner}: s_sorted_desc is not in non-increasing order at index {i + 1}")
        if w is None:
            return _reduce_sorted(scores, pos.astype(np.int64), (~pos).astype(np.int64))
        n_pos = int(np.count_nonzero(pos))
        return _reduce_sorted(scores, np.where(pos, w, 0.0), np.where(pos, 0.0, w), (n_pos, pos.shape[0] - n_pos))

    @classmethod
    def merge(cls, parts: Iterable[RankSummary]) -> RankSummary:
        """Exact summary of the union of the data sets summarised by ``parts``.

        Weighted and unweighted parts may be mixed (an unweighted row weighs 1);
        the result is weighted (float64) if any part is.
        """
        parts = list(parts)
        if not parts:
            return cls(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
        if len(parts) == 1:
            return parts[0]
        scores = np.concatenate([p.scores for p in parts])
        _, order, _ = merge_runs([-p.scores for p in parts])  # each part is a decreasing run
        if not any(p.weighted for p in parts):
            pos = np.concatenate([p.pos for p in parts])
            neg = np.concatenate([p.neg for p in parts])
            return _reduce_sorted(scores[order], pos[order], neg[order])
        pos = np.concatenate([p.pos.astype(np.float64, copy=False) for p in parts])
        neg = np.concatenate([p.neg.astype(np.float64, copy=False) for p in parts])
        rows = (sum(p.n_positive for p in parts), sum(p.n_negative for p in parts))
        return _reduce_sorted(scores[order], pos[order], neg[order], rows)

    # -- counts ---------------------------------------------------------------
    @property
    def weighted(self) -> bool:
        """Whether ``pos`` / ``neg`` hold sums of sample weights (float64) rather than counts."""
        return self.pos.dtype.kind == "f" or self.neg.dtype.kind == "f"

    @property
    def n_positive(self) -> int:
        """Number of positive rows (rows of weight 0 included)."""
        return int(self.pos.sum()) if self.n_rows_positive is None else int(self.n_rows_positive)

    @property
    def n_negative(self) -> int:
        """Number of negative rows (rows of weight 0 included)."""
        return int(self.neg.sum()) if self.n_rows_negative is None else int(self.n_rows_negative)

    @property
    def n(self) -> int:
        """Number of rows."""
        return self.n_positive + self.n_negative

    @property
    def weight_positive(self) -> float:
        """Total sample weight of the positive rows (their number without weights)."""
        return float(self._masses()[0])

    @property
    def weight_negative(self) -> float:
        """Total sample weight of the negative rows (their number without weights)."""
        return float(self._masses()[1])

    @property
    def weight_total(self) -> float:
        """Total sample weight (the number of rows without weights)."""
        p, q = self._masses()
        return float(p + q)

    def class_masses(self) -> tuple[int, int] | tuple[float, float]:
        """``(positives, negatives)``: exact ints without weights, float weight sums with them."""
        return self._masses()

    def _masses(self) -> tuple[int, int] | tuple[float, float]:
        """``(positives, negatives)``: exact ints without weights, float weight sums with them."""
        if self.weighted:
            return float(self.pos.sum()), float(self.neg.sum())
        return int(self.pos.sum()), int(self.neg.sum())

    def _require_both_classes(self, owner: str) -> tuple[int, int] | tuple[float, float]:
        p, q = self._masses()
        if p == 0 or q == 0:
            if not self.weighted:
                raise ParameterError(
                    f"{owner} is undefined when y holds a single class (got {q} negative and {p} positive labels)"
                )
            raise ParameterError(
                f"{owner} is undefined when y holds a single class (got {self.n_negative} negative rows of total "
                f"sample_weight {q!r} and {self.n_positive} positive rows of total sample_weight {p!r}; a class of "
                "zero total weight is absent)"
            )
        return p, q

    def _resolve_k(self, k: Any, k_fraction: Any, owner: str, default_positives: bool) -> int | float:
        """The cut-off of precision / recall at k (:func:`resolve_k` on this summary's masses)."""
        p, q = self._masses()
        integral = not self.weighted or bool(np.all(self.pos == np.round(self.pos)) and np.all(self.neg == np.round(self.neg)))
        if k is None and k_fraction is None and default_positives:
            return p
        return resolve_k(k, k_fraction, positive=p, total=p + q, integral=integral, owner=owner)

    # -- ranking metrics ------------------------------------------------------
    def roc_auc(self) -> float:
        """Area under the ROC curve, tied positive / negative pairs counting 1/2 (pairs weighted by ``w+ * w-``)."""
        n_pos, n_neg = self._require_both_classes("roc_auc_score")
        # positives (positive weight) ranked strictly above each distinct score
        above = np.cumsum(self.pos) - self.pos
        if self.weighted:
            # 2 * (weight of pairs won) + (weight of pairs tied): exact for integer weights below 2**53
            return float(np.dot(self.neg, 2.0 * above + self.pos)) / (2.0 * n_pos * n_neg)
        if n_pos * n_neg < 2**61:
            # exact integer arithmetic: 2 * (#pairs won) + (#pairs tied)
            twice = int(np.dot(self.neg, 2 * above + self.pos))
            return _ratio(twice, 2 * n_pos * n_neg)
        won = float(np.dot(self.neg.astype(np.float64), above + 0.5 * self.pos))
        return won / n_pos / n_neg

    def _positives_in_top(self, k: int | float) -> tuple[int, int] | tuple[float, float]:
        """Expected positives among the top ``k`` rows (weight units with weights) as ``(numerator, denominator)``.

        The tied group straddling the cut-off contributes in proportion to the
        share of it that falls inside the top ``k``.
        """
        num_t = float if self.weighted else int
        counts = self.pos + self.neg
        cum = np.cumsum(counts)
        # first group reaching k (clipped: a weight total may differ from cum[-1] by rounding)
        g = min(int(np.searchsorted(cum, k, side="left")), cum.shape[0] - 1)
        before = num_t(cum[g - 1]) if g else num_t(0)
        pos_before = num_t(self.pos[:g].sum())
        cnt = num_t(counts[g])
        return pos_before * cnt + num_t(self.pos[g]) * (k - before), cnt

    def precision_at_k(self, k: int | float | None = None, *, k_fraction: float | None = None) -> float:
        """Expected precision of the top-``k`` rows (ties broken at random); see :func:`precision_at_k`."""
        kk = self._resolve_k(k, k_fraction, "precision_at_k", default_positives=False)
        num, den = self._positives_in_top(kk)
        return _ratio(num, den * kk)

    def recall_at_k(self, k: int | float | None = None, *, k_fraction: float | None = None) -> float:
        """Expected recall of the top-``k`` rows (0.0 when there is no positive); see :func:`recall_at_k`."""
        kk = self._resolve_k(k, k_fraction, "recall_at_k", default_positives=False)
        num, den = self._positives_in_top(kk)
        return _ratio(num, den * self._masses()[0])

    def prbep(self) -> float:
        """Precision (= recall) of the top ``n_positive`` rows (weight of positives), ties counted fractionally."""
        n_pos, _ = self._require_both_classes("prbep_score")
        num, den = self._positives_in_top(n_pos)
        return _ratio(num, den * n_pos)

    def roc_curve(self) -> tuple[np.ndarray, np.ndarray]:
        """``(fpr, tpr)``: one point per distinct score, from (0, 0) to (1, 1); rates of weight with weights."""
        self._require_both_classes("roc_curve_points")
        cum_neg = np.cumsum(self.neg)
        cum_pos = np.cumsum(self.pos)
        fpr = np.concatenate([[0.0], cum_neg / cum_neg[-1]])
        tpr = np.concatenate([[0.0], cum_pos / cum_pos[-1]])
        return fpr, tpr

    # -- threshold metrics ----------------------------------------------------
    def confusion(self, threshold: float = 0.0) -> tuple[int, int, int, int] | tuple[float, float, float, float]:
        """``(tp, fp, fn, tn)`` of the rule "positive iff score > threshold" (weight sums with weights)."""
        t = _check_threshold(threshold, "RankSummary.confusion")
        m = self.scores.shape[0]
        above = m - int(np.searchsorted(self.scores[::-1], t, side="right"))
        if self.weighted:
            return (
                float(self.pos[:above].sum()),
                float(self.neg[:above].sum()),
                float(self.pos[above:].sum()),
                float(self.neg[above:].sum()),
            )
        tp = int(self.pos[:above].sum())
        fp = int(self.neg[:above].sum())
        return tp, fp, self.n_positive - tp, self.n_negative - fp

    def expected_confusion(self, threshold: float = 0.0) -> tuple[float, float, float, float]:
        """Expected ``(tp, fp, fn, tn)`` of the randomized rule "positive with probability clip(1/2 + score - threshold, 0, 1)"
        (Goh et al.'s randomized classifier; weight sums with weights)."""
        t = _check_threshold(threshold, "RankSummary.expected_confusion")
        p = ramp(self.scores - t)
        tp, fp = float(p @ self.pos), float(p @ self.neg)
        return tp, fp, float(self.pos.sum()) - tp, float(self.neg.sum()) - fp

    def best_threshold(self) -> tuple[float, int] | tuple[float, float]:
        """Threshold minimizing the training errors (FP + FN) of "positive iff score > threshold".

        Cuts fall midway between consecutive distinct scores; the first of equally
        good cuts (highest threshold) wins.  With sample weights the errors are
        weighted (a float).

        Returns
        -------
        (threshold, errors)
        """
        # errors[j]: predict the j highest distinct scores positive -> FP of the top j + FN of the rest
        fn = np.concatenate([np.cumsum(self.pos[::-1])[::-1], np.zeros(1, self.pos.dtype)])
        fp = np.concatenate([np.zeros(1, self.neg.dtype), np.cumsum(self.neg)])
        errors = fp + fn
        j = int(np.argmin(errors))
        sc = self.scores
        if j == 0:
            t = float(sc[0]) if sc.size else 0.0
        elif j == sc.size:
            t = float(sc[-1]) - 1.0 - abs(float(sc[-1]))
        else:
            t = 0.5 * (float(sc[j - 1]) + float(sc[j]))
            if not float(sc[j]) <= t < float(sc[j - 1]):  # midpoint rounded onto an end
                t = float(sc[j])
        return t, (float(errors[j]) if self.weighted else int(errors[j]))

    def metrics(
        self, threshold: float = 0.0, k: int | float | None = None, *, k_fraction: float | None = None, randomized: bool = False,
        single_class: str = "raise",
    ) -> dict[str, float | int | None]:
        """All metrics; see :func:`binary_metrics`. With ``randomized`` the threshold metrics (accuracy, precision,
        recall, F1) are the expected ones of the randomized rule (:meth:`expected_confusion`).

        ``single_class="report"``: rows of one class give the metrics defined on them and None for the others (ROC-AUC and
        PRBEP rank one class against the other; without positives recall, F1 and the at-k figures have no denominator);
        ``"raise"`` (the default, as scikit-learn): a :class:`ParameterError`."""
        n_pos, n_neg = self._masses()
        if single_class == "report" and (n_pos == 0 or n_neg == 0):
            return self._one_class_metrics(threshold, randomized)
        auc = self.roc_auc()  # raises on a single class
        kk = self._resolve_k(k, k_fraction, "binary_metrics", default_positives=True)
        num, den = self._positives_in_top(kk)
        tp, fp, fn, tn = self.expected_confusion(threshold) if randomized else self.confusion(threshold)
        out = self._counts()
        out.update(
            roc_auc=auc,
            prbep=self.prbep(),
            accuracy=_ratio(tp + tn, tp + fp + fn + tn),
            precision=_ratio(tp, tp + fp),
            recall=_ratio(tp, tp + fn),
            f1=_ratio(2 * tp, 2 * tp + fp + fn),
            k=kk,
            prec_at_k=_ratio(num, den * kk),
            rec_at_k=_ratio(num, den * n_pos),
        )
        return out

    def _counts(self) -> dict[str, float | int | None]:
        """The row counts every metrics dict starts with (and the weight totals, with sample weights)."""
        out: dict[str, float | int | None] = {"n": self.n, "n_positive": self.n_positive}
        if self.weighted:
            out["weight_total"] = self.weight_total
            out["weight_positive"] = self.weight_positive
        return out

    def _one_class_metrics(self, threshold: float, randomized: bool) -> dict[str, float | int | None]:
        """What :meth:`metrics` reports on rows of one class: accuracy always; precision when a row scores positive;
        recall and F1 when the rows are positive; None for the rest."""
        n_pos, _ = self._masses()
        tp, fp, fn, tn = self.expected_confusion(threshold) if randomized else self.confusion(threshold)
        out = self._counts()
        out.update(
            roc_auc=None, prbep=None,
            accuracy=_ratio(tp + tn, tp + fp + fn + tn),
            precision=_ratio(tp, tp + fp) if tp + fp > 0 else None,
            recall=_ratio(tp, tp + fn) if n_pos else None,
            f1=_ratio(2 * tp, 2 * tp + fp + fn) if n_pos else None,
            k=None, prec_at_k=None, rec_at_k=None,
        )
        return out


def _reduce_sorted(
    scores: np.ndarray, pos: np.ndarray, neg: np.ndarray, rows: tuple[int, int] | None = None
) -> RankSummary:
    """Collapse rows with equal scores; ``scores`` is non-increasing.

    ``rows`` = (positive rows, negative rows) marks ``pos`` / ``neg`` as sample
    weights: the sums are float64 and groups of zero total weight are dropped.
    """
    n = scores.shape[0]
    if n == 0:
        if rows is None:
            return RankSummary(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
        return RankSummary(np.zeros(0), np.zeros(0), np.zeros(0), int(rows[0]), int(rows[1]))
    # compare with != (not diff) so that +-inf runs are grouped too
    starts = np.flatnonzero(np.concatenate([[True], scores[1:] != scores[:-1]]))
    if rows is None:
        return RankSummary(
            scores=scores[starts],
            pos=np.add.reduceat(pos, starts).astype(np.int64, copy=False),
            neg=np.add.reduceat(neg, starts).astype(np.int64, copy=False),
        )
    p = np.add.reduceat(pos.astype(np.float64, copy=False), starts)
    q = np.add.reduceat(neg.astype(np.float64, copy=False), starts)
    keep = (p + q) > 0
    return RankSummary(scores[starts][keep], p[keep], q[keep], int(rows[0]), int(rows[1]))


def _summarise_checked(pos: np.ndarray, scores: np.ndarray, w: np.ndarray | None = None) -> RankSummary:
    order = np.argsort(-scores, kind="stable")
    if w is None:
        p = pos[order].astype(np.int64)
        return _reduce_sorted(scores[order], p, 1 - p)
    po, wo = pos[order], w[order]
    n_pos = int(np.count_nonzero(pos))
    return _reduce_sorted(scores[order], np.where(po, wo, 0.0), np.where(po, 0.0, wo), (n_pos, pos.shape[0] - n_pos))


def _summarise(y: ArrayLike, s: ArrayLike, owner: str, sample_weight: ArrayLike | None = None) -> RankSummary:
    pos, scores, w = _check_inputs(y, s, owner, sample_weight)
    return _summarise_checked(pos, scores, w)


def _confusion(
    y: ArrayLike, s: ArrayLike, threshold: float, owner: str, sample_weight: ArrayLike | None = None
) -> tuple[int, int, int, int] | tuple[float, float, float, float]:
    """O(n) ``(tp, fp, fn, tn)`` without sorting (weight sums with ``sample_weight``)."""
    pos, scores, w = _check_inputs(y, s, owner, sample_weight)
    t = _check_threshold(threshold, owner)
    pred = scores > t
    if w is not None:
        return (
            float(w[pred & pos].sum()),
            float(w[pred & ~pos].sum()),
            float(w[~pred & pos].sum()),
            float(w[~pred & ~pos].sum()),
        )
    tp = int(np.count_nonzero(pred & pos))
    fp = int(np.count_nonzero(pred)) - tp
    n_pos = int(np.count_nonzero(pos))
    return tp, fp, n_pos - tp, pos.shape[0] - n_pos - fp


# ---------------------------------------------------------------------------
# public functions
# ---------------------------------------------------------------------------
def roc_auc_score(y: ArrayLike, s: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """Exact area under the ROC curve.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores; larger means more likely positive.
    sample_weight : array-like of shape (n,), optional
        Finite, non-negative row weights; a positive / negative pair weighs
        ``w+ * w-`` (as ``sklearn.metrics.roc_auc_score(..., sample_weight=w)``).

    Returns
    -------
    float
        The probability that a random positive scores above a random negative,
        a tie counting one half.  Computed in O(n log n) by one stable sort.

    Raises
    ------
    ParameterError
        A class is absent (or of zero total weight), or the inputs are invalid.
    """
    return _summarise(y, s, "roc_auc_score", sample_weight).roc_auc()


def prbep_score(y: ArrayLike, s: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """Precision / recall break-even point.

    The precision of the ``n_pos`` highest-scored rows, ``n_pos`` being the number
    of positives; there precision equals recall.  With sample weights, the
    precision of the top rows whose total weight is the total weight of the
    positives.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    sample_weight : array-like of shape (n,), optional
        Finite, non-negative row weights (a row counts as if repeated ``w_i`` times).

    Returns
    -------
    float

    Raises
    ------
    ParameterError
        A class is absent (or of zero total weight), or the inputs are invalid.

    Notes
    -----
    When tied scores straddle the cut-off, the tied group counts fractionally:
    if ``j`` of its ``c`` rows fall in the top ``n_pos`` and it holds ``p``
    positives, it contributes ``p * j / c`` positives.  This is the expected
    value of the metric when ties are broken uniformly at random.  With weights,
    ``j``, ``c`` and ``p`` are weights.
    """
    return _summarise(y, s, "prbep_score", sample_weight).prbep()


def precision_at_k(
    y: ArrayLike,
    s: ArrayLike,
    k: int | float | None = None,
    *,
    k_fraction: float | None = None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Precision of the ``k`` highest-scored rows.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    k : int, or float with sample weights
        The cut-off, a count: an int in ``[1, n]`` rows; with ``sample_weight``
        a number of rows counted in weight units, a float in ``(0, total
        weight]`` -- the top rows whose total weight is ``k``.  A fraction such
        as 0.01 is an error: use ``k_fraction``.
    k_fraction : float, optional
        Instead of ``k``: a fraction (> 0) of the positives, ``k = max(1,
        round(k_fraction * n_positive))`` rows; with weights ``k = k_fraction *
        weight_positive``.  Exactly one of ``k`` and ``k_fraction`` is required.
    sample_weight : array-like of shape (n,), optional
        Finite, non-negative row weights (a row counts as if repeated ``w_i`` times).

    Returns
    -------
    float
        Positives among the top ``k`` (their weight), divided by ``k``.  A tied
        group at the cut-off counts fractionally (expected value under random
        tie breaking, see :func:`prbep_score`); so does, with weights, a row
        straddling it.

    Raises
    ------
    ParameterError
        ``k`` / ``k_fraction`` is missing, doubled or out of range, or the inputs
        are invalid.
    """
    return _summarise(y, s, "precision_at_k", sample_weight).precision_at_k(k, k_fraction=k_fraction)


def recall_at_k(
    y: ArrayLike,
    s: ArrayLike,
    k: int | float | None = None,
    *,
    k_fraction: float | None = None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Recall of the ``k`` highest-scored rows.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    k : int, or float with sample weights
        The cut-off, a count (see :func:`precision_at_k`).
    k_fraction : float, optional
        Instead of ``k``: a fraction of the positives (see :func:`precision_at_k`).
    sample_weight : array-like of shape (n,), optional
        Finite, non-negative row weights (a row counts as if repeated ``w_i`` times).

    Returns
    -------
    float
        Positives among the top ``k`` divided by the number of positives (0.0
        when there is none); weights of positives with ``sample_weight``.  Ties
        at the cut-off count fractionally, as in :func:`precision_at_k`.

    Raises
    ------
    ParameterError
        ``k`` / ``k_fraction`` is missing, doubled or out of range, or the inputs
        are invalid.
    """
    return _summarise(y, s, "recall_at_k", sample_weight).recall_at_k(k, k_fraction=k_fraction)


def accuracy_score(
    y: ArrayLike, s: ArrayLike, threshold: float = 0.0, *, sample_weight: ArrayLike | None = None
) -> float:
    """Accuracy of the predictions "positive iff ``s > threshold``".

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores (e.g. a linear model's decision function).
    threshold : float, default=0.0
        Rows with ``s > threshold`` (strictly) are predicted positive.
    sample_weight : array-like of shape (n,), optional
        Finite, non-negative row weights (as scikit-learn's ``sample_weight``).

    Returns
    -------
    float
        Correct predictions (their weight) over all rows (the total weight);
        0.0 when the total weight is 0.
    """
    tp, fp, fn, tn = _confusion(y, s, threshold, "accuracy_score", sample_weight)
    return _ratio(tp + tn, tp + fp + fn + tn)


def precision_score(
    y: ArrayLike, s: ArrayLike, threshold: float = 0.0, *, sample_weight: ArrayLike | None = None
) -> float:
    """Precision of the predictions "positive iff ``s > threshold``".

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    threshold : float, default=0.0
        Rows with ``s > threshold`` (strictly) are predicted positive.
    sample_weight : array-like of shape (n,), optional
        Finite, non-negative row weights (as scikit-learn's ``sample_weight``).

    Returns
    -------
    float
        ``tp / (tp + fp)`` (weight sums with weights); 0.0 when nothing (no
        weight) is predicted positive.
    """
    tp, fp, _, _ = _confusion(y, s, threshold, "precision_score", sample_weight)
    return _ratio(tp, tp + fp)


def recall_score(
    y: ArrayLike, s: ArrayLike, threshold: float = 0.0, *, sample_weight: ArrayLike | None = None
) -> float:
    """Recall of the predictions "positive iff ``s > threshold``".

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    threshold : float, default=0.0
        Rows with ``s > threshold`` (strictly) are predicted positive.
    sample_weight : array-like of shape (n,), optional
        Finite, non-negative row weights (as scikit-learn's ``sample_weight``).

    Returns
    -------
    float
        ``tp / (tp + fn)`` (weight sums with weights); 0.0 when there is no
        positive label (no positive weight).
    """
    tp, _, fn, _ = _confusion(y, s, threshold, "recall_score", sample_weight)
    return _ratio(tp, tp + fn)


def f1_score(
    y: ArrayLike, s: ArrayLike, threshold: float = 0.0, *, sample_weight: ArrayLike | None = None
) -> float:
    """F1 score of the predictions "positive iff ``s > threshold``".

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    threshold : float, default=0.0
        Rows with ``s > threshold`` (strictly) are predicted positive.
    sample_weight : array-like of shape (n,), optional
        Finite, non-negative row weights (as scikit-learn's ``sample_weight``).

    Returns
    -------
    float
        ``2 tp / (2 tp + fp + fn)`` (weight sums with weights); 0.0 when there
        is neither a positive label nor a positive prediction.
    """
    tp, fp, fn, _ = _confusion(y, s, threshold, "f1_score", sample_weight)
    return _ratio(2 * tp, 2 * tp + fp + fn)


def binary_metrics(
    y: ArrayLike,
    s: ArrayLike,
    threshold: float = 0.0,
    k: int | float | None = None,
    *,
    k_fraction: float | None = None,
    sample_weight: ArrayLike | None = None,
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
    k : int, or float with sample weights, optional
        Cut-off of ``prec_at_k`` / ``rec_at_k``, a count (see
        :func:`precision_at_k`).
    k_fraction : float, optional
        Instead of ``k``: the cut-off as a fraction of the positives (see
        :func:`precision_at_k`).  With neither, ``k`` is the number (total
        weight) of positives, and then ``prec_at_k == prbep``.
    sample_weight : array-like of shape (n,), optional
        Finite, non-negative row weights (a row counts as if repeated ``w_i`` times).

    Returns
    -------
    dict
        Keys ``n``, ``n_positive`` (row counts, rows of weight 0 included),
        ``roc_auc``, ``prbep``, ``accuracy``, ``precision``, ``recall``,
        ``f1``, ``k`` (the resolved cut-off: a row count, or a weight amount
        with weights), ``prec_at_k`` and ``rec_at_k``; with ``sample_weight``
        also ``weight_total`` and ``weight_positive``.

    Raises
    ------
    ParameterError
        A class is absent or of zero total weight (AUC and PRBEP are
        undefined), or a parameter is invalid.
    """
    summary = _summarise(y, s, "binary_metrics", sample_weight)
    _check_threshold(threshold, "binary_metrics")
    return cast(dict[str, float | int], summary.metrics(threshold=threshold, k=k, k_fraction=k_fraction))  # both classes: no None


def roc_curve_points(
    y: ArrayLike, s: ArrayLike, *, sample_weight: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Points of the ROC curve, for plotting.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {-1, +1}, {0, 1} or bool.
    s : array-like of shape (n,)
        Scores.
    sample_weight : array-like of shape (n,), optional
        Finite, non-negative row weights: the rates are shares of the class
        weights, and scores carried only by rows of weight 0 give no point.

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
        A class is absent (or of zero total weight), or the inputs are invalid.
    """
    return _summarise(y, s, "roc_curve_points", sample_weight).roc_curve()
