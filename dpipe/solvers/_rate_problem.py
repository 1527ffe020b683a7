"""A rate fit's inner problem: the majorized Lagrangian (:mod:`dpipe.objectives._rate_lagrangian`) over the passes of
its stores (:mod:`dpipe.engine._rate_passes`), in the solver's coordinates.

For multipliers ``v`` (``v_0 = 1`` for the objective row) and a majorization anchor
``theta' = (u', b')``, the inner problem is

    Psi(theta) = lam/2 ||theta||^2 + sum over stores and rows of v_x (P U_p + N U_n) + const(v) [+ R(w)]

with ``theta = (u, b)``, the raw weights ``w = u / scale`` (``scale`` 1 unless the fit
standardizes), the Huberized hinge bounds ``U_p``, ``U_n`` of :mod:`dpipe.reduce._rates`
and, for auc-rate, auc-smooth's pairwise hinge ``R`` on the training store. One
evaluation is one :func:`~dpipe.reduce._rates.rate_pass` per store (value, gradient and
per-cell sums; the per-example weights are computed on the workers from the multipliers
and the anchor) plus, for auc-rate, the ranking's score and gradient passes.

Newton's Hessian-vector products (:meth:`RateProblem.hess_vec`): one
:func:`~dpipe.reduce._rates.rate_hessian_pass` per store, which reads only the rows in a
Huber zone (kept on the workers by the evaluation at the same point), plus the ranking's
two passes without a sort (:meth:`~dpipe.engine.RankPasses.direction`,
:meth:`~dpipe.engine.RankPasses.product`). Bytes per product: ``d + 1`` floats each way
per shard for the rates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine._rate_passes import RatePasses
from ..objectives._rate_lagrangian import RateLagrangian
from ..reduce._rates import RatePass

if TYPE_CHECKING:
    from ..engine._protocols import Dataset

__all__ = ["RateProblem", "InnerObjective"]


class RateProblem:
    """One rate fit's inner problem: its objective (:class:`~dpipe.objectives._rate_lagrangian.RateLagrangian`), its
    passes (:class:`~dpipe.engine._rate_passes.RatePasses`), the column scales and auc-rate's ranking term.

    Parameters
    ----------
    datasets, plans, smoothing
        The stores by alias, their cell layouts and the hinges' Huber width (:class:`~dpipe.engine._rate_passes.RatePasses`).
    rows, lam
        The compiled rows and the ridge on ``theta = (u, b)`` (:class:`~dpipe.objectives._rate_lagrangian.RateLagrangian`).
    ranking : object, optional
        auc-rate's ranking term on the training store: ``value_and_grad(w)``, ``last["J"]``
        (the exact risk) and ``train_auc()``; for Newton also ``value(w)`` and
        ``hess_vec(d)`` at the last ``value_and_grad`` point (the
        :class:`~dpipe.solvers.NewtonObjective` calls, without a ridge).
    scale : ndarray, optional
        Column scales when the fit standardizes (``w = u / scale``).
    curvature : bool
        Every rate pass keeps its point's curvature rows on the workers (for Newton).
    """

    def __init__(self, datasets: Mapping[str, Dataset], plans: Mapping[str, Any], rows: Any, lam: float, smoothing: float,
                 ranking: Any = None, scale: np.ndarray | None = None, curvature: bool = False) -> None:
        self.lagrangian = RateLagrangian(rows, lam)
        self.data = RatePasses(datasets, plans, smoothing, curvature)
        self.n_features = int(next(iter(datasets.values())).n_features)
        # theta = (u, b) with the raw weights w = u / scale (standardize); lam/2 ||theta||^2 penalizes u
        self.inv_scale = np.ones(self.n_features) if scale is None else 1.0 / np.asarray(scale, dtype=np.float64)
        self.ranking = ranking
        #: Hessian-vector products run so far
        self.hess_products = 0
        self._recent: list[tuple[tuple[bytes, bytes, bytes], tuple[float, np.ndarray, dict[str, RatePass], float]]] = []

    @property
    def rows(self) -> Any:
        """The compiled rows (the objective's, then one per constraint)."""
        return self.lagrangian.rows

    @property
    def lam(self) -> float:
        """The ridge on ``theta = (u, b)``."""
        return self.lagrangian.lam

    @property
    def evaluations(self) -> int:
        """Rate passes run so far (one per store each)."""
        return self.data.evaluations

    @property
    def n_rows(self) -> int:
        """Rows of the problem: the objective's, then one per constraint."""
        return self.lagrangian.n_rows

    def weights(self, theta: np.ndarray) -> np.ndarray:
        """The raw-feature weights ``w`` of ``theta = (u, b)``."""
        return theta[: self.n_features] * self.inv_scale

    def _point(self, theta: np.ndarray, anchor: np.ndarray, v_full: np.ndarray) -> tuple[np.ndarray, float, tuple[np.ndarray, float], dict]:
        d = self.n_features
        multipliers = {alias: self.lagrangian.cell_multipliers(alias, v_full) for alias in self.data.datasets}
        return self.weights(theta), float(theta[d]), (self.weights(anchor), float(anchor[d])), multipliers

    def passes(self, theta: np.ndarray, anchor: np.ndarray, v_full: np.ndarray) -> dict[str, RatePass]:
        """One :func:`~dpipe.reduce._rates.rate_pass` per store at ``theta``."""
        return self.data.passes(*self._point(theta, anchor, v_full))

    def bounded_rows(self, results: Mapping[str, RatePass], smoothed: bool = False) -> np.ndarray:
        """Every row with each ramp replaced by its bound at the anchor (exact hinges, or Huberized with ``smoothed``)."""
        return self.lagrangian.bounded_rows(results, smoothed)

    def rows_at(self, results: Mapping[str, RatePass], kind: int) -> np.ndarray:
        """Every row with the per-cell sums of ``kind`` (``RAMP``, ``INDICATOR``) as its rates."""
        return self.lagrangian.rows_at(results, kind)

    def smoothed(self, theta: np.ndarray, anchor: np.ndarray, v_full: np.ndarray) -> tuple[float, np.ndarray, dict[str, RatePass], float]:
        """The smoothed bounded Lagrangian, its gradient in ``theta``, the passes' results, and the exact ranking risk.

        The ranking risk is the mean pairwise hinge of the ROC-AUC surrogate at ``w`` (0
        without one). The last two evaluations are remembered: the solution the inner
        solver returns was its last (or next to last) evaluation, so reading the cut there
        costs no pass.
        """
        key = (theta.tobytes(), anchor.tobytes(), v_full.tobytes())
        for known, out in self._recent:
            if known == key:
                return out
        results = self.passes(theta, anchor, v_full)
        value = self.lagrangian.value(theta, results, v_full)
        grad = np.asarray(sum(r.grad for r in results.values()))  # a new array (0 + the first): no copy here
        ranking_risk = 0.0
        if self.ranking is not None:
            auc_value, auc_grad = self.ranking.value_and_grad(self.weights(theta))
            value += auc_value
            grad[: self.n_features] += auc_grad
            ranking_risk = float(self.ranking.last["J"])
        grad[: self.n_features] *= self.inv_scale  # the chain rule through w = u / scale
        grad += self.lam * theta
        out = (value, grad, results, ranking_risk)
        self._recent = [(key, out), *self._recent[:1]]
        return out

    def forget(self) -> None:
        """Drop the remembered evaluations (the next :meth:`smoothed` runs its passes)."""
        self._recent = []

    def hess_vec(self, theta: np.ndarray, anchor: np.ndarray, v_full: np.ndarray, direction: np.ndarray) -> np.ndarray:
        """The generalized Hessian of :meth:`smoothed` at ``theta`` times ``direction`` (``d + 1``).

        ``S ([X, -1]^T D [X, -1] + H_R) S d + lam d`` with ``S = diag(1 / scale, 1)``; the
        ranking's ``H_R`` (auc-rate) is taken at its last ``value_and_grad`` point, which
        the caller keeps at ``theta``.
        """
        d = self.n_features
        sd = np.asarray(direction, dtype=np.float64).copy()
        sd[:d] *= self.inv_scale
        out = self.data.hessian(*self._point(theta, anchor, v_full), sd)
        if self.ranking is not None:
            out[:d] += self.ranking.hess_vec(sd[:d])
        out[:d] *= self.inv_scale
        self.hess_products += 1
        return out + self.lam * np.asarray(direction, dtype=np.float64)


class InnerObjective:
    """One inner problem (fixed anchor and multipliers) as TRON's objective, in coordinates ``y = theta / pre``.

    ``pre`` is a diagonal preconditioner (the column scales: :func:`~dpipe.solvers.solve_rates`);
    it changes the coordinates the solver runs in, not the problem or its minimizer.
    """

    def __init__(self, problem: RateProblem, anchor: np.ndarray, v_full: np.ndarray, pre: np.ndarray) -> None:
        self.problem, self.anchor, self.v_full, self.pre = problem, anchor, v_full, pre
        self._point: np.ndarray | None = None

    def value(self, y: np.ndarray) -> float:
        """The inner objective at a trial point (the ranking's Hessian point stays where it was)."""
        p, theta = self.problem, y * self.pre
        if p.ranking is None:
            return p.smoothed(theta, self.anchor, self.v_full)[0]
        results = p.passes(theta, self.anchor, self.v_full)
        return p.lagrangian.value(theta, results, self.v_full) + p.ranking.value(p.weights(theta))

    def value_and_grad(self, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Value and gradient at ``y``, where the Hessian-vector products are then taken (auc-rate: fresh passes, which
        move the ranking's Hessian point there)."""
        theta = y * self.pre
        if self.problem.ranking is not None:
            self.problem.forget()
        value, grad, _, _ = self.problem.smoothed(theta, self.anchor, self.v_full)
        self._point = theta
        return value, grad * self.pre

    def hess_vec(self, s: np.ndarray) -> np.ndarray:
        """``P H P s`` at the last :meth:`value_and_grad` point (``P = diag(pre)``)."""
        if self._point is None:
            raise RuntimeError("InnerObjective.hess_vec needs a preceding value_and_grad")
        return self.problem.hess_vec(self._point, self.anchor, self.v_full, s * self.pre) * self.pre
