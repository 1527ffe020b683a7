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
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["INLINE_MAX", "NamePattern", "compact_names", "expand_names", "is_pattern", "same_names", "encode_vector", "decode_vector"]

#: longer name lists are written compactly when they follow a pattern
INLINE_MAX = 10_000

_TAIL = re.compile(r"(.*?)(0|[1-9][0-9]*)$")


class NamePattern(Sequence[str]):
    """The names ``prefix + str(start + j)`` for ``j = 0 .. count - 1``, without building them.

    What a wide store's or model's pattern reads as: a read-only sequence of strings whose
    names are made when asked for, so a store of 2^20 features opens without 10^6 Python
    strings (75 MB and 0.4 s on the driver, 10 times that at 10^7 features). It compares
    equal to any sequence of the same names, and finds a name's position by parsing it.
    """

    __slots__ = ("prefix", "start", "length")

    def __init__(self, prefix: str, start: int, count: int) -> None:
        self.prefix, self.start, self.length = prefix, start, count

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [f"{self.prefix}{self.start + j}" for j in range(*i.indices(self.length))]
        j = i + self.length if i < 0 else i
        if not 0 <= j < self.length:
            raise IndexError(f"name {i} of {self.length}")
        return f"{self.prefix}{self.start + j}"

    def __iter__(self) -> Iterator[str]:
        return (f"{self.prefix}{self.start + j}" for j in range(self.length))

    def index(self, name: Any, start: int = 0, stop: int | None = None) -> int:
        """The position of ``name`` (``ValueError`` when it is not one of the names)."""
        rest = name[len(self.prefix):] if isinstance(name, str) and name.startswith(self.prefix) else ""
        j = int(rest) - self.start if rest.isascii() and rest.isdigit() and rest == str(int(rest)) else -1
        if not max(0, start) <= j < (self.length if stop is None else min(stop, self.length)):
            raise ValueError(f"{name!r} is not in the names {self.prefix}{self.start}..{self.prefix}{self.start + self.length - 1}")
        return j

    def count(self, name: Any) -> int:
        """1 if ``name`` is one of the names, else 0 (each appears once)."""
        return int(name in self)

    def __contains__(self, name: object) -> bool:
        try:
            self.index(name)
        except ValueError:
            return False
        return True

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NamePattern):
            return self.length == other.length and (self.length == 0 or (self.prefix, self.start) == (other.prefix, other.start))
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == self.length and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are unhashable

    def __repr__(self) -> str:
        return f"NamePattern({self.prefix!r}, {self.start}, {self.length})"

    def to_json(self) -> dict[str, Any]:
        """The pattern as :func:`compact_names` writes it."""
        return {"prefix": self.prefix, "start": self.start, "count": self.length}


def same_names(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two sequences hold the same names in the same order (two patterns compare without building a name)."""
    if isinstance(a, NamePattern) or isinstance(b, NamePattern):
        return a == b
    return list(a) == list(b)


def compact_names(names: Sequence[str]) -> list[str] | dict[str, Any]:
    """``names`` as a pattern ``{"prefix", "start", "count"}`` when there are more than :data:`INLINE_MAX` of them and
    they follow one, else as a list."""
    if isinstance(names, NamePattern):
        return names.to_json() if len(names) > INLINE_MAX else list(names)
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


def expand_names(value: Any, where: str) -> Sequence[str]:
    """The names that ``value`` (a list, or a pattern: a :class:`NamePattern`) stands for; ``ValueError`` naming ``where`` otherwise."""
    if isinstance(value, list):
        return value
    if is_pattern(value):
        prefix, start, count = value["prefix"], value["start"], value["count"]
        if isinstance(prefix, str) and type(start) is int and type(count) is int and start >= 0 and count >= 0:
            return NamePattern(prefix, start, count)
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
