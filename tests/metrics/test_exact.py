"""Tests of dpipe.metrics: exact binary metrics against scikit-learn and brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import sklearn.metrics as skm
from hypothesis import given, settings
from hypothesis import strategies as st

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


# ---------------------------------------------------------------------------
# brute-force references
# ---------------------------------------------------------------------------
def brute_auc(y, s):
    """O(n^2): mean over positive/negative pairs of 1[s+ > s-] + 1/2 1[s+ == s-]."""
    pos = s[y == 1]
    neg = s[y != 1]
    gt = pos[:, None] > neg[None, :]
    eq = pos[:, None] == neg[None, :]
    return float((gt.sum() + 0.5 * eq.sum()) / gt.size)


def brute_top_k_expectation(y, s, k):
    """Expected positives in the top k over all n! tie-breaking orders (tiny n)."""
    n = len(s)
    total = 0
    count = 0
    for prio in itertools.permutations(range(n)):
        order = sorted(range(n), key=lambda i: (-s[i], prio[i]))
        total += sum(1 for i in order[:k] if y[i] == 1)
        count += 1
    return total / count


def random_case(rng, n, ties, pos_rate=0.3):
    y = np.where(rng.random(n) < pos_rate, 1, -1)
    y[0], y[1] = 1, -1  # both classes present
    if ties:
        s = rng.integers(-3, 4, n).astype(np.float64) + 0.5 * y * (rng.random(n) < 0.3)
    else:
        s = rng.normal(size=n) + 0.7 * y
    return y, s


# ---------------------------------------------------------------------------
# agreement with scikit-learn
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("seed", range(5))
def test_matches_sklearn(seed, ties):
    rng = np.random.default_rng(seed)
    y, s = random_case(rng, 2000, ties)
    for t in (0.0, 0.5, -1.0):
        pred = np.where(s > t, 1, -1)
        assert abs(accuracy_score(y, s, t) - skm.accuracy_score(y, pred)) <= TOL
        assert abs(precision_score(y, s, t) - skm.precision_score(y, pred)) <= TOL
        assert abs(recall_score(y, s, t) - skm.recall_score(y, pred)) <= TOL
        assert abs(f1_score(y, s, t) - skm.f1_score(y, pred)) <= TOL
    assert abs(roc_auc_score(y, s) - skm.roc_auc_score(y, s)) <= TOL


def test_label_encodings_agree():
    rng = np.random.default_rng(7)
    y, s = random_case(rng, 500, ties=True)
    y01 = (y == 1).astype(np.int64)
    ref = binary_metrics(y, s, threshold=0.5, k=37)
    for yy in (y01, y01.astype(bool), y.astype(np.float32), list(y)):
        assert binary_metrics(yy, s, threshold=0.5, k=37) == ref


def test_default_threshold_is_strict_zero():
    y = np.array([1, 1, -1, -1])
    s = np.array([0.0, 1.0, 0.0, -1.0])  # a score of exactly 0 is predicted negative
    assert precision_score(y, s) == 1.0
    assert recall_score(y, s) == 0.5
    assert accuracy_score(y, s) == 0.75


def test_zero_division_conventions():
    y = np.array([-1, -1, 1])
    s = np.array([-1.0, -2.0, -3.0])  # nothing predicted positive
    assert precision_score(y, s) == 0.0
    assert f1_score(y, s) == 0.0
    y_neg = np.array([-1, -1, -1])
    assert recall_score(y_neg, s) == 0.0
    assert f1_score(y_neg, s) == 0.0
    assert accuracy_score(y_neg, s) == 1.0
    assert recall_at_k(y_neg, s, 2) == 0.0
    assert precision_at_k(y_neg, s, 2) == 0.0
    pred = np.where(s > 0, 1, -1)
    assert precision_score(y, s) == skm.precision_score(y, pred, zero_division=0.0)
    assert f1_score(y_neg, s) == skm.f1_score(y_neg, pred, zero_division=0.0)


# ---------------------------------------------------------------------------
# AUC
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(10))
def test_auc_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    y, s = random_case(rng, int(rng.integers(2, 300)), ties=bool(seed % 2))
    assert abs(roc_auc_score(y, s) - brute_auc(y, s)) <= TOL


def test_auc_all_tied_is_half():
    assert roc_auc_score([1, -1, 1, -1, -1], [2.0] * 5) == 0.5


def test_auc_infinite_scores():
    y = np.array([1, 1, -1, -1, 1])
    s = np.array([np.inf, np.inf, np.inf, -np.inf, -np.inf])
    assert abs(roc_auc_score(y, s) - brute_auc(y, s)) <= TOL


def test_roc_curve_points():
    rng = np.random.default_rng(3)
    y, s = random_case(rng, 400, ties=True)
    fpr, tpr = roc_curve_points(y, s)
    assert fpr[0] == tpr[0] == 0.0 and fpr[-1] == tpr[-1] == 1.0
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    ref_fpr, ref_tpr, _ = skm.roc_curve(y, s, drop_intermediate=False)
    np.testing.assert_allclose(fpr, ref_fpr, rtol=0, atol=TOL)
    np.testing.assert_allclose(tpr, ref_tpr, rtol=0, atol=TOL)
    area = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
    assert abs(area - roc_auc_score(y, s)) <= TOL


# ---------------------------------------------------------------------------
# PRBEP, precision / recall at k
# ---------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(
    data=st.lists(st.tuples(st.booleans(), st.integers(0, 2)), min_size=2, max_size=6).filter(
        lambda d: 0 < sum(p for p, _ in d) < len(d)
    )
)
def test_prbep_expected_over_tie_breaks(data):
    y = np.array([1 if p else -1 for p, _ in data])
    s = np.array([float(v) for _, v in data])
    n_pos = int((y == 1).sum())
    ref = brute_top_k_expectation(y, s, n_pos) / n_pos
    assert abs(prbep_score(y, s) - ref) <= TOL


@settings(max_examples=40, deadline=None)
@given(
    data=st.lists(st.tuples(st.booleans(), st.integers(0, 2)), min_size=1, max_size=6),
    kfrac=st.floats(0.0, 1.0),
)
def test_top_k_expected_over_tie_breaks(data, kfrac):
    y = np.array([1 if p else -1 for p, _ in data])
    s = np.array([float(v) for _, v in data])
    n = len(y)
    k = min(n, 1 + int(kfrac * n))
    expected = brute_top_k_expectation(y, s, k)
    n_pos = int((y == 1).sum())
    assert abs(precision_at_k(y, s, k) - expected / k) <= TOL
    assert abs(recall_at_k(y, s, k) - (expected / n_pos if n_pos else 0.0)) <= TOL


@pytest.mark.parametrize("seed", range(5))
def test_top_k_without_ties(seed):
    rng = np.random.default_rng(seed)
    y, s = random_case(rng, 300, ties=False)
    order = np.argsort(-s)
    n_pos = int((y == 1).sum())
    for k in (1, 2, 17, n_pos, 299, 300):
        hits = int((y[order[:k]] == 1).sum())
        assert precision_at_k(y, s, k) == hits / k
        assert recall_at_k(y, s, k) == hits / n_pos


@pytest.mark.parametrize("seed", range(5))
def test_prbep_matches_precision_recall_curve(seed):
    rng = np.random.default_rng(seed)
    y, s = random_case(rng, 500, ties=False)
    n_pos = int((y == 1).sum())
    prec, rec, thr = skm.precision_recall_curve(y, s)
    cut = np.sort(s)[::-1][n_pos - 1]
    (i,) = np.flatnonzero(thr == cut)
    assert abs(prec[i] - rec[i]) <= TOL
    assert abs(prbep_score(y, s) - prec[i]) <= TOL


def test_k_fraction_is_a_fraction_of_the_positives():
    # k is only a count; a fraction is k_fraction, of the 9 positives, rounded
    y = np.array([1, -1, 1, -1, -1, -1, 1, -1, -1, -1] * 3)
    s = -np.arange(30, dtype=np.float64)
    assert precision_at_k(y, s, k_fraction=1 / 3) == precision_at_k(y, s, 3)  # 9 / 3 is 3, not 4
    assert precision_at_k(y, s, k_fraction=0.4) == precision_at_k(y, s, 4)  # round(3.6)
    assert recall_at_k(y, s, k_fraction=2.0) == recall_at_k(y, s, 18)
    assert binary_metrics(y, s, k_fraction=0.2)["k"] == 2
    with pytest.raises(ParameterError, match="k_fraction"):
        precision_at_k(y, s, 0.1)


@pytest.mark.parametrize("k", [0, -1, 31, 0.0, 1.5, -0.2, float("nan"), True, "3", None])
def test_invalid_k(k):
    y = np.array([1, -1, 1] * 10)
    s = np.arange(30, dtype=np.float64)
    with pytest.raises(ParameterError, match="'k' parameter"):
        precision_at_k(y, s, k)
    with pytest.raises(ParameterError, match="'k' parameter"):
        recall_at_k(y, s, k)


def test_a_whole_float_k_is_a_count():
    y = np.array([1, -1, 1] * 10)
    s = np.arange(30, dtype=np.float64)
    assert precision_at_k(y, s, 4.0) == precision_at_k(y, s, 4)  # the CLI and the fit records carry k as a float


def test_k_accepts_numpy_types():
    y = np.array([1, -1, 1, -1])
    s = np.array([4.0, 3.0, 2.0, 1.0])
    assert precision_at_k(y, s, np.int64(2)) == 0.5
    assert precision_at_k(y, s, k_fraction=np.float32(0.5)) == 1.0


# ---------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------
labels_scores = st.integers(2, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.booleans(), min_size=n, max_size=n).filter(lambda v: 0 < sum(v) < len(v)),
        st.lists(st.integers(-20, 20), min_size=n, max_size=n),
    )
)


@settings(max_examples=60, deadline=None)
@given(labels_scores)
def test_auc_invariant_under_increasing_transform(case):
    y, s = np.array(case[0]), np.array(case[1], dtype=np.float64)
    auc = roc_auc_score(y, s)
    for t in (lambda v: 3.0 * v - 7.0, lambda v: v**3 + 5.0 * v, lambda v: np.exp(v / 4.0)):
        assert abs(roc_auc_score(y, t(s)) - auc) <= TOL
        assert abs(prbep_score(y, t(s)) - prbep_score(y, s)) <= TOL


@settings(max_examples=60, deadline=None)
@given(labels_scores)
def test_auc_of_negated_scores(case):
    y, s = np.array(case[0]), np.array(case[1], dtype=np.float64)
    assert abs(roc_auc_score(y, -s) - (1.0 - roc_auc_score(y, s))) <= TOL
    assert abs(roc_auc_score(y, s) - brute_auc(np.where(y, 1, -1), s)) <= TOL


@settings(max_examples=60, deadline=None)
@given(labels_scores, st.integers(1, 5))
def test_summary_merge_is_exact(case, n_parts):
    y, s = np.array(case[0]), np.array(case[1], dtype=np.float64)
    whole = RankSummary.from_scores(y, s)
    cuts = np.linspace(0, len(y), n_parts + 1).astype(int)
    parts = [RankSummary.from_scores(y[a:b], s[a:b]) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    merged = RankSummary.merge(parts)
    for name in ("scores", "pos", "neg"):
        np.testing.assert_array_equal(getattr(merged, name), getattr(whole, name))
    assert merged.metrics(0.0, 1) == whole.metrics(0.0, 1)


def test_summary_from_sorted_and_confusion():
    rng = np.random.default_rng(11)
    y, s = random_case(rng, 1000, ties=True)
    order = np.argsort(-s, kind="stable")
    a = RankSummary.from_sorted(s[order], y[order])
    b = RankSummary.from_scores(y, s)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.pos, b.pos)
    assert np.all(np.diff(a.scores) < 0)
    assert a.n == 1000 and a.n_positive == int((y == 1).sum())
    for t in (-10.0, -0.5, 0.0, 0.5, 1.0, 10.0):
        tp, fp, fn, tn = a.confusion(t)
        pred = s > t
        assert (tp, fp, fn, tn) == (
            int((pred & (y == 1)).sum()),
            int((pred & (y != 1)).sum()),
            int((~pred & (y == 1)).sum()),
            int((~pred & (y != 1)).sum()),
        )
    with pytest.raises(ParameterError, match="non-increasing"):
        RankSummary.from_sorted(s, y)


def test_binary_metrics_keys_and_values():
    rng = np.random.default_rng(5)
    y, s = random_case(rng, 800, ties=True)
    m = binary_metrics(y, s, threshold=0.25)
    assert set(m) == {"n", "n_positive", "roc_auc", "prbep", "accuracy", "precision", "recall", "f1", "k", "prec_at_k", "rec_at_k"}
    assert m["n"] == 800 and m["n_positive"] == int((y == 1).sum()) == m["k"]
    assert m["prec_at_k"] == m["rec_at_k"] == m["prbep"] == prbep_score(y, s)
    assert m["roc_auc"] == roc_auc_score(y, s)
    assert m["accuracy"] == accuracy_score(y, s, 0.25)
    assert m["precision"] == precision_score(y, s, 0.25)
    assert m["recall"] == recall_score(y, s, 0.25)
    assert m["f1"] == f1_score(y, s, 0.25)
    m2 = binary_metrics(y, s, k=50)
    assert m2["k"] == 50
    assert m2["prec_at_k"] == precision_at_k(y, s, 50)
    assert m2["rec_at_k"] == recall_at_k(y, s, 50)


def test_large_input_is_fast_and_exact():
    rng = np.random.default_rng(0)
    n = 400_000
    y = np.where(rng.random(n) < 0.1, 1, -1).astype(np.int8)
    s = np.round(rng.normal(size=n) + y, 2)
    assert abs(roc_auc_score(y, s) - skm.roc_auc_score(y, s)) <= TOL


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("y", [[1, 1, 1], [-1, -1, -1], [0, 0, 0], [True, True, True]])
def test_single_class_errors(y):
    s = [0.3, 0.1, 0.2]
    for fn in (roc_auc_score, prbep_score, roc_curve_points, binary_metrics):
        with pytest.raises(ParameterError, match="single class"):
            fn(y, s)
    with pytest.raises(ValueError):  # ParameterError is a ValueError
        roc_auc_score(y, s)


@pytest.mark.parametrize(
    "y, s, match",
    [
        ([1, 2, -1], [0.0, 1.0, 2.0], "label 2 at index 1"),
        ([1, 0, -1], [0.0, 1.0, 2.0], "mixes -1"),
        ([1, -1], [0.0, 1.0, 2.0], "2 rows but s has 3"),
        ([1, -1], [0.0, float("nan")], "NaN at index 1"),
        ([], [], "empty"),
        ([[1, -1]], [[0.0, 1.0]], "1-dimensional"),
        (["a", "b"], [0.0, 1.0], "dtype"),
    ],
)
def test_invalid_inputs(y, s, match):
    with pytest.raises(ParameterError, match=match):
        roc_auc_score(y, s)
    with pytest.raises(ParameterError, match=match):
        accuracy_score(y, s)


def test_invalid_threshold():
    with pytest.raises(ParameterError, match="'threshold' parameter"):
        accuracy_score([1, -1], [0.0, 1.0], threshold=float("nan"))
    with pytest.raises(ParameterError, match="'threshold' parameter"):
        binary_metrics([1, -1], [0.0, 1.0], threshold="x")


def test_auc_is_exact_rational():
    # 1 positive above 2 of 3 negatives, tied with the third: (2 + 0.5) / 3
    assert roc_auc_score([1, -1, -1, -1], [1.0, 0.0, 0.0, 1.0]) == 2.5 / 3
    assert math.isclose(prbep_score([1, -1, -1, 1], [1.0, 1.0, 1.0, 0.0]), (2 * 1 / 3) / 2)


@pytest.mark.parametrize("seed", range(6))
def test_best_threshold_minimizes_training_errors(seed):
    from dpipe.metrics import RankSummary

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    y = np.where(rng.random(n) < 0.4, 1, -1)
    if seed % 2:
        s = rng.integers(-3, 4, size=n).astype(float)  # many ties
    else:
        s = rng.standard_normal(n)
    if seed == 0:
        y[:] = 1
    t, errors = RankSummary.from_scores(y, s).best_threshold()
    brute = min(int(np.sum(np.where(s > c, 1, -1) != y)) for c in np.concatenate([s, [s.min() - 1, s.max() + 1]]))
    assert errors == brute == int(np.sum(np.where(s > t, 1, -1) != y))
