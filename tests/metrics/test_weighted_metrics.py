"""Tests of sample weights in dpipe.metrics and of the k / k_fraction rules.

Weighted semantics: a row of weight w counts as if it were repeated w times, so
integer weights must give exactly the metrics of the np.repeat-expanded rows,
and real weights must agree with scikit-learn's ``sample_weight``.
"""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.metrics as skm

from dpipe.exceptions import ParameterError
from dpipe.metrics import (
    RankSummary,
    accuracy_score,
    binary_metrics,
    f1_score,
    prbep_score,
    precision_at_k,
    precision_score,
    recall_at_k,
    recall_score,
    roc_auc_score,
    roc_curve_points,
)

TOL = 1e-12
THRESHOLD_FUNCS = (accuracy_score, precision_score, recall_score, f1_score)
SKLEARN_THRESHOLD_FUNCS = (skm.accuracy_score, skm.precision_score, skm.recall_score, skm.f1_score)


def random_case(rng, n, ties, pos_rate=0.3):
    y = np.where(rng.random(n) < pos_rate, 1, -1)
    y[0], y[1] = 1, -1
    if ties:
        s = rng.integers(-3, 4, n).astype(np.float64) + 0.5 * y * (rng.random(n) < 0.3)
    else:
        s = rng.normal(size=n) + 0.7 * y
    return y, s


def integer_weights(rng, y):
    """Weights in 0..4 (many zeros), both classes keeping a positive weight."""
    w = rng.integers(0, 5, y.shape[0])
    w[0] = w[1] = 2  # y[0] is positive, y[1] negative
    return w


def dedupe(fpr, tpr):
    pts = np.stack([fpr, tpr], axis=1)
    keep = np.concatenate([[True], np.any(pts[1:] != pts[:-1], axis=1)])
    return pts[keep]


# ---------------------------------------------------------------------------
# integer weights == repeated rows (exactly)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_integer_weights_equal_repeated_rows(seed, ties):
    rng = np.random.default_rng(seed)
    y, s = random_case(rng, int(rng.integers(20, 400)), ties)
    w = integer_weights(rng, y)
    ye, se = np.repeat(y, w), np.repeat(s, w)
    wf = w.astype(np.float64)
    n_e, npos_e = ye.shape[0], int((ye == 1).sum())

    assert roc_auc_score(y, s, sample_weight=w) == roc_auc_score(ye, se)
    assert prbep_score(y, s, sample_weight=wf) == prbep_score(ye, se)
    for t in (0.0, 0.5, -1.0, 10.0):
        for ours in THRESHOLD_FUNCS:
            assert ours(y, s, t, sample_weight=w) == ours(ye, se, t)
    for k in sorted({1, 2, 7, npos_e, n_e // 2, n_e - 1, n_e}):
        assert precision_at_k(y, s, k, sample_weight=w) == precision_at_k(ye, se, k)
        assert recall_at_k(y, s, k, sample_weight=w) == recall_at_k(ye, se, k)

    a, b = RankSummary.from_scores(y, s, sample_weight=w), RankSummary.from_scores(ye, se)
    assert a.weighted and not b.weighted and a.pos.dtype == np.float64
    np.testing.assert_array_equal(a.scores, b.scores)  # scores of weight 0 only are dropped
    np.testing.assert_array_equal(a.pos, b.pos)
    np.testing.assert_array_equal(a.neg, b.neg)
    t_a, err_a = a.best_threshold()
    t_b, err_b = b.best_threshold()
    assert (t_a, err_a) == (t_b, err_b) and isinstance(err_a, float) and isinstance(err_b, int)
    for t in (-1.0, 0.0, 0.25, 3.0):
        assert a.confusion(t) == b.confusion(t)
    for x, x_e in zip(roc_curve_points(y, s, sample_weight=w), roc_curve_points(ye, se)):
        np.testing.assert_array_equal(x, x_e)

    ma = binary_metrics(y, s, 0.5, 9, sample_weight=w)
    mb = binary_metrics(ye, se, 0.5, 9)
    assert set(ma) == set(mb) | {"weight_total", "weight_positive"}
    assert ma["n"] == y.shape[0] and ma["n_positive"] == int((y == 1).sum())  # row counts, zero weights included
    assert ma["weight_total"] == n_e and ma["weight_positive"] == npos_e
    assert {key: v for key, v in ma.items() if key not in ("n", "n_positive", "weight_total", "weight_positive")} == {
        key: v for key, v in mb.items() if key not in ("n", "n_positive")
    }
    # default k = the weight of the positives, where prec@k == PRBEP
    md = a.metrics()
    assert md["k"] == npos_e and md["prec_at_k"] == md["prbep"] == b.prbep()


@pytest.mark.parametrize("seed", range(6))
def test_integer_weights_best_threshold_is_brute_force_optimum(seed):
    rng = np.random.default_rng(50 + seed)
    n = int(rng.integers(2, 60))
    y = np.where(rng.random(n) < 0.4, 1, -1)
    s = rng.integers(-3, 4, size=n).astype(float) if seed % 2 else rng.standard_normal(n)
    w = rng.integers(0, 5, n)
    t, errors = RankSummary.from_scores(y, s, sample_weight=w).best_threshold()
    cuts = np.concatenate([s, [s.min() - 1, s.max() + 1]])
    brute = min(int(np.sum(w * (np.where(s > c, 1, -1) != y))) for c in cuts)
    assert errors == brute == np.sum(w * (np.where(s > t, 1, -1) != y))


def test_weighted_top_k_counts_a_straddling_row_in_part():
    # distinct scores, fractional weights: k = 1.25 takes the two top rows and half the third
    y = np.array([1, -1, 1, -1, 1])
    s = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    w = np.full(5, 0.5)
    assert precision_at_k(y, s, 1.25, sample_weight=w) == (0.5 + 0.25) / 1.25
    assert recall_at_k(y, s, 1.25, sample_weight=w) == (0.5 + 0.25) / 1.5
    # with whole weights (or none) k is a whole number of rows, as for the repeated rows
    with pytest.raises(ParameterError, match="'k' parameter.*must be an int"):
        precision_at_k(y, s, 2.5, sample_weight=np.ones(5))
    # k in weight units: the top row alone weighs 4
    w2 = np.array([4.0, 1.0, 1.0, 1.0, 1.0])
    assert precision_at_k(y, s, 4, sample_weight=w2) == 1.0
    assert precision_at_k(y, s, 5, sample_weight=w2) == 4 / 5
    assert recall_at_k(y, s, 4, sample_weight=w2) == 4 / 6


# ---------------------------------------------------------------------------
# real weights == scikit-learn
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_real_weights_match_sklearn(seed, ties):
    rng = np.random.default_rng(10 + seed)
    y, s = random_case(rng, 1500, ties)
    w = rng.exponential(size=y.shape[0]) * (rng.random(y.shape[0]) < 0.9)  # some zero weights
    assert abs(roc_auc_score(y, s, sample_weight=w) - skm.roc_auc_score(y, s, sample_weight=w)) <= TOL
    for t in (0.0, 0.5, -1.0):
        pred = np.where(s > t, 1, -1)
        for ours, ref in zip(THRESHOLD_FUNCS, SKLEARN_THRESHOLD_FUNCS):
            assert abs(ours(y, s, t, sample_weight=w) - ref(y, pred, sample_weight=w)) <= TOL
    fpr, tpr = roc_curve_points(y, s, sample_weight=w)
    assert fpr[0] == tpr[0] == 0.0 and fpr[-1] == tpr[-1] == 1.0
    ref_fpr, ref_tpr, _ = skm.roc_curve(y, s, sample_weight=w, drop_intermediate=False)
    ours_pts, ref_pts = dedupe(fpr, tpr), dedupe(ref_fpr, ref_tpr)
    assert ours_pts.shape == ref_pts.shape
    np.testing.assert_allclose(ours_pts, ref_pts, rtol=0, atol=TOL)
    area = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
    assert abs(area - roc_auc_score(y, s, sample_weight=w)) <= TOL
    m = binary_metrics(y, s, 0.5, sample_weight=w)
    assert abs(m["weight_total"] - w.sum()) <= 1e-9 and abs(m["weight_positive"] - w[y == 1].sum()) <= 1e-9
    assert abs(m["f1"] - skm.f1_score(y, np.where(s > 0.5, 1, -1), sample_weight=w)) <= TOL


def test_real_weights_prbep_is_precision_at_positive_weight():
    rng = np.random.default_rng(3)
    y, s = random_case(rng, 300, ties=False)
    w = rng.uniform(0.5, 2.0, 300)
    order = np.argsort(-s)
    wp = w[y == 1].sum()
    cw = np.cumsum(w[order])
    j = int(np.searchsorted(cw, wp))  # the row straddling the cut-off counts in part
    hits = np.sum((w * (y == 1))[order[:j]]) + (y[order[j]] == 1) * (wp - (cw[j - 1] if j else 0.0))
    assert abs(prbep_score(y, s, sample_weight=w) - hits / wp) <= 1e-12
    assert abs(precision_at_k(y, s, k_fraction=1.0, sample_weight=w) - hits / wp) <= 1e-12


# ---------------------------------------------------------------------------
# merge / from_sorted
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_parts", [1, 2, 5])
@pytest.mark.parametrize("seed", range(3))
def test_weighted_merge_is_exact(seed, n_parts):
    rng = np.random.default_rng(20 + seed)
    y, s = random_case(rng, 500, ties=True)
    w = rng.integers(0, 64, y.shape[0]) / 8.0  # dyadic: every partial sum is exact
    whole = RankSummary.from_scores(y, s, sample_weight=w)
    cuts = np.linspace(0, len(y), n_parts + 1).astype(int)
    parts = [RankSummary.from_scores(y[a:b], s[a:b], sample_weight=w[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    merged = RankSummary.merge(parts)
    for name in ("scores", "pos", "neg"):
        np.testing.assert_array_equal(getattr(merged, name), getattr(whole, name))
    assert (merged.n, merged.n_positive) == (whole.n, whole.n_positive) == (500, int((y == 1).sum()))
    assert merged.metrics(0.0, 3.5) == whole.metrics(0.0, 3.5)
    assert merged.best_threshold() == whole.best_threshold()


def test_merge_weighted_with_unweighted():
    rng = np.random.default_rng(4)
    y, s = random_case(rng, 400, ties=True)
    w = rng.uniform(0.0, 3.0, 400)
    w[200:] = 1.0  # the unweighted half weighs 1 per row
    a = RankSummary.from_scores(y[:200], s[:200], sample_weight=w[:200])
    b = RankSummary.from_scores(y[200:], s[200:])
    assert not b.weighted
    merged = RankSummary.merge([a, b])
    whole = RankSummary.from_scores(y, s, sample_weight=w)
    assert merged.weighted and merged.pos.dtype == np.float64
    np.testing.assert_array_equal(merged.scores, whole.scores)
    np.testing.assert_allclose(merged.pos, whole.pos, rtol=1e-13)
    np.testing.assert_allclose(merged.neg, whole.neg, rtol=1e-13)
    assert (merged.n, merged.n_positive) == (400, int((y == 1).sum()))
    mm, mw = merged.metrics(0.25), whole.metrics(0.25)
    assert mm.keys() == mw.keys()
    for key in mm:
        assert abs(mm[key] - mw[key]) <= 1e-9 * max(1.0, abs(mw[key])), key


def test_weighted_from_sorted_equals_from_scores():
    rng = np.random.default_rng(11)
    y, s = random_case(rng, 600, ties=True)
    w = rng.integers(0, 16, 600) / 4.0
    order = np.argsort(-s, kind="stable")
    a = RankSummary.from_sorted(s[order], y[order], w[order])
    b = RankSummary.from_scores(y, s, sample_weight=w)
    for name in ("scores", "pos", "neg"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.metrics(0.0) == b.metrics(0.0)
    assert RankSummary.from_sorted(s[order], y[order]).pos.dtype == np.int64


# ---------------------------------------------------------------------------
# bad weights
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "w, match",
    [
        ([1.0, -0.5, 1.0, 1.0], "sample_weight must be non-negative, got -0.5 at index 1"),
        ([1.0, 1.0, float("nan"), 1.0], "sample_weight must be finite, got nan at index 2"),
        ([1.0, 1.0, 1.0, float("inf")], "sample_weight must be finite, got inf at index 3"),
        ([1.0, 1.0, 1.0], "sample_weight has 3 rows but y has 4"),
        ([[1.0, 1.0, 1.0, 1.0]], "sample_weight must be 1-dimensional"),
        (["a", "b", "c", "d"], "sample_weight must hold real numbers"),
    ],
)
def test_bad_weights(w, match):
    y, s = [1, -1, 1, -1], [0.3, 0.1, 0.2, -0.4]
    for fn in (roc_auc_score, prbep_score, roc_curve_points, binary_metrics, *THRESHOLD_FUNCS):
        with pytest.raises(ParameterError, match=match):
            fn(y, s, sample_weight=w)
    for fn in (precision_at_k, recall_at_k):
        with pytest.raises(ParameterError, match=match):
            fn(y, s, 1, sample_weight=w)
    with pytest.raises(ParameterError, match=match):
        RankSummary.from_scores(y, s, sample_weight=w)
    if np.ndim(w) == 1 and len(w) == 4 and not isinstance(w[0], str):
        with pytest.raises(ParameterError, match="weight_sorted .*sample_weight"):
            RankSummary.from_sorted([0.3, 0.2, 0.1, -0.4], [1, 1, -1, -1], w)


@pytest.mark.parametrize("w", [[0.0, 1.0, 0.0, 2.0], [1.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
def test_zero_weight_class_is_absent(w):
    y, s = [1, -1, 1, -1], [0.3, 0.1, 0.2, -0.4]
    for fn in (roc_auc_score, prbep_score, roc_curve_points, binary_metrics):
        with pytest.raises(ParameterError, match="single class"):
            fn(y, s, sample_weight=w)


def test_zero_weights_leave_threshold_metrics_defined():
    y, s = [1, -1, 1, -1], [0.3, 0.1, -0.2, -0.4]
    w = [0.0, 1.0, 2.0, 1.0]  # nothing of positive weight predicted positive
    assert precision_score(y, s, sample_weight=w) == 0.0
    assert recall_score(y, s, sample_weight=w) == 0.0
    assert accuracy_score(y, s, sample_weight=w) == 0.25  # correct: the negative of weight 1 below 0
    assert accuracy_score(y, s, sample_weight=np.zeros(4)) == 0.0


# ---------------------------------------------------------------------------
# k / k_fraction rules
# ---------------------------------------------------------------------------
def test_k_and_k_fraction_exclude_each_other():
    y, s = np.array([1, -1, 1, -1] * 5), np.arange(20.0)
    for call in (
        lambda: precision_at_k(y, s, 3, k_fraction=0.5),
        lambda: recall_at_k(y, s, 3, k_fraction=0.5),
        lambda: binary_metrics(y, s, k=3, k_fraction=0.5),
        lambda: RankSummary.from_scores(y, s).metrics(k=3, k_fraction=0.5),
        lambda: precision_at_k(y, s, 3.0, k_fraction=0.5, sample_weight=np.ones(20)),
    ):
        with pytest.raises(ParameterError, match="'k' and 'k_fraction' parameters of .* exclude each other"):
            call()


@pytest.mark.parametrize("k", [0.01, 0.5, np.float64(0.25), 2.5])
def test_fractional_k_points_to_k_fraction(k):
    y, s = np.array([1, -1, 1, -1] * 5), np.arange(20.0)
    for call in (precision_at_k, recall_at_k):
        with pytest.raises(ParameterError, match=r"'k' parameter.*use k_fraction.*fraction of the positives"):
            call(y, s, k)
    with pytest.raises(ParameterError, match="use k_fraction"):
        binary_metrics(y, s, k=k)


def test_k_is_required_by_top_k_functions_and_defaults_to_positives_in_metrics():
    y, s = np.array([1, -1, -1, -1] * 5), np.arange(20.0)
    with pytest.raises(ParameterError, match="'k' parameter.*Got None.*k_fraction"):
        precision_at_k(y, s)
    with pytest.raises(ParameterError, match="'k' parameter"):
        RankSummary.from_scores(y, s).recall_at_k()
    assert binary_metrics(y, s)["k"] == 5
    w = np.linspace(0.5, 2.0, 20)
    m = binary_metrics(y, s, sample_weight=w)
    assert m["k"] == m["weight_positive"]
    assert abs(m["k"] - w[y == 1].sum()) <= TOL
    assert m["prec_at_k"] == m["rec_at_k"] == m["prbep"]


def test_k_fraction_semantics():
    y = np.array([1, -1, 1, -1, -1, -1, 1, -1, -1, -1] * 3)  # 9 positives of 30
    s = -np.arange(30.0)
    # without weights: round(k_fraction * n_positive) rows, at least 1
    assert binary_metrics(y, s, k_fraction=0.5)["k"] == round(4.5)
    assert binary_metrics(y, s, k_fraction=0.01)["k"] == 1
    assert precision_at_k(y, s, k_fraction=2.0) == precision_at_k(y, s, 18)
    assert RankSummary.from_scores(y, s).recall_at_k(k_fraction=1.0) == recall_at_k(y, s, 9)
    # with weights: k_fraction * weight_positive, not rounded
    w = np.full(30, 0.5)
    for f in (0.01, 0.5, 1.0, 3.0):
        kw = f * 4.5
        assert precision_at_k(y, s, k_fraction=f, sample_weight=w) == precision_at_k(y, s, kw, sample_weight=w)
        assert recall_at_k(y, s, k_fraction=f, sample_weight=w) == recall_at_k(y, s, kw, sample_weight=w)
        assert binary_metrics(y, s, k_fraction=f, sample_weight=w)["k"] == kw
    # weighted k is a weight amount: k = 1.5 is the top 3 rows of weight 0.5
    assert precision_at_k(y, s, 1.5, sample_weight=w) == precision_at_k(y, s, 3)


@pytest.mark.parametrize("k_fraction", [0, 0.0, -0.5, float("nan"), float("inf"), True, None])
def test_invalid_k_fraction(k_fraction):
    y, s = np.array([1, -1, 1, -1] * 5), np.arange(20.0)
    if k_fraction is None:  # neither k nor k_fraction
        with pytest.raises(ParameterError, match="'k' parameter"):
            precision_at_k(y, s, k_fraction=k_fraction)
        return
    for call in (precision_at_k, recall_at_k):
        with pytest.raises(ParameterError, match="'k_fraction' parameter"):
            call(y, s, k_fraction=k_fraction)
        with pytest.raises(ParameterError, match="'k_fraction' parameter"):
            call(y, s, k_fraction=k_fraction, sample_weight=np.ones(20))


def test_k_fraction_out_of_range():
    y, s = np.array([1, -1, -1, -1] * 5), np.arange(20.0)  # 5 positives of 20
    with pytest.raises(ParameterError, match="'k_fraction' parameter.*more than"):
        precision_at_k(y, s, k_fraction=4.5)  # 22.5 -> 22 rows > 20
    with pytest.raises(ParameterError, match="'k_fraction' parameter.*more than"):
        precision_at_k(y, s, k_fraction=4.5, sample_weight=np.ones(20))  # whole weights: 22 rows, as without weights
    with pytest.raises(ParameterError, match="'k_fraction' parameter.*more than"):
        precision_at_k(y, s, k_fraction=4.5, sample_weight=np.full(20, 0.5))  # 11.25 > 10
    assert precision_at_k(y, s, k_fraction=4.0) == precision_at_k(y, s, 20) == 0.25
    y_neg = -np.ones(20)
    with pytest.raises(ParameterError, match="'k_fraction' parameter.*which are 0"):
        recall_at_k(y_neg, s, k_fraction=0.5)
    with pytest.raises(ParameterError, match="'k_fraction' parameter.*which are 0"):
        recall_at_k(y, s, k_fraction=0.5, sample_weight=(y != 1).astype(float))


@pytest.mark.parametrize("k", [0, 0.0, -1.0, 20.5, float("nan"), float("inf"), True, "3"])
def test_invalid_weighted_k(k):
    y, s = np.array([1, -1, 1, -1] * 5), np.arange(20.0)
    w = np.full(20, 1.5)  # fractional weights: k is a weight amount in (0, 30]
    k = 30.5 if k == 20.5 else k
    with pytest.raises(ParameterError, match="'k' parameter.*weight units"):
        precision_at_k(y, s, k, sample_weight=w)
    with pytest.raises(ParameterError, match="'k' parameter.*weight units"):
        recall_at_k(y, s, k, sample_weight=w)


def test_weighted_k_accepts_small_and_numpy_amounts():
    y = np.array([1, -1, 1, -1])
    s = np.array([4.0, 3.0, 2.0, 1.0])
    w = np.array([0.25, 0.25, 0.25, 0.25])  # weights summing to 1: k = 0.25 is the top row
    assert precision_at_k(y, s, 0.25, sample_weight=w) == 1.0
    assert precision_at_k(y, s, np.float32(0.5), sample_weight=w) == 0.5
    assert recall_at_k(y, s, np.int64(1), sample_weight=w) == 1.0
    assert binary_metrics(y, s, k=0.75, sample_weight=w)["k"] == 0.75
