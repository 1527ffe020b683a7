"""Label rules: how the label values of a source become the -1 / +1 classes of a store.

A :class:`LabelRule` is one of

``positive``
    the listed values are +1, every other value is -1;
``negative``
    the listed values are -1, every other value is +1 (the KDD Cup 99
    rare-attack task is ``negative=["normal.", "smurf.", "neptune."]``);
``binary``
    no values given: the labels must already be binary, that is a subset of
    {-1, +1} or of {0, 1} (written in any numeric form: ``+1``, ``-1``, ``1.0``,
    ``0.0``, ...). 0 and -1 become -1, 1 becomes +1; a file holding both 0 and -1 is
    refused.

Values are compared as strings and, when both sides parse as numbers, numerically
(``"1"`` matches ``"1.0"``). svmlight labels are numbers, so there the comparison is
numeric only. The rule is JSON-serialisable (:meth:`LabelRule.to_dict`) and stored
in the manifest ``encoding["label"]`` so that ``like=`` ingests reuse it.

Label values are collected during the first pass of an ingest by a
:class:`LabelCounter`, which remembers the count and the first :class:`Where` of
every distinct value so that errors can name the line.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, overload

from ..exceptions import InputError, ParameterError

__all__ = ["LabelRule", "LabelCounter", "Where", "class_absent_message", "MAX_LABEL_VALUES", "MISSING_LABELS"]

#: Most distinct label values an ingest accepts (a class label has few values).
MAX_LABEL_VALUES = 65536

#: Tabular label values that mean "missing"; a missing label is an error.
MISSING_LABELS = ("", "?")

RULE_KINDS = ("positive", "negative", "binary")


class Where(NamedTuple):
    """A place in a source: file, 1-based line (text sources) or 1-based row (Parquet).

    Attributes
    ----------
    path : str
        Source file.
    line : int or None
        1-based line of a text source.
    row : int or None
        1-based row of a Parquet source (used when ``line`` is None).
    order : int
        Index of the file in the list of sources, for ordering places.
    """

    path: str
    line: int | None = None
    row: int | None = None
    order: int = 0

    def key(self) -> tuple[int, int]:
        """Sort key: sources in order, then lines/rows in order."""
        return (self.order, self.line if self.line is not None else (self.row or 0))

    def describe(self) -> str:
        """``"line 12"`` or ``"row 12"``."""
        return f"line {self.line}" if self.line is not None else f"row {self.row}"

    def error(self, message: str) -> InputError:
        """An :class:`InputError` naming this place."""
        if self.line is not None:
            return InputError(message, path=self.path, line=self.line)
        if self.row is not None:
            return InputError(f"row {self.row}: {message}", path=self.path)
        return InputError(message, path=self.path)


def _as_float(value: Any) -> float | None:
    """``value`` as a finite float, or None when it is not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        v = float(value)
    else:
        try:
            v = float(str(value).strip())
        except ValueError:
            return None
    return v if math.isfinite(v) else None


def _show(value: Any) -> str:
    """Label value as the user wrote it (floats without a needless ``.0``)."""
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


def _split_values(values: Sequence[str] | str | None, name: str, owner: str) -> tuple[str, ...] | None:
    if values is None:
        return None
    if isinstance(values, (str, int, float)) and not isinstance(values, bool):
        items: list[Any] = str(values).split(",")
    elif isinstance(values, Iterable) and not isinstance(values, (bytes, Mapping)):
        items = []
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise ParameterError(f"The {name!r} parameter of {owner} must be a string or a list of strings. Got {values!r} instead.")
            items.extend(str(v).split(","))
    else:
        raise ParameterError(f"The {name!r} parameter of {owner} must be a string or a list of strings. Got {values!r} instead.")
    out = tuple(dict.fromkeys(s.strip() for s in items if s.strip() != ""))
    if not out:
        raise ParameterError(f"The {name!r} parameter of {owner} must name at least one label value. Got {values!r} instead.")
    return out


@dataclasses.dataclass(frozen=True)
class LabelRule:
    """How source label values map to -1 / +1.

    Parameters
    ----------
    kind : {"positive", "negative", "binary"}
        See the module docstring.
    values : tuple of str
        The listed values (empty for ``"binary"``).
    """

    kind: str = "binary"
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in RULE_KINDS:
            raise ParameterError(f"unknown label rule kind {self.kind!r}; expected one of {RULE_KINDS}")
        if self.kind != "binary" and not self.values:
            raise ParameterError(f"a {self.kind!r} label rule needs at least one value")

    # -- construction ------------------------------------------------------------
    @overload
    @classmethod
    def from_args(cls, positive: Sequence[str] | str, negative: None, owner: str = ...) -> LabelRule: ...
    @overload
    @classmethod
    def from_args(cls, positive: None, negative: Sequence[str] | str, owner: str = ...) -> LabelRule: ...
    @overload
    @classmethod
    def from_args(cls, positive: Sequence[str] | str | None, negative: Sequence[str] | str | None, owner: str = ...) -> LabelRule | None: ...
    @classmethod
    def from_args(cls, positive: Sequence[str] | str | None, negative: Sequence[str] | str | None, owner: str = "ingest") -> LabelRule | None:
        """Rule from the ``positive=`` / ``negative=`` arguments; None when neither is given.

        Comma-separated strings are split, surrounding whitespace is removed.

        Raises
        ------
        ParameterError
            Both are given, or one is empty or not strings.
        """
        pos = _split_values(positive, "positive", owner)
        neg = _split_values(negative, "negative", owner)
        if pos is not None and neg is not None:
            raise ParameterError(f"The 'positive' and 'negative' parameters of {owner} are exclusive; pass only one of them.")
        if pos is not None:
            return cls("positive", pos)
        if neg is not None:
            return cls("negative", neg)
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form, ``{"kind": ..., "values": [...]}``."""
        return {"kind": self.kind, "values": list(self.values)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LabelRule:
        """Inverse of :meth:`to_dict` (extra keys are ignored)."""
        return cls(str(d.get("kind", "binary")), tuple(str(v) for v in d.get("values", ())))

    def check_numeric(self, owner: str = "ingest") -> None:
        """Refuse listed values that are not numbers (svmlight labels are numbers)."""
        for v in self.values:
            if _as_float(v) is None:
                raise ParameterError(f"The {self.kind!r} parameter of {owner} must list numbers for an svmlight source (labels are numeric). Got {v!r}.")

    # -- mapping -----------------------------------------------------------------
    def _listed(self, value: Any) -> bool:
        if isinstance(value, float):
            return any(_as_float(v) == value for v in self.values)
        s = str(value)
        if s in self.values:
            return True
        x = _as_float(s)
        return x is not None and any(_as_float(v) == x for v in self.values)

    def resolve(self, first_seen: Mapping[Any, Where]) -> dict[Any, int]:
        """Map every observed label value to -1 or +1.

        Parameters
        ----------
        first_seen : mapping
            Distinct label value -> place of its first occurrence.

        Returns
        -------
        dict
            Value -> -1 or +1.

        Raises
        ------
        InputError
            A value cannot be mapped (binary rule only); the message names the file
            and line of the first offending value.
        """
        if self.kind == "positive":
            return {v: (1 if self._listed(v) else -1) for v in first_seen}
        if self.kind == "negative":
            return {v: (-1 if self._listed(v) else 1) for v in first_seen}
        out: dict[Any, int] = {}
        seen_neg: dict[float, Any] = {}
        for value, where in sorted(first_seen.items(), key=lambda kv: kv[1].key()):
            x = _as_float(value)
            if x not in (-1.0, 0.0, 1.0):
                raise where.error(f"label {_show(value)!r} cannot be mapped to -1/+1; pass positive= or negative=")
            if x != 1.0:
                other = -1.0 if x == 0.0 else 0.0
                if other in seen_neg:
                    first = seen_neg[other]
                    raise where.error(
                        f"label {_show(value)!r} cannot be mapped to -1/+1: the source also has label {_show(first)!r} "
                        f"({first_seen[first].describe()}), so it is neither {{-1, +1}} nor {{0, 1}}; pass positive= or negative="
                    )
                seen_neg.setdefault(x, value)
            out[value] = 1 if x == 1.0 else -1
        return out

    def describe(self) -> str:
        """Short human description, for warnings."""
        if self.kind == "binary":
            return "labels taken as binary ({-1, +1} or {0, 1})"
        return f"{self.kind}={list(self.values)}"


class LabelCounter:
    """Distinct label values seen in a source, with counts and first places.

    Parameters
    ----------
    cap : int
        Most distinct values accepted; one more raises :class:`InputError`.
    """

    def __init__(self, cap: int = MAX_LABEL_VALUES) -> None:
        self.cap = cap
        self.counts: dict[Any, int] = {}
        self.first: dict[Any, Where] = {}

    def add(self, values: Sequence[Any], counts: Iterable[int], wheres: Sequence[Where]) -> None:
        """Record distinct ``values`` of one piece, with their counts and first places."""
        for v, c, w in zip(values, counts, wheres):
            if v in self.counts:
                self.counts[v] += int(c)
                continue
            if len(self.counts) >= self.cap:
                raise w.error(f"more than {self.cap} distinct label values (this one is {_show(v)!r}); is the label column right?")
            self.counts[v] = int(c)
            self.first[v] = w

    @property
    def n_rows(self) -> int:
        """Rows seen."""
        return sum(self.counts.values())

    def class_counts(self, mapping: Mapping[Any, int]) -> tuple[int, int]:
        """(negatives, positives) under ``mapping``."""
        neg = sum(c for v, c in self.counts.items() if mapping[v] == -1)
        pos = sum(c for v, c in self.counts.items() if mapping[v] == 1)
        return neg, pos

    def classes(self, mapping: Mapping[Any, int]) -> dict[str, int]:
        """JSON form ``{value: -1/+1}`` sorted by value, for the manifest."""
        return {_show(v): int(mapping[v]) for v in sorted(mapping, key=lambda x: (isinstance(x, str), x))}


def class_absent_message(n_neg: int, n_pos: int, rule: LabelRule, source: str) -> str | None:
    """Text of the :class:`~dpipe.exceptions.DataWarning` for a missing class, or None."""
    if n_neg and n_pos:
        return None
    missing, present = ("+1", "-1") if not n_pos else ("-1", "+1")
    return (
        f"{source}: no row has label {missing}: all {n_neg + n_pos} rows are {present} under the label rule "
        f"{rule.describe()}; check positive=/negative= (a store with one class cannot train a classifier)"
    )
