"""A model registry and scheduled retraining: champion / challenger under a churn constraint.

A registry is a directory of versioned models with a champion pointer and an
append-only history of decisions (:class:`Registry`); :func:`retrain` trains a
challenger on new data under ``churn(champion) <= target`` and ``recall >= the
champion's``, compares both on a fresh holdout and promotes the challenger only when
the configured rule holds. ``dpipe retrain CONFIG.yaml`` and ``dpipe registry
list|show|promote|rollback`` are the command line.
"""

from ._config import PROMOTE_METRICS, RetrainConfig, load_config
from ._registry import Registry
from ._retrain import EXIT_CODES, RetrainResult, retrain

__all__ = ["Registry", "RetrainConfig", "RetrainResult", "retrain", "load_config", "EXIT_CODES", "PROMOTE_METRICS"]
