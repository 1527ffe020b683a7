"""The record every fit returns (modelled on scipy's ``OptimizeResult``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from .._jsonable import jsonable
from .._wide import encode_vector

if TYPE_CHECKING:  # a fit without constraints never imports dpipe.rates
    from ..rates._report import ConstraintReport

__all__ = ["FitResult", "Candidate"]


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One model a fit offers for threshold calibration to choose among.

    Attributes
    ----------
    label : str
        What it is ("lbfgs from the paper start", "auc-moment direction", ...).
    coef : ndarray of shape (d,)
    intercept : float
    modelled_error : float or None
        The objective's own (modelled) error of it, if it has one.
    """

    label: str
    coef: np.ndarray
    intercept: float
    modelled_error: float | None = None


@dataclasses.dataclass
class FitResult:
    """Outcome of a fit.

    Attributes
    ----------
    x : ndarray
        Solution in the solver's own coordinates.
    fun : float
        Objective value at ``x``.
    nit : int
        Iterations.
    nfev : int
        Objective evaluations (each one data evaluation where the objective reads data).
    status : int
        0 converged, 1 iteration limit, 2 other stop (see ``message``).
    success : bool
        Whether the tolerance was reached.
    message : str
        Solver message.
    history : list of dict
        One entry per iteration (``iteration``, ``fun``, ``grad_norm``, ``seconds`` and
        objective-specific values).
    time_data : float
        Seconds spent loading shards and in data passes before the solve (moment
        objectives: the moments pass; smoothed objectives with ``standardize``: the
        column-scale pass).
    time_solve : float
        Seconds in the solver.
    info : dict
        Anything else worth keeping (starts tried, smoothing, ...).
    constraints : list of ConstraintReport
        A rate fit's constraints on its training rows (the record keeps them in ``info["constraints"]``).
    constraints_validation : list of ConstraintReport or None
        The same on the validation rows that set its threshold (``info["constraints_validation"]``), or None (the
        training rows did).
    """

    x: np.ndarray
    fun: float
    nit: int = 0
    nfev: int = 0
    status: int = 0
    success: bool = True
    message: str = ""
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    time_data: float = 0.0
    time_solve: float = 0.0
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    constraints: list[ConstraintReport] = dataclasses.field(default_factory=list)
    constraints_validation: list[ConstraintReport] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dictionary (the constraint reports as records in ``info``, where model files keep them)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.name.startswith("constraints")}
        d["x"] = encode_vector(np.asarray(self.x))  # compact beyond 10,000 values (dpipe._wide)
        info = dict(self.info)
        if self.constraints:
            info["constraints"] = [c.to_record() for c in self.constraints]
        if self.constraints_validation is not None:
            info["constraints_validation"] = [c.to_record() for c in self.constraints_validation]
        d["info"] = info
        return jsonable(d)
