"""The data side of a rate fit: the stores, the compiled rows and the passes of the majorized Lagrangian.

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

import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..reduce._rates import BOUND_NEGATIVE, BOUND_POSITIVE, SMOOTH_NEGATIVE, SMOOTH_POSITIVE, WEIGHT, RatePass, rate_hessian_pass, rate_pass

if TYPE_CHECKING:
    from ..engine._protocols import Dataset

__all__ = ["RateProblem", "InnerObjective"]


class RateProblem:
    """The stores, the compiled rows and the passes of one rate fit.

    Parameters
    ----------
    datasets : mapping of str to LocalDataset or ShardedDataset
        The stores by alias (``"train"`` first).
    plans : mapping of str to StorePlan
        Each store's cell layout (with the fit's memo key).
    rows : CompiledRows
        The objective (row 0) and constraint rows as per-cell coefficients.
    lam : float
        The ridge on ``theta = (u, b)``.
    smoothing : float
        Huber width of the inner problem's hinges.
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
        self.datasets, self.plans, self.rows, self.lam, self.smoothing = datasets, plans, rows, float(lam), float(smoothing)
        self.split = {a: (np.maximum(c, 0.0), np.maximum(-c, 0.0)) for a, c in rows.coef.items()}
        self.n_features = int(next(iter(datasets.values())).n_features)
        # theta = (u, b) with the raw weights w = u / scale (standardize); lam/2 ||theta||^2 penalizes u
        self.inv_scale = np.ones(self.n_features) if scale is None else 1.0 / np.asarray(scale, dtype=np.float64)
        self.ranking = ranking
        self.curvature = bool(curvature)
        #: rate passes (one per store each) and Hessian-vector products run so far
        self.evaluations = 0
        self.hess_products = 0
        self._recent: list[tuple[tuple[bytes, bytes, bytes], tuple[float, np.ndarray, dict[str, RatePass], float]]] = []

    @property
    def n_rows(self) -> int:
        """Rows of the problem: the objective's, then one per constraint."""
        return int(self.rows.constant.size)

    def weights(self, theta: np.ndarray) -> np.ndarray:
        """The raw-feature weights ``w`` of ``theta = (u, b)``."""
        return theta[: self.n_features] * self.inv_scale

    def _args(self, alias: str, theta: np.ndarray, anchor: np.ndarray, v_full: np.ndarray) -> tuple:
        d = self.n_features
        cp, cn = self.split[alias]
        return (self.weights(theta), float(theta[d]), (self.weights(anchor), float(anchor[d])), self.plans[alias].layout,
                v_full @ cp, v_full @ cn, self.smoothing)

    def passes(self, theta: np.ndarray, anchor: np.ndarray, v_full: np.ndarray) -> dict[str, RatePass]:
        """One :func:`~dpipe.reduce._rates.rate_pass` per store at ``theta``."""
        out = {alias: ds.map_reduce(rate_pass, operator.add, *self._args(alias, theta, anchor, v_full), self.curvature)
               for alias, ds in self.datasets.items()}
        self.evaluations += 1
        return out

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
        value = 0.5 * self.lam * float(theta @ theta) + sum(r.value for r in results.values())
        value += float(v_full @ (self.rows.constant + sum(np.minimum(self.rows.coef[a], 0.0) @ r.sums[WEIGHT] for a, r in results.items())))
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
        out = sum(ds.map_reduce(rate_hessian_pass, np.add, *self._args(alias, theta, anchor, v_full), sd) for alias, ds in self.datasets.items())
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
        value = 0.5 * p.lam * float(theta @ theta) + sum(r.value for r in results.values())
        value += float(self.v_full @ (p.rows.constant + sum(np.minimum(p.rows.coef[a], 0.0) @ r.sums[WEIGHT] for a, r in results.items())))
        return value + p.ranking.value(p.weights(theta))

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
