"""The ramp ``clip(1/2 + z, 0, 1)``: Goh et al.'s relaxed indicator, and the randomized classifier's probability of a
positive prediction at margin ``z``. One definition for the fit, the metrics, the model and the estimator (NumPy only)."""

from __future__ import annotations

import numpy as np

__all__ = ["ramp"]


def ramp(z: np.ndarray) -> np.ndarray:
    """``clip(1/2 + z, 0, 1)``: the probability a ramp-randomized classifier predicts positive."""
    return np.clip(0.5 + np.asarray(z, dtype=np.float64), 0.0, 1.0)
