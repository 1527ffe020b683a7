"""Objectives: pure functions of class moments or of merged sorted scores; they never know about dask."""

from ._moment import AUCMomentObjective, ErrorMomentObjective, StandardizedMoments, closed_form_auc_direction
from ._smooth import PreconditionedObjective, RayMinimum, RiskAt, SmoothedAUCRisk, SmoothedPRBEPRisk, ray_minimum, train_auc
from ._structural import STRUCTURAL_LOSSES, Plane, StructuralLoss

__all__ = [
    "StandardizedMoments",
    "AUCMomentObjective",
    "ErrorMomentObjective",
    "closed_form_auc_direction",
    "SmoothedAUCRisk",
    "SmoothedPRBEPRisk",
    "RiskAt",
    "PreconditionedObjective",
    "RayMinimum",
    "ray_minimum",
    "train_auc",
    "StructuralLoss",
    "Plane",
    "STRUCTURAL_LOSSES",
]
