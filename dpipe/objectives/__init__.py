"""Objectives: pure functions of class moments or of merged sorted scores; they never know about dask.

The names are imported from their modules on first use (the moment objectives load
scipy, the rank objectives numba). To export a new one, add one line to
:data:`_LAZY`: ``"SquaredPairwiseHinge": "._pairwise_l2"``.
"""

from .._lazy import attach

#: exported name -> the private module that defines it
_LAZY = {
    "StandardizedMoments": "._moment",
    "AUCMomentObjective": "._moment",
    "ErrorMomentObjective": "._moment",
    "closed_form_auc_direction": "._moment",
    "SmoothedAUCRisk": "._smooth",
    "SmoothedPRBEPRisk": "._smooth",
    "RiskAt": "._risk",
    "PreconditionedObjective": "._smooth",
    "RayMinimum": "._smooth",
    "ray_minimum": "._smooth",
    "train_auc": "._risk",
    "SquaredPairwiseHinge": "._pairwise_l2",
    "liblinear_lam": "._pairwise_l2",
    "auc_risk": "._pairwise_l2",
    "Curvature": "._curvature",
    "RangeCurvature": "._range_curvature",
    "StructuralLoss": "._structural",
    "Plane": "._structural",
    "STRUCTURAL_LOSSES": "._structural",
}

__all__ = [*_LAZY]
__getattr__, __dir__ = attach(__name__, _LAZY)
