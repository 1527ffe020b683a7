"""SVM-perf's structural risks over shards: the plane at ``w`` for the cutting-plane solver.

For a multivariate loss ``Delta`` the risk is

    R(w) = max over admissible labelings y' of [Delta(y, y') + w.(Psi(x, y') - Psi(x, y))],

convex and piecewise linear in ``w``. At any ``w`` the maximizer ``ybar`` gives the plane
``R(v) >= Delta(y, ybar) + v . a`` with ``a = sum_i coef_i x_i`` (tight at ``v = w``).
One plane costs what one smoothed-objective evaluation costs: a score pass (sorted
per-class scores from every shard, merged on the driver), the loss-augmented argmax
oracle on the merged scores (:mod:`dpipe.objectives._argmax`), and a gradient pass
``X^T coef`` with each shard's coefficients sent back to it. Bytes moved: 8 per row
each way, as for the smoothed objectives.

Conventions are those of the oracles: ROCArea's risk is the mean pairwise hinge (the
``t -> 0`` limit of ``auc-smooth``), the contingency losses use ``Psi`` scaled by
``1 / (2n)``; ``lam = 1 / (100 C)`` for SVM-perf's ``C``.

SVM-perf's bias feature (``--b``) is not stored: a constant ``bias`` appended to every
row shifts all scores by ``bias * w_b``, which keeps their order, so it is added to the
merged scores on the driver and its plane coefficient is ``bias * sum(coef)``.
Standardized coordinates (``scale``) likewise need no copy of the data: the workers
score with ``v / scale`` and the plane's slope is divided by ``scale``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from ..exceptions import DPipeError
from ..reduce import gradient_pass, score_pass
from ._argmax import (
    MostViolated,
    error_rate_argmax,
    f1_argmax,
    prbep_argmax,
    prec_at_k_argmax,
    rec_at_k_argmax,
    rocarea_argmax,
)
from ._smooth import _scatter, merge_class_runs

__all__ = ["StructuralRisk", "STRUCTURAL_LOSSES"]

#: loss name -> (oracle, takes k)
STRUCTURAL_LOSSES: dict[str, tuple[Callable[..., MostViolated], bool]] = {
    "rocarea": (rocarea_argmax, False),
    "error": (error_rate_argmax, False),
    "prbep": (prbep_argmax, False),
    "f1": (f1_argmax, False),
    "prec@k": (prec_at_k_argmax, True),
    "rec@k": (rec_at_k_argmax, True),
}


class StructuralRisk:
    """SVM-perf's risk ``R(w)`` for one loss over a sharded dataset.

    Parameters
    ----------
    dataset : LocalDataset or ShardedDataset
        Training data.
    loss : {"rocarea", "error", "prbep", "f1", "prec@k", "rec@k"}
        The multivariate loss.
    n_positive, n_negative : int
        Class counts.
    k : int, optional
        Number of predicted positives for ``prec@k`` / ``rec@k`` (required there).
    bias : float
        SVM-perf's ``--b``: the value of a constant feature appended to every row
        (regularized like the others); ``0`` appends none. ``w`` then has one more
        entry, and the model's intercept is ``bias * w[-1]``.
    scale : ndarray of shape (d,), optional
        Work in the coordinates ``v = scale * w`` (features divided by ``scale``):
        the standardized problem, whose ridge applies to ``v``.
    """

    def __init__(
        self, dataset: Any, loss: str, n_positive: int, n_negative: int, k: int | None = None, *, bias: float = 0.0,
        scale: np.ndarray | None = None,
    ) -> None:
        if loss not in STRUCTURAL_LOSSES:
            raise DPipeError(f"unknown structural loss {loss!r}; valid: {', '.join(STRUCTURAL_LOSSES)}")
        self.oracle, takes_k = STRUCTURAL_LOSSES[loss]
        if n_positive == 0 or (n_negative == 0 and loss in ("rocarea", "prbep")):
            missing = "positive" if n_positive == 0 else "negative"
            raise DPipeError(f"the training data has no {missing} rows ({n_negative} negative, {n_positive} positive); the {loss} loss needs both classes")
        if takes_k and (k is None or not 1 <= int(k) <= n_positive + n_negative):
            raise DPipeError(f"the {loss} loss needs k between 1 and the number of rows ({n_positive + n_negative}); got {k}")
        self.ds = dataset
        self.loss_name = loss
        self.k = int(k) if takes_k else None
        self.bias = float(bias)
        self.n_pos, self.n_neg = int(n_positive), int(n_negative)
        self.scale = None if scale is None else np.asarray(scale, dtype=np.float64)
        self.n_features = int(dataset.n_features) + (self.bias != 0.0)
        self.nfev = 0
        self.last: dict[str, Any] = {}
        self._token = uuid.uuid4().hex

    def split(self, v: np.ndarray) -> tuple[np.ndarray, float]:
        """``(coef, intercept)`` on the raw features for the solver's vector ``v``."""
        d = int(self.ds.n_features)
        coef = np.asarray(v[:d], dtype=np.float64)
        if self.scale is not None:
            coef = coef / self.scale
        return coef, (self.bias * float(v[d]) if self.bias != 0.0 else 0.0)

    def plane(self, v: np.ndarray) -> tuple[float, float, np.ndarray]:
        """``(R(v), Delta(y, ybar), a)``: the risk at ``v`` and its tight plane ``Delta + u . a``."""
        t0 = time.perf_counter()
        self.nfev += 1
        key = f"{self._token}-{self.nfev}"
        w, intercept = self.split(v)
        parts = self.ds.map_gather(score_pass, w, key)
        t1 = time.perf_counter()
        sp, op, lp = merge_class_runs([p[0] for p in parts])
        sn, on, ln = merge_class_runs([p[1] for p in parts])
        if intercept != 0.0:  # a shift keeps the order
            sp, sn = sp + intercept, sn + intercept
        t2 = time.perf_counter()
        mv = self.oracle(sp, sn, self.k) if self.k is not None else self.oracle(sp, sn)
        t3 = time.perf_counter()
        coef_pos, coef_neg = np.asarray(mv.coef_pos, dtype=float), np.asarray(mv.coef_neg, dtype=float)
        per_shard = list(zip(_scatter(coef_pos, op, lp), _scatter(coef_neg, on, ln)))
        a = np.asarray(self.ds.map_reduce_each(gradient_pass, np.add, per_shard, w, key), dtype=float)
        if self.scale is not None:
            a = a / self.scale
        if self.bias != 0.0:
            a = np.append(a, self.bias * (coef_pos.sum() + coef_neg.sum()))
        t4 = time.perf_counter()
        self.last = {
            "seconds_score": t1 - t0,
            "seconds_merge": t2 - t1,
            "seconds_oracle": t3 - t2,
            "seconds_gradient": t4 - t3,
            "bytes_moved": 16 * (self.n_pos + self.n_neg) + 8 * w.size * 3 * len(parts),
        }
        return float(mv.value), float(mv.loss), a
