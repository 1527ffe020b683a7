"""The model artifact: a versioned JSON file that loading and scoring read with numpy alone.

This module imports nothing from dask, zarr or pyarrow, so a serving process needs
only ``numpy`` and dpipe's standard-library modules to load a model and score rows.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._formats import MODEL_FORMAT
from .._locks import before_rename, destination_lock
from .._modes import current_umask as _umask
from .._ramp import ramp
from .._transform import FeatureTransform
from .._wide import NamePattern, compact_names, decode_vector, encode_vector, expand_names, is_pattern
from ..exceptions import OutputError, ParameterError
from ._probability import ProbabilityCalibration

if TYPE_CHECKING:
    from ..rates._report import ConstraintReport

__all__ = ["LinearModel", "MODEL_FORMAT", "MODEL_FORMAT_VERSION", "MAX_COEF_L1", "MAX_INTERCEPT"]

MODEL_FORMAT_VERSION = 1

#: Largest sum of ``|coef|`` a model may have: every feature a store holds is a finite float32
#: (``|x| <= 3.4e38``), so every partial sum of ``x . coef`` is at most ``sum |coef| * 3.4e38 <=
#: 1.8e308 / 4``, and with ``|intercept| <= 1.8e308 / 4`` a score computed in float64 is at most
#: half of float64's range: it cannot overflow, whatever the store, and neither can the difference
#: of two scores (about 1.3e269; any fitted model is far below).
MAX_COEF_L1 = float(np.finfo(np.float64).max) / (4.0 * float(np.finfo(np.float32).max))
#: Largest ``|intercept|`` (see :data:`MAX_COEF_L1`).
MAX_INTERCEPT = float(np.finfo(np.float64).max) / 4.0


def _weights_problem(coef: np.ndarray, intercept: float) -> tuple[str, str] | None:
    """(field, problem) when the weights let a score of float32 features overflow float64 (:data:`MAX_COEF_L1`), else None."""
    with np.errstate(over="ignore"):
        l1 = float(np.abs(coef).sum())
    if not l1 <= MAX_COEF_L1:
        return "coef", (f"the weights are too large: the sum of |coef| is {l1:.4g}, above {MAX_COEF_L1:.4g}, so the score of a "
                        "row of float32 features can overflow float64")
    if not abs(intercept) <= MAX_INTERCEPT:
        return "intercept", f"{intercept!r} is too large (|intercept| above {MAX_INTERCEPT:.4g}): scores can overflow float64"
    return None

_MAPPING_FIELDS = ("params", "encoding", "training", "fit", "metrics")
_STRING_FIELDS = ("objective", "created", "dpipe_version")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _kind(v: Any) -> str:
    """A short description of a JSON value for messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, str):
        return f"a string ({v[:40]!r})"
    if _is_number(v):
        return f"the number {v!r}"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _check_document(d: Any, where: str) -> None:
    """Check the model document's types and shapes; one :class:`ParameterError` naming ``where`` and the field.

    Done by hand rather than with a msgspec schema (as the store manifest is) so that
    loading a model keeps needing numpy alone (see the module docstring).
    """
    def bad(field: str, problem: str) -> ParameterError:
        return ParameterError(f"{where}: model field '{field}': {problem}")

    _check_format(d, where)
    for field in ("coef", "intercept"):
        if field not in d:
            raise bad(field, "missing")
    coef = _checked_coef(d["coef"], bad)
    intercept = d["intercept"]
    if not _is_number(intercept):
        raise bad("intercept", f"expected a number, got {_kind(intercept)}")
    if not math.isfinite(intercept):
        raise bad("intercept", f"expected a finite number, got {intercept!r}")
    problem = _weights_problem(np.asarray(coef, dtype=np.float64), float(intercept))
    if problem is not None:
        raise bad(*problem)
    _check_names(d.get("feature_names"), len(coef), where, bad)
    for field in _STRING_FIELDS:
        if d.get(field) is not None and not isinstance(d[field], str):
            raise bad(field, f"expected a string, got {_kind(d[field])}")
    for field in _MAPPING_FIELDS:
        if d.get(field) is not None and not isinstance(d[field], Mapping):
            raise bad(field, f"expected an object, got {_kind(d[field])}")


def _check_format(d: Any, where: str) -> None:
    """A JSON object marked as a dpipe model of the format version this dpipe reads."""
    if not isinstance(d, Mapping):
        raise ParameterError(f"{where}: not a dpipe model file (a JSON object is expected, got {_kind(d)})")
    if d.get("format") != MODEL_FORMAT:
        raise ParameterError(f"{where}: not a dpipe model file (format {d.get('format')!r})")
    version = d.get("format_version")
    if not (isinstance(version, int) and not isinstance(version, bool)) or version != MODEL_FORMAT_VERSION:
        raise ParameterError(f"{where}: unsupported model format_version {version!r} (this dpipe reads {MODEL_FORMAT_VERSION})")


def _checked_coef(coef: Any, bad: Callable[[str, str], ParameterError]) -> Any:
    """The weights, finite numbers: a list, or a wide model's base64 of little-endian float64 (decoded)."""
    if isinstance(coef, Mapping):
        try:
            coef = decode_vector(coef)
        except ValueError as exc:
            raise bad("coef", str(exc)) from None
        bad_at = np.flatnonzero(~np.isfinite(coef))
        if bad_at.size:
            raise bad(f"coef[{int(bad_at[0])}]", f"expected a finite number, got {float(coef[bad_at[0]])!r}")
        return coef
    if not isinstance(coef, list):
        raise bad("coef", f"expected a list of numbers, got {_kind(coef)}")
    for i, v in enumerate(coef):
        if not _is_number(v):
            raise bad(f"coef[{i}]", f"expected a number, got {_kind(v)}")
        if not math.isfinite(v):
            raise bad(f"coef[{i}]", f"expected a finite number, got {v!r}")
    return coef


def _check_names(names: Any, n_weights: int, where: str, bad: Callable[[str, str], ParameterError]) -> None:
    """``feature_names``, when given: strings (or a name pattern), one per weight."""
    if is_pattern(names):
        try:
            names = expand_names(names, where)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
    if names is None:
        return
    if not isinstance(names, (list, NamePattern)):
        raise bad("feature_names", f"expected a list of strings, got {_kind(names)}")
    for i, v in enumerate(names if isinstance(names, list) else ()):  # a pattern's names are strings
        if not isinstance(v, str):
            raise bad(f"feature_names[{i}]", f"expected a string, got {_kind(v)}")
    if len(names) != n_weights:
        raise bad("feature_names", f"{len(names)} names for {n_weights} weights in 'coef'")


def _is_sparse(X: Any) -> bool:
    """A scipy.sparse matrix or array (told without importing scipy)."""
    return not isinstance(X, np.ndarray) and callable(getattr(X, "tocsr", None)) and hasattr(X, "nnz")


class LinearModel:
    """A linear scoring rule ``s(x) = x.coef + intercept`` with its provenance.

    Parameters
    ----------
    coef : array-like of shape (d,)
        Feature weights.
    intercept : float
        Added to every score; ``predict`` labels a row +1 when its score is > 0.
    feature_names : list of str, optional
        One per weight.
    objective : str
        Objective the model was trained for ("auc-moment", "error-moment", ...).
    params : dict
        Hyper-parameters of the fit.
    encoding : dict
        The training store's encoding (categorical vocabularies, column roles, and the
        fitted feature transform ``encoding["transform"]`` if the store has one), so raw
        CSV-like records can be scored with :meth:`score_records` and raw feature rows with
        ``decision_function(X, raw=True)``.
    training : dict
        Training store path, manifest sha256, rows and class counts.
    fit : dict
        The fit record (``FitResult.to_dict()``).
    metrics : dict
        Metrics measured after training (e.g. ``{"train": {...}}``).
    probability : ProbabilityCalibration or dict, optional
        The map from scores to probabilities fitted on held-out rows (``train(probability=)``),
        which :meth:`predict_proba` applies.
    """

    def __init__(
        self,
        coef: Sequence[float] | np.ndarray,
        intercept: float = 0.0,
        *,
        feature_names: Sequence[str] | None = None,
        objective: str = "",
        params: Mapping[str, Any] | None = None,
        encoding: Mapping[str, Any] | None = None,
        training: Mapping[str, Any] | None = None,
        fit: Mapping[str, Any] | None = None,
        metrics: Mapping[str, Any] | None = None,
        probability: ProbabilityCalibration | Mapping[str, Any] | None = None,
        created: str | None = None,
        dpipe_version: str | None = None,
    ) -> None:
        self.coef = np.asarray(coef, dtype=np.float64).reshape(-1)
        self.intercept = float(intercept)
        #: the names, a list or (a wide model's) :class:`~dpipe._wide.NamePattern`
        self.feature_names: Sequence[str] = (feature_names if isinstance(feature_names, NamePattern) else list(feature_names) if feature_names is not None
                                             else [f"x{i}" for i in range(self.coef.size)])
        if len(self.feature_names) != self.coef.size:
            raise ValueError(f"LinearModel: {len(self.feature_names)} feature names for {self.coef.size} weights")
        if not (np.all(np.isfinite(self.coef)) and math.isfinite(self.intercept)):
            raise ValueError("LinearModel: weights and intercept must be finite")
        problem = _weights_problem(self.coef, self.intercept)
        if problem is not None:
            raise ValueError(f"LinearModel: {problem[0]}: {problem[1]}")
        #: the file the model was loaded from (:meth:`load`), named by errors; None for a model built in memory
        self.path: str | None = None
        self.objective = objective
        self.params = dict(params or {})
        self.encoding = dict(encoding or {})
        self.training = dict(training or {})
        self.fit = dict(fit or {})
        self.metrics = dict(metrics or {})
        #: the probability calibration (None: the model gives scores and labels, no probabilities)
        self.probability = ProbabilityCalibration.from_dict(probability) if isinstance(probability, Mapping) else probability
        self._name_index: dict[str, int] | None = None  # feature name -> column, built on the first sparse record
        self.created = created or _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        if dpipe_version is None:
            from .._version import __version__ as dpipe_version
        self.dpipe_version = dpipe_version

    def __repr__(self) -> str:
        return f"LinearModel(objective={self.objective!r}, n_features={self.n_features}, intercept={self.intercept:.6g})"

    @property
    def n_features(self) -> int:
        """Number of weights."""
        return int(self.coef.size)

    # -- scoring --------------------------------------------------------------------
    @property
    def transform(self) -> FeatureTransform | None:
        """The training store's fitted feature transform (``log1p`` / ``scale`` at ingest), or None."""
        d = self.encoding.get("transform")
        return None if d is None else FeatureTransform.from_dict(d, self.feature_names, "LinearModel")

    def transform_rows(self, X: np.ndarray) -> np.ndarray:
        """Raw feature rows as the training store holds them: rounded to float32, then the store's
        transform applied (float32 array; without a transform, only the rounding)."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"LinearModel: X has shape {X.shape}; expected (n, {self.n_features})")
        t = self.transform
        return X.astype(np.float32) if t is None else t.apply(X, where="LinearModel")

    def decision_function(self, X: np.ndarray, *, raw: bool = False) -> np.ndarray:
        """Scores ``X @ coef + intercept`` in float64, shape (n,).

        Parameters
        ----------
        X : array or scipy.sparse matrix of shape (n, n_features)
            Features as the training store holds them, or (``raw=True``) as the source
            gives them before the store's transform (:meth:`transform_rows`). A sparse
            matrix (CSR, CSC, COO, ...) is multiplied as it is, in O(nnz), never densified.
        raw : bool
            Apply the training store's transform first; the scores are then identical to
            those of the same rows ingested ``--like`` the training store.

        Raises
        ------
        ValueError
            A score is not finite (a NaN or infinite feature, or float64 features so large
            that the score overflows): one line naming the model (its file when loaded) and
            the row. Rows of float32 features never overflow: the weights are bounded
            (:data:`MAX_COEF_L1`, checked when a model is built or loaded).
        """
        if _is_sparse(X):
            return self._sparse_scores(X, raw)
        if raw:
            X = self.transform_rows(X)
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"LinearModel: X has shape {X.shape}; expected (n, {self.n_features})")
        if X.dtype.kind not in "fc":
            X = X.astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):  # float64 arithmetic (float32 rows are widened); checked below
            s = X @ self.coef + self.intercept
        if not np.isfinite(s).all():  # O(n); the row is looked for only when a score is not finite
            raise ValueError(self._non_finite(X, s))
        return s

    def _sparse_scores(self, X: Any, raw: bool) -> np.ndarray:
        """:meth:`decision_function` of a scipy.sparse matrix (as CSR; its own product, so this module imports no scipy)."""
        X = X.tocsr()
        if raw and self.transform is not None:  # a transform that keeps zeros (log1p, maxabs) keeps the rows sparse
            X = self.transform.apply(X, where=self.path or "LinearModel")
        if len(X.shape) != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"LinearModel: X has shape {X.shape}; expected (n, {self.n_features})")
        with np.errstate(over="ignore", invalid="ignore"):
            s = np.asarray(X @ self.coef, dtype=np.float64) + self.intercept
        if not np.isfinite(s).all():
            r = int(np.argmax(~np.isfinite(s)))
            raise ValueError(self._non_finite(X[[r]].toarray(), s[r : r + 1]).replace("row 0", f"row {r}", 1))
        return s

    def _non_finite(self, X: np.ndarray, s: np.ndarray) -> str:
        """One line naming the model and the first row whose score is not finite, and why."""
        r = int(np.argmax(~np.isfinite(s)))
        where = f"{self.path or 'LinearModel'}: row {r}"
        bad = np.flatnonzero(~np.isfinite(X[r]))
        if bad.size:
            j = int(bad[0])
            return f"{where}: feature {j} ({self.feature_names[j]}) is {float(X[r, j])!r}; scores need finite features"
        return (f"{where}: the score is {float(s[r])!r}: it overflows float64 (features up to {float(np.abs(X[r]).max()):.4g} "
                f"with weights whose |coef| sum to {float(np.abs(self.coef).sum()):.4g})")

    @property
    def constraint_reports(self) -> list[ConstraintReport]:
        """A rate fit's constraints on its training rows: value, interval, verdict, rates, multiplier (empty for
        other objectives; read from the fit record)."""
        from ..rates._report import reports_from_records

        return reports_from_records(self.fit.get("info", {}).get("constraints"))

    @property
    def validation_constraint_reports(self) -> list[ConstraintReport] | None:
        """The same on the validation rows that set a rate fit's threshold (``constraint_validation``,
        ``validation_fraction``), or None (the training rows did, or no rate fit)."""
        from ..rates._report import reports_from_records

        records = self.fit.get("info", {}).get("constraints_validation")
        return None if records is None else reports_from_records(records)

    @property
    def randomized(self) -> bool:
        """Whether the model is the paper's randomized classifier (``threshold_rule="randomized"``): a row is
        predicted positive with probability :meth:`positive_probability`, not when its score is > 0."""
        return self.params.get("threshold_rule") == "randomized"

    def positive_probability(self, X: np.ndarray, *, raw: bool = False) -> np.ndarray:
        """A randomized model's probability of predicting each row positive: ``clip(1/2 + score, 0, 1)`` (the ramp)."""
        if not self.randomized:
            raise ValueError("LinearModel: positive_probability is a randomized model's (threshold_rule='randomized'); "
                             "this one predicts positive where the score is > 0")
        return ramp(self.decision_function(X, raw=raw))

    def predict_proba(self, X: Any, *, raw: bool = False) -> np.ndarray:
        """Calibrated probabilities ``[P(y = -1), P(y = +1)]`` of each row, shape (n, 2), from the calibration fitted on
        held-out rows (:attr:`probability`). ``X`` and ``raw``: as in :meth:`decision_function`.

        Raises
        ------
        ValueError
            The model has no calibration (trained without ``probability=``).
        """
        if self.probability is None:
            raise ValueError(f"{self.path or 'LinearModel'}: this model has no probability calibration; train it with probability='sigmoid' "
                             "or 'isotonic' (dpipe train --probability ...), which fits one on held-out rows")
        p = self.probability.probability(self.decision_function(X, raw=raw))
        return np.column_stack([1.0 - p, p])

    def predict(self, X: np.ndarray, random_state: int | np.random.Generator | None = None, *, raw: bool = False) -> np.ndarray:
        """Labels in {-1, +1}: +1 where the score is > 0; for a randomized model, +1 with probability
        :meth:`positive_probability`, drawn from ``random_state`` (a seed or a NumPy Generator).
        ``raw``: as in :meth:`decision_function`."""
        if not self.randomized:
            if random_state is not None:
                raise ValueError("LinearModel: random_state applies to randomized models (threshold_rule='randomized'); this one is deterministic")
            return np.where(self.decision_function(X, raw=raw) > 0, 1, -1).astype(np.int8)
        p = self.positive_probability(X, raw=raw)
        return np.where(np.random.default_rng(random_state).random(p.size) < p, 1, -1).astype(np.int8)

    def encode_records(self, records: Iterable[Mapping[str, Any] | Sequence[Any]]) -> Any:
        """Turn raw source records into the feature matrix the model was trained on.

        Parameters
        ----------
        records : iterable of mappings or sequences, pandas DataFrame or pyarrow Table
            Tabular training data: mappings (column name -> raw value), sequences (values
            in the source's column order, label column included or not), or a table with the
            feature columns (by name; other columns are ignored). svmlight training
            data: sparse mappings (feature name, as in :attr:`feature_names`, -> value; the
            features a record leaves out are 0).

        Returns
        -------
        ndarray of shape (n, d), float64, or scipy.sparse.csr_array
            The values the training store would hold for these records. Tabular: numeric
            columns parsed as floats, categorical ones one-hot encoded with the training
            vocabulary (an unseen value gives all zeros), rounded to float32 and transformed by
            the store's fitted transform if it has one (:meth:`transform_rows`); with feature
            hashing (``ingest(hash_features=)``) the columns hashed as ingest hashed them, as
            CSR rows (a missing value, None, is the category ``"?"``; a token-list column takes
            a list of strings, a map column a mapping of string to number). svmlight: CSR rows.
        """
        enc = self.encoding
        if enc.get("kind") == "svmlight":
            return self._sparse_records(records)
        if enc.get("kind") != "tabular":
            raise ValueError(f"LinearModel: raw records can be encoded only for tabular (CSV/Parquet) or svmlight training data, not {enc.get('kind')!r}")
        from ..io._frames import is_frame, record_arrays, table_arrays
        from ..io._tabular import Column, Rows, TabularEncoder, TabularSchema

        where = self.path or "LinearModel"
        columns = enc["columns"]
        names = [c["name"] for c in columns]
        feature_cols = [c for c in columns if c.get("role") in ("feature", "group")]  # a group column stays a feature
        cols = [Column(c["name"], "feature", c.get("type", "numeric"), c.get("categories")) for c in feature_cols]
        if is_frame(records):  # a pandas DataFrame or pyarrow table
            have, arrays = table_arrays(records, where=f"{where}: records")
            lacking = [c.name for c in cols if c.name not in have]
            if lacking:
                raise ValueError(f"{where}: the records lack the column(s) {lacking}")
            arrays = [arrays[have.index(c.name)] for c in cols]
        else:
            rows = []
            for i, rec in enumerate(records):
                if not isinstance(rec, Mapping):
                    rec = list(rec)
                    if len(rec) == len(names):
                        rec = dict(zip(names, rec))
                    elif len(rec) == len(feature_cols):
                        rec = {c["name"]: v for c, v in zip(feature_cols, rec)}
                    else:
                        raise ValueError(f"{where}: record {i} has {len(rec)} values; expected {len(names)} (all columns) "
                                         f"or {len(feature_cols)} (feature columns)")
                rows.append(rec)
            arrays = record_arrays(rows, cols, where=f"{where}: records")
        n = len(arrays[0]) if arrays else 0
        hashing = None
        if enc.get("hashing") is not None:
            from ..io._hashing import FeatureHashing

            hashing = FeatureHashing.from_dict(enc["hashing"], f"{where}: encoding")
        encoder = TabularEncoder(TabularSchema(cols, hashing), {})
        if hashing is not None:  # hashed columns: CSR rows, as ingest wrote them
            X = encoder.encode_csr(arrays, Rows("records", n))[0]
            return X if self.transform is None else self.transform.apply(X, where=where)
        X = encoder.encode(arrays, Rows("records", n))[0]  # one-hot with the training vocabulary: an unseen value gives zeros
        if X.shape[1] != self.n_features:
            raise ValueError(f"{where}: encoding gives {X.shape[1]} features; the model has {self.n_features}")
        return self.transform_rows(X).astype(np.float64)

    def _sparse_records(self, records: Iterable[object]) -> Any:
        """CSR rows of sparse records ``{feature name: value}`` (svmlight training data); an unknown name is an error."""
        from ..reduce._block import csr_block

        if self._name_index is None and not isinstance(self.feature_names, NamePattern):  # a pattern parses a name
            self._name_index = {name: j for j, name in enumerate(self.feature_names)}
        indptr: list[int] = [0]
        indices: list[int] = []
        values: list[float] = []
        for i, rec in enumerate(records):
            if not isinstance(rec, Mapping):
                raise ValueError(f"LinearModel: record {i} is a {type(rec).__name__}; svmlight-trained models score mappings of feature name -> value")
            row = sorted((self._feature_index(name, i), float(v)) for name, v in rec.items())
            indices.extend(j for j, _ in row)
            values.extend(v for _, v in row)
            indptr.append(len(indices))
        X = csr_block(np.asarray(values, dtype=np.float32), np.asarray(indices, dtype=np.int64), np.asarray(indptr, dtype=np.int64), self.n_features)
        X.sum_duplicates()
        return X if self.transform is None else self.transform.apply(X, where="LinearModel")

    def _feature_index(self, name: Any, record: int) -> int:
        try:
            if isinstance(self.feature_names, NamePattern):
                return self.feature_names.index(name)
            assert self._name_index is not None  # made by _sparse_records
            return self._name_index[name]
        except (KeyError, ValueError):
            raise ValueError(f"LinearModel: record {record} names feature {name!r}, which the model does not have "
                             f"({self.n_features} features: {', '.join(map(str, self.feature_names[:3]))}, ...)") from None

    def score_records(self, records: Iterable[Mapping[str, Any] | Sequence[Any]]) -> np.ndarray:
        """Scores of raw records (see :meth:`encode_records`)."""
        return self.decision_function(self.encode_records(records))

    # -- persistence ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON document written by :meth:`save`."""
        return {
            "format": MODEL_FORMAT,
            "format_version": MODEL_FORMAT_VERSION,
            "dpipe_version": self.dpipe_version,
            "created": self.created,
            "objective": self.objective,
            "params": self.params,
            "coef": encode_vector(self.coef),
            "intercept": self.intercept,
            "feature_names": compact_names(self.feature_names),
            "encoding": self.encoding,
            "training": self.training,
            "fit": self.fit,
            "metrics": self.metrics,
            **({} if self.probability is None else {"probability": self.probability.to_dict()}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "model") -> LinearModel:
        """Build from the JSON document; checks format, version and every field's type and shape.

        Raises
        ------
        ParameterError
            One line naming ``where`` and the field that is wrong.
        """
        _check_document(d, where)
        coef = decode_vector(d["coef"]) if isinstance(d["coef"], Mapping) else d["coef"]
        names = d.get("feature_names")
        names = expand_names(names, where) if is_pattern(names) else names
        encoding = d.get("encoding") or {}
        if encoding.get("transform") is not None:
            try:
                FeatureTransform.from_dict(encoding["transform"], names or [f"x{i}" for i in range(len(coef))], f"{where}: encoding")
            except ValueError as exc:
                raise ParameterError(str(exc)) from None
        return cls(
            coef,
            d["intercept"],
            feature_names=names,
            objective=d.get("objective", ""),
            params=d.get("params"),
            encoding=d.get("encoding"),
            training=d.get("training"),
            fit=d.get("fit"),
            metrics=d.get("metrics"),
            probability=None if d.get("probability") is None else ProbabilityCalibration.from_dict(d["probability"], where),
            created=d.get("created"),
            dpipe_version=d.get("dpipe_version", ""),
        )

    def save(self, path: str | os.PathLike) -> str:
        """Write the model as JSON (to a temporary name, then renamed). Returns the path.

        Replaces an existing ``path``: the callers that take a user's path check it first
        (:func:`dpipe.train`'s ``out=``: never a file inside a store or a registry, an existing
        one only with ``overwrite``). Holds the destination's lock while writing
        (:func:`dpipe._locks.destination_lock`: one writer of ``path`` at a time).

        Raises
        ------
        OutputError
            The file cannot be written (a full disk, a file-size limit, a read-only
            directory): one line naming ``path``; no temporary is left.
        DestinationBusyError
            Another process is writing ``path``.
        """
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        with destination_lock(path, "model"):
            tmp = None
            try:
                fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp-", dir=directory)
                os.fchmod(fd, 0o666 & ~_umask())  # what open() would give: mkstemp makes it 0600
                with os.fdopen(fd, "w") as f:
                    json.dump(self.to_dict(), f, indent=1, allow_nan=False)
                    f.write("\n")
                before_rename(path)  # no signal received, and the lock still this process's
                os.replace(tmp, path)
            except BaseException as exc:
                if tmp is not None and os.path.exists(tmp):
                    os.unlink(tmp)
                if isinstance(exc, OSError) and not isinstance(exc, OutputError):
                    raise OutputError(f"{path}: cannot write the model: {exc.strerror or exc}") from exc
                raise
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> LinearModel:
        """Read a model written by :meth:`save`.

        Raises
        ------
        ParameterError
            One line naming ``path`` (and the field): a directory, not valid JSON, not a
            dpipe model, an unsupported version, or a field of the wrong type or shape.
        FileNotFoundError, PermissionError
            The file cannot be opened.
        """
        path = os.fspath(path)
        if os.path.isdir(path):
            raise ParameterError(f"{path}: is a directory, not a dpipe model file")
        try:
            with open(path, "rb") as f:
                d = json.load(f)
        except IsADirectoryError:
            raise ParameterError(f"{path}: is a directory, not a dpipe model file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ParameterError(f"{path}: model file is not valid JSON ({exc})") from None
        except RecursionError:
            raise ParameterError(f"{path}: model file is not valid JSON (nested too deeply)") from None
        model = cls.from_dict(d, where=path)
        model.path = path
        return model

    def digest(self) -> str:
        """sha256 of the weights and intercept (identifies a model in logs and workflows)."""
        h = hashlib.sha256(self.coef.tobytes())
        h.update(np.float64(self.intercept).tobytes())
        return h.hexdigest()


def deployed_model(path: str | os.PathLike) -> tuple[np.ndarray, float]:
    """``(coef, intercept)`` of a saved dpipe model (its prediction: ``X coef + intercept > 0``): the deployed model a churn
    constraint compares with."""
    model = LinearModel.load(path)
    return np.asarray(model.coef, dtype=np.float64), float(model.intercept)
