"""A pairwise risk as TRON's objective: value, gradient and Hessian-vector products through the engine's passes.

``J(w) = lam/2 ||w||^2 + R(X w)`` for a risk with ``at(scores)`` and ``curvature(scores)``
(:class:`~dpipe.objectives.SquaredPairwiseHinge`). Per Newton iteration: one score pass
(sort and merge) for the trial point, whose merged scores give the value; when the
step is accepted, one gradient pass that keeps each shard's order on its worker. Per CG
step, at that fixed ``w``: one pass for ``X d`` in the kept order (no sort), O(n) prefix
sums on the driver (:meth:`Curvature.apply`), one pass for ``X^T (M X d)``. Bytes per CG
step: 8 per row each way, as for an evaluation, and no sort or merge.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..engine import MergedScores, RankPasses

__all__ = ["PairwiseNewtonObjective"]


class PairwiseNewtonObjective:
    """``lam/2 ||w||^2 + R(X w)`` with the three calls of :class:`~dpipe.solvers.NewtonObjective`.

    Parameters
    ----------
    passes : RankPasses
        The dataset's passes.
    risk : object
        ``at(MergedScores) -> RiskAt`` and ``curvature(MergedScores) -> Curvature``.
    lam : float
        Weight of the ridge.

    Attributes
    ----------
    last : dict
        The last evaluation's exact risk, passes' timings and bytes; counts of passes.
    """

    def __init__(self, passes: RankPasses, risk: Any, lam: float) -> None:
        self.passes = passes
        self.risk = risk
        self.lam = float(lam)
        self.last: dict[str, Any] = {}
        self.hess_products = 0
        self._trial: tuple[np.ndarray, MergedScores, Any] | None = None  # the last scored w, its scores and risk
        self._point: np.ndarray | None = None  # where the Hessian is taken
        self._scores: MergedScores | None = None
        self._curvature: Any = None

    def _evaluate(self, w: np.ndarray) -> tuple[MergedScores, Any]:
        if self._trial is not None and np.array_equal(self._trial[0], w):
            return self._trial[1], self._trial[2]
        s = self.passes.scores(w)
        t0 = time.perf_counter()
        at = self.risk.at(s)
        self.last = {"J": at.exact, "J_mu": at.value, **self.passes.last, "seconds_kernel": time.perf_counter() - t0}
        self._trial = (np.array(w, dtype=np.float64), s, at)
        return s, at

    def value(self, w: np.ndarray) -> float:
        """The objective at ``w`` (one score pass)."""
        _, at = self._evaluate(w)
        return at.value + 0.5 * self.lam * float(w @ w)

    def value_and_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """Value and gradient at ``w`` (the score pass of :meth:`value` reused), which becomes the Hessian's point."""
        s, at = self._evaluate(w)
        grad = self.passes.gradient(at.g_pos, at.g_neg, keep=True)
        self._point, self._scores, self._curvature = self._trial[0], s, self.risk.curvature(s)
        return at.value + 0.5 * self.lam * float(w @ w), grad + self.lam * w

    def hess_vec(self, d: np.ndarray) -> np.ndarray:
        """``(lam I + X^T M X) d`` at the point of the last :meth:`value_and_grad` (two passes, no sort)."""
        if self._point is None:
            raise RuntimeError("PairwiseNewtonObjective.hess_vec needs a preceding value_and_grad")
        kept = self.passes.kept
        if kept is None or not np.array_equal(kept, self._point):  # a rejected trial point was scored since: its order is not this one's
            self.passes.scores(self._point)
            self._trial = None
        u_pos, u_neg = self.passes.direction(d)
        m_pos, m_neg = self._curvature.apply(u_pos, u_neg)
        self.hess_products += 1
        return self.passes.product(m_pos, m_neg) + self.lam * np.asarray(d, dtype=np.float64)

    def train_auc(self) -> float:
        """Exact (weighted) training ROC-AUC at the Hessian's point."""
        from ..objectives import train_auc

        return train_auc(self._scores)
