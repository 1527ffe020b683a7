"""The structural family (SVM-perf's losses): 1-slack cutting planes, one score pass and one gradient pass per iteration."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine import HostsLost, RankPasses, class_totals, column_scales
from ..metrics import resolve_k
from ..solvers import fit_cutting_plane
from ._early_stopping import early_stopping
from ._outcome import FitOutcome
from ._records import StructuralParams
from ._registry import OBJECTIVES

if TYPE_CHECKING:
    from ..engine._protocols import Dataset
    from ..objectives import StructuralLoss

__all__ = ["fit_structural", "StructuralRisk"]

log = logging.getLogger("dpipe.fit")


class StructuralRisk:
    """SVM-perf's risk as the cutting plane sees it: ``plane(v) -> (R(v), Delta, a)`` through the engine's passes.

    SVM-perf's bias feature (``--b``) is not stored: a constant ``bias`` appended to
    every row shifts all scores by ``bias * v_b``, which keeps their order, so it is
    added to the merged scores and its plane coefficient is ``bias * sum(coef)``.
    Standardized coordinates (``scale``) need no copy of the data either: the workers
    score with ``v / scale`` and the plane's slope is divided by ``scale``.

    Parameters
    ----------
    passes : RankPasses
        The dataset's score and gradient passes.
    loss : StructuralLoss
        The oracle (a pure function of the merged scores).
    bias : float
        Value of the constant feature; 0 appends none.
    scale : ndarray of shape (d,), optional
        Solve for ``v = scale * w`` (the standardized problem).
    """

    def __init__(self, passes: RankPasses, loss: StructuralLoss, bias: float = 0.0, scale: np.ndarray | None = None) -> None:
        self.passes = passes
        self.loss = loss
        self.bias = float(bias)
        self.scale = scale
        self.d = passes.n_features
        self.n_features = self.d + (self.bias != 0.0)
        self.last: dict[str, Any] = {}
        self._ranges = passes.range_exchange(loss)  # None: the driver merges the scores

    def split(self, v: np.ndarray) -> tuple[np.ndarray, float]:
        """``(coef, intercept)`` on the raw features for the solver's vector ``v``."""
        coef = np.asarray(v[: self.d], dtype=np.float64)
        if self.scale is not None:
            coef = coef / self.scale
        return coef, (self.bias * float(v[self.d]) if self.bias != 0.0 else 0.0)

    def plane(self, v: np.ndarray) -> tuple[float, float, np.ndarray]:
        """``(R(v), Delta(y, ybar), a)``: the risk at ``v`` and its tight plane ``Delta + u . a``."""
        w, intercept = self.split(v)
        if self._ranges is not None:
            try:
                ev = self._ranges.evaluate(w, self.loss)  # ROCArea: an intercept shifts every score, no pair changes
            except HostsLost as error:
                log.warning("%s; the driver merges the scores from now on", error)
                self._ranges = None
            else:
                a = ev.gradient / self.scale if self.scale is not None else ev.gradient
                if self.bias != 0.0:
                    a = np.append(a, self.bias * ev.weight_sum)
                self.last = dict(self._ranges.last)
                return ev.value, min(1.0, ev.exact), a  # the swapped weight over m, as the weighted oracle clips it
        s = self.passes.scores(w)
        if intercept != 0.0:  # a shift keeps the order
            s = s.scaled(1.0, intercept)
        t0 = time.perf_counter()
        pl = self.loss.at(s)
        t1 = time.perf_counter()
        a = self.passes.gradient(pl.c_pos, pl.c_neg)
        if self.scale is not None:
            a = a / self.scale
        if self.bias != 0.0:
            a = np.append(a, self.bias * (pl.c_pos.sum() + pl.c_neg.sum()))
        self.last = {**self.passes.last, "seconds_oracle": t1 - t0}
        return pl.value, pl.loss, a


def fit_structural(ds: Dataset, p: StructuralParams, validate: Callable[[np.ndarray, float], dict[str, float]] | None = None) -> FitOutcome:
    """Fit an SVM-perf loss by 1-slack cutting planes on an opened dataset (two passes per iteration).

    The bias feature (``p.bias``, SVM-perf's ``--b``) is used by the losses that set a
    threshold (error, F1); the ranking losses have none (a constant feature's weight
    decouples from the others), and their threshold is calibrated instead.
    """
    t0 = time.perf_counter()
    setup_passes = []
    scale = None
    if p.standardize:
        scale = column_scales(ds)
        setup_passes.append("column scales")
    k = None
    if p.k is not None or p.k_fraction is not None:  # prec@k, rec@k: the one k rule of the metrics
        totals = class_totals(ds)
        k = resolve_k(p.k, p.k_fraction, positive=totals.positive, total=totals.positive + totals.negative, integral=totals.integral, owner=p.owner)
    t_setup = time.perf_counter() - t0
    make_loss: Callable[[str, float | None], StructuralLoss] = OBJECTIVES[p.objective].load_risk()  # the oracle of the entry
    risk = StructuralRisk(RankPasses(ds), make_loss(p.objective, k), p.bias or 0.0, scale)
    v_validate = None if validate is None else (lambda v: validate(*risk.split(v)))
    stopping = early_stopping(p, validate)
    assert not isinstance(p.lam, str)  # lam="auto" is a path of fits, each with a number (dpipe/fit/_lam_path.py)
    result = fit_cutting_plane(risk, risk.n_features, p.lam, eps=p.eps, max_iter=p.max_iter, validate=v_validate, callback=stopping,
                               name=f"{p.objective}: ")
    if stopping is not None:  # the best iterate by the validation metric, not the lowest J
        stopping.finish(result)
    coef, intercept = risk.split(result.x)
    result.time_data = t_setup
    result.info.update(standardized=scale is not None, setup_passes=setup_passes, k=k, bias=p.bias or 0.0, lam=p.lam, C=1.0 / (100.0 * p.lam))
    return FitOutcome(coef, intercept, result)
