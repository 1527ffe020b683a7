"""What a family's fit returns to ``train``: typed fields, nothing read from ``FitResult.info``."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..solvers import Candidate, FitResult

__all__ = ["FitOutcome", "WarmStart"]


@dataclasses.dataclass(frozen=True)
class FitOutcome:
    """A fitted linear model before threshold calibration.

    Attributes
    ----------
    coef : ndarray of shape (d,)
        Weights on the raw features.
    intercept : float
        The fit's own intercept (the moment model's threshold; 0 for the ranking
        objectives; ``bias * w_bias`` for SVM-perf's error and f1).
    result : FitResult
        The solver's record (kept in the model's fit record).
    candidates : tuple of Candidate
        Models worth comparing by exact training error when calibrating (error-moment's
        fits from both starts and the auc-moment direction); empty: only this one.
    """

    coef: np.ndarray
    intercept: float
    result: FitResult
    candidates: tuple[Candidate, ...] = ()


@dataclasses.dataclass(frozen=True)
class WarmStart:
    """Where a fit of a regularization path starts (:mod:`dpipe.fit._lam_path`), and its stopping rule's reference.

    Attributes
    ----------
    coef : ndarray of shape (d,)
        Raw-feature weights: the previous ``lam``'s solution.
    grad_norm : float or None
        The gradient norm the relative stopping rule compares with: the cold start's (LIBLINEAR's rule with an initial
        solution), so that a warm start close to the minimum is not asked for a tighter fit than a cold one. None: the
        fit measures it at its own cold start (one evaluation).
    """

    coef: np.ndarray
    grad_norm: float | None = None
