"""``probability=``: the held-out scores a probability calibration is fitted on.

With a validation store (``validation=``, the estimator's ``eval_set``) the final model
scores it. Without one, the training store is cross-fitted, as scikit-learn's
``CalibratedClassifierCV(cv=K, ensemble=False)`` does: the rows are dealt into
``probability_folds`` seeded folds (:class:`~dpipe.engine._split.RowSplit`: a pure function
of the seed, shard and row, so every engine holds out the same rows), a model with the same
parameters is fitted on the other folds (the held-out rows at weight 0) and scores its fold.
That is ``K`` more fits; the final model is the one fitted on every row. The driver
gathers one score, label and weight per row - O(n), never O(n d).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine._split import DatasetPart, RowSplit
from ..exceptions import ParameterError
from ..model._probability import ProbabilityCalibration, fit_probability_calibration
from ..reduce._scores import shard_scores
from ._records import FitParams, MomentParams, SmoothParams, StructuralParams

if TYPE_CHECKING:
    from ..engine._protocols import Dataset

__all__ = ["DEFAULT_PROBABILITY_FOLDS", "PROBABILITY_SEED", "calibrate_probability", "held_out_scores"]

log = logging.getLogger(__name__)

#: folds when ``probability_folds`` is not given
DEFAULT_PROBABILITY_FOLDS = 5
#: the seed of the folds (fixed: a rerun holds out the same rows)
PROBABILITY_SEED = 0


def held_out_scores(shard: Any, coef: np.ndarray, intercept: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores, labels and weights of a shard's rows of positive weight (runs where the shard lives)."""
    w = np.ones(shard.n_rows) if shard.weight is None else np.asarray(shard.weight, dtype=np.float64)
    keep = w > 0
    s = shard_scores(shard, coef, intercept)  # the passes' own scoring kernel, which names a non-finite feature
    return s[keep], np.asarray(shard.y)[keep], w[keep]


def _gather(ds: Dataset, coef: np.ndarray, intercept: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    parts = ds.map_gather(held_out_scores, np.asarray(coef, dtype=np.float64), float(intercept))
    return tuple(np.concatenate([p[i] for p in parts]) if parts else np.zeros(0) for i in range(3))  # type: ignore[return-value]


def calibrate_probability(ds: Dataset, params: MomentParams | SmoothParams | StructuralParams, coef: np.ndarray, intercept: float,
                          refit: Callable[[Dataset, FitParams], tuple[np.ndarray, float]],
                          validation: Dataset | None = None) -> ProbabilityCalibration:
    """Fit ``params.probability`` on held-out scores: ``validation``'s under the final model, else the folds'.

    Parameters
    ----------
    ds : opened dataset
        The training store (cross-fitted when ``validation`` is None).
    params : family record
        The resolved parameters (``probability``, ``probability_folds``, and the fit's own).
    coef, intercept : the final model
    refit : callable
        ``refit(part, params) -> (coef, intercept)``: the fit (and its threshold) on a part of ``ds``.
    validation : opened dataset, optional
        The validation store.
    """
    method = params.probability
    assert method is not None  # fit_probability calls this only with probability given
    folds = params.probability_folds
    if validation is not None:
        if folds is not None:
            raise ParameterError("The 'probability_folds' parameter applies when probabilities are calibrated on folds of the training "
                                 "store; with a validation store they are calibrated on it: drop one of the two.")
        s, y, w = _gather(validation, coef, intercept)
        return fit_probability_calibration(method, s, y, w, "validation")
    folds = DEFAULT_PROBABILITY_FOLDS if folds is None else int(folds)
    inner = dataclasses.replace(params, probability=None, probability_folds=None)
    scores, labels, weights = [], [], []
    for j in range(folds):
        split = RowSplit(1.0 / folds, PROBABILITY_SEED, low=j / folds)
        fit_part, held = DatasetPart(ds, split, "fit"), DatasetPart(ds, split, "validation")
        c, b = refit(fit_part, inner)
        s, y, w = _gather(held, c, b)
        scores.append(s)
        labels.append(y)
        weights.append(w)
        log.info("probability: fold %d of %d fitted (%d held-out rows)", j + 1, folds, s.size)
    return fit_probability_calibration(method, np.concatenate(scores), np.concatenate(labels), np.concatenate(weights), f"folds={folds}")
