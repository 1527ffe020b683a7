"""A scikit-learn-style estimator over NumPy or dask arrays."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ._train import MOMENT_OBJECTIVES, calibrate_threshold, check_fit_params, fit_moments, fit_on_dataset
from .engine import LocalDataset
from .io import Shard
from .exceptions import ParameterError
from .metrics import RankSummary
from .model import LinearModel
from .reduce import ClassMoments, merge_moments, shard_moments

__all__ = ["DPipeClassifier"]


def _is_dask(a: Any) -> bool:
    return type(a).__module__.startswith("dask.")


def _dask_moments(X, y_pm) -> ClassMoments:
    import dask

    X = X.rechunk({1: -1})
    y_pm = y_pm.rechunk((X.chunks[0],))
    parts = [dask.delayed(shard_moments)(xb, yb) for xb, yb in zip(X.to_delayed().ravel(), y_pm.to_delayed().ravel())]
    while len(parts) > 1:
        merged = [dask.delayed(merge_moments)(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            merged.append(parts[-1])
        parts = merged
    return parts[0].compute()


class DPipeClassifier:
    """Linear classifier trained for a chosen measure, with the scikit-learn API.

    Parameters
    ----------
    objective : str
        What to optimize: "auc-moment", "error-moment", "auc-smooth",
        "prbep-smooth", or SVM-perf's "rocarea", "prbep", "f1", "prec@k", "rec@k",
        "error" (see :func:`dpipe.train`; all but the moment objectives take NumPy
        input only).
    solver : str, optional
        Solver for the objective (default: the objective's first).
    lam, C, ridge, max_iter, tol, memory, smoothing, epsilon, mu_scale, continuation, standardize, precondition, init, eps, k, k_fraction, bias, calibrate
        As in :func:`dpipe.train`.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features)
    intercept_ : ndarray of shape (1,)
    classes_ : ndarray of shape (2,)
        The two labels; ``classes_[1]`` is the positive class.
    n_features_in_ : int
    fit_result_ : FitResult

    Notes
    -----
    ``fit`` accepts NumPy arrays (one in-process pass) and dask arrays (one task per
    row block, merged by a tree reduction on the current dask scheduler).
    """

    def __init__(
        self,
        objective: str = "auc-moment",
        *,
        solver: str | None = None,
        lam: float | None = None,
        C: float | None = None,
        ridge: float = 1e-6,
        max_iter: int | None = None,
        tol: float | None = None,
        memory: int | None = None,
        smoothing: float | None = None,
        epsilon: float = 1e-3,
        mu_scale: float = 1.0,
        continuation: bool = False,
        standardize: bool = False,
        precondition: bool | str = False,
        init: str = "zeros",
        eps: float = 1e-3,
        k: int | None = None,
        k_fraction: float | None = None,
        bias: float = 1.0,
        calibrate: bool | None = None,
    ) -> None:
        self.objective = objective
        self.solver = solver
        self.lam = lam
        self.C = C
        self.ridge = ridge
        self.max_iter = max_iter
        self.tol = tol
        self.memory = memory
        self.smoothing = smoothing
        self.epsilon = epsilon
        self.mu_scale = mu_scale
        self.continuation = continuation
        self.standardize = standardize
        self.precondition = precondition
        self.init = init
        self.eps = eps
        self.k = k
        self.k_fraction = k_fraction
        self.bias = bias
        self.calibrate = calibrate

    # -- scikit-learn protocol ---------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> DPipeClassifier:
        """Set constructor parameters; unknown names are an error."""
        valid = self._param_names()
        for key, value in params.items():
            if key not in valid:
                raise ParameterError(f"Invalid parameter {key!r} for DPipeClassifier. Valid parameters: {', '.join(valid)}.")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values() if p.name != "self"}
        changed = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if v != defaults[k])
        return f"DPipeClassifier({changed})"

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> DPipeClassifier:
        """Fit on features ``X`` (n, d) and two-valued labels ``y`` (n,)."""
        params = check_fit_params(
            self.objective, self.solver, "DPipeClassifier", lam=self.lam, C=self.C, ridge=self.ridge, max_iter=self.max_iter, tol=self.tol,
            memory=self.memory, smoothing=self.smoothing, epsilon=self.epsilon, mu_scale=self.mu_scale, continuation=self.continuation,
            standardize=self.standardize, precondition=self.precondition, init=self.init, eps=self.eps, k=self.k, k_fraction=self.k_fraction, bias=self.bias,
            calibrate=self.calibrate,
        )
        if _is_dask(X) or _is_dask(y):
            import dask.array as da

            X, y = da.asarray(X), da.asarray(y)
            classes = np.unique(np.asarray(da.unique(y).compute()))
        else:
            X, y = np.asarray(X), np.asarray(y).ravel()
            classes = np.unique(y)
        if X.ndim != 2 or X.shape[0] != y.shape[0]:
            raise ParameterError(f"DPipeClassifier.fit: X has shape {X.shape} and y {y.shape}; expected (n, d) and (n,)")
        if classes.size != 2:
            raise ParameterError(f"DPipeClassifier.fit: y must have exactly two classes; got {classes.size} ({classes[:5].tolist()})")
        if sample_weight is not None and (_is_dask(X) or _is_dask(y)):
            raise ParameterError("DPipeClassifier.fit: sample_weight is supported for NumPy input only")
        if params["objective"] not in MOMENT_OBJECTIVES:
            if _is_dask(X):
                raise ParameterError(f"DPipeClassifier.fit: objective {params['objective']!r} takes NumPy input; use dpipe.train on a store for out-of-core data")
            y_pm = np.where(y == classes[1], 1, -1).astype(np.int8)
            ds = LocalDataset([Shard(X=np.ascontiguousarray(X, dtype=np.float32), y=y_pm)])
            coef, intercept, result = fit_on_dataset(ds, int((y_pm > 0).sum()), int((y_pm < 0).sum()), params)
        else:
            if _is_dask(X):
                y_pm = (2 * (y == classes[1]) - 1).astype(np.int8)
                moments = _dask_moments(X, y_pm)
            else:
                y_pm = np.where(y == classes[1], 1, -1).astype(np.int8)
                w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
                with threadpool_limits(limits=1, user_api="blas"):  # bitwise equal to a dask worker's result
                    moments = shard_moments(X, y_pm, w)
            coef, intercept, result = fit_moments(moments, params)
        if params["calibrate"]:
            if _is_dask(X):
                y_np = np.asarray(y_pm.compute())
                summarise = lambda w, b: RankSummary.from_scores(y_np, np.asarray((X @ w + b).compute()))  # noqa: E731
            else:
                summarise = lambda w, b: RankSummary.from_scores(y_pm, X @ w + b)  # noqa: E731
            coef, intercept, _, _ = calibrate_threshold(coef, intercept, result, summarise)
        else:
            result.info.pop("candidates", None)
        self.coef_ = coef.reshape(1, -1)
        self.intercept_ = np.array([intercept])
        self.classes_ = classes
        self.n_features_in_ = int(X.shape[1])
        self.fit_result_ = result
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise ParameterError("This DPipeClassifier instance is not fitted yet. Call 'fit' first.")

    def decision_function(self, X: Any) -> Any:
        """Scores ``X @ coef_.T + intercept_``, shape (n,); lazy for dask arrays."""
        self._check_fitted()
        return X @ self.coef_[0] + self.intercept_[0]

    def predict(self, X: Any) -> Any:
        """``classes_[1]`` where the score is > 0, else ``classes_[0]``."""
        s = self.decision_function(X)
        if _is_dask(s):
            return s.map_blocks(lambda b: self.classes_[(b > 0).astype(int)], dtype=self.classes_.dtype)
        return self.classes_[(np.asarray(s) > 0).astype(int)]

    def score(self, X: Any, y: Any) -> float:
        """Accuracy of :meth:`predict` (the scikit-learn classifier convention)."""
        return float(np.mean(np.asarray(self.predict(X)) == np.asarray(y)))

    def to_model(self, feature_names: list[str] | None = None) -> LinearModel:
        """The fitted rule as a :class:`LinearModel` (to save, evaluate or serve)."""
        self._check_fitted()
        return LinearModel(
            self.coef_[0], self.intercept_[0], feature_names=feature_names, objective=self.objective,
            params=self.get_params(), fit=self.fit_result_.to_dict(),
        )
