"""Objectives: pure functions of class moments or of merged sorted scores; they never know about dask.

The names are imported from their modules on first use (the moment objectives load
scipy, the rank objectives numba). To export a new one, add one line to
:data:`_LAZY`: ``"SquaredPairwiseHinge": "._pairwise_l2"``.
"""

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # what the lazy names are, for mypy (which would otherwise see __getattr__'s Any)
    from ._curvature import Curvature as Curvature
    from ._moment import AUCMomentObjective as AUCMomentObjective
    from ._moment import ErrorMomentObjective as ErrorMomentObjective
    from ._moment import StandardizedMoments as StandardizedMoments
    from ._moment import closed_form_auc_direction as closed_form_auc_direction
    from ._pairwise_l2 import SquaredPairwiseHinge as SquaredPairwiseHinge
    from ._pairwise_l2 import auc_risk as auc_risk
    from ._pairwise_l2 import liblinear_lam as liblinear_lam
    from ._range_curvature import RangeCurvature as RangeCurvature
    from ._risk import RiskAt as RiskAt
    from ._risk import train_auc as train_auc
    from ._smooth import PreconditionedObjective as PreconditionedObjective
    from ._smooth import RayMinimum as RayMinimum
    from ._smooth import SmoothedAUCRisk as SmoothedAUCRisk
    from ._smooth import SmoothedPRBEPRisk as SmoothedPRBEPRisk
    from ._smooth import ray_minimum as ray_minimum
    from ._structural import STRUCTURAL_LOSSES as STRUCTURAL_LOSSES
    from ._structural import Plane as Plane
    from ._structural import StructuralLoss as StructuralLoss

__all__ = [*_LAZY]
__getattr__, __dir__ = attach(__name__, _LAZY)
