"""The smoothed pairwise hinge computed range by range: the exact form a distributed score pass can use.

:func:`~dpipe.objectives._rank_kernels.auc_gamma` needs every score of both classes in one
place (the driver-merged route merges all shards' sorted runs). The pairwise hinge of width ``t``
couples a positive at ``s`` only with the negatives in ``(s - 1, s - 1 + t)`` in detail;
every negative at or above ``s - 1 + t`` counts with slope 1 and every one at or below
``s - 1`` not at all (and symmetrically for a negative). So cut the score axis at splitters
``a_1 < ... < a_{R-1}`` (``a_0 = -inf``, ``a_R = +inf``); range ``r`` owns

* the positives in ``[a_r, a_{r+1})`` and the negatives in ``[a_r - 1, a_{r+1} - 1)``,

and needs, besides its own rows, a halo of width ``t`` on one side of each class and three
totals from the other ranges:

* the positives in ``[a_r - t, a_r)`` and the total weight of those below ``a_r - t``
  (all on the slope-1 side of every own negative);
* the negatives in ``[a_{r+1} - 1, a_{r+1} - 1 + t)`` and the total weight and weighted
  score sum of those at or above ``a_{r+1} - 1 + t`` (all on the slope-1 side of every own
  positive).

:func:`auc_gamma_range` then gives the own rows' weights and the range's share of the value
exactly (up to float64 summation order). A driver handles the splitters and ``O(R)`` totals;
each range's rows and halos travel between workers. :func:`dpipe.testing._references.split_into_ranges` is the
reference that cuts merged scores into those pieces (tests compare the ranges' results with
:func:`auc_gamma` on all the scores); :mod:`dpipe.reduce._ranges` cuts them shard by shard.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._runs import RangeInput
from ._rank_kernels import auc_gamma_part

__all__ = ["RangeInput", "RangeOutput", "auc_gamma_range"]


class RangeOutput(NamedTuple):
    """The own rows' results, as :func:`auc_gamma` would give them for those rows."""

    gamma_pos: np.ndarray
    gamma_neg: np.ndarray
    value: float
    hinge: float


def auc_gamma_range(r: RangeInput, t: float) -> RangeOutput:
    """:func:`auc_gamma`'s outputs for range ``r``'s own rows (module docstring); value and hinge summed over its own positives."""
    vp, vn = r.vp, r.vn
    if (vp is None) != (vn is None):  # a missing one of the two is all ones, as in auc_gamma
        vp = np.ones(r.sp.size) if vp is None else vp
        vn = np.ones(r.sn.size) if vn is None else vn
    # the negatives above the halo have slope 1 for every own positive (1 - s_i + s_j >= t), the positives below it for every own negative
    gp, gn, value, hinge = auc_gamma_part(r.sp, r.sn, t, r.own_pos_start, r.own_neg_stop, vp, vn,
                                          r.above_neg_weight, r.above_neg_sum, r.below_pos_weight)
    return RangeOutput(gp, gn, value, hinge)
