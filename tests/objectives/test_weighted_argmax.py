"""Sample weights in the loss-augmented argmax oracles: a row of weight v is v repeated
rows. Integer weights against the unweighted oracles and brute-force enumeration on the
expanded data; real weights against the weighted references, the cutting-plane
property and scale invariance; all-ones weights against no weights."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from dpipe.exceptions import ParameterError
from dpipe.objectives._argmax import error_rate_argmax, f1_argmax, prbep_argmax, prec_at_k_argmax, rec_at_k_argmax, rocarea_argmax
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
# helpers (independent of the module)
# ---------------------------------------------------------------------------
LOSSES = ["rocarea", "error", "prbep", "prec@k", "rec@k", "f1"]

FAST = {
    "rocarea": lambda sp, sn, k, **w: rocarea_argmax(sp, sn, **w),
    "error": lambda sp, sn, k, **w: error_rate_argmax(sp, sn, **w),
    "prbep": lambda sp, sn, k, **w: prbep_argmax(sp, sn, **w),
    "prec@k": lambda sp, sn, k, **w: prec_at_k_argmax(sp, sn, k, **w),
    "rec@k": lambda sp, sn, k, **w: rec_at_k_argmax(sp, sn, k, **w),
    "f1": lambda sp, sn, k, **w: f1_argmax(sp, sn, **w),
}

REFERENCE = {
    "rocarea": lambda sp, sn, k, **w: rocarea_argmax_reference(sp, sn, **w),
    "error": lambda sp, sn, k, **w: error_rate_argmax_reference(sp, sn, **w),
    "prbep": lambda sp, sn, k, **w: prbep_argmax_reference(sp, sn, **w),
    "prec@k": lambda sp, sn, k, **w: prec_at_k_argmax_reference(sp, sn, k, **w),
    "rec@k": lambda sp, sn, k, **w: rec_at_k_argmax_reference(sp, sn, k, **w),
    "f1": lambda sp, sn, k, **w: f1_argmax_reference(sp, sn, **w),
}


def seed_of(*parts):
    return zlib.crc32(repr(parts).encode())


def scale(sp, sn):
    return 1.0 + float(max(np.abs(sp).max(initial=0.0), np.abs(sn).max(initial=0.0)))


def draw_scores(rng, n_pos, n_neg, kind):
    if kind == "normal":
        sp, sn = rng.standard_normal(n_pos) + 0.5, rng.standard_normal(n_neg)
    elif kind == "halves":  # ties, and scores exactly on the margins +-1
        sp, sn = rng.integers(-3, 4, n_pos) * 0.5, rng.integers(-4, 3, n_neg) * 0.5
    else:  # integer-valued: many ties
        sp, sn = rng.integers(-2, 3, n_pos).astype(float), rng.integers(-3, 2, n_neg).astype(float)
    return np.sort(sp), np.sort(sn)


def draw_int_weights(rng, n_pos, n_neg, high=3):
    """Integer weights in 0..high with a positive total in each class."""
    vp, vn = rng.integers(0, high + 1, n_pos), rng.integers(0, high + 1, n_neg)
    vp[rng.integers(n_pos)] = max(1, vp.max())
    vn[rng.integers(n_neg)] = max(1, vn.max())
    return vp.astype(float), vn.astype(float)


def ks_for(loss, total):
    if loss in ("prec@k", "rec@k"):
        return sorted({1, 2, max(1, total // 2), total - 1, total} & set(range(1, total + 1)))
    return [None]


def summed_over_copies(coef_expanded, v):
    """Per-row sum of the coefficients of a row's np.repeat copies."""
    rows = np.repeat(np.arange(v.size), v.astype(int))
    return np.bincount(rows, weights=coef_expanded, minlength=v.size)


def table_loss(loss, a, b, n_pos, n_neg, k=None):
    """Delta of the tables (a, b) from precision / recall (NaN: not admissible)."""
    c = n_pos - a
    pred = a + b
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(pred > 0, a / np.where(pred > 0, pred, 1), 0.0)
        rec = a / n_pos if n_pos else np.zeros(a.shape)
        if loss == "error":
            return (b + c) / (n_pos + n_neg)
        if loss == "f1":
            return 1.0 - np.where(prec + rec > 0, 2 * prec * rec / np.where(prec + rec > 0, prec + rec, 1.0), 0.0)
        if loss == "prbep":
            return np.where(pred == n_pos, 1.0 - prec, np.nan)
        if loss == "prec@k":
            return np.where(pred == k, 1.0 - a / k, np.nan)
        if loss == "rec@k":
            return np.where(pred == k, 1.0 - rec, np.nan)
    raise AssertionError(loss)


def enumerate_max(sp, sn, loss, k=None):
    """max over all y' in {-1, +1}^n of Delta + (1/(2n)) sum_i (y'_i - y_i) s_i (expanded rows)."""
    n_pos, n_neg = sp.size, sn.size
    n = n_pos + n_neg
    s = np.concatenate([sp, sn])
    y = np.concatenate([np.ones(n_pos), -np.ones(n_neg)])
    bits = ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
    a = bits[:, :n_pos].sum(axis=1)
    b = bits[:, n_pos:].sum(axis=1)
    delta = table_loss(loss, a, b, n_pos, n_neg, k)
    vals = delta + (np.where(bits, 1.0, -1.0) - y) @ s / (2 * n)
    return float(np.max(vals[~np.isnan(delta)]))


def enumerate_roc_max(sp, sn):
    u = (1.0 - sp[:, None] + sn[None, :]).ravel()
    bits = ((np.arange(2**u.size)[:, None] >> np.arange(u.size)[None, :]) & 1).astype(np.float64)
    return float(np.max(bits @ u) / u.size)


def assert_same(r, q, sp, sn, coef_atol=1e-12):
    tol = 1e-12 * scale(sp, sn)
    assert r.loss == pytest.approx(q.loss, rel=0, abs=1e-13)
    assert abs(r.value - q.value) <= tol
    np.testing.assert_allclose(r.coef_pos, q.coef_pos, rtol=0, atol=coef_atol)
    np.testing.assert_allclose(r.coef_neg, q.coef_neg, rtol=0, atol=coef_atol)


def check_plane_consistent(r, sp, sn):
    assert r.coef_pos.shape == sp.shape and r.coef_neg.shape == sn.shape
    assert 0.0 <= r.loss <= 1.0
    assert np.all(r.coef_pos <= 0.0) and np.all(r.coef_neg >= 0.0)
    assert abs(r.value - (r.loss + r.coef_pos @ sp + r.coef_neg @ sn)) <= 1e-12 * scale(sp, sn)


# ---------------------------------------------------------------------------
# integer weights == repeated rows
# ---------------------------------------------------------------------------
SIZES = [(1, 1), (1, 5), (5, 1), (3, 4), (6, 6), (9, 3), (4, 11), (25, 30)]


@pytest.mark.parametrize("kind", ["normal", "halves", "integers"])
@pytest.mark.parametrize(("n_pos", "n_neg"), SIZES)
@pytest.mark.parametrize("loss", LOSSES)
def test_integer_weights_equal_expanded_rows(loss, n_pos, n_neg, kind):
    rng = np.random.default_rng(seed_of("expand", loss, n_pos, n_neg, kind))
    fast, ref = FAST[loss], REFERENCE[loss]
    for _ in range(3):
        sp, sn = draw_scores(rng, n_pos, n_neg, kind)
        vp, vn = draw_int_weights(rng, n_pos, n_neg)
        ep, en = np.repeat(sp, vp.astype(int)), np.repeat(sn, vn.astype(int))
        for k in ks_for(loss, ep.size + en.size):
            r = fast(sp, sn, k, vp=vp, vn=vn)
            e = fast(ep, en, k)
            check_plane_consistent(r, sp, sn)
            assert r.loss == pytest.approx(e.loss, rel=0, abs=1e-13)
            assert abs(r.value - e.value) <= 1e-12 * scale(sp, sn)
            # a row's coefficient is the sum of its copies'
            np.testing.assert_allclose(r.coef_pos, summed_over_copies(e.coef_pos, vp), rtol=0, atol=1e-12)
            np.testing.assert_allclose(r.coef_neg, summed_over_copies(e.coef_neg, vn), rtol=0, atol=1e-12)
            # the weighted reference is the unweighted reference on the expanded rows
            q, qe = ref(sp, sn, k, vp=vp, vn=vn), ref(ep, en, k)
            check_plane_consistent(q, sp, sn)
            assert abs(q.value - qe.value) <= 1e-12 * scale(sp, sn)
            assert abs(q.value - r.value) <= 1e-12 * scale(sp, sn)
            if kind == "normal" or loss in ("rocarea", "error"):
                assert q.loss == pytest.approx(qe.loss, rel=0, abs=1e-13)
                np.testing.assert_allclose(q.coef_pos, summed_over_copies(qe.coef_pos, vp), rtol=0, atol=1e-12)
                np.testing.assert_allclose(q.coef_neg, summed_over_copies(qe.coef_neg, vn), rtol=0, atol=1e-12)


TINY = [(1, 1), (1, 3), (3, 1), (2, 2), (2, 3), (3, 2), (1, 4), (4, 2)]


@pytest.mark.parametrize("kind", ["normal", "halves", "integers"])
@pytest.mark.parametrize(("n_pos", "n_neg"), TINY)
@pytest.mark.parametrize("loss", LOSSES)
def test_integer_weights_match_enumeration_of_expanded_rows(loss, n_pos, n_neg, kind):
    rng = np.random.default_rng(seed_of("enum", loss, n_pos, n_neg, kind))
    done = 0
    for _ in range(8):
        sp, sn = draw_scores(rng, n_pos, n_neg, kind)
        vp, vn = draw_int_weights(rng, n_pos, n_neg)
        ep, en = np.repeat(sp, vp.astype(int)), np.repeat(sn, vn.astype(int))
        if ep.size + en.size > 13 or (loss == "rocarea" and ep.size * en.size > 14):
            continue
        done += 1
        for k in ks_for(loss, ep.size + en.size):
            r = FAST[loss](sp, sn, k, vp=vp, vn=vn)
            best = enumerate_roc_max(ep, en) if loss == "rocarea" else enumerate_max(ep, en, loss, k)
            assert abs(r.value - best) <= 1e-12 * scale(sp, sn)
    assert done > 0


def test_large_integer_weights_f1_and_fixed_counts_match_expansion():
    """Weights up to 40 (several copies inside one row maximize): still the expansion."""
    rng = np.random.default_rng(11)
    for n_pos, n_neg in [(3, 5), (8, 8), (2, 12), (15, 4), (10, 30)]:
        for _ in range(10):
            sp, sn = draw_scores(rng, n_pos, n_neg, "normal")
            sp, sn = sp * 0.05, np.sort(sn * 0.05 - 0.02)
            vp, vn = draw_int_weights(rng, n_pos, n_neg, high=40)
            if rng.random() < 0.5:  # runs of zero-weight rows between rows of many copies
                vp, vn = vp * (rng.random(n_pos) < 0.4), vn * (rng.random(n_neg) < 0.4)
                vp[rng.integers(n_pos)] += 1.0
            ep, en = np.repeat(sp, vp.astype(int)), np.repeat(sn, vn.astype(int))
            total = ep.size + en.size
            for loss in ("f1", "prbep", "prec@k", "rec@k"):
                for k in sorted({1, total // 3, total // 2, total}) if loss in ("prec@k", "rec@k") else [None]:
                    r, e = FAST[loss](sp, sn, k, vp=vp, vn=vn), FAST[loss](ep, en, k)
                    assert r.loss == pytest.approx(e.loss, rel=0, abs=1e-13)
                    assert abs(r.value - e.value) <= 1e-12 * scale(sp, sn)
                    np.testing.assert_allclose(r.coef_pos, summed_over_copies(e.coef_pos, vp), rtol=0, atol=1e-12)
                    np.testing.assert_allclose(r.coef_neg, summed_over_copies(e.coef_neg, vn), rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------
# all-ones weights == no weights
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["normal", "halves", "integers"])
@pytest.mark.parametrize("loss", LOSSES)
def test_unit_weights_equal_no_weights(loss, kind):
    rng = np.random.default_rng(seed_of("ones", loss, kind))
    for n_pos, n_neg in [(1, 1), (4, 9), (30, 20), (7, 120)]:
        sp, sn = draw_scores(rng, n_pos, n_neg, kind)
        for k in ks_for(loss, n_pos + n_neg):
            r = FAST[loss](sp, sn, k, vp=np.ones(n_pos), vn=np.ones(n_neg))
            u = FAST[loss](sp, sn, k)
            assert r.loss == u.loss and r.value == u.value
            np.testing.assert_array_equal(r.coef_pos, u.coef_pos)
            np.testing.assert_array_equal(r.coef_neg, u.coef_neg)
            # one side given: the other is all ones
            h = FAST[loss](sp, sn, k, vp=np.ones(n_pos))
            assert h.loss == u.loss and h.value == u.value
            q, qu = REFERENCE[loss](sp, sn, k, vp=np.ones(n_pos), vn=np.ones(n_neg)), REFERENCE[loss](sp, sn, k)
            assert abs(q.value - qu.value) <= 1e-12 * scale(sp, sn)


# ---------------------------------------------------------------------------
# real weights
# ---------------------------------------------------------------------------
def draw_real_weights(rng, n_pos, n_neg):
    vp, vn = rng.exponential(1.0, n_pos), rng.exponential(1.0, n_neg)
    vp[rng.random(n_pos) < 0.15] = 0.0  # some rows of weight zero
    vn[rng.random(n_neg) < 0.15] = 0.0
    vp[rng.integers(n_pos)] = 0.37 + vp.max()
    vn[rng.integers(n_neg)] = 0.61 + vn.max()
    return vp, vn


def real_ks(loss, total):
    if loss in ("prec@k", "rec@k"):
        return [0.3, 0.25 * total, 0.5 * total + 0.1, total]
    return [None]


REAL_LOSSES = ["rocarea", "error", "prbep", "prec@k", "rec@k"]


@pytest.mark.parametrize("kind", ["normal", "halves", "integers"])
@pytest.mark.parametrize(("n_pos", "n_neg"), [(1, 1), (2, 7), (7, 2), (10, 10), (40, 25)])
@pytest.mark.parametrize("loss", REAL_LOSSES)
def test_real_weights_match_weighted_reference(loss, n_pos, n_neg, kind):
    rng = np.random.default_rng(seed_of("real-ref", loss, n_pos, n_neg, kind))
    for _ in range(3):
        sp, sn = draw_scores(rng, n_pos, n_neg, kind)
        vp, vn = draw_real_weights(rng, n_pos, n_neg)
        for k in real_ks(loss, vp.sum() + vn.sum()):
            r, q = FAST[loss](sp, sn, k, vp=vp, vn=vn), REFERENCE[loss](sp, sn, k, vp=vp, vn=vn)
            check_plane_consistent(r, sp, sn)
            check_plane_consistent(q, sp, sn)
            assert abs(r.value - q.value) <= 1e-12 * scale(sp, sn) * (1 + 1 / min(1.0, k or 1.0))
            assert np.all(r.coef_pos[vp == 0] == 0.0) and np.all(r.coef_neg[vn == 0] == 0.0)
            if loss == "rocarea":  # a row's pairs are at most all its pairs: |coef| <= v / W_class
                assert np.all(-r.coef_pos <= vp / vp.sum() * (1 + 1e-12))
                assert np.all(r.coef_neg <= vn / vn.sum() * (1 + 1e-12))
            else:  # a row is flipped at most by its own weight, at most one row per class in part
                fp, fn = r.coef_neg * (vp.sum() + vn.sum()), -r.coef_pos * (vp.sum() + vn.sum())
                assert np.all(fp <= vn * (1 + 1e-12)) and np.all(fn <= vp * (1 + 1e-12))
                part_p = (fn > 1e-9 * vp) & (fn < vp * (1 - 1e-9))
                part_n = (fp > 1e-9 * vn) & (fp < vn * (1 - 1e-9))
                assert part_p.sum() <= 1 and part_n.sum() <= 1
            if kind == "normal" or loss in ("rocarea", "error"):
                assert_same(r, q, sp, sn, coef_atol=1e-12)


def perturbed_value(fast, k, sp, sn, vp, vn, rng, eps):
    """The weighted oracle at scores moved row by row (then re-sorted with the weights)."""
    tp, tn = sp + eps * rng.standard_normal(sp.size), sn + eps * rng.standard_normal(sn.size)
    op, on = np.argsort(tp, kind="stable"), np.argsort(tn, kind="stable")
    return tp, tn, fast(tp[op], tn[on], k, vp=vp[op], vn=vn[on]).value


@pytest.mark.parametrize("kind", ["normal", "halves"])
@pytest.mark.parametrize("loss", LOSSES)
def test_real_weights_plane_is_a_lower_bound(loss, kind):
    """value(s') >= loss + coef . s' at other scores s' (the risk is a max of planes)."""
    rng = np.random.default_rng(seed_of("plane", loss, kind))
    fast = FAST[loss]
    for n_pos, n_neg in [(1, 4), (5, 5), (12, 30), (40, 15)]:
        for _ in range(3):
            sp, sn = draw_scores(rng, n_pos, n_neg, kind)
            vp, vn = draw_int_weights(rng, n_pos, n_neg, high=4) if loss == "f1" else draw_real_weights(rng, n_pos, n_neg)
            for k in real_ks(loss, vp.sum() + vn.sum()):
                r = fast(sp, sn, k, vp=vp, vn=vn)
                check_plane_consistent(r, sp, sn)
                for eps in (1e-3, 0.1, 1.0, 5.0):
                    tp, tn, v = perturbed_value(fast, k, sp, sn, vp, vn, rng, eps)
                    assert v >= r.loss + r.coef_pos @ tp + r.coef_neg @ tn - 1e-12 * scale(tp, tn)


@pytest.mark.parametrize("loss", REAL_LOSSES)
def test_real_weights_are_scale_invariant_and_halves_match_expansion(loss):
    """Weights and k scaled together leave the oracle unchanged; weights in halves times 2
    are integers, so the result is the unweighted oracle on 2v copies of each row."""
    rng = np.random.default_rng(seed_of("halves", loss))
    fast = FAST[loss]
    for n_pos, n_neg in [(2, 3), (6, 6), (20, 13)]:
        for kind in ("normal", "integers"):
            sp, sn = draw_scores(rng, n_pos, n_neg, kind)
            vp, vn = draw_int_weights(rng, n_pos, n_neg, high=5)
            vp, vn = vp / 2, vn / 2
            total = vp.sum() + vn.sum()
            ks = [0.5, total / 2 - (total / 2) % 0.5, total] if loss in ("prec@k", "rec@k") else [None]
            for k in ks:
                r = fast(sp, sn, k, vp=vp, vn=vn)
                for alpha in (2.0, 0.1, 7.3):
                    s = fast(sp, sn, None if k is None else alpha * k, vp=alpha * vp, vn=alpha * vn)
                    if kind == "normal" or loss in ("rocarea", "error"):
                        assert_same(r, s, sp, sn, coef_atol=1e-12)
                    else:  # exact ties in the value may be resolved by another table after rounding
                        assert abs(r.value - s.value) <= 1e-12 * scale(sp, sn)
                e = fast(np.repeat(sp, (2 * vp).astype(int)), np.repeat(sn, (2 * vn).astype(int)), None if k is None else int(2 * k))
                assert r.loss == pytest.approx(e.loss, rel=0, abs=1e-13)
                assert abs(r.value - e.value) <= 1e-12 * scale(sp, sn)
                np.testing.assert_allclose(r.coef_pos, summed_over_copies(e.coef_pos, 2 * vp), rtol=0, atol=1e-12)


def test_prbep_weighted_is_prec_and_rec_at_the_positive_weight():
    rng = np.random.default_rng(5)
    for n_pos, n_neg in [(1, 30), (25, 35), (40, 6)]:
        sp, sn = draw_scores(rng, n_pos, n_neg, "normal")
        vp, vn = draw_real_weights(rng, n_pos, n_neg)
        vp = vp.round(3)  # k = Wp exactly representable as the same sum
        r = prbep_argmax(sp, sn, vp=vp, vn=vn)
        k = float(np.cumsum(vp)[-1])
        for other in (prec_at_k_argmax(sp, sn, k, vp=vp, vn=vn), rec_at_k_argmax(sp, sn, k, vp=vp, vn=vn)):
            assert_same(r, other, sp, sn, coef_atol=1e-15)


# ---------------------------------------------------------------------------
# F1: integer weights only
# ---------------------------------------------------------------------------
def test_f1_rejects_non_integer_weights():
    sp, sn = np.array([-1.0, 0.5]), np.array([0.0, 1.0, 2.0])
    with pytest.raises(ParameterError, match=r"f1 loss takes integer sample weights.*0\.37.*'vn' at index 1"):
        f1_argmax(sp, sn, vp=np.array([1.0, 2.0]), vn=np.array([1.0, 0.37, 3.0]))
    with pytest.raises(ParameterError, match="integer sample weights"):
        f1_argmax(sp, sn, vp=np.array([1.5, 2.0]))
    with pytest.raises(ParameterError, match="integer sample weights"):
        contingency_argmax_reference(sp, sn, "f1", vp=np.array([1.5, 2.0]))
    with pytest.raises(ParameterError, match="2\\*\\*53"):
        f1_argmax(sp, sn, vp=np.array([2.0**52, 2.0**52]), vn=np.ones(3))
    r = f1_argmax(sp, sn, vp=np.array([1.0, 2.0]), vn=np.array([0.0, 4.0, 3.0]))  # integer-valued floats
    check_plane_consistent(r, sp, sn)


def test_f1_weighted_scan_does_not_depend_on_the_weight_magnitude_in_time():
    """Huge integer weights: the scan visits rows, not copies (O(n+ log), not O(W))."""
    rng = np.random.default_rng(3)
    sp, sn = draw_scores(rng, 50, 80, "normal")
    vp, vn = rng.integers(1, 10**9, 50).astype(float), rng.integers(1, 10**9, 80).astype(float)
    r = f1_argmax(sp, sn, vp=vp, vn=vn)
    check_plane_consistent(r, sp, sn)
    # the plane bounds the risk elsewhere, and one-copy moves of the split rows do not help
    for eps in (0.01, 1.0):
        tp, tn, v = perturbed_value(FAST["f1"], None, sp, sn, vp, vn, rng, eps)
        assert v >= r.loss + r.coef_pos @ tp + r.coef_neg @ tn - 1e-12 * scale(tp, tn)


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------
def test_invalid_weights_are_rejected():
    sp, sn = np.array([0.0, 1.0]), np.array([-1.0, 0.5, 2.0])
    for loss in LOSSES:
        fast = FAST[loss]
        with pytest.raises(ValueError, match=r"'vp' parameter of .* one weight per score of 'sp'.*3.*2 scores"):
            fast(sp, sn, 1, vp=np.ones(3), vn=np.ones(3))
        with pytest.raises(ValueError, match=r"'vn' parameter of .* one weight per score of 'sn'.*\(2,\).*3 scores"):
            fast(sp, sn, 1, vn=np.ones(2))
        with pytest.raises(ParameterError, match="finite non-negative"):
            fast(sp, sn, 1, vp=np.array([1.0, -1.0]))
        with pytest.raises(ParameterError, match="finite non-negative"):
            fast(sp, sn, 1, vn=np.array([1.0, np.nan, 1.0]))
        with pytest.raises(ParameterError, match="one weight per score"):
            fast(sp, sn, 1, vp=np.ones((2, 1)))
    for loss in ("rocarea", "prbep", "rec@k", "f1"):
        with pytest.raises(ParameterError, match="positive weight"):
            FAST[loss](sp, sn, 1, vp=np.zeros(2))
    with pytest.raises(ParameterError, match="both classes of positive weight"):
        rocarea_argmax(sp, sn, vn=np.zeros(3))
    with pytest.raises(ParameterError, match="an example of positive weight"):
        error_rate_argmax(sp, sn, vp=np.zeros(2), vn=np.zeros(3))
    # prec@k without positive weight is fine (loss 1), as without weights
    r = prec_at_k_argmax(sp, sn, 2.5, vp=np.zeros(2))
    assert r.loss == 1.0 and np.all(r.coef_pos == 0.0)
    for k in (0, -1.0, 5.01, np.inf, np.nan, True, "x"):
        with pytest.raises(ParameterError, match="'k' parameter of prec_at_k_argmax"):
            prec_at_k_argmax(sp, sn, k, vp=np.ones(2), vn=np.ones(3))
    assert prec_at_k_argmax(sp, sn, 5.0, vp=np.ones(2), vn=np.ones(3)).loss == pytest.approx(0.6)
