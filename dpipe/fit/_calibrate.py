"""Threshold calibration: the exact (weighted) training error decides the intercept and the candidate."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Protocol

import numpy as np

from ..solvers import Candidate
from ._outcome import FitOutcome

__all__ = ["Calibrated", "calibrate"]

log = logging.getLogger("dpipe.fit")


class ThresholdSummary(Protocol):
    """What calibration reads of a summary of the training scores: a :class:`~dpipe.metrics.RankSummary`, or a
    :class:`~dpipe.engine._threshold.ThresholdSearch` (the threshold without the scores)."""

    def best_threshold(self) -> tuple[float, float] | tuple[float, int]: ...

    def class_masses(self) -> tuple[float, float] | tuple[int, int]: ...


@dataclasses.dataclass(frozen=True)
class Calibrated:
    """The chosen model with its calibrated intercept.

    Attributes
    ----------
    coef, intercept
        The model.
    summary : RankSummary or ThresholdSearch
        Its uncalibrated training scores' summary (a :class:`~dpipe.engine._threshold.ThresholdSearch`, which
        has the threshold but not the scores, where the training metrics are not measured on a cluster).
    threshold : float
        What was subtracted from the fit's intercept.
    table : list of dict
        Every candidate's label, modelled error, training error, threshold (the shift of the
        candidate's own intercept) and the intercept it ends with.
    """

    coef: np.ndarray
    intercept: float
    summary: ThresholdSummary
    threshold: float
    table: list[dict]


def calibrate(outcome: FitOutcome, summarise: Callable[[np.ndarray, float], ThresholdSummary]) -> Calibrated:
    """Choose among the fit's candidates by exact training error, each at its best threshold.

    The moment objectives model the score distributions as normal; the threshold that
    minimizes the *modelled* error can be off where they are not, and the ranking
    objectives have no threshold at all. One score pass per candidate sorts the
    training scores and finds the threshold with the fewest (weighted) training
    errors; the candidate with the fewest is kept and its intercept shifted there.

    Parameters
    ----------
    outcome : FitOutcome
        The fit (its ``candidates``, or the fitted model alone).
    summarise : callable
        ``(coef, intercept) -> RankSummary`` of the training scores (one pass), or anything with its
        ``best_threshold()`` and ``class_masses()`` (:func:`~dpipe.engine._threshold.best_threshold_on_ranges`).
    """
    candidates = outcome.candidates or (Candidate("fit", outcome.coef, outcome.intercept),)
    table, best = [], None
    for cand in candidates:
        summary = summarise(cand.coef, cand.intercept)
        t, errors = summary.best_threshold()
        total = float(sum(summary.class_masses()))
        table.append({"label": cand.label, "modelled_error": cand.modelled_error, "train_error": float(errors) / total, "threshold": t,
                      "intercept": cand.intercept - t})
        if best is None or errors < best[0]:
            best = (errors, cand, t, summary)
    assert best is not None
    _, cand, t, summary = best
    log.info("threshold calibration: %s", "; ".join(f"{r['label']}: training error {r['train_error']:.5f}" for r in table))
    return Calibrated(cand.coef, cand.intercept - t, summary, t, table)
