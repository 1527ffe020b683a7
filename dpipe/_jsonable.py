"""Python values as JSON takes them: the one conversion of the fit records, the model file's fields and the CLI's documents."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["jsonable"]


def jsonable(value: Any, *, finite: bool = False) -> Any:
    """``value`` with NumPy scalars and arrays as Python values, tuples as lists and keys as strings; with ``finite``,
    NaN and infinities as None (strict JSON, ``allow_nan=False``)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v, finite=finite) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, finite=finite) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist(), finite=finite)
    if isinstance(value, np.generic):
        value = value.item()
    if finite and isinstance(value, float) and not math.isfinite(value):
        return None
    return value
