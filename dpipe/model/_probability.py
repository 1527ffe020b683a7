"""Probabilities from scores: a calibration fitted on held-out rows, recorded in the model.

dpipe's objectives rank or threshold; they do not model probabilities, and a calibration
fitted on the training rows' own scores is biased (the fit pulled those scores apart). So
the calibration is fitted on scores the model did not train on: a validation store, or
cross-fitted folds of the training store (see :func:`dpipe.fit._probability`), as
scikit-learn's ``CalibratedClassifierCV`` does.

``sigmoid``
    Platt scaling: ``p = 1 / (1 + exp(-(a s + b)))``, ``a`` and ``b`` minimizing the
    weighted log-loss against Platt's smoothed targets (``(n+ + 1) / (n+ + 2)`` for a
    positive, ``1 / (n- + 2)`` for a negative; ``n+``, ``n-`` the classes' weights), as
    scikit-learn does.
``isotonic``
    A non-decreasing step function of the score (scikit-learn's ``IsotonicRegression``,
    weighted), kept as its knots and applied by linear interpolation, clipped at the ends.

Applying either needs only NumPy.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..exceptions import ParameterError

__all__ = ["PROBABILITY_METHODS", "ProbabilityCalibration", "fit_probability_calibration"]

#: the calibrations ``probability=`` chooses from
PROBABILITY_METHODS = ("sigmoid", "isotonic")


@dataclasses.dataclass(frozen=True)
class ProbabilityCalibration:
    """A fitted map from scores to P(y = +1).

    Attributes
    ----------
    method : {"sigmoid", "isotonic"}
    a, b : float
        sigmoid: ``p = 1 / (1 + exp(-(a s + b)))``.
    knots, values : tuple of float
        isotonic: the step function's knots (increasing scores) and its values there.
    held_out : str
        Which rows it was fitted on: ``"validation"`` or ``"folds=K"``.
    n_rows : int
        How many (rows of positive weight).
    """

    method: str
    held_out: str
    n_rows: int
    a: float = 0.0
    b: float = 0.0
    knots: tuple[float, ...] = ()
    values: tuple[float, ...] = ()

    def probability(self, scores: np.ndarray) -> np.ndarray:
        """P(y = +1) of each score (float64)."""
        s = np.asarray(scores, dtype=np.float64)
        if self.method == "sigmoid":
            z = self.a * s + self.b
            with np.errstate(over="ignore"):
                return np.where(z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))), np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))))
        return np.interp(s, self.knots, self.values)  # np.interp clips at the end knots

    def to_dict(self) -> dict[str, Any]:
        """The model file's ``probability`` field."""
        d: dict[str, Any] = {"method": self.method, "held_out": self.held_out, "n_rows": self.n_rows}
        if self.method == "sigmoid":
            d.update(a=self.a, b=self.b)
        else:
            d.update(knots=list(self.knots), values=list(self.values))
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "model") -> ProbabilityCalibration:
        """Inverse of :meth:`to_dict`; a wrong field is one :class:`ParameterError` naming ``where``."""
        def bad(why: str) -> ParameterError:
            return ParameterError(f"{where}: field 'probability' {why}")

        if not isinstance(d, Mapping) or d.get("method") not in PROBABILITY_METHODS:
            raise bad(f"must be a mapping whose method is one of {', '.join(PROBABILITY_METHODS)}")
        base = {"method": d["method"], "held_out": str(d.get("held_out", "")), "n_rows": int(d.get("n_rows", 0))}
        if d["method"] == "sigmoid":
            a: Any = d.get("a")  # JSON as read: checked next
            b: Any = d.get("b")
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (a, b)):
                raise bad("needs finite numbers a and b (sigmoid)")
            return cls(**base, a=float(a), b=float(b))
        knots, values = d.get("knots"), d.get("values")
        try:
            k, v = np.asarray(knots, dtype=np.float64), np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise bad("needs lists of numbers knots and values (isotonic)") from None
        if k.ndim != 1 or k.size < 1 or k.shape != v.shape or not np.all(np.isfinite(k)) or np.any(np.diff(k) < 0) \
                or np.any(np.diff(v) < 0) or np.any((v < 0) | (v > 1)):
            raise bad("needs as many knots as values, knots non-decreasing, values non-decreasing in [0, 1] (isotonic)")
        return cls(**base, knots=tuple(map(float, k)), values=tuple(map(float, v)))


def _platt(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """Platt's ``(a, b)`` on scores ``s``, labels ``y`` in {0, 1} and weights ``w`` (standardized scores inside)."""
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    n_pos, n_neg = float(w[y == 1].sum()), float(w[y == 0].sum())  # weighted: a row of weight v counts as v rows
    t = np.where(y == 1, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    centre, scale = float(np.average(s, weights=w)), float(np.sqrt(np.average((s - np.average(s, weights=w)) ** 2, weights=w))) or 1.0
    z = (s - centre) / scale

    def loss(x: np.ndarray) -> tuple[float, np.ndarray]:
        u = x[0] * z + x[1]
        f = -float(np.sum(w * (t * log_expit(u) + (1 - t) * log_expit(-u))))
        r = w * (expit(u) - t)
        return f, np.array([float(r @ z), float(r.sum())])

    x0 = np.array([0.0, math.log((n_pos + 1.0) / (n_neg + 1.0))])
    res = minimize(loss, x0, jac=True, method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-14, "maxiter": 1000})
    a_z, b_z = float(res.x[0]), float(res.x[1])
    return a_z / scale, b_z - a_z * centre / scale


def fit_probability_calibration(method: str, scores: np.ndarray, y: np.ndarray, weight: np.ndarray | None, held_out: str) -> ProbabilityCalibration:
    """Fit ``method`` on held-out ``scores`` with labels ``y`` (+1 / -1 or 1 / 0) and ``weight``.

    Raises
    ------
    ParameterError
        An unknown method, or held-out rows without both classes (of positive weight).
    """
    if method not in PROBABILITY_METHODS:
        raise ParameterError(f"The 'probability' parameter must be one of {', '.join(map(repr, PROBABILITY_METHODS))}. Got {method!r} instead.")
    s = np.asarray(scores, dtype=np.float64)
    y01 = (np.asarray(y) > 0).astype(np.float64)
    w = np.ones_like(s) if weight is None else np.asarray(weight, dtype=np.float64)
    keep = w > 0
    s, y01, w = s[keep], y01[keep], w[keep]
    if not (np.any(y01 == 1) and np.any(y01 == 0)):
        raise ParameterError(f"probability={method!r}: the held-out rows ({held_out}) need both classes to fit a calibration; "
                             f"they have {int(y01.sum())} positive and {int((1 - y01).sum())} negative row(s)")
    if method == "sigmoid":
        a, b = _platt(s, y01, w)
        return ProbabilityCalibration(method, held_out, int(s.size), a=a, b=b)
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(s, y01, sample_weight=w)
    return ProbabilityCalibration(method, held_out, int(s.size), knots=tuple(map(float, iso.X_thresholds_)), values=tuple(map(float, iso.y_thresholds_)))
