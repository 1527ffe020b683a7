"""Loss-augmented argmax oracles of the multivariate SVM: exhaustive enumeration of all
labelings, the naive references (pairwise ROCArea, Algorithm 2) and consistency."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpipe.exceptions import ParameterError
from dpipe.objectives._argmax import error_rate_argmax, f1_argmax, prbep_argmax, prec_at_k_argmax, rec_at_k_argmax, rocarea_argmax
from dpipe.objectives._rank_kernels import prbep_risk_exact
from dpipe.testing import (
    contingency_argmax_reference,
    error_rate_argmax_reference,
    f1_argmax_reference,
    prbep_argmax_reference,
    prec_at_k_argmax_reference,
    rec_at_k_argmax_reference,
    rocarea_argmax_reference,
)

# ---------------------------------------------------------------------------
# helpers written independently of the module
# ---------------------------------------------------------------------------


def table_loss(loss, a, b, n_pos, n_neg, k=None):
    """Delta from precision / recall as the paper defines them (NaN: not admissible)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    c = n_pos - a
    n = n_pos + n_neg
    pred = a + b
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(pred > 0, a / np.where(pred > 0, pred, 1.0), 0.0)
        rec = a / n_pos if n_pos else np.zeros_like(a)
        if loss == "error":
            return (b + c) / n
        if loss == "f1":
            f1 = np.where(prec + rec > 0, 2 * prec * rec / np.where(prec + rec > 0, prec + rec, 1.0), 0.0)
            return 1.0 - f1
        if loss == "prbep":  # precision == recall: exactly n+ predicted positives
            return np.where(pred == n_pos, 1.0 - prec, np.nan)
        if loss == "prec@k":
            return np.where(pred == k, 1.0 - a / k, np.nan)
        if loss == "rec@k":
            return np.where(pred == k, 1.0 - rec, np.nan)
    raise AssertionError(loss)


def enumerate_max(sp, sn, loss, k=None):
    """max over all y' in {-1, +1}^n of Delta + (1/(2n)) sum_i (y'_i - y_i) s_i."""
    n_pos, n_neg = sp.size, sn.size
    n = n_pos + n_neg
    s = np.concatenate([sp, sn])
    y = np.concatenate([np.ones(n_pos), -np.ones(n_neg)])
    bits = ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
    yp = np.where(bits, 1.0, -1.0)
    a = bits[:, :n_pos].sum(axis=1)
    b = bits[:, n_pos:].sum(axis=1)
    delta = table_loss(loss, a, b, n_pos, n_neg, k)
    vals = delta + (yp - y) @ s / (2 * n)
    return float(np.max(vals[~np.isnan(delta)]))


def enumerate_roc_max(sp, sn):
    """max over all pair labelings z in {0, 1}^m of (1/m) sum z_ij (1 - s_i + s_j)."""
    u = (1.0 - sp[:, None] + sn[None, :]).ravel()
    m = u.size
    bits = ((np.arange(2**m)[:, None] >> np.arange(m)[None, :]) & 1).astype(np.float64)
    return float(np.max(bits @ u) / m)


def seed_of(*parts):
    return zlib.crc32(repr(parts).encode())


def scale(sp, sn):
    return 1.0 + float(max(np.abs(sp).max(initial=0.0), np.abs(sn).max(initial=0.0)))


def check_consistent(r, sp, sn):
    assert r.coef_pos.shape == sp.shape and r.coef_neg.shape == sn.shape
    assert 0.0 <= r.loss <= 1.0
    lin = r.loss + r.coef_pos @ sp + r.coef_neg @ sn
    assert abs(r.value - lin) <= 1e-12 * scale(sp, sn)


def check_table(r, sp, sn, loss, k=None):
    """coef flips a prefix of sp and a suffix of sn by 1/n; the loss is that table's."""
    check_consistent(r, sp, sn)
    n_pos, n_neg = sp.size, sn.size
    n = n_pos + n_neg
    c = int(np.count_nonzero(r.coef_pos))
    b = int(np.count_nonzero(r.coef_neg))
    assert np.all(r.coef_pos[:c] == -1.0 / n) and np.all(r.coef_pos[c:] == 0.0)
    assert np.all(r.coef_neg[n_neg - b :] == 1.0 / n) and np.all(r.coef_neg[: n_neg - b] == 0.0)
    expected = float(table_loss(loss, n_pos - c, b, n_pos, n_neg, k))
    assert not np.isnan(expected), "the maximizer is not an admissible labeling"
    assert r.loss == pytest.approx(expected, rel=0, abs=1e-14)
    return n_pos - c, b


def check_roc(r, sp, sn):
    check_consistent(r, sp, sn)
    m = sp.size * sn.size
    cnt_p, cnt_n = -r.coef_pos * m, r.coef_neg * m
    np.testing.assert_allclose(cnt_p, np.round(cnt_p), rtol=0, atol=1e-9)
    np.testing.assert_allclose(cnt_n, np.round(cnt_n), rtol=0, atol=1e-9)
    cnt_p, cnt_n = np.round(cnt_p), np.round(cnt_n)
    assert np.all(cnt_p >= 0) and np.all(cnt_n >= 0)
    assert np.all(np.diff(cnt_p) <= 0) and np.all(np.diff(cnt_n) >= 0)  # monotone in the score
    assert cnt_p.sum() == cnt_n.sum() == pytest.approx(r.loss * m, abs=1e-6)


TABLE_ORACLES = {
    "error": (lambda sp, sn, k: error_rate_argmax(sp, sn), lambda sp, sn, k: contingency_argmax_reference(sp, sn, "error")),
    "f1": (lambda sp, sn, k: f1_argmax(sp, sn), lambda sp, sn, k: f1_argmax_reference(sp, sn)),
    "prbep": (lambda sp, sn, k: prbep_argmax(sp, sn), lambda sp, sn, k: prbep_argmax_reference(sp, sn)),
    "prec@k": (prec_at_k_argmax, prec_at_k_argmax_reference),
    "rec@k": (rec_at_k_argmax, rec_at_k_argmax_reference),
}


def ks_for(loss, n):
    if loss in ("prec@k", "rec@k"):
        return sorted({1, 2, max(1, n // 2), n - 1, n} & set(range(1, n + 1)))
    return [None]


def draw_scores(rng, n_pos, n_neg, kind):
    if kind == "normal":
        sp, sn = rng.standard_normal(n_pos) + 0.5, rng.standard_normal(n_neg)
    elif kind == "halves":  # ties, and scores exactly on the margins +-1
        sp, sn = rng.integers(-3, 4, n_pos) * 0.5, rng.integers(-4, 3, n_neg) * 0.5
    else:  # integer-valued: many ties, pairs exactly at margin 1
        sp, sn = rng.integers(-2, 3, n_pos).astype(float), rng.integers(-3, 2, n_neg).astype(float)
    return np.sort(sp), np.sort(sn)


# ---------------------------------------------------------------------------
# exhaustive enumeration, n <= 12
# ---------------------------------------------------------------------------
SMALL = [(1, 1), (1, 4), (4, 1), (1, 11), (11, 1), (2, 3), (3, 4), (5, 5), (6, 6), (4, 8), (9, 3)]


@pytest.mark.parametrize("kind", ["normal", "halves", "integers"])
@pytest.mark.parametrize(("n_pos", "n_neg"), SMALL)
@pytest.mark.parametrize("loss", list(TABLE_ORACLES))
def test_table_oracles_match_enumeration(loss, n_pos, n_neg, kind):
    rng = np.random.default_rng(seed_of(loss, n_pos, n_neg, kind))
    fast, _ = TABLE_ORACLES[loss]
    for _ in range(3):
        sp, sn = draw_scores(rng, n_pos, n_neg, kind)
        for k in ks_for(loss, n_pos + n_neg):
            r = fast(sp, sn, k)
            check_table(r, sp, sn, loss, k)
            assert abs(r.value - enumerate_max(sp, sn, loss, k)) <= 1e-12 * scale(sp, sn)


@pytest.mark.parametrize("kind", ["normal", "halves", "integers"])
@pytest.mark.parametrize(("n_pos", "n_neg"), [(1, 1), (1, 12), (12, 1), (2, 5), (3, 4), (4, 3), (6, 6), (3, 9)])
def test_rocarea_matches_enumeration(n_pos, n_neg, kind):
    rng = np.random.default_rng(seed_of("roc", n_pos, n_neg, kind))
    for _ in range(3):
        sp, sn = draw_scores(rng, n_pos, n_neg, kind)
        r = rocarea_argmax(sp, sn)
        check_roc(r, sp, sn)
        hinge = np.maximum(0.0, 1.0 - (sp[:, None] - sn[None, :])).mean()
        if n_pos * n_neg <= 12:
            best = enumerate_roc_max(sp, sn)
        else:  # the pairs decouple: the pairwise max is the enumeration's
            best = hinge
        assert abs(r.value - best) <= 1e-12 * scale(sp, sn)
        assert abs(r.value - hinge) <= 1e-12 * scale(sp, sn)


def test_prec_at_k_without_positives_and_contingency_without_negatives():
    sn = np.array([-2.0, -0.5, 0.25, 3.0])
    for k in range(1, 5):
        r = prec_at_k_argmax(np.empty(0), sn, k)
        check_table(r, np.empty(0), sn, "prec@k", k)
        assert r.loss == 1.0 and abs(r.value - enumerate_max(np.empty(0), sn, "prec@k", k)) <= 1e-12
    sp = np.array([-1.0, 0.5, 2.0])
    for loss, (fast, _) in TABLE_ORACLES.items():
        for k in ks_for(loss, 3):
            r = fast(sp, np.empty(0), k)
            check_table(r, sp, np.empty(0), loss, k)
            assert abs(r.value - enumerate_max(sp, np.empty(0), loss, k)) <= 1e-12 * scale(sp, sp)


# ---------------------------------------------------------------------------
# naive references, n <= 300
# ---------------------------------------------------------------------------
MEDIUM = [(1, 299), (299, 1), (30, 270), (150, 150), (120, 40), (7, 60)]


@pytest.mark.parametrize("kind", ["normal", "integers"])
@pytest.mark.parametrize(("n_pos", "n_neg"), MEDIUM)
@pytest.mark.parametrize("loss", list(TABLE_ORACLES))
def test_table_oracles_match_algorithm_2(loss, n_pos, n_neg, kind):
    rng = np.random.default_rng(seed_of(loss, n_pos, n_neg, kind, "medium"))
    fast, ref = TABLE_ORACLES[loss]
    for _ in range(2):
        sp, sn = draw_scores(rng, n_pos, n_neg, kind)
        for k in ks_for(loss, n_pos + n_neg):
            r, q = fast(sp, sn, k), ref(sp, sn, k)
            check_table(r, sp, sn, loss, k)
            check_table(q, sp, sn, loss, k)
            assert abs(r.value - q.value) <= 1e-12 * scale(sp, sn)
            if kind == "normal":  # continuous scores: the maximizer is unique
                assert r.loss == pytest.approx(q.loss, rel=0, abs=1e-14)
                np.testing.assert_array_equal(r.coef_pos, q.coef_pos)
                np.testing.assert_array_equal(r.coef_neg, q.coef_neg)


@pytest.mark.parametrize("kind", ["normal", "halves", "integers"])
@pytest.mark.parametrize(("n_pos", "n_neg"), MEDIUM)
def test_rocarea_and_error_rate_match_reference(n_pos, n_neg, kind):
    rng = np.random.default_rng(seed_of("roc-err", n_pos, n_neg, kind))
    for _ in range(3):
        sp, sn = draw_scores(rng, n_pos, n_neg, kind)
        r, q = rocarea_argmax(sp, sn), rocarea_argmax_reference(sp, sn)
        check_roc(r, sp, sn)
        check_consistent(q, sp, sn)
        assert r.loss == q.loss  # the same pair predicate: identical counts
        np.testing.assert_array_equal(r.coef_pos, q.coef_pos)
        np.testing.assert_array_equal(r.coef_neg, q.coef_neg)
        assert abs(r.value - q.value) <= 1e-12 * scale(sp, sn)
        r, q = error_rate_argmax(sp, sn), error_rate_argmax_reference(sp, sn)
        check_table(r, sp, sn, "error")
        assert r.loss == q.loss
        np.testing.assert_array_equal(r.coef_pos, q.coef_pos)
        np.testing.assert_array_equal(r.coef_neg, q.coef_neg)
        hinge = (np.maximum(0.0, 1.0 - sp).sum() + np.maximum(0.0, 1.0 + sn).sum()) / (n_pos + n_neg)
        assert abs(r.value - hinge) <= 1e-12 * scale(sp, sn)
        assert abs(r.value - q.value) <= 1e-12 * scale(sp, sn)


def test_prbep_is_prec_and_rec_at_n_pos_and_matches_the_smoothed_risk_limit():
    rng = np.random.default_rng(7)
    for n_pos, n_neg in [(1, 50), (40, 60), (70, 9)]:
        sp, sn = draw_scores(rng, n_pos, n_neg, "normal")
        r = prbep_argmax(sp, sn)
        for other in (prec_at_k_argmax(sp, sn, n_pos), rec_at_k_argmax(sp, sn, n_pos)):
            assert other.loss == r.loss and other.value == r.value
            np.testing.assert_array_equal(other.coef_pos, r.coef_pos)
        # Zhang's PRBEP risk uses Psi scaled by 1/n (not 1/(2n)): the same maximum at 2 s
        n = n_pos + n_neg
        assert prbep_argmax(2 * sp, 2 * sn).value == pytest.approx(prbep_risk_exact(sp, sn, n), rel=1e-12, abs=1e-12)


# ---------------------------------------------------------------------------
# property tests
# ---------------------------------------------------------------------------
score = st.one_of(
    st.integers(-4, 4).map(float),
    st.floats(min_value=-20.0, max_value=20.0, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=150, deadline=None)
@given(sp=st.lists(score, min_size=1, max_size=40), sn=st.lists(score, min_size=0, max_size=60))
def test_f1_fast_equals_algorithm_2(sp, sn):
    sp, sn = np.sort(np.array(sp, np.float64)), np.sort(np.array(sn, np.float64))
    r, q = f1_argmax(sp, sn), f1_argmax_reference(sp, sn)
    check_table(r, sp, sn, "f1")
    assert abs(r.value - q.value) <= 1e-12 * scale(sp, sn)


@settings(max_examples=60, deadline=None)
@given(
    sp=st.lists(score, min_size=1, max_size=30),
    sn=st.lists(score, min_size=0, max_size=40),
    k_frac=st.floats(0.0, 1.0),
)
def test_fixed_count_oracles_equal_algorithm_2(sp, sn, k_frac):
    sp, sn = np.sort(np.array(sp, np.float64)), np.sort(np.array(sn, np.float64))
    n = sp.size + sn.size
    k = min(n, 1 + int(k_frac * n))
    for loss, kk in (("prbep", None), ("prec@k", k), ("rec@k", k)):
        fast, ref = TABLE_ORACLES[loss]
        r, q = fast(sp, sn, kk), ref(sp, sn, kk)
        check_table(r, sp, sn, loss, kk)
        assert abs(r.value - q.value) <= 1e-12 * scale(sp, sn)


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------
def test_invalid_inputs_are_rejected():
    good = np.array([0.0, 1.0])
    with pytest.raises(ParameterError, match="sorted in increasing order"):
        f1_argmax(np.array([1.0, 0.0]), good)
    with pytest.raises(ParameterError, match="'sn' parameter of rocarea_argmax"):
        rocarea_argmax(good, np.array([0.0, np.nan]))
    with pytest.raises(ParameterError, match="finite"):
        error_rate_argmax(good, np.array([0.0, np.inf]))
    with pytest.raises(ParameterError, match="1-d"):
        prbep_argmax(good.reshape(2, 1), good)
    with pytest.raises(ParameterError, match="both classes"):
        rocarea_argmax(good, np.empty(0))
    for fn in (f1_argmax, prbep_argmax, lambda sp, sn: rec_at_k_argmax(sp, sn, 1)):
        with pytest.raises(ParameterError, match="needs a positive"):
            fn(np.empty(0), good)
    with pytest.raises(ParameterError, match="needs an example"):
        error_rate_argmax(np.empty(0), np.empty(0))
    for k in (0, 5, 1.5, True):
        with pytest.raises(ParameterError, match="'k' parameter of prec_at_k_argmax"):
            prec_at_k_argmax(good, good, k)
    with pytest.raises(ParameterError, match="'loss' parameter"):
        contingency_argmax_reference(good, good, "auc")
