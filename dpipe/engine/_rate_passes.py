"""The rate family's passes: one :func:`~dpipe.reduce._rates.rate_pass` (value, gradient, per-cell sums) or one
:func:`~dpipe.reduce._rates.rate_hessian_pass` per store, the per-example weights computed on the workers from the
per-cell multipliers and the anchor. Bytes per pass: ``d + 1`` floats and the cells' sums each way per shard."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..reduce._rates import RatePass, rate_hessian_pass, rate_pass

__all__ = ["RatePasses"]


class RatePasses:
    """The passes of one rate fit over its stores.

    Parameters
    ----------
    datasets : mapping of str to LocalDataset or ShardedDataset
        The stores by alias (``"train"`` first).
    plans : mapping of str to StorePlan
        Each store's cell layout (with the fit's memo key).
    smoothing : float
        Huber width of the hinges.
    curvature : bool
        Every rate pass keeps its point's curvature rows on the workers (for Newton's
        :meth:`hessian`, which reads only the rows in a Huber zone).

    Attributes
    ----------
    evaluations : int
        Rate passes run (one per store each).
    """

    def __init__(self, datasets: Mapping[str, Any], plans: Mapping[str, Any], smoothing: float, curvature: bool = False) -> None:
        self.datasets, self.plans, self.smoothing, self.curvature = datasets, plans, float(smoothing), bool(curvature)
        self.evaluations = 0

    def _args(self, alias: str, coef: np.ndarray, intercept: float, anchor: tuple[np.ndarray, float],
              multipliers: tuple[np.ndarray, np.ndarray]) -> tuple:
        return (coef, float(intercept), anchor, self.plans[alias].layout, multipliers[0], multipliers[1], self.smoothing)

    def passes(self, coef: np.ndarray, intercept: float, anchor: tuple[np.ndarray, float],
               multipliers: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, RatePass]:
        """Every store's merged :class:`~dpipe.reduce._rates.RatePass` at the model ``(coef, intercept)``
        (``multipliers[alias]``: the per-cell weights of its positive and negative bounds)."""
        out = {alias: ds.map_reduce(rate_pass, operator.add, *self._args(alias, coef, intercept, anchor, multipliers[alias]), self.curvature)
               for alias, ds in self.datasets.items()}
        self.evaluations += 1
        return out

    def hessian(self, coef: np.ndarray, intercept: float, anchor: tuple[np.ndarray, float],
                multipliers: Mapping[str, tuple[np.ndarray, np.ndarray]], direction: np.ndarray) -> np.ndarray:
        """``[X, -1]^T D [X, -1] direction`` summed over the stores (``d + 1``), at the point of the last :meth:`passes`."""
        return sum(ds.map_reduce(rate_hessian_pass, np.add, *self._args(alias, coef, intercept, anchor, multipliers[alias]), direction)
                   for alias, ds in self.datasets.items())
