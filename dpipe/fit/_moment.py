"""The moment family (auc-moment, error-moment): one moments pass, then the fit on the driver."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..engine import class_moments
from ..reduce import ClassMoments
from ..solvers import fit_auc_moment, fit_error_moment
from ._outcome import FitOutcome
from ._params import fit_lam
from ._records import MomentParams
from ._registry import OBJECTIVES

if TYPE_CHECKING:
    from ..engine._protocols import Dataset

__all__ = ["fit_moment", "fit_moments", "auc_moment_fit", "error_moment_fit", "MomentFit"]

log = logging.getLogger("dpipe.fit")

#: what a moment objective's entry points at (:attr:`Objective.risk`): its fit from the class moments at the ridge ``lam``
MomentFit = Callable[[ClassMoments, MomentParams, float | None], FitOutcome]


def fit_moments(moments: ClassMoments, p: MomentParams) -> FitOutcome:
    """Fit a moment objective from class moments (no data access): its registry entry's fit (:attr:`Objective.risk`).

    Parameters
    ----------
    moments : ClassMoments
        (Weighted) moments of the training data.
    p : MomentParams
        Output of :func:`dpipe.fit.resolve`.
    """
    lam = p.lam
    if p.C is not None:  # C's lam from the training weights
        negative, positive = (float(v) for v in moments.weight)
        lam = fit_lam(p, positive, negative, int(moments.n_features))
    assert not isinstance(lam, str)  # lam="auto" is refused for the moment objectives (Family.lam_auto)
    risk = OBJECTIVES[p.objective].risk
    assert risk is not None  # every moment objective names its fit
    fit: MomentFit = risk.load()
    return fit(moments, p, lam)


def auc_moment_fit(moments: ClassMoments, p: MomentParams, lam: float | None) -> FitOutcome:
    """auc-moment: the closed-form direction, or L-BFGS on the normal model's AUC (:func:`~dpipe.solvers.fit_auc_moment`)."""
    if p.solver == "closed-form":
        assert p.ridge is not None  # the closed form's ridge (its only option)
        coef, intercept, result = fit_auc_moment(moments, solver=p.solver, ridge=p.ridge)
    else:
        assert lam is not None and p.max_iter is not None and p.tol is not None and p.memory is not None  # L-BFGS's, all apply
        coef, intercept, result = fit_auc_moment(moments, solver=p.solver, lam=lam, max_iter=p.max_iter, tol=p.tol, memory=p.memory)
    if lam is not None:
        result.info.setdefault("lam", lam)
    return FitOutcome(coef, intercept, result)


def error_moment_fit(moments: ClassMoments, p: MomentParams, lam: float | None) -> FitOutcome:
    """error-moment: L-BFGS on the normal model's expected 0-1 error, with its candidate models (:func:`~dpipe.solvers.fit_error_moment`)."""
    assert lam is not None and p.max_iter is not None and p.tol is not None and p.memory is not None and p.ridge is not None  # L-BFGS's, all apply
    coef, intercept, result, candidates = fit_error_moment(moments, lam=lam, max_iter=p.max_iter, tol=p.tol, memory=p.memory, ridge=p.ridge)
    result.info.setdefault("lam", lam)
    return FitOutcome(coef, intercept, result, tuple(candidates))


def fit_moment(ds: Dataset, p: MomentParams, validate: Any = None) -> FitOutcome:
    """One moments pass over ``ds``, then :func:`fit_moments`."""
    t0 = time.perf_counter()
    moments = class_moments(ds)
    t_data = time.perf_counter() - t0
    log.info("moments pass: %.3f s (%d negative, %d positive rows)", t_data, moments.count[0], moments.count[1])
    out = fit_moments(moments, p)
    out.result.time_data = t_data
    out.result.info["setup_passes"] = ["class moments"]
    return out
