"""Compact JSON for wide data: a store or a model of 10^6 features should not carry 10^6 strings or decimal numbers.

**Names.** A list of more than :data:`INLINE_MAX` names that reads ``prefix + str(start + j)`` for
``j = 0 .. count - 1`` (svmlight's ``f1 .. fd``, hashed features, generated tokens) is written
as ``{"prefix": ..., "start": ..., "count": ...}`` and expanded when read. Any other list is
written as it is (a store keeps a long irregular list in its own file: :mod:`dpipe.io._manifest`).

**Vectors** (a model's weights, a fit's iterate). More than :data:`INLINE_MAX` float64 values
are written as ``{"dtype": "<f8", "base64": ...}``: exact, 10.7 bytes a value against about
20 as decimals, and decoded by NumPy alone.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["INLINE_MAX", "compact_names", "expand_names", "is_pattern", "encode_vector", "decode_vector"]

#: longer name lists are written compactly when they follow a pattern
INLINE_MAX = 10_000

_TAIL = re.compile(r"(.*?)(0|[1-9][0-9]*)$")


def compact_names(names: Sequence[str]) -> list[str] | dict[str, Any]:
    """``names`` as a pattern ``{"prefix", "start", "count"}`` when there are more than :data:`INLINE_MAX` of them and
    they follow one, else as a list."""
    names = list(names)
    if len(names) <= INLINE_MAX:
        return names
    m = _TAIL.fullmatch(names[0])
    if m is None:
        return names
    prefix, start = m.group(1), int(m.group(2))
    if all(name == f"{prefix}{start + j}" for j, name in enumerate(names)):
        return {"prefix": prefix, "start": start, "count": len(names)}
    return names


def is_pattern(value: Any) -> bool:
    """Whether ``value`` is a compact pattern of names (as :func:`compact_names` writes it)."""
    return isinstance(value, dict) and set(value) == {"prefix", "start", "count"}


def expand_names(value: Any, where: str) -> list[str]:
    """The list of names that ``value`` (a list, or a pattern) stands for; ``ValueError`` naming ``where`` otherwise."""
    if isinstance(value, list):
        return value
    if is_pattern(value):
        prefix, start, count = value["prefix"], value["start"], value["count"]
        if isinstance(prefix, str) and type(start) is int and type(count) is int and start >= 0 and count >= 0:
            return [f"{prefix}{start + j}" for j in range(count)]
    raise ValueError(f"{where}: feature_names must be a list of strings or {{prefix, start, count}}, got {str(value)[:80]}")


def encode_vector(values: np.ndarray) -> list[float] | dict[str, Any]:
    """A float64 vector as JSON: a list, or for more than :data:`INLINE_MAX` values ``{"dtype": "<f8", "base64": ...}``."""
    values = np.asarray(values, dtype=np.float64)
    if values.size <= INLINE_MAX:
        return values.tolist()
    return {"dtype": "<f8", "base64": base64.b64encode(np.ascontiguousarray(values, dtype="<f8").tobytes()).decode("ascii")}


def decode_vector(value: Mapping[str, Any]) -> np.ndarray:
    """The vector of :func:`encode_vector`'s compact form; ``ValueError`` when it is malformed."""
    if set(value) != {"dtype", "base64"} or value["dtype"] != "<f8" or not isinstance(value["base64"], str):
        raise ValueError("expected a list of numbers or {dtype: '<f8', base64: ...}")
    try:
        raw = base64.b64decode(value["base64"], validate=True)
    except (ValueError, TypeError):
        raise ValueError("base64 does not decode") from None
    if len(raw) % 8:
        raise ValueError(f"{len(raw)} bytes are not whole float64 values")
    return np.frombuffer(raw, dtype="<f8").astype(np.float64)
