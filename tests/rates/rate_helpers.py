"""Helpers of the rate tests: rows with a group column that a feature carries."""

from __future__ import annotations

import numpy as np


def grouped_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X float32 (n, 4), y in {-1, +1}, group int16)``: group 1 ("F") is 40 % of the rows, feature 3 carries it."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    g = (rng.random(n) < 0.4).astype(np.int16)  # 1: group "F", 0: "M"
    X[:, 3] = g + 0.3 * rng.normal(size=n)  # a feature that carries the group
    y = np.where(X @ np.array([1.0, -0.6, 0.2, 1.2]) + 0.8 * rng.normal(size=n) > 0.6, 1, -1).astype(np.int8)
    return X.astype(np.float32), y, g
