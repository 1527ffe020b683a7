"""Validation during a fit: the per-iteration validator, and early stopping on its metric (xgboost's ``early_stopping_rounds``).

The validator measures the exact metrics of an iterate on an opened validation dataset (one
pass). :class:`EarlyStopping` is the solvers' per-iteration ``callback``: it reads the
metric from the iteration's history record, keeps the best iterate, and returns a message
(asking the solver to stop) once ``rounds`` iterations in a row have not strictly improved on
the best. The family's fit then hands :meth:`EarlyStopping.finish` the solver's record, which
puts the best iterate in it and keeps what happened in ``info["early_stopping"]``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine import rank_summary
from ..exceptions import DPipeError, ParameterError
from ._records import FitParams, SmoothParams, StructuralParams
from ._registry import OBJECTIVES

if TYPE_CHECKING:
    from ..engine._protocols import Dataset
    from ..solvers import FitResult

__all__ = ["EarlyStopping", "METRICS", "stopping_metric", "stopping_rounds", "make_validator", "early_stopping"]

log = logging.getLogger("dpipe.fit")

#: metric (a key of :meth:`RankSummary.metrics`) -> (its key in the fit history, how log lines and messages name it)
METRICS: dict[str, tuple[str, str]] = {
    "roc_auc": ("validation_auc", "AUC"),
    "prbep": ("validation_prbep", "PRBEP"),
    "accuracy": ("validation_accuracy", "accuracy"),
    "f1": ("validation_f1", "F1"),
    "prec_at_k": ("validation_prec_at_k", "Prec@k"),
    "rec_at_k": ("validation_rec_at_k", "Rec@k"),
}

def stopping_metric(objective: str) -> str:
    """The validation metric that matches ``objective``'s loss (higher is better): its entry's :attr:`~dpipe.fit.Objective.metric`,
    a key of :data:`METRICS`."""
    metric = OBJECTIVES[objective].metric
    if metric is None:
        raise DPipeError(f"objective {objective!r} takes no validation set: its entry names no validation metric (Objective.metric)")
    return metric


def stopping_rounds(p: FitParams) -> int | None:
    """``early_stopping_rounds`` of the resolved record ``p`` (None: off, or a family without a validation set)."""
    return p.early_stopping_rounds if isinstance(p, (SmoothParams, StructuralParams)) else None


def make_validator(vds: Dataset, p: FitParams) -> Callable[[np.ndarray, float], dict[str, float]]:
    """``(coef, intercept) -> {history key: value}``: the exact validation AUC and PRBEP of an iterate on the opened dataset
    ``vds`` (one pass), and for error, f1, prec@k and rec@k also the metric of their loss (same pass): accuracy and F1 at
    the fit's own threshold, Prec@k and Rec@k at the fit's ``k_fraction`` of the validation positives (or its count ``k``).
    """
    metric = stopping_metric(p.objective)
    k, k_fraction = (p.k, p.k_fraction) if isinstance(p, StructuralParams) else (None, None)

    def validate(w: np.ndarray, intercept: float = 0.0) -> dict[str, float]:
        v = rank_summary(vds, w, intercept).metrics(k=k, k_fraction=k_fraction)
        out = {"validation_auc": v["roc_auc"], "validation_prbep": v["prbep"]}
        out[METRICS[metric][0]] = v[metric]
        return out

    return validate


def early_stopping(p: FitParams, validate: Callable[..., Any] | None) -> EarlyStopping | None:
    """The early stopping the resolved parameters ``p`` ask for (None without ``early_stopping_rounds``)."""
    rounds = stopping_rounds(p)
    if rounds is None:
        return None
    if validate is None:
        raise ParameterError(f"The 'early_stopping_rounds' parameter of {p.owner} needs a validation set: give validation= "
                             "(dpipe train --validation STORE; DPipeClassifier.fit's eval_set).")
    return EarlyStopping(stopping_metric(p.objective), rounds)


class EarlyStopping:
    """Stop a fit when its validation metric has not improved for ``rounds`` iterations; keep the best iterate.

    Called by the solver after every iteration as ``callback(x, record)``, with the iterate in
    the solver's coordinates and the iteration's history record, which holds the validation
    metric (the validator runs in the solver's monitor). Only a strictly larger value is an
    improvement (a tie does not reset the count); a NaN never is. At iteration
    ``best_iteration + rounds`` the call returns the reason to stop, which the solvers record
    as their ``message`` (``status`` 2).

    Parameters
    ----------
    metric : str
        A key of :data:`METRICS` (higher is better).
    rounds : int
        Iterations without improvement before stopping (>= 1).

    Attributes
    ----------
    iteration : int
        Calls so far (the fit's iteration number, counted across continuation stages).
    best_iteration : int or None
        The iteration of the best value so far (1-based, as the fit history's ``iteration``).
    best_score : float or None
        The best value so far.
    best_x : ndarray or None
        A copy of the best iterate.
    stopped : bool
        Whether it asked the solver to stop.
    """

    def __init__(self, metric: str, rounds: int) -> None:
        if metric not in METRICS:
            raise ValueError(f"unknown early-stopping metric {metric!r}; one of {', '.join(METRICS)}")
        if int(rounds) < 1:
            raise ValueError(f"early stopping needs rounds >= 1; got {rounds}")
        self.metric = metric
        self.key, self.label = METRICS[metric]
        self.rounds = int(rounds)
        self.iteration = 0
        self.best_iteration: int | None = None
        self.best_score: float | None = None
        self.best_x: np.ndarray | None = None
        self._best_record: dict[str, Any] = {}
        self.stopped = False

    def __call__(self, x: np.ndarray, record: dict[str, Any]) -> str | None:
        """Note the iterate ``x`` and its ``record``; the reason to stop, or None to go on."""
        self.iteration += 1
        value = float(record[self.key])
        if math.isfinite(value) and (self.best_score is None or value > self.best_score):
            self.best_iteration, self.best_score = self.iteration, value
            self.best_x = np.array(x, dtype=np.float64, copy=True)
            self._best_record = dict(record)
            return None
        if self.best_iteration is None or self.iteration - self.best_iteration < self.rounds:
            return None
        self.stopped = True
        why = f"early stopping: validation {self.label} did not improve for {self.rounds} iteration{'s' if self.rounds != 1 else ''}"
        log.info("%s at iteration %d; best %.6g at iteration %d", why, self.iteration, self.best_score, self.best_iteration)
        return why

    def finish(self, result: FitResult) -> FitResult:
        """Put the best iterate into the solver's ``result`` (``x``, ``fun``, ``info["J"]``) and record the early stopping
        in ``result.info["early_stopping"]``: ``metric``, ``early_stopping_rounds``, ``best_iteration``, ``best_score``,
        ``stopped`` (whether it ended the run; otherwise the solver stopped first). Returns ``result``."""
        if self.best_x is not None:
            result.x = self.best_x
            fun = self._best_record.get("fun", math.nan)
            result.fun = float(fun) if math.isfinite(fun) else float(self._best_record.get("J", result.fun))
            if "J" in result.info and "J" in self._best_record:
                result.info["J"] = self._best_record["J"]
        result.info["early_stopping"] = {"metric": self.metric, "early_stopping_rounds": self.rounds, "best_iteration": self.best_iteration,
                                         "best_score": self.best_score, "stopped": self.stopped}
        return result
