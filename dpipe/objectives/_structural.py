"""SVM-perf's structural risks: the most violated constraint at merged scores, a pure function.

For a multivariate loss ``Delta`` the risk is

    R(w) = max over admissible labelings y' of [Delta(y, y') + w.(Psi(x, y') - Psi(x, y))],

convex and piecewise linear in ``w``. At any ``w`` the maximizer ``ybar`` gives the plane
``R(v) >= Delta(y, ybar) + v . a`` with ``a = sum_i coef_i x_i`` (tight at ``v = w``).
:meth:`StructuralLoss.at` runs the loss-augmented argmax oracle
(:mod:`dpipe.objectives._argmax`) on the merged sorted scores of every row and returns
the risk, the loss and each row's coefficient; the engine's gradient pass turns the
coefficients into ``a``. One plane costs what one smoothed-objective evaluation costs.

Conventions are those of the oracles: ROCArea's risk is the mean pairwise hinge (the
``t -> 0`` limit of ``auc-smooth``), the contingency losses use ``Psi`` scaled by
``1 / (2n)``; ``lam = 1 / (100 C)`` for SVM-perf's ``C``. With sample weights every row
counts as that many repeated rows (the oracles' weighted forms).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .._runs import MergedScores, RangeInput
from ..exceptions import DPipeError
from ._argmax import (
    MostViolated,
    error_rate_argmax,
    f1_argmax,
    prbep_argmax,
    prec_at_k_argmax,
    rec_at_k_argmax,
    rocarea_argmax,
    rocarea_argmax_part,
)

__all__ = ["StructuralLoss", "Plane", "STRUCTURAL_LOSSES"]

#: loss name -> (oracle, takes k)
STRUCTURAL_LOSSES: dict[str, tuple[Callable[..., MostViolated], bool]] = {
    "rocarea": (rocarea_argmax, False),
    "error": (error_rate_argmax, False),
    "prbep": (prbep_argmax, False),
    "f1": (f1_argmax, False),
    "prec@k": (prec_at_k_argmax, True),
    "rec@k": (rec_at_k_argmax, True),
}


def _both_classes(name: str, wp: float, wn: float, negatives: bool = True) -> tuple[float, float]:
    if wp <= 0 or (negatives and wn <= 0):
        missing = "positive" if wp <= 0 else "negative"
        raise DPipeError(f"the training data has no {missing} rows (weight {wn:g} negative, {wp:g} positive); the {name} loss needs both classes")
    return wp, wn


class Plane(NamedTuple):
    """The most violated constraint at the current scores."""

    #: the risk R at the scores
    value: float
    #: Delta(y, ybar)
    loss: float
    #: coefficient of every positive / negative row in ``a = sum_i coef_i x_i``, merged order
    c_pos: np.ndarray
    c_neg: np.ndarray


class StructuralLoss:
    """SVM-perf's risk for one multivariate loss, as a function of the merged scores.

    Parameters
    ----------
    loss : {"rocarea", "error", "prbep", "f1", "prec@k", "rec@k"}
        The multivariate loss.
    k : float, optional
        Predicted positives for ``prec@k`` / ``rec@k`` (required there; in weight
        units with sample weights).
    """

    def __init__(self, loss: str, k: float | None = None) -> None:
        if loss not in STRUCTURAL_LOSSES:
            raise DPipeError(f"unknown structural loss {loss!r}; valid: {', '.join(STRUCTURAL_LOSSES)}")
        self.oracle, takes_k = STRUCTURAL_LOSSES[loss]
        if takes_k and k is None:
            raise DPipeError(f"the {loss} loss needs k")
        self.name = loss
        self.k = k if takes_k else None
        #: whether the workers can run this oracle range by range (:meth:`at_range`): ROCArea's pairs decouple by score
        self.ranged = loss == "rocarea"
        #: halo width of a score range: pairs with ``s_j > s_i - 1`` are exactly those of the range and the totals beyond
        #: (up to rounding: a negative at exactly fl(hi - 1) counts for a positive just below hi whose s_i - 1 rounds to it,
        #: which the merged oracle's strict ``>`` leaves out; scores within an ulp of a splitter)
        self.halo = 0.0

    def at(self, s: MergedScores) -> Plane:
        """The risk, the loss and every row's plane coefficient at the scores ``s``."""
        _both_classes(self.name, *s.class_weights, negatives=self.name in ("rocarea", "prbep"))
        args = (s.pos, s.neg) if self.k is None else (s.pos, s.neg, self.k)
        mv = self.oracle(*args, vp=s.pos_weight, vn=s.neg_weight) if s.weighted else self.oracle(*args)
        return Plane(float(mv.value), float(mv.loss), np.asarray(mv.coef_pos, dtype=float), np.asarray(mv.coef_neg, dtype=float))

    def at_range(self, r: RangeInput) -> Plane:
        """The ROCArea oracle on one score range, not yet times :meth:`range_scale`: the risk's and the loss's
        shares (sums over the range's own positives) and the own rows' coefficients."""
        if not self.ranged:
            raise DPipeError(f"the {self.name} oracle has no range form; the driver merges the scores for it")
        swapped, total, c_pos, c_neg = rocarea_argmax_part(r)
        return Plane(total, swapped, c_pos, c_neg)

    def range_scale(self, class_weights: tuple[float, float]) -> float:
        """``1 / (W+ W-)``: what turns the ranges' summed shares into the risk, the loss and the coefficients."""
        wp, wn = _both_classes(self.name, *class_weights)
        return 1.0 / (wp * wn)
