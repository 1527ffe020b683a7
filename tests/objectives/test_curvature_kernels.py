"""The fused Newton kernels give NumPy's bits: Curvature.apply against its NumPy reference (dpipe.testing), searchsorted_sorted against
np.searchsorted (ties, empty arrays, both sides, weighted and unweighted; the merge kernel itself and NumPy's bisections below
NUMPY_MERGE_MAX)."""

from __future__ import annotations

import numpy as np
import pytest

from dpipe._runs import MergedScores
from dpipe.objectives._curvature import NUMPY_MERGE_MAX, Curvature, _merge_positions, searchsorted_sorted
from dpipe.objectives._rank_kernels import sorted_auc
from dpipe.testing._references import curvature_apply_reference, sorted_auc_reference


@pytest.mark.parametrize("seed", range(40))
def test_searchsorted_sorted_is_numpys(seed):
    rng = np.random.default_rng(seed)
    a = np.sort(np.round(rng.normal(size=rng.integers(0, 300)), 1))  # rounded: many ties
    q = np.sort(np.round(rng.normal(size=rng.integers(0, 300)), 1))
    for side in ("left", "right"):
        np.testing.assert_array_equal(searchsorted_sorted(a, q, side), np.searchsorted(a, q, side=side))
        np.testing.assert_array_equal(searchsorted_sorted(q, a, side), np.searchsorted(q, a, side=side))
        np.testing.assert_array_equal(_merge_positions(a, q, side == "right"), np.searchsorted(a, q, side=side))  # the merge that
        np.testing.assert_array_equal(_merge_positions(q, a, side == "right"), np.searchsorted(q, a, side=side))  # large inputs take
    with pytest.raises(ValueError, match="side"):
        searchsorted_sorted(a, q, "middle")


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_curvature_apply_is_its_numpy_reference_bit_for_bit(weighted, seed):
    rng = np.random.default_rng(seed)
    n_pos, n_neg, t = int(rng.integers(1, 200)), int(rng.integers(1, 2000)), 0.3
    sp, sn = np.sort(np.round(rng.normal(size=n_pos) + 1, 2)), np.sort(np.round(rng.normal(size=n_neg), 2))
    vp, vn = (rng.random(n_pos) + 0.5, rng.random(n_neg) + 0.5) if weighted else (None, None)
    s = MergedScores(sp, sn, vp, vn)
    c = Curvature.of_runs(s, searchsorted_sorted(sn, sp - 1.0, "right"), searchsorted_sorted(sn, sp - 1.0 + t, "left"),
                          searchsorted_sorted(sp, sn + 1.0 - t, "right"), searchsorted_sorted(sp, sn + 1.0, "left"), 1.0 / (t * n_pos * n_neg))
    u_pos, u_neg = rng.normal(size=n_pos), rng.normal(size=n_neg)
    for got, want in zip(c.apply(u_pos, u_neg), curvature_apply_reference(c, u_pos, u_neg)):
        np.testing.assert_array_equal(got, want)


def test_large_inputs_take_the_merge_and_the_unweighted_auc_stays_exact():
    rng = np.random.default_rng(0)
    sp = np.sort(np.round(rng.normal(size=NUMPY_MERGE_MAX) + 0.5, 2))  # above NUMPY_MERGE_MAX in all: the merge; many ties
    sn = np.sort(np.round(rng.normal(size=NUMPY_MERGE_MAX // 2), 2))
    for side in ("left", "right"):
        np.testing.assert_array_equal(searchsorted_sorted(sn, sp, side), np.searchsorted(sn, sp, side=side))
    assert sorted_auc(sp, sn) == pytest.approx(sorted_auc_reference(sp, sn), abs=1e-15)
    assert sorted_auc(sp[:300], sn[::500]) == pytest.approx(sorted_auc_reference(sp[:300], sn[::500]), abs=1e-15)
