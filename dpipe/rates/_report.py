"""What a measured rate constraint reports: :class:`ConstraintReport`, and :class:`RateMeasure` for each rate in it.

The one typed form of a constraint's outcome, wherever it is measured: by a rate fit on its
training rows and on the validation rows that set its threshold (the fit record, the model,
the registry entry) and by :func:`dpipe.evaluate`. Model files, registry entries and the
CLI's JSON keep the record form (:meth:`ConstraintReport.to_record`, the keys they always
had); :meth:`ConstraintReport.from_record` reads it back, also from model files written
before these classes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Literal

__all__ = ["RateMeasure", "ConstraintReport", "reports_from_records", "Verdict", "LEVEL", "verdict_of"]

#: the two-sided level of every interval
LEVEL = 0.95

#: a constraint at its level: its whole interval at or below 0, above 0, or across 0
Verdict = Literal["holds", "violated", "not significant"]


def verdict_of(interval: tuple[float, float]) -> Verdict:
    """``holds`` when the whole interval is at or below 0, ``violated`` when above 0, else ``not significant``."""
    lo, hi = interval
    return "holds" if hi <= 0 else "violated" if lo > 0 else "not significant"


@dataclasses.dataclass(frozen=True)
class RateMeasure:
    """One rate a constraint names, as measured.

    Attributes
    ----------
    rate : str
        The rate and its rows, e.g. ``"positive(group=F)"``.
    value : float
        Its share of the rows' weight (NaN over no rows).
    effective_rows : float
        Kish's effective number of rows ``(sum v)^2 / sum v^2`` (the row count without weights).
    interval : tuple of float
        Its Clopper-Pearson interval at the report's level.
    """

    rate: str
    value: float
    effective_rows: float
    interval: tuple[float, float]

    def to_record(self) -> dict[str, Any]:
        """The JSON record (the keys model files and the CLI's documents use)."""
        return {"rate": self.rate, "value": self.value, "effective_rows": self.effective_rows, "interval": list(self.interval)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> RateMeasure:
        """The measure of a JSON record written by :meth:`to_record`."""
        lo, hi = record["interval"]
        return cls(str(record["rate"]), float(record["value"]), float(record["effective_rows"]), (float(lo), float(hi)))


@dataclasses.dataclass(frozen=True)
class ConstraintReport:
    """One constraint of a model on some rows: its value, interval and verdict, and the rates it is made of.

    Attributes
    ----------
    text : str
        The constraint as written (``lhs <= rhs`` or ``>=``).
    value : float
        ``lhs - rhs`` in the ``<=`` direction with exact (indicator) rates (a randomized
        model's: expected rates); the constraint holds on these rows when it is ``<= 0``.
    interval : tuple of float
        The interval of ``value`` at ``level``: Clopper-Pearson for a single rate, the delta
        method over disjoint cells otherwise (``method``; :mod:`dpipe.rates._intervals`).
    level : float
        The interval's two-sided level (0.95).
    verdict : {"holds", "violated", "not significant"}
        :func:`verdict_of` the interval.
    method : str
        ``"clopper-pearson"`` or ``"normal (delta method)"``.
    rates : tuple of RateMeasure
        Every rate the constraint names.
    ramp_value : float or None
        A fit's: ``value`` with ramp rates, what the solver optimized (None from evaluate).
    multiplier : float or None
        A fit's: the constraint's Lagrange multiplier at the model (None from evaluate).
    tolerance : float
        How far above 0 ``value`` may be and the constraint still hold: a fit's feasibility
        tolerance (1e-6), 0 from evaluate.
    """

    text: str
    value: float
    interval: tuple[float, float]
    level: float
    verdict: Verdict
    method: str
    rates: tuple[RateMeasure, ...] = ()
    ramp_value: float | None = None
    multiplier: float | None = None
    tolerance: float = 0.0

    @property
    def holds(self) -> bool:
        """The point value meets the constraint (``value <= tolerance``), whatever the interval says."""
        return bool(self.value <= self.tolerance)

    def fitted(self, value: float, ramp_value: float, multiplier: float) -> ConstraintReport:
        """This report with a fit's value (its exact rates at the model), ramp value and multiplier."""
        return dataclasses.replace(self, value=float(value), ramp_value=float(ramp_value), multiplier=float(multiplier))

    def to_record(self) -> dict[str, Any]:
        """The JSON record: ``text, value, holds, interval, level, verdict, method, rates`` and, from a fit, ``ramp_value,
        multiplier, satisfied, tolerance`` (the keys of model files, registry entries and the CLI's documents)."""
        out: dict[str, Any] = {"text": self.text, "value": self.value, "holds": self.holds}
        if self.multiplier is not None:
            out.update(ramp_value=self.ramp_value, multiplier=self.multiplier, satisfied=self.holds)
        if self.tolerance:
            out["tolerance"] = self.tolerance
        out.update(interval=list(self.interval), level=self.level, verdict=self.verdict, method=self.method,
                   rates=[r.to_record() for r in self.rates])
        return out

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ConstraintReport:
        """The report of a JSON record (:meth:`to_record`'s, or a model file's from before: ``satisfied`` without ``holds``)."""
        lo, hi = record.get("interval", (float("nan"), float("nan")))  # model files from before the intervals have none
        interval = (float(lo), float(hi))
        optional = {k: float(record[k]) for k in ("ramp_value", "multiplier", "tolerance") if record.get(k) is not None}
        return cls(str(record["text"]), float(record["value"]), interval, float(record.get("level", LEVEL)),
                   record.get("verdict", verdict_of(interval)), str(record.get("method", "")),
                   tuple(RateMeasure.from_record(r) for r in record.get("rates", ())), **optional)


def reports_from_records(records: Iterable[Mapping[str, Any]] | None) -> list[ConstraintReport]:
    """:meth:`ConstraintReport.from_record` of each record (none: an empty list)."""
    return [ConstraintReport.from_record(r) for r in records or ()]
