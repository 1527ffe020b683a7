"""Objectives: small objects with ``value_and_grad(w)``; they never know about dask."""

from ._moment import AUCMomentObjective, ErrorMomentObjective, StandardizedMoments, closed_form_auc_direction
from ._smooth import PreconditionedObjective, RayMinimum, SmoothedAUCObjective, SmoothedPRBEPObjective, StandardizedObjective
from ._structural import STRUCTURAL_LOSSES, StructuralRisk

__all__ = [
    "StandardizedMoments",
    "AUCMomentObjective",
    "ErrorMomentObjective",
    "closed_form_auc_direction",
    "SmoothedAUCObjective",
    "SmoothedPRBEPObjective",
    "StandardizedObjective",
    "PreconditionedObjective",
    "RayMinimum",
    "StructuralRisk",
    "STRUCTURAL_LOSSES",
]
