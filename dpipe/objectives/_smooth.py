"""Smoothed ROCArea and PRBEP objectives (Zhang, Saha and Vishwanathan), evaluated over shards.

Both are ``J_mu(w) = lam/2 ||w||^2 + R_mu(w)`` where ``R_mu`` is a smoothed
multivariate risk that depends on the scores only through their order within each
class. One evaluation runs two passes over the data (see :mod:`dpipe.reduce._sorted`):
a score pass whose per-shard sorted scores are merged on the driver, O(n log k) for
k shards, and a gradient pass ``X^T g`` with the per-example weights the driver
computes in O(n). The objectives talk to a dataset object only through
``map_gather`` and ``map_reduce_each``; they never import dask.

Bytes moved per evaluation: 8 per row to the driver (scores), 8 per row back
(weights), 8 d per shard (gradient parts), plus ``w`` (8 d) sent with every task.

Smoothing defaults follow the paper: ``mu = epsilon / D`` with ``epsilon = 1e-3`` and
the prox-function ``1/2 ||beta||^2``. For ROCArea (``D = m / 2`` over the m pairs) this is
the Huber width ``t = m mu = 2 epsilon``; for PRBEP (``D = n / 2``) ``mu = 2 epsilon / n``.
``scale`` multiplies it (the paper's study uses 1, 100 and 1000).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import minimize_scalar

from ..exceptions import DPipeError
from ..reduce import class_scores, gradient_pass, score_pass
from ._rank_kernels import auc_gamma, prbep_beta, prbep_risk_exact, sorted_auc

__all__ = ["SmoothedAUCObjective", "SmoothedPRBEPObjective", "PreconditionedObjective", "StandardizedObjective", "RayMinimum", "merge_class_runs"]

#: relative step in ``alpha`` of :meth:`_SmoothedRankObjective.ray_minimum`'s curvature
RAY_CURVATURE_STEP = 0.05


class RayMinimum(NamedTuple):
    """Where a smoothed objective is lowest along a ray ``alpha * direction``."""

    #: the minimizing scale (> 0)
    alpha: float
    #: second derivative of the smoothed risk (no ridge) along the ray at ``alpha``
    curvature: float


def merge_class_runs(runs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Merge increasing runs: (merged scores, permutation of the concatenation, run lengths).

    A stable sort of the concatenation; numpy's timsort merges the k runs in O(n log k).
    """
    lengths = [r.size for r in runs]
    cat = np.concatenate(runs) if runs else np.zeros(0)
    order = np.argsort(cat, kind="stable")
    return cat[order], order, lengths


def _merge_shard_scores(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[tuple, tuple]:
    """:func:`merge_class_runs` of the shards' sorted positive and of their sorted negative scores."""
    return merge_class_runs([p[0] for p in parts]), merge_class_runs([p[1] for p in parts])


def _scatter(values: np.ndarray, order: np.ndarray, lengths: list[int]) -> list[np.ndarray]:
    out = np.empty_like(values)
    out[order] = values
    return np.split(out, np.cumsum(lengths)[:-1]) if lengths else []


class _SmoothedRankObjective:
    name = ""

    def __init__(self, dataset: Any, lam: float, n_positive: int, n_negative: int) -> None:
        if n_positive == 0 or n_negative == 0:
            missing = "positive" if n_positive == 0 else "negative"
            raise DPipeError(f"the training data has no {missing} rows ({n_negative} negative, {n_positive} positive); {self.name} needs both classes")
        self.ds = dataset
        self.lam = float(lam)
        self.n_pos, self.n_neg = int(n_positive), int(n_negative)
        self.n = self.n_pos + self.n_neg
        self.last: dict[str, Any] = {}
        self.nfev = 0
        self._token = uuid.uuid4().hex

    def _kernel(self, sp: np.ndarray, sn: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
        raise NotImplementedError

    def value_and_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """Smoothed objective J_mu(w) and its gradient; records J(w) and timings in ``last``."""
        t0 = time.perf_counter()
        self.nfev += 1
        key = f"{self._token}-{self.nfev}"
        parts = self.ds.map_gather(score_pass, w, key)
        t1 = time.perf_counter()
        (sp, op, lp), (sn, on, ln) = _merge_shard_scores(parts)
        t2 = time.perf_counter()
        gp, gn, risk, exact = self._kernel(sp, sn)
        t3 = time.perf_counter()
        per_shard = list(zip(_scatter(gp, op, lp), _scatter(gn, on, ln)))
        grad = self.ds.map_reduce_each(gradient_pass, np.add, per_shard, w, key)
        t4 = time.perf_counter()
        reg = 0.5 * self.lam * float(w @ w)
        self.last = {
            "J": exact + reg,
            "J_mu": risk + reg,
            "sp": sp,
            "sn": sn,
            "seconds_score": t1 - t0,
            "seconds_merge": t2 - t1,
            "seconds_kernel": t3 - t2,
            "seconds_gradient": t4 - t3,
            "bytes_moved": 16 * self.n + 8 * w.size * 3 * len(parts),
        }
        return risk + reg, grad + self.lam * w

    def train_auc(self) -> float:
        """Exact ROC-AUC (ties count half) of the last evaluated scores."""
        return sorted_auc(self.last["sp"], self.last["sn"])

    def line_minimum(self, direction: np.ndarray, ridge: float = 0.0) -> float:
        """The ``alpha > 0`` that minimizes ``J_mu(alpha * direction)`` (plus ``ridge/2 alpha^2``).

        One score pass over the data; the search itself runs on the driver, since the
        scores of ``alpha * direction`` are ``alpha`` times those of ``direction`` and
        the risk needs only the sorted scores. ``J_mu`` is convex in ``alpha``, so a
        bounded Brent search on ``log alpha`` (to 1 %), over 10 e-folds either side of
        the scale that gives the scores unit spread, finds its minimum (about 10 kernel
        calls, O(n) each; 0.1 s on kdd99's 395,000 rows).
        """
        return self.ray_minimum(direction, ridge).alpha

    def ray_minimum(self, direction: np.ndarray, ridge: float = 0.0) -> RayMinimum:
        """:meth:`line_minimum`, with the smoothed risk's curvature along the ray there.

        ``curvature`` is ``d^2/dalpha^2 R_mu(alpha * direction)`` at the minimum (the
        ridge left out), by a central difference of +-5 % in ``alpha`` over the same
        sorted scores: two more kernel calls, no pass. The risk is piecewise quadratic
        in ``alpha``, so the difference averages the curvature of the pairs near the
        margin rather than sampling one kink. 0 when no pair is in a quadratic piece.
        """
        (sp, _, _), (sn, _, _) = _merge_shard_scores(self.ds.map_gather(class_scores, direction))
        quad = self.lam * float(direction @ direction) + ridge
        spread = float(np.std(np.concatenate([sp, sn])))
        if not np.isfinite(spread) or spread <= 0:
            raise DPipeError(f"{self.name}: every row scores the same along the starting direction; it cannot set the scale of the start")
        centre = -np.log(spread)

        def risk(alpha: float) -> float:
            return self._kernel(alpha * sp, alpha * sn)[2]

        def along(log_alpha: float) -> float:
            a = np.exp(log_alpha)
            return risk(a) + 0.5 * quad * a * a

        found = minimize_scalar(along, bounds=(centre - 10.0, centre + 10.0), method="bounded", options={"xatol": 1e-2})
        alpha, step = float(np.exp(found.x)), RAY_CURVATURE_STEP
        curvature = (risk(alpha * (1 + step)) - 2.0 * risk(alpha) + risk(alpha * (1 - step))) / (alpha * step) ** 2
        return RayMinimum(alpha, max(float(curvature), 0.0))


class SmoothedAUCObjective(_SmoothedRankObjective):
    """``lam/2 ||w||^2 + (1/m) sum_ij h_t(1 - w.x_i + w.x_j)`` over positive i, negative j.

    ``h_t`` is the Huberized hinge of width ``t`` (uniform error <= t/2); ``t -> 0``
    gives SVM-perf's ROCArea objective. No intercept (the ranking ignores it).

    Parameters
    ----------
    dataset : LocalDataset or ShardedDataset
        Training data.
    lam : float
        Ridge weight (SVM-perf's C corresponds to ``lam = 1 / (100 C)``).
    t : float
        Huber width (> 0).
    n_positive, n_negative : int
        Class counts (from the store's manifest).
    """

    name = "auc-smooth"

    def __init__(self, dataset: Any, lam: float, t: float, n_positive: int, n_negative: int) -> None:
        super().__init__(dataset, lam, n_positive, n_negative)
        self.t = float(t)
        self.m = float(self.n_pos) * float(self.n_neg)

    def _kernel(self, sp, sn):
        gp, gn, value, hinge = auc_gamma(sp, sn, self.t)
        return -gp / self.m, gn / self.m, value / self.m, hinge / self.m


class SmoothedPRBEPObjective(_SmoothedRankObjective):
    """``lam/2 ||w||^2 + max_beta [sum c beta - mu/2 ||beta||^2]`` (see DESIGN.md).

    ``c_i = 1/n+ - 2 w.x_i / n`` on positives, ``c_j = 2 w.x_j / n`` on negatives,
    ``beta`` in [0, 1]^n with as much weight on positives as on negatives; the gradient
    is ``lam w - (2/n) sum_i y_i beta_i x_i``. ``mu -> 0`` gives the PRBEP risk
    ``max over labelings with #FN = #FP`` of the structural hinge.

    Parameters
    ----------
    dataset, lam, n_positive, n_negative
        As for :class:`SmoothedAUCObjective`.
    mu : float
        Smoothing (> 0).
    """

    name = "prbep-smooth"

    def __init__(self, dataset: Any, lam: float, mu: float, n_positive: int, n_negative: int) -> None:
        super().__init__(dataset, lam, n_positive, n_negative)
        self.mu = float(mu)

    def _kernel(self, sp, sn):
        bp, bn, value, _ = prbep_beta(sp, sn, self.n, self.mu)
        scale = 2.0 / self.n
        return -scale * bp, scale * bn, value, prbep_risk_exact(sp, sn, self.n)


class PreconditionedObjective:
    """A smoothed objective in the solver's coordinates ``u``, with ``w = T u``.

    ``J(u) = R(T u) + lam/2 sum_j p_j (T u)_j^2``: the risk ``R`` of ``inner`` (built
    with ``lam = 0``, or with its own ridge) plus a ridge with per-feature weights
    ``p`` on the raw weights ``w``. The gradient is ``T^T (grad R + lam p * w)``.
    ``T`` is a vector (a diagonal change of variables, O(d) per evaluation) or a d x d
    matrix (O(d^2), on the driver only). The minimizer in ``w`` does not depend on
    ``T``; L-BFGS's path does: with ``T`` close to the inverse square root of the
    Hessian it needs far fewer iterations.

    Parameters
    ----------
    inner : SmoothedAUCObjective or SmoothedPRBEPObjective
        The risk, evaluated at ``w = T u`` on the raw shards.
    transform : ndarray of shape (d,) or (d, d)
        ``T``.
    lam : float
        Weight of the added ridge.
    penalty : ndarray of shape (d,), optional
        Its per-feature weights ``p`` (default all 1).
    """

    def __init__(self, inner: _SmoothedRankObjective, transform: np.ndarray, lam: float = 0.0, penalty: np.ndarray | None = None) -> None:
        self.inner = inner
        self.transform = np.asarray(transform, dtype=float)
        self.lam = float(lam)
        d = self.transform.shape[0]
        self.penalty = np.ones(d) if penalty is None else np.asarray(penalty, dtype=float)
        self.last: dict[str, Any] = {}

    def to_raw(self, u: np.ndarray) -> np.ndarray:
        """Raw-feature weights ``w = T u``."""
        return self.transform @ u if self.transform.ndim == 2 else self.transform * u

    def from_raw(self, w: np.ndarray) -> np.ndarray:
        """The solver's coordinates ``u`` of raw weights ``w``."""
        return np.linalg.solve(self.transform, w) if self.transform.ndim == 2 else w / self.transform

    def _pull_back(self, g: np.ndarray) -> np.ndarray:
        return self.transform.T @ g if self.transform.ndim == 2 else self.transform * g

    def value_and_grad(self, u: np.ndarray) -> tuple[float, np.ndarray]:
        """Value and gradient with respect to the solver's coordinates ``u``."""
        w = self.to_raw(u)
        f, g = self.inner.value_and_grad(w)
        pw = self.penalty * w
        reg = 0.5 * self.lam * float(w @ pw)
        self.last = dict(self.inner.last, J=self.inner.last["J"] + reg, J_mu=self.inner.last["J_mu"] + reg)
        return f + reg, self._pull_back(g + self.lam * pw)

    def train_auc(self) -> float:
        """Exact training ROC-AUC of the last evaluation."""
        return self.inner.train_auc()

    def ray_minimum(self, direction: np.ndarray) -> RayMinimum:
        """:meth:`_SmoothedRankObjective.ray_minimum` along ``u = alpha * direction``."""
        w = self.to_raw(direction)
        return self.inner.ray_minimum(w, ridge=self.lam * float(w @ (self.penalty * w)))

    def line_minimum(self, direction: np.ndarray) -> float:
        """The ``alpha > 0`` that minimizes this objective at ``u = alpha * direction``."""
        return self.ray_minimum(direction).alpha


class StandardizedObjective(PreconditionedObjective):
    """``lam/2 ||v||^2 + R(v / scale)``: a smoothed risk fitted on standardized features.

    With ``z = (x - m) / scale`` the score ``v.z`` differs from ``(v / scale).x`` by a
    constant, and both rank risks ignore constant shifts, so the inner objective is
    evaluated on the raw shards at ``w = v / scale``; the ridge applies to ``v``. The
    model on raw features is ``w = v / scale``.

    Parameters
    ----------
    inner : SmoothedAUCObjective or SmoothedPRBEPObjective
        Built with ``lam = 0``.
    scale : ndarray of shape (d,)
        Per-feature standard deviation (1 for constant features).
    lam : float
        Ridge on the standardized weights.
    """

    def __init__(self, inner: _SmoothedRankObjective, scale: np.ndarray, lam: float) -> None:
        self.scale = np.asarray(scale, dtype=float)
        super().__init__(inner, 1.0 / self.scale, lam, self.scale**2)
