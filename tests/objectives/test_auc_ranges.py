"""The smoothed pairwise hinge range by range equals the merged kernel (the exact distributed form)."""

from __future__ import annotations

import numpy as np
import pytest

from dpipe.objectives._auc_ranges import auc_gamma_range
from dpipe.objectives._rank_kernels import auc_gamma
from dpipe.testing._references import split_into_ranges


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranges_give_the_merged_kernels_weights_value_and_hinge(seed, weighted):
    rng = np.random.default_rng(seed)
    t = [2e-3, 0.05, 0.5][seed]
    sp = np.sort(np.round(rng.normal(0.6, 1.0, 3000), 2))  # rounded: many ties, some exactly at splitters and window edges
    sn = np.sort(np.round(rng.normal(-0.2, 1.0, 5000), 2))
    vp = rng.integers(1, 4, sp.size).astype(float) if weighted else None
    vn = rng.random(sn.size) * 2 if weighted else None
    gp, gn, value, hinge = auc_gamma(sp, sn, t, vp, vn)
    for splitters in (np.array([0.3]), np.quantile(sp, [0.1, 0.25, 0.5, 0.75, 0.9]).round(2), np.array([-9.0, 0.0, 0.01, 9.0])):
        parts = [auc_gamma_range(r, t) for r in split_into_ranges(sp, sn, splitters, t, vp, vn)]
        np.testing.assert_allclose(np.concatenate([p.gamma_pos for p in parts]), gp, rtol=1e-11, atol=1e-9)
        np.testing.assert_allclose(np.concatenate([p.gamma_neg for p in parts]), gn, rtol=1e-11, atol=1e-9)
        assert sum(p.value for p in parts) == pytest.approx(value, rel=1e-11)
        assert sum(p.hinge for p in parts) == pytest.approx(hinge, rel=1e-11)


def test_each_range_holds_its_rows_and_halos_only():
    """A range's inputs are its own rows plus halos of width t (and 1 + t across classes), not every score."""
    rng = np.random.default_rng(5)
    t = 0.01
    sp, sn = np.sort(rng.normal(1.0, 1.0, 20_000)), np.sort(rng.normal(0.0, 1.0, 20_000))
    ranges = split_into_ranges(sp, sn, np.quantile(sp, np.linspace(0, 1, 9)[1:-1]), t)
    own = [(r.sp.size - r.own_pos_start, r.own_neg_stop) for r in ranges]
    assert sum(o[0] for o in own) == sp.size and sum(o[1] for o in own) == sn.size
    halo = sum(r.own_pos_start + r.sn.size - r.own_neg_stop for r in ranges)
    assert halo < 0.05 * (sp.size + sn.size)  # 7 cuts x 2 classes x (density x t): about 2 % here, each range O(its own rows)
