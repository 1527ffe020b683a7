"""What a family's fit returns to ``train``: typed fields, nothing read from ``FitResult.info``."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..solvers import Candidate, FitResult

__all__ = ["FitOutcome"]


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
