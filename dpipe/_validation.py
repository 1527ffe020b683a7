"""Up-front parameter validation with uniform messages."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .exceptions import ParameterError

__all__ = ["check_number", "check_choice", "check_int"]


def _fmt_interval(low: float, high: float, closed: str) -> str:
    left = "[" if closed in ("both", "left") else "("
    right = "]" if closed in ("both", "right") else ")"
    lo = "-inf" if low == -math.inf else repr(low)
    hi = "inf" if high == math.inf else repr(high)
    return f"{left}{lo}, {hi}{right}"


def check_number(
    value: Any,
    name: str,
    owner: str,
    low: float = -math.inf,
    high: float = math.inf,
    closed: str = "neither",
) -> float:
    """Return ``value`` as a float, or raise a :class:`ParameterError`.

    The message reads "The 'C' parameter of X must be a float in the range
    (0, inf]. Got -1 instead."
    """
    interval = _fmt_interval(low, high, closed)
    msg = f"The {name!r} parameter of {owner} must be a float in the range {interval}. Got {value!r} instead."
    if isinstance(value, bool):
        raise ParameterError(msg)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(msg) from None
    if math.isnan(v):
        raise ParameterError(msg)
    lo_ok = v >= low if closed in ("both", "left") else v > low
    hi_ok = v <= high if closed in ("both", "right") else v < high
    if not (lo_ok and hi_ok):
        raise ParameterError(msg)
    return v


def check_int(value: Any, name: str, owner: str, low: int = 0, high: float = math.inf) -> int:
    """Return ``value`` as an int in ``[low, high]`` or raise :class:`ParameterError`."""
    hi = "inf" if high == math.inf else str(int(high))
    msg = f"The {name!r} parameter of {owner} must be an int in the range [{low}, {hi}]. Got {value!r} instead."
    if isinstance(value, bool):
        raise ParameterError(msg)
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise ParameterError(msg) from None
    if v != value and not (isinstance(value, str) and str(v) == value.strip()):
        raise ParameterError(msg)
    if v < low or v > high:
        raise ParameterError(msg)
    return v


def check_choice(value: Any, name: str, owner: str, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices`` or raise :class:`ParameterError`."""
    choices = list(choices)
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise ParameterError(f"The {name!r} parameter of {owner} must be one of {listed}. Got {value!r} instead.")
    return value
