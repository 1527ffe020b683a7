"""Shared by the pairwise risks (the smoothed ones and the squared hinge): what a risk returns at merged scores, and the
exact training ROC-AUC there."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._runs import MergedScores
from ._rank_kernels import sorted_auc

__all__ = ["RiskAt", "train_auc"]


class RiskAt(NamedTuple):
    """A smoothed risk at the current scores."""

    #: the smoothed risk R_mu
    value: float
    #: the exact, non-smooth risk (the mu -> 0 limit)
    exact: float
    #: dR_mu / ds_i per positive / negative row, in the order of the merged scores
    g_pos: np.ndarray
    g_neg: np.ndarray


def train_auc(s: MergedScores) -> float:
    """Exact (weighted) ROC-AUC of merged scores, ties counting half."""
    return sorted_auc(s.pos, s.neg, s.pos_weight, s.neg_weight)
