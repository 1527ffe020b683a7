"""``DPipeClassifier``: the fit layer as a scikit-learn estimator, over NumPy, pandas, scipy sparse or dask arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_consistent_length, check_is_fitted, column_or_1d, validate_data

from ._ramp import ramp
from ._validation import check_choice
from .engine import LocalDataset
from .engine._cluster_spec import ENGINES
from .engine._passes import class_totals
from .exceptions import ParameterError
from .fit import DEFAULT_OBJECTIVE, OBJECTIVES, finish_fit, fit_dataset, fit_probability, model_params, resolve
from .fit._early_stopping import make_validator, stopping_rounds
from .fit._params import numpydoc
from .io import Shard
from .io._frames import TABLE_UNSEEN, encode_table, is_frame, is_table, scan_table, table_arrays, table_encoding
from .io._tabular import TabularSchema
from .model import LinearModel
from .reduce._block import block_of_input

__all__ = ["DPipeClassifier"]

#: rows per in-memory shard (each one task, as a store's shard would be)
ESTIMATOR_SHARD_ROWS = 65536


def _sample_weight(sample_weight: Any, n: int) -> np.ndarray:
    """``sample_weight`` as ``n`` finite, non-negative float64 weights (a number weighs every row alike), or a ValueError."""
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise ValueError(f"sample_weight.shape == {w.shape}, expected ({n},)!")
    if not np.all(np.isfinite(w)):
        raise ValueError("Input sample_weight contains NaN or infinity.")
    if np.any(w < 0):
        raise ValueError("Negative values in data passed to `sample_weight`")
    if not np.any(w > 0):
        raise ValueError("Sample weights must contain at least one non-zero number.")
    return w


def _check_two_classes(classes: np.ndarray) -> None:
    if classes.size != 2:
        raise ValueError(f"Only binary classification is supported. DPipeClassifier needs exactly two classes in y; got {classes.size} "
                         f"class(es) ({classes[:5].tolist()}).")


def _is_dask(a: Any) -> bool:
    return type(a).__module__.startswith("dask.")


def _vocabulary_and_rows(part: Any, index: int) -> tuple[list[dict[str, Any]], int]:
    """A pandas partition's vocabularies (:func:`~dpipe.engine._collection.partition_vocabulary`) and its row count, in one task."""
    from .engine._collection import partition_vocabulary

    return partition_vocabulary(part, index), len(part)


def _labels_and_rows(part: Any) -> tuple[np.ndarray, int]:
    """A pandas partition of the labels' distinct values and its length, in one task."""
    import pandas as pd

    return np.asarray(pd.unique(part)), len(part)


def _partition_where(index: int, count: int, start: int, stop: int) -> str:
    """A dask partition (or row block) in error messages: ``"X partition 2 of 4 (rows 20-29)"``, rows numbered globally from 0."""
    return f"X partition {index} of {count} (rows {start}-{stop - 1})"


def _bad_value(b: Any, names: list[str] | None) -> tuple[int, Any, str] | None:
    """The first value of a block that is not a finite number, as ``(row in the block, column, what it is)``; None if all are."""
    name = lambda j: names[j] if names else int(j)  # noqa: E731 - the column as fit saw it: its name, else its index
    if hasattr(b, "tocsr"):  # a sparse block: only its stored values can be bad
        csr = b.tocsr()
        bad = np.flatnonzero(~np.isfinite(csr.data))
        if bad.size == 0:
            return None
        k = int(bad[0])
        i = int(np.searchsorted(csr.indptr, k, side="right")) - 1
        return i, name(csr.indices[k]), "NaN" if np.isnan(csr.data[k]) else "infinity"
    try:
        values = np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError):  # a value that is not a number: found cell by cell (the error path only)
        for i, row in enumerate(np.asarray(b, dtype=object)):
            for j, v in enumerate(row):
                try:
                    float(v)
                except (TypeError, ValueError):
                    return i, name(j), f"non-numeric value {v!r}"
        raise  # pragma: no cover - the conversion failed, so some cell does
    bad_cells = np.argwhere(~np.isfinite(values))
    if bad_cells.size == 0:
        return None
    i, j = (int(v) for v in bad_cells[0])
    return i, name(j), "NaN" if np.isnan(values[i, j]) else "infinity"


def _dask_block_scores(b: Any, coef: np.ndarray, intercept: float, names: list[str] | None, block_info: Any = None) -> np.ndarray:
    """Scores of one row block of a dask array (on a worker); a value that is not a finite number is a ValueError naming
    the block, the global row and the column."""
    problem = _bad_value(b, names)
    if problem is not None:
        i, column, what = problem
        info = (block_info or {}).get(0)
        if info is None:  # pragma: no cover - dask passes block_info to every block
            raise ValueError(f"X: row {i}, column {column!r}: {what}; DPipeClassifier needs finite numbers")
        start, stop = info["array-location"][0]
        where = _partition_where(info["chunk-location"][0], info["num-chunks"][0], start, stop)
        raise ValueError(f"{where}: row {start + i}, column {column!r}: {what}; DPipeClassifier needs finite numbers")
    scores = b @ coef if hasattr(b, "tocsr") else np.asarray(b, dtype=np.float64) @ coef
    return np.asarray(scores, dtype=np.float64).ravel() + intercept


class DPipeClassifier(ClassifierMixin, BaseEstimator):
    """Linear classifier trained for a chosen measure, with the scikit-learn API.

    The hyper-parameters are those of :func:`dpipe.train` (declared once in
    :data:`dpipe.fit.PARAMS`); ``None`` means the objective's default, and an option
    that does not apply to the objective is a :class:`~dpipe.exceptions.ParameterError`
    at ``fit``. Binary classification only; ``classes_[1]`` is the positive class.

    ``fit`` takes NumPy arrays, pandas DataFrames (feature names are kept), scipy
    sparse matrices (kept sparse: CSR shards of 65,536 rows, O(nnz) per pass) and dask arrays or DataFrames.

    **Dask collections** are fitted where their partitions live when a distributed client
    is current (as ``xgboost.dask`` does): each row block becomes a shard on its worker
    (:mod:`dpipe.engine._collection`), the passes run there, and the driver receives
    reduced results - the class moments, the gradients, the threshold's range counts -
    not the rows (measured: 0.57 MB received for a 1.6-million-row, 128 MB fit of
    auc-moment). Blocks of :data:`ESTIMATOR_SHARD_ROWS` rows give exactly the in-memory
    model; other block sizes sum in another order, so the iterative solvers' models agree
    to their stopping rule. A DataFrame with string columns is scanned and encoded
    partition by partition where it lives (only each column's vocabulary comes to the
    driver). With ``engine="auto"`` (the default) a collection below the cluster's
    break-even and the driver's memory bound has the same shards built on the workers and
    brought here, once, and is fitted in this process's threads, with the same model bit
    for bit (:func:`~dpipe.engine._collection.collection_engine`; the choice and its reason
    are logged). Without a distributed client, with ``groups`` or with ``engine="local"``,
    the collection is computed into memory on the current scheduler first.
    ``decision_function`` and ``predict`` on dask collections stay lazy.

    **Tables.** A pandas DataFrame with string, categorical or object columns, or a
    pyarrow Table, is encoded as ``dpipe ingest`` encodes a CSV or Parquet file - by
    the same classes: numeric columns as they are, the others one-hot with a sorted
    vocabulary (strings stripped; a missing string is the category ``"?"``; a missing
    number is an error naming the row and column). The fitted encoding is
    ``encoding_``; ``coef_`` has one weight per encoded feature (``feature_names_``),
    ``decision_function`` and ``predict`` take tables with the same columns (a category
    the vocabulary lacks is handled as ``unseen`` says), and :meth:`to_model` keeps the
    encoding, so :meth:`LinearModel.score_records <dpipe.model.LinearModel.score_records>`
    scores raw records and tables identically.
    ``sample_weight`` weights every objective as repeated rows. A target that is not
    binary is a ``ValueError`` ("Only binary classification is supported").
    ``predict_proba`` exists with ``probability='sigmoid'`` or ``'isotonic'``: the objectives
    rank or threshold, they do not model probabilities, so a calibration is fitted on
    held-out rows (the ``eval_set``, else cross-fitted folds of ``X``), as
    :class:`sklearn.calibration.CalibratedClassifierCV` fits one, and kept in
    :meth:`to_model`.

    Parameters
    ----------
    objective : str
        What to optimize: one of :data:`dpipe.fit.OBJECTIVES`.
    unseen : {"warn", "error", "ignore"}
        Tables only: a category the fitted vocabulary lacks, at ``decision_function`` /
        ``predict``. ``"warn"`` (default) scores it as no category at all (all-zero one-hot
        features, as scikit-learn's ``OneHotEncoder(handle_unknown="ignore")`` encodes it and
        ``HistGradientBoostingClassifier`` treats it) and says so in one
        :class:`~dpipe.exceptions.DataWarning` per call, naming the columns and values: so
        ``cross_val_score`` and ``GridSearchCV`` work on raw tables whose rare categories a
        split deals to one side only. ``"ignore"``: the same without the warning; ``"error"``:
        an error naming the row, column and value (as ``dpipe ingest --unseen``). Set to
        another value than the default for input that holds numbers only, it is a
        :class:`~dpipe.exceptions.ParameterError` (it would do nothing).
    engine : {"auto", "dask", "local"}
        Dask collections only: where a fit on a distributed client runs. ``"dask"`` where the
        partitions live; ``"local"``: the collection computed into memory here, then fitted as
        a pandas DataFrame or NumPy array is; ``"auto"`` (default): here, from the shards built
        on the workers, while their float32 features fit below both the cluster's break-even
        (never on a cluster of this machine's workers; from about 39 MB against twice this
        process's threads on other machines) and half the driver's available memory over 1.4
        (``dpipe.local-max-bytes`` sets one bound instead), else where the partitions live.
        ``"dask"`` for input that is not a dask collection, without a distributed client or with
        ``groups`` is a :class:`~dpipe.exceptions.ParameterError`.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features)
    intercept_ : ndarray of shape (1,)
    classes_ : ndarray of shape (2,)
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        With a DataFrame or table input: its columns.
    feature_names_ : list of str
        The names of ``coef_``'s weights: the input columns, or with a table the encoded
        features (``workclass=Private``, ...).
    encoding_ : dict
        With a table input: the fitted encoding (columns, types, vocabularies), as a
        model's ``encoding``.
    n_iter_ : int
        Solver iterations (1 for the closed form).
    fit_result_ : FitResult
    probability_ : ProbabilityCalibration or None
        The calibration ``predict_proba`` applies (with ``probability``).
    best_iteration_ : int
        With ``early_stopping_rounds``: the iteration whose model was kept (1-based, as
        ``fit_result_.history``), the best on ``fit``'s ``eval_set``.
    best_score_ : float
        With ``early_stopping_rounds``: its validation metric
        (``fit_result_.info["early_stopping"]["metric"]``).
    """

    #: set by fit (scikit-learn's validate_data, or the table's column names); read where it exists
    feature_names_in_: np.ndarray

    def __init__(
        self,
        objective: str = DEFAULT_OBJECTIVE,
        unseen: str = "warn",
        *,
        engine: str = "auto",
        # BEGIN: every hyper-parameter of dpipe.fit.PARAMS (generated by python -m dpipe.fit._codegen; do not edit)
        solver: str | None = None,
        lam: float | str | None = None,
        constraints: Any = None,
        mm_steps: int | None = None,
        multiplier_bound: float | None = None,
        threshold_rule: str | None = None,
        validation_fraction: float | None = None,
        validation_seed: int | None = None,
        slack: float | None = None,
        confidence: float | None = None,
        C: float | None = None,
        ridge: float | None = None,
        max_iter: int | None = None,
        tol: float | None = None,
        memory: int | None = None,
        smoothing: float | None = None,
        surrogate: str | None = None,
        epsilon: float | None = None,
        mu_scale: float | None = None,
        continuation: bool | None = None,
        continuation_factor: float | None = None,
        standardize: bool | None = None,
        precondition: str | bool | None = None,
        init: str | None = None,
        eps: float | None = None,
        k: float | None = None,
        k_fraction: float | None = None,
        bias: float | None = None,
        calibrate: bool | None = None,
        early_stopping_rounds: int | None = None,
        probability: str | None = None,
        probability_folds: int | None = None,
        # END of the generated hyper-parameters
    ) -> None:
        self.objective = objective
        self.unseen = unseen
        self.engine = engine
        # BEGIN: every hyper-parameter an attribute of the same name, unchanged (generated by python -m dpipe.fit._codegen; do not edit)
        self.solver = solver
        self.lam = lam
        self.constraints = constraints
        self.mm_steps = mm_steps
        self.multiplier_bound = multiplier_bound
        self.threshold_rule = threshold_rule
        self.validation_fraction = validation_fraction
        self.validation_seed = validation_seed
        self.slack = slack
        self.confidence = confidence
        self.C = C
        self.ridge = ridge
        self.max_iter = max_iter
        self.tol = tol
        self.memory = memory
        self.smoothing = smoothing
        self.surrogate = surrogate
        self.epsilon = epsilon
        self.mu_scale = mu_scale
        self.continuation = continuation
        self.continuation_factor = continuation_factor
        self.standardize = standardize
        self.precondition = precondition
        self.init = init
        self.eps = eps
        self.k = k
        self.k_fraction = k_fraction
        self.bias = bias
        self.calibrate = calibrate
        self.early_stopping_rounds = early_stopping_rounds
        self.probability = probability
        self.probability_folds = probability_folds
        # END of the generated attributes

    def _hyper_parameters(self) -> dict[str, Any]:
        """Every hyper-parameter of :data:`dpipe.fit.PARAMS` as set (None: not given)."""
        # BEGIN: the hyper-parameters as set, by name (generated by python -m dpipe.fit._codegen; do not edit)
        return {"solver": self.solver, "lam": self.lam, "constraints": self.constraints, "mm_steps": self.mm_steps,
            "multiplier_bound": self.multiplier_bound, "threshold_rule": self.threshold_rule, "validation_fraction": self.validation_fraction,
            "validation_seed": self.validation_seed, "slack": self.slack, "confidence": self.confidence, "C": self.C, "ridge": self.ridge,
            "max_iter": self.max_iter, "tol": self.tol, "memory": self.memory, "smoothing": self.smoothing, "surrogate": self.surrogate,
            "epsilon": self.epsilon, "mu_scale": self.mu_scale, "continuation": self.continuation, "continuation_factor": self.continuation_factor,
            "standardize": self.standardize, "precondition": self.precondition, "init": self.init, "eps": self.eps, "k": self.k,
            "k_fraction": self.k_fraction, "bias": self.bias, "calibrate": self.calibrate, "early_stopping_rounds": self.early_stopping_rounds,
            "probability": self.probability, "probability_folds": self.probability_folds}
        # END of the generated mapping

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = True
        return tags

    def _shards(self, X: Any, y_pm: np.ndarray, weight: np.ndarray | None, group: np.ndarray | None = None) -> list[Shard]:
        rows = block_of_input(X)  # float32; a sparse matrix as CSR, never densified (row slices: COO cannot be sliced, CSC slowly)
        n = rows.shape[0]
        shards = []
        for i, start in enumerate(range(0, max(n, 1), ESTIMATOR_SHARD_ROWS)):
            block = block_of_input(rows.slice_rows(start, start + ESTIMATOR_SHARD_ROWS).array).array  # its own canonical arrays
            w = None if weight is None else weight[start : start + ESTIMATOR_SHARD_ROWS]  # float64: whole weights stay exact
            g = None if group is None else group[start : start + ESTIMATOR_SHARD_ROWS]
            shards.append(Shard(X=block, y=y_pm[start : start + ESTIMATOR_SHARD_ROWS], group=g, weight=w, index=i))
        return shards

    def _check_numeric_input(self) -> None:
        """``unseen`` set for numbers: an option that does not apply is an error."""
        if self.unseen != TABLE_UNSEEN[0]:
            raise ParameterError(f"The 'unseen' parameter of DPipeClassifier applies to tables with string or categorical columns (pandas, "
                                 f"pyarrow); this X holds numbers only, so unseen={self.unseen!r} would do nothing: leave it at {TABLE_UNSEEN[0]!r}.")

    def _check_unseen(self) -> None:
        if self.unseen not in TABLE_UNSEEN:
            raise ParameterError(f"The 'unseen' parameter of DPipeClassifier must be one of {', '.join(map(repr, TABLE_UNSEEN))}. Got {self.unseen!r} instead.")

    def _table_features(self, X: Any, where: str, first_row: int = 0) -> np.ndarray:
        """The encoded rows of a table with the fitted encoding (float32); errors name ``where`` and the row numbered from ``first_row``."""
        if not is_frame(X):
            raise ValueError(f"{where}: DPipeClassifier was fitted on a table with the columns {list(self.feature_names_in_)}; "
                             f"pass a pandas DataFrame or pyarrow Table with those columns, not {type(X).__name__}")
        self._check_unseen()
        names, arrays = table_arrays(X, where)
        return encode_table(TabularSchema.from_list(self.encoding_["columns"]), names, arrays, unseen=self.unseen, where=where, first_row=first_row)

    def _fit_features(self, X: Any, y: Any) -> tuple[Any, np.ndarray]:
        """``(X, y)`` checked, with the input's encoding (a table's) or its columns set (``n_features_in_``, ...)."""
        for name in ("encoding_", "feature_names_in_"):  # not kept from an earlier fit
            self.__dict__.pop(name, None)
        if not is_table(X):
            self._check_numeric_input()
            X, y = validate_data(self, X, y, accept_sparse=("csr", "csc", "coo"), dtype=(np.float64, np.float32), ensure_min_samples=2)
            self.feature_names_ = list(self.feature_names_in_) if hasattr(self, "feature_names_in_") else [f"x{i}" for i in range(X.shape[1])]
            return X, y
        self._check_unseen()
        names, arrays = table_arrays(X, "X")
        y = column_or_1d(y, warn=True)
        n = len(arrays[0]) if arrays else 0
        if n != y.shape[0]:
            raise ValueError(f"Found input variables with inconsistent numbers of samples: [{n}, {y.shape[0]}]")
        if y.shape[0] < 2:
            raise ValueError(f"Found array with {y.shape[0]} sample(s) while a minimum of 2 is required by DPipeClassifier.")
        schema = scan_table(names, arrays, "X")
        self.n_features_in_ = len(names)
        self.feature_names_in_ = np.asarray(names, dtype=object)
        self.encoding_ = table_encoding(schema, self.unseen)
        self.feature_names_ = list(schema.feature_names)  # a table has no hashed slots: its names are columns and categories
        return encode_table(schema, names, arrays, where="X"), y

    def _memory_dataset(self, X: Any, y: Any, sample_weight: Any, groups: Any, family: str) -> tuple[LocalDataset, np.ndarray]:
        """In-memory input checked and cut into shards of :data:`ESTIMATOR_SHARD_ROWS` rows; the dataset and the classes."""
        X, y = self._fit_features(X, y)
        check_classification_targets(y)
        y_type = type_of_target(y, input_name="y", raise_unknown=True)
        if y_type not in ("binary", "multiclass"):
            raise ValueError(f"Only binary classification is supported. The type of the target is {y_type}.")
        classes = np.unique(y)
        _check_two_classes(classes)
        weight = None
        if sample_weight is not None:
            weight = _sample_weight(sample_weight, X.shape[0])
            present = [float(weight[y == c].sum()) > 0 for c in classes]
            if not all(present):
                raise ValueError(f"DPipeClassifier needs both classes with positive sample_weight; class {classes[present.index(False)]!r} "
                                 "has total weight 0.")
        y_pm = np.where(y == classes[1], 1, -1).astype(np.int8)
        group, group_names = self._groups(groups, X.shape[0], family)
        return LocalDataset(self._shards(X, y_pm, weight, group), group_names=group_names), classes

    def _check_engine(self, X: Any, groups: Any) -> None:
        """``engine`` one of its values, and ``"dask"`` only where a collection can be fitted where it lives."""
        check_choice(self.engine, "engine", "DPipeClassifier", ENGINES)
        if self.engine != "dask":
            return
        if not _is_dask(X):
            raise ParameterError(f"The 'engine' parameter of DPipeClassifier: 'dask' fits a dask array or DataFrame where its partitions live; "
                                 f"this X is a {type(X).__name__}, fitted in this process: leave engine at 'auto'.")
        if groups is not None:
            raise ParameterError("The 'engine' parameter of DPipeClassifier: 'dask' does not take the 'groups' argument of fit (a fit with "
                                 "groups computes the collection into memory); use engine='auto'.")

    def _collection_dataset(self, X: Any, y: Any, sample_weight: Any, groups: Any) -> tuple[Any, np.ndarray] | None:
        """A dask collection on a distributed client, as a dataset, or None (not a collection, no client, groups, or
        ``engine="local"``: computed into memory instead). Fitted where its blocks live (:mod:`dpipe.engine._collection`)
        with ``engine="dask"``, or ``"auto"`` above :func:`~dpipe.engine._collection.collection_engine`'s bound; below it
        the same shards are built on the workers and fitted in this process. A DataFrame with string columns is scanned
        partition by partition on the workers (one vocabulary per column back to the driver), then each partition encoded
        where it lives."""
        self._check_engine(X, groups)
        if not _is_dask(X) or groups is not None or self.engine == "local":
            return None
        try:
            from distributed import get_client

            client = get_client()
        except (ImportError, ValueError):  # no distributed client: dask's local scheduler computes the input
            if self.engine == "dask":
                raise ParameterError("The 'engine' parameter of DPipeClassifier: 'dask' needs a distributed client (distributed.Client(...) "
                                     "made or current); there is none, so use engine='auto' (computed into memory here).") from None
            return None
        import dask
        import dask.array as da

        from .engine._collection import CollectionDataset, collection_engine, collection_shards, merge_vocabularies

        # the labels: a dask Series' unique() shuffles its values between the workers (and distributed logs the shuffle's
        # start and end as warnings); each partition's distinct labels and length in one task instead (the lengths cut the
        # labels as X is cut, without another round of tasks)
        series = _is_dask(y) and hasattr(y, "unique")
        # each expression optimized once here (dask-expr does it again, 10-20 ms each, for every new collection derived from
        # an unoptimized one; measured 7 such calls, 0.15 s, in a fit of adult)
        X, y = (X.optimize() if hasattr(X, "optimize") else X), (y.optimize() if series else y)
        if series:
            label_parts = [dask.delayed(_labels_and_rows)(part) for part in y.to_delayed()]
        else:
            labels: Any = y.unique() if hasattr(y, "unique") else da.unique(y) if _is_dask(y) else np.asarray(y)
            label_parts = list(np.ravel(labels.to_delayed())) if _is_dask(labels) else []
        frame = hasattr(X, "columns")
        table = frame and is_table(X._meta)
        parts = X.to_delayed() if frame else []
        if table:  # string columns: ingest's scan on each partition, the vocabularies joined; the partitions' rows in the same tasks
            self._check_unseen()
            counts = [dask.delayed(_vocabulary_and_rows)(part, i) for i, part in enumerate(parts)]
        else:
            self._check_numeric_input()
            counts = [dask.delayed(len)(part) for part in parts]  # a numeric DataFrame's partition lengths
        # the labels and the scans (or lengths) in one compute, all as delayed (dask warns of a compute mixing them with
        # expressions): one round of tasks
        found = dask.compute(*label_parts, *counts)
        counted, found = found[len(label_parts):], found[: len(label_parts)]
        label_rows = tuple(n for _, n in found) if series else None
        classes = np.unique(np.concatenate([np.asarray(v[0] if series else v).ravel() for v in found]) if label_parts else labels)
        check_classification_targets(classes)
        _check_two_classes(classes)
        schema = None
        rows: tuple[int, ...] | None
        if table:
            schema, rows = merge_vocabularies([v for v, _ in counted]), tuple(n for _, n in counted)
        elif frame:
            rows = tuple(int(n) for n in counted)
        else:
            rows = None if np.isnan(X.shape[0]) else tuple(int(n) for n in X.chunks[0])
        for name in ("encoding_", "feature_names_in_"):
            self.__dict__.pop(name, None)
        self.n_features_in_ = int(X.shape[1])
        names = [str(c) for c in X.columns] if frame else None
        if names is not None and all(isinstance(c, str) for c in X.columns):
            self.feature_names_in_ = np.asarray(names, dtype=object)
        self.feature_names_ = names or [f"x{i}" for i in range(self.n_features_in_)]
        n_features = self.n_features_in_
        if schema is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
            self.encoding_ = table_encoding(TabularSchema.from_list(schema), self.unseen)
            self.feature_names_ = list(TabularSchema.from_list(schema).feature_names)
            n_features = len(self.feature_names_)
        where = "dask" if self.engine == "dask" else collection_engine(None if rows is None else sum(rows), n_features, client,
                                                                        "dask DataFrame" if frame else "dask array")
        if where == "local":
            ds: Any = LocalDataset(collection_shards(X, y, sample_weight, classes[1], client, schema=schema, rows=rows if frame else None,
                                                     label_rows=label_rows))
        else:
            ds = CollectionDataset(X, y, sample_weight, classes[1], client, schema=schema, rows=rows if frame else None, label_rows=label_rows)
        if sample_weight is not None:
            totals = class_totals(ds)  # one pass, merged on the workers (or here)
            if not (totals.negative > 0 and totals.positive > 0):
                ds.close()
                raise ValueError(f"DPipeClassifier needs both classes with positive sample_weight; class {classes[int(totals.negative > 0)]!r} "
                                 "has total weight 0.")
        return ds, classes

    @staticmethod
    def _groups(groups: Any, n: int, family: str) -> tuple[np.ndarray | None, list[str] | None]:
        """Group codes (int16) and their names (the values as strings, sorted) of ``groups``."""
        if groups is None:
            return None, None
        if family != "rate":
            raise ParameterError("The 'groups' argument of DPipeClassifier.fit applies to the rate objectives (their constraints name "
                                 "groups); use objective='error-rate' (or another *-rate).")
        values = np.asarray(groups)
        if values.shape != (n,):
            raise ValueError(f"groups has shape {values.shape}; expected ({n},), one group per row of X.")
        names, codes = np.unique(values.astype(str), return_inverse=True)
        if names.size > np.iinfo(np.int16).max:
            raise ValueError(f"groups has {names.size} distinct values; at most {np.iinfo(np.int16).max} are supported.")
        return codes.astype(np.int16), [str(v) for v in names]

    def _eval_dataset(self, eval_set: Any, classes: np.ndarray) -> LocalDataset:
        """The one validation set of ``eval_set``, ``[(X_val, y_val)]``, checked as ``X`` and ``y`` are, as an in-memory dataset."""
        pairs = list(eval_set) if isinstance(eval_set, (list, tuple)) else None
        if pairs is None or len(pairs) != 1 or not isinstance(pairs[0], (list, tuple)) or len(pairs[0]) != 2:
            got = f"{len(pairs)} sets" if pairs is not None and len(pairs) != 1 else f"{type(eval_set).__name__} {eval_set!r:.60}"
            raise ParameterError(f"The 'eval_set' argument of DPipeClassifier.fit takes one validation set, [(X_val, y_val)]; got {got}.")
        X_val, y_val = pairs[0]
        if _is_dask(X_val) or _is_dask(y_val):
            import dask

            X_val, y_val = dask.compute(X_val, y_val)
        if hasattr(self, "encoding_"):
            X_val = self._table_features(X_val, "eval_set's X")
        else:
            X_val = validate_data(self, X_val, accept_sparse=("csr", "csc", "coo"), dtype=(np.float64, np.float32), reset=False)
        y_val = column_or_1d(y_val)
        check_consistent_length(X_val, y_val)
        unknown = np.setdiff1d(np.unique(y_val), classes)
        if unknown.size:
            raise ValueError(f"eval_set's y has labels {unknown[:5].tolist()} that y does not have ({classes.tolist()}).")
        if not all(np.any(y_val == c) for c in classes):
            raise ValueError(f"eval_set's y needs both classes {classes.tolist()}: its metrics rank positives against negatives.")
        y_pm = np.where(y_val == classes[1], 1, -1).astype(np.int8)
        return LocalDataset(self._shards(X_val, y_pm, None))

    def fit(self, X: Any, y: Any, sample_weight: Any = None, groups: Any = None, eval_set: Any = None) -> DPipeClassifier:
        """Fit the objective on ``X`` and two-valued labels ``y``.

        Parameters
        ----------
        X : array-like, DataFrame, sparse matrix or dask array of shape (n, d)
            Features.
        y : array-like of shape (n,)
            Labels with exactly two values; ``classes_[1]`` (the larger) is positive.
        sample_weight : array-like of shape (n,), optional
            Non-negative weights; a row of weight v counts as v repeated rows.
        groups : array-like of shape (n,), optional
            Rate objectives: each row's group (any values; the constraints name them as
            strings, ``"positive_rate(group=F) >= 0.8 * positive_rate(group=M)"``).
        eval_set : list of one (X_val, y_val) pair, optional
            Smoothed and structural objectives: a validation set (as xgboost's ``eval_set``,
            but one), whose exact metrics join ``fit_result_.history`` after every
            iteration; with ``early_stopping_rounds``, the set whose metric decides when to
            stop (the model is then the best iterate, ``best_iteration_``).

        Returns
        -------
        DPipeClassifier
            ``self``, fitted.
        """
        p = resolve(self.objective, self._hyper_parameters(), "DPipeClassifier")
        family = OBJECTIVES[self.objective].family
        if eval_set is not None and family in ("moment", "rate"):
            raise ParameterError(f"The 'eval_set' argument of DPipeClassifier.fit applies to the smoothed and structural objectives, not to "
                                 f"{self.objective!r} ({'fitted from one moments pass' if family == 'moment' else 'its steps are not comparable by a validation metric'}).")
        if stopping_rounds(p) is not None and eval_set is None:
            raise ParameterError("The 'early_stopping_rounds' parameter of DPipeClassifier needs the 'eval_set' argument of fit, "
                                 "[(X_val, y_val)]: the set whose metric decides when to stop.")
        native = self._collection_dataset(X, y, sample_weight, groups)
        if native is not None:
            ds, classes = native
        else:
            if _is_dask(X) or _is_dask(y) or _is_dask(sample_weight):  # no distributed client (or groups, or string columns)
                import dask

                X, y, sample_weight = dask.compute(X, y, sample_weight)  # one graph, on the current scheduler
            ds, classes = self._memory_dataset(X, y, sample_weight, groups, family)
        try:
            eval_ds = None if eval_set is None else self._eval_dataset(eval_set, classes)
            validate = None if eval_ds is None else make_validator(eval_ds, p)
            outcome = fit_dataset(ds, p, validate)
            coef, intercept, _ = finish_fit(ds, outcome, p, train_metrics=False)
            self.probability_ = fit_probability(ds, p, coef, intercept, eval_ds)
        finally:
            ds.close()
        self.coef_ = np.asarray(coef, dtype=np.float64).reshape(1, -1)
        self.intercept_ = np.array([float(intercept)])
        self.classes_ = classes
        if hasattr(self, "encoding_"):
            self.encoding_["label"] = {"classes": classes.tolist()}
        self.n_iter_ = max(1, int(outcome.result.nit))
        self.fit_result_ = outcome.result
        self.fit_params_ = model_params(p)
        stopping = outcome.result.info.get("early_stopping")
        for name in ("best_iteration_", "best_score_"):  # not kept from an earlier fit
            self.__dict__.pop(name, None)
        if stopping is not None:
            self.best_iteration_, self.best_score_ = stopping["best_iteration"], stopping["best_score"]
        return self

    def decision_function(self, X: Any) -> Any:
        """Scores ``X @ coef_.T + intercept_``.

        Parameters
        ----------
        X : array-like, DataFrame, sparse matrix, dask array or dask DataFrame of shape (n, d)
            Features, in the columns ``fit`` saw.

        Returns
        -------
        ndarray or dask array of shape (n,)
            The scores (lazy for dask input); positive means ``classes_[1]``.
        """
        check_is_fitted(self)
        if hasattr(self, "encoding_"):  # fitted on a table: encode the rows as fit did
            if _is_dask(X) and hasattr(X, "columns"):  # each partition encoded and scored where it lives
                import pandas as pd

                self._table_features(pd.DataFrame({c: pd.Series(dtype=t) for c, t in X.dtypes.items()}), "X")  # its columns, on the driver
                lengths = tuple(int(n) for n in X.map_partitions(len).compute())  # one integer a partition: the global rows of errors
                starts = tuple(int(v) for v in np.cumsum((0, *lengths))[:-1])
                return X.map_partitions(self._partition_scores, starts, meta=("score", "f8")).to_dask_array(lengths=lengths)
            return self._table_features(X, "X") @ self.coef_[0] + self.intercept_[0]
        if _is_dask(X) and hasattr(X, "columns"):  # a dask DataFrame: check its columns, then score its blocks
            names = list(getattr(self, "feature_names_in_", []))
            if names and list(X.columns) != names:
                raise ValueError(f"The dask DataFrame's columns {list(X.columns)[:5]}... differ from the feature names seen in fit {names[:5]}...")
            X = X.to_dask_array(lengths=True)
        if _is_dask(X):
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has shape {X.shape}, but DPipeClassifier is expecting {self.n_features_in_} features as input.")
            columns = [str(n) for n in getattr(self, "feature_names_in_", [])] or None  # the errors' column names
            return X.rechunk({1: -1}).map_blocks(_dask_block_scores, self.coef_[0], float(self.intercept_[0]), columns, drop_axis=1,
                                                 dtype=np.float64, meta=np.empty((0,), dtype=np.float64))
        X = validate_data(self, X, accept_sparse=("csr", "csc", "coo"), dtype=(np.float64, np.float32), reset=False)
        return np.asarray(X @ self.coef_[0]).ravel() + self.intercept_[0]

    def _partition_scores(self, part: Any, starts: tuple[int, ...], partition_info: dict[str, Any] | None = None) -> Any:
        """Scores of one pandas partition of a dask DataFrame, as a Series on its index; an error names the partition
        and the global row (``starts``: each partition's first row in the whole frame)."""
        import pandas as pd

        where = "X"
        if partition_info is not None and partition_info.get("number") is not None:
            k = int(partition_info["number"])
            where = _partition_where(k, len(starts), starts[k], starts[k] + len(part))
            first_row = starts[k]
        else:  # pragma: no cover - dask passes partition_info to a function that takes it
            first_row = 0
        return pd.Series(self._table_features(part, where, first_row) @ self.coef_[0] + self.intercept_[0], index=part.index, name="score")

    def __getattr__(self, name: str) -> Any:
        """Only for a missing attribute: ``predict_proba`` without ``probability`` says how to get probabilities (it stays
        absent, so ``hasattr`` is False and scikit-learn's scorers use :meth:`decision_function`)."""
        if name == "predict_proba":
            raise AttributeError(f"This {type(self).__name__} has no predict_proba: it was made without probability (its objectives rank "
                                 "or set a threshold, they do not model probabilities). Set probability='sigmoid' (or 'isotonic') and fit "
                                 "again for a calibration on held-out rows; decision_function gives the scores.", name=name, obj=self)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self)

    @available_if(lambda self: getattr(self, "probability", None) is not None)
    def predict_proba(self, X: Any) -> Any:
        """Probabilities of ``classes_``, shape (n, 2), from the calibration fitted on held-out rows
        (``probability``: the ``eval_set``, else ``probability_folds`` cross-fitted folds). Present only
        with ``probability`` set, so scikit-learn's scorers use :meth:`decision_function` otherwise.

        Parameters
        ----------
        X : array-like, DataFrame, sparse matrix, dask array or dask DataFrame of shape (n, d)
            Features.

        Returns
        -------
        ndarray or dask array of shape (n, 2)
            ``[P(classes_[0]), P(classes_[1])]`` per row (lazy for dask input).
        """
        check_is_fitted(self, "probability_")
        s = self.decision_function(X)

        def both(b: np.ndarray) -> np.ndarray:
            assert self.probability_ is not None  # available_if: fitted with probability
            p = self.probability_.probability(b)
            return np.column_stack([1.0 - p, p])

        if _is_dask(s):
            return s.map_blocks(both, new_axis=1, chunks=(s.chunks[0], (2,)), dtype=np.float64)
        return both(np.asarray(s))

    def predict(self, X: Any, random_state: int | None = None) -> Any:
        """``classes_[1]`` where the score is > 0, else ``classes_[0]``; for a randomized model
        (``threshold_rule="randomized"``), ``classes_[1]`` with probability ``clip(1/2 + score, 0, 1)``.

        Parameters
        ----------
        X : array-like, DataFrame, sparse matrix, dask array or dask DataFrame of shape (n, d)
            Features.
        random_state : int, optional
            Seed of a randomized model's draws (as fairlearn's ``predict``); an error for
            a deterministic model. Dask input draws each block from the seed and the
            block's position.

        Returns
        -------
        ndarray or dask array of shape (n,)
            Predicted labels (lazy for dask input).
        """
        s = self.decision_function(X)
        if self.fit_params_.get("threshold_rule") != "randomized":
            if random_state is not None:
                raise ValueError("DPipeClassifier.predict: random_state draws a randomized model's labels (threshold_rule='randomized'); "
                                 "this model is deterministic")
            if _is_dask(s):
                return s.map_blocks(lambda b: self.classes_[(b > 0).astype(int)], dtype=self.classes_.dtype)
            return self.classes_[(np.asarray(s) > 0).astype(int)]
        entropy: Any = np.random.SeedSequence(random_state).entropy  # an int here (random_state is an int or None); typed int | Sequence | None

        def draw(b: np.ndarray, block: int = 0) -> np.ndarray:
            u = np.random.default_rng([entropy, block]).random(b.shape)
            return self.classes_[(u < ramp(b)).astype(int)]

        if _is_dask(s):
            return s.map_blocks(lambda b, block_info=None: draw(b, block_info[None]["chunk-location"][0]), dtype=self.classes_.dtype)
        return draw(np.asarray(s))

    def to_model(self, feature_names: list[str] | None = None) -> LinearModel:
        """The fitted rule as a :class:`LinearModel` (to save, evaluate or serve)."""
        check_is_fitted(self)
        names = feature_names if feature_names is not None else (self.feature_names_ if hasattr(self, "feature_names_in_") else None)
        return LinearModel(self.coef_[0], self.intercept_[0], feature_names=names, objective=self.objective, params=self.fit_params_,
                           fit=self.fit_result_.to_dict(), encoding=getattr(self, "encoding_", None), probability=self.probability_)


def _finish_class() -> None:
    if DPipeClassifier.__doc__ is not None:  # None under python -OO
        DPipeClassifier.__doc__ = DPipeClassifier.__doc__.replace(
            "        What to optimize: one of :data:`dpipe.fit.OBJECTIVES`.\n",
            "        What to optimize: one of :data:`dpipe.fit.OBJECTIVES` (" + ", ".join(OBJECTIVES) + ").\n"
            + "".join("    " + line + "\n" for line in numpydoc().splitlines()),
        )


_finish_class()
