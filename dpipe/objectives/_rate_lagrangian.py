"""The rate family's objective: the majorized Lagrangian of a rate fit, assembled from per-cell sums (pure).

A rate fit (Goh et al. 2016, :mod:`dpipe.fit._rates`) has an objective row (row 0) and one
row per constraint, each ``constant + sum over stores and cells of coef_c rate_c``
(:class:`~dpipe.rates._cells.CompiledRows`). For multipliers ``v`` (``v_0 = 1``) and a
majorization anchor, its inner problem is

    Psi(theta) = lam/2 ||theta||^2 + sum over stores of V(theta) + v . (constant + sum_c min(coef_c, 0) W_c)

where ``V`` is the smoothed bound every shard's :func:`~dpipe.reduce._rates.rate_pass`
sums with per-cell weights ``v . max(coef, 0)`` (the positive side) and ``v . max(-coef, 0)``
(the negative side), and ``W_c`` is cell ``c``'s weight: a negative coefficient's ramp is
bounded by ``W_c`` minus the other side's ramp. This module turns those sums into the
value, the rows at the model and their bounds; it never sees a dataset (the passes are
:class:`dpipe.engine._rate_passes.RatePasses`'s).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..reduce._rates import BOUND_NEGATIVE, BOUND_POSITIVE, SMOOTH_NEGATIVE, SMOOTH_POSITIVE, WEIGHT, RatePass

__all__ = ["RateLagrangian"]


class RateLagrangian:
    """The majorized Lagrangian of a rate fit's compiled rows.

    Parameters
    ----------
    rows : CompiledRows
        The objective (row 0) and constraint rows as per-cell coefficients per store alias.
    lam : float
        The ridge on ``theta = (u, b)``.
    """

    def __init__(self, rows: Any, lam: float) -> None:
        self.rows, self.lam = rows, float(lam)
        #: per alias, the positive and the negative parts of every row's cell coefficients
        self.split = {a: (np.maximum(c, 0.0), np.maximum(-c, 0.0)) for a, c in rows.coef.items()}

    @property
    def n_rows(self) -> int:
        """Rows of the problem: the objective's, then one per constraint."""
        return int(self.rows.constant.size)

    def cell_multipliers(self, alias: str, v_full: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The per-cell weights of store ``alias``'s positive-side and negative-side bounds under multipliers ``v_full``."""
        cp, cn = self.split[alias]
        return v_full @ cp, v_full @ cn

    def value(self, theta: np.ndarray, results: Mapping[str, RatePass], v_full: np.ndarray) -> float:
        """``Psi(theta)`` from the stores' passes at ``theta`` (without a ranking term)."""
        value = 0.5 * self.lam * float(theta @ theta) + sum(r.value for r in results.values())
        return value + float(v_full @ (self.rows.constant + sum(np.minimum(self.rows.coef[a], 0.0) @ r.sums[WEIGHT] for a, r in results.items())))

    def bounded_rows(self, results: Mapping[str, RatePass], smoothed: bool = False) -> np.ndarray:
        """Every row with each ramp replaced by its bound at the anchor (exact hinges, or Huberized with ``smoothed``)."""
        pos, neg = (SMOOTH_POSITIVE, SMOOTH_NEGATIVE) if smoothed else (BOUND_POSITIVE, BOUND_NEGATIVE)
        value = self.rows.constant.copy()
        for alias, r in results.items():
            cp, cn = self.split[alias]
            c = self.rows.coef[alias]
            value += cp @ r.sums[pos] + cn @ r.sums[neg] + np.minimum(c, 0.0) @ r.sums[WEIGHT]
        return value

    def rows_at(self, results: Mapping[str, RatePass], kind: int) -> np.ndarray:
        """Every row with the per-cell sums of ``kind`` (``RAMP``, ``INDICATOR``) as its rates."""
        return self.rows.evaluate({a: r.sums[kind] for a, r in results.items()})
