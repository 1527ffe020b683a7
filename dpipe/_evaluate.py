"""``dpipe.evaluate`` and ``dpipe.predict``: score a store on the cluster.

Evaluation sorts each shard's scores on its worker and merges the sorted runs on
the driver (the driver receives 9 bytes per row: a float64 score and an int8
label), then computes exact metrics — ties in the ROC-AUC counted as half.
Prediction writes one row per store row, in store order, to a Parquet file that
is written under a temporary name and renamed into place; its schema metadata
``dpipe.format = dpipe-predictions`` marks it as dpipe's (only such a file is
replaced by ``overwrite``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from ._locks import before_rename
from ._modes import set_default_mode
from ._output import locked_output, write_error
from ._ramp import ramp
from ._written import METRICS_FORMAT, METRICS_FORMAT_VERSION, PREDICTIONS_FORMAT, PREDICTIONS_FORMAT_KEY
from .engine import open_dataset, rank_summary
from .engine._cluster_spec import ClusterSpec
from .exceptions import DataWarning, DPipeError, ParameterError
from .io import Store
from .io._store import as_store
from .model import LinearModel
from .reduce import shard_scores_labels

if TYPE_CHECKING:
    from .rates import ConstraintReport

__all__ = ["evaluate", "predict", "write_metrics", "metrics_document", "evaluate_dataset", "group_rates", "constraint_values", "evaluate_part"]


def evaluate_dataset(
    ds: Any, coef: np.ndarray, intercept: float, *, k: float | None = None, k_fraction: float | None = None, threshold: float = 0.0,
    randomized: bool = False,
) -> dict[str, Any]:
    """Exact (weighted, when the store has a weight column) metrics of the model ``(coef, intercept)`` on an opened dataset;
    with ``randomized``, the threshold metrics are the randomized classifier's expected ones. Rows of one class give
    what is defined on them (accuracy, ...) and None for the rest (ROC-AUC, PRBEP, ...), with a :class:`DataWarning`."""
    summary = rank_summary(ds, coef, intercept)
    positive, negative = summary.class_masses()
    if positive == 0 or negative == 0:
        where = getattr(getattr(ds, "store", None), "path", None) or "the rows"
        warnings.warn(f"{where}: every row is {'negative' if positive == 0 else 'positive'}, so ROC-AUC, PRBEP and the at-k figures "
                      f"are undefined (null){' as are recall and F1' if positive == 0 else ''}; accuracy and the rest are reported",
                      DataWarning, stacklevel=2)
    return summary.metrics(threshold=threshold, k=k, k_fraction=k_fraction, randomized=randomized, single_class="report")


def group_rates(ds: Any, coef: np.ndarray, intercept: float, randomized: bool = False) -> dict[str, Any]:
    """Per value of the store's group column: its weight and its positive, true-positive, false-positive and error rates;
    and across the groups the selection-rate ratio (smallest over largest positive rate) and the TPR and FPR gaps (one pass).
    With ``randomized``, expected rates of the randomized classifier."""
    from .rates._cells import DataInfo, decode_cell
    from .reduce._rates import CellLayout, cell_predictions

    info = DataInfo.of(ds)
    if info.group_names is None:
        raise ParameterError(f"{info.path}: the 'by_group' parameter of evaluate needs a group column (ingest the store with group_col=)")
    layout = CellLayout(len(info.group_names))
    weight, positive, _ = ds.map_reduce(cell_predictions, np.add, np.asarray(coef, dtype=np.float64), float(intercept), layout, randomized)
    out: dict[str, Any] = {}
    for g, name in enumerate(info.group_names):
        cells = {decode_cell(c, layout)[0]: c for c in range(layout.n_cells) if decode_cell(c, layout)[1] == g}
        pos, neg = cells[1], cells[-1]
        n = weight[pos] + weight[neg]

        def rate(num: float, den: float) -> float | None:
            return float(num / den) if den > 0 else None

        out[name] = {
            "n": float(n), "positive_rate": rate(positive[pos] + positive[neg], n),
            "true_positive_rate": rate(positive[pos], weight[pos]), "false_positive_rate": rate(positive[neg], weight[neg]),
            "error_rate": rate(weight[pos] - positive[pos] + positive[neg], n),
        }
    summary: dict[str, Any] = {"groups": out}
    selection = [r["positive_rate"] for r in out.values() if r["positive_rate"] is not None]
    summary["selection_rate_ratio"] = float(min(selection) / max(selection)) if selection and max(selection) > 0 else None
    for key, label in (("true_positive_rate", "true_positive_rate_gap"), ("false_positive_rate", "false_positive_rate_gap")):
        values = [r[key] for r in out.values() if r[key] is not None]
        summary[label] = float(max(values) - min(values)) if values else None
    return summary


def constraint_values(datasets: dict[str, Any], coef: np.ndarray, intercept: float, constraints: Any, randomized: bool = False) -> list[ConstraintReport]:
    """Each constraint's left-hand side minus right-hand side with exact rates of the model on ``datasets`` (alias -> opened
    dataset, ``"train"`` the evaluated store), whether it holds (``<= 0``), its 95 % interval and verdict (holds /
    violated / not significant) and its rates with their intervals (:mod:`dpipe.rates._intervals`); one pass per
    dataset. With ``randomized``, expected rates of the randomized classifier."""
    from .model._linear import deployed_model
    from .rates._cells import DataInfo, compile_rows, plan_stores
    from .rates._intervals import constraint_report
    from .rates._parse import check_constraints
    from .reduce._rates import cell_predictions

    constraints = check_constraints(constraints, "constraints", "evaluate")
    plans = plan_stores(None, constraints, {a: DataInfo.of(ds) for a, ds in datasets.items()}, deployed_model)
    sums = {a: ds.map_reduce(cell_predictions, np.add, np.asarray(coef, dtype=np.float64), float(intercept), plans[a].layout, randomized)
            for a, ds in datasets.items()}
    rows = compile_rows(None, constraints, plans, {a: s[0] for a, s in sums.items()})
    return constraint_report(constraints, rows, plans, sums)


def evaluate(
    model: LinearModel | str | os.PathLike,
    store: str | os.PathLike | Store,
    *,
    k: float | None = None,
    k_fraction: float | None = None,
    threshold: float = 0.0,
    by_group: bool = False,
    constraints: Any = None,
    datasets: dict[str, str | os.PathLike | Store] | None = None,
    engine: str = "auto", client: Any = None, scheduler: str | None = None, workers: int | None = None,
    memory_limit: str | int | None = None, cache: str | None = "stream",
    verify: bool | None = None,
) -> dict[str, Any]:
    """Exact ROC-AUC, PRBEP, accuracy, precision, recall, F1, Prec@k and Rec@k of a model on a store.

    Parameters
    ----------
    model : LinearModel or path
        The model (or its JSON file).
    store : str or Store
        Labelled store with the model's features.
    k : int, optional
        Cut-off of Prec@k / Rec@k: a number of rows (total sample weight in a weighted
        store); default the number of positives. Excludes ``k_fraction``.
    k_fraction : float, optional
        The cut-off as a fraction of the positives (the meaning ``k_fraction`` has in
        training, SVM-perf's ``-p``).
    threshold : float
        Rows with score > threshold are predicted positive.
    by_group : bool
        Also the rates of every value of the store's group column (:func:`group_rates`),
        under ``"by_group"``.
    constraints : list of str or dpipe.rates.Constraint, optional
        Also evaluate these rate constraints with the model's predictions (under
        ``"constraints"``: each one's left minus right side and whether it holds).
    datasets : dict of str to str or Store, optional
        Other stores the constraints name by alias (the evaluated store is ``"train"``).
    engine, client, scheduler, workers, memory_limit, cache
        Where the scoring pass runs (see :func:`dpipe.train`; ``"auto"`` stays in this
        process for small stores); one pass, so shards are streamed by default.
    verify : bool, optional
        Re-hash every shard read against the store's checksums (see :func:`dpipe.train`):
        ``None`` (default) the dask config key ``dpipe.verify`` (on); ``False`` opts out.

    Returns
    -------
    dict
        Metric name -> value, plus ``n`` and ``n_positive``. For a randomized model
        (``threshold_rule="randomized"``) accuracy, precision, recall, F1, the group rates
        and the constraints are expected values, and ``"randomized"`` is True.
    """
    cluster = ClusterSpec.from_keywords(locals())
    model, st = _model_and_store(model, store, verify)
    st.require_labels("evaluate")
    _check_threshold(threshold, "evaluate")
    if datasets and not constraints:
        raise ParameterError("The 'datasets' parameter of evaluate names the stores constraints use; no constraint is given.")
    intercept = model.intercept - threshold
    with contextlib.ExitStack() as stack:
        ds = stack.enter_context(open_dataset(st, cluster, owner="evaluate", worker_row_bytes=0))
        metrics = evaluate_dataset(ds, model.coef, model.intercept, k=k, k_fraction=k_fraction, threshold=threshold, randomized=model.randomized)
        if model.randomized:
            metrics["randomized"] = True  # accuracy, precision, recall, F1 and the rates below are expectations
        if by_group:
            metrics["by_group"] = group_rates(ds, model.coef, intercept, model.randomized)
        if constraints:
            others = {alias: stack.enter_context(open_dataset(_model_and_store(model, other, verify)[1], cluster, owner="evaluate", worker_row_bytes=0)) for alias, other in (datasets or {}).items()}
            reports = constraint_values({"train": ds, **others}, model.coef, intercept, constraints, model.randomized)
            metrics["constraints"] = [r.to_record() for r in reports]
    return metrics


def evaluate_part(model: LinearModel | str | os.PathLike, store: str | os.PathLike | Store, split: Any, part: str, *,
                  cluster: ClusterSpec = ClusterSpec(cache="stream"), verify: bool | None = None) -> dict[str, Any]:
    """:func:`evaluate`'s metrics of ``model`` on one part (``"fit"`` or ``"validation"``) of a seeded row split of ``store``
    (:class:`dpipe.engine._split.RowSplit`: the rows a rate fit's ``validation_fraction`` held out, or kept), where ``cluster`` says."""
    from .engine._split import DatasetPart

    model, st = _model_and_store(model, store, verify)
    st.require_labels("evaluate")
    with open_dataset(st, cluster, worker_row_bytes=0) as ds:
        return evaluate_dataset(DatasetPart(ds, split, part), model.coef, model.intercept, randomized=model.randomized)


def _model_and_store(model: LinearModel | str | os.PathLike, store: str | os.PathLike | Store,
                     verify: bool | None = None, owner: str = "evaluate") -> tuple[LinearModel, Store]:
    """Load both (the store read with ``verify``: :func:`~dpipe.io._store.as_store`) and check that the store has the
    model's features, in order, stored with the model's transform."""
    from .io._stored_transform import check_same_features

    model = model if isinstance(model, LinearModel) else LinearModel.load(model)
    st = as_store(store, verify, owner)
    check_same_features(model.feature_names, model.encoding, st, "model")
    return model, st


def predict(
    model: LinearModel | str | os.PathLike,
    store: str | os.PathLike | Store,
    out: str | os.PathLike,
    *,
    threshold: float = 0.0,
    seed: int | None = None,
    overwrite: bool = False,
    engine: str = "auto", client: Any = None, scheduler: str | None = None, workers: int | None = None,
    memory_limit: str | int | None = None, cache: str | None = "stream",
    verify: bool | None = None,
) -> str:
    """Score every row of a store and write ``row, score, label, y`` to a Parquet file.

    ``label`` is the predicted label in the user's labels: the one value of the model's
    training labels that became +1 where score > threshold, else the one that became -1
    (adult: ``">50K"`` / ``"<=50K"``, strings; numbers stay numbers: a9a's 1 / -1, a 0/1
    file's 1 / 0); a model whose class came from several values (``negative="normal."`` on
    kdd99: every attack is +1) has +1 / -1 there. ``y`` is the store's label as -1 / +1 (0
    in an unlabelled store). Rows keep the store's order; one row group per shard. A randomized
    model's (``threshold_rule="randomized"``) labels are drawn, each row +1 with
    probability ``clip(1/2 + score - threshold, 0, 1)``, from ``seed`` (the same seed, the
    same labels); ``seed`` is an error for a deterministic model. ``verify``: as in
    :func:`evaluate` (default on; ``False`` opts out of re-hashing the shards read).

    Returns
    -------
    str
        The path written.

    Raises
    ------
    OutputError
        ``out`` cannot be written (checked before the pass: :func:`dpipe._output.check_output_path`;
        never inside a store or a model registry), or an OS error while writing it (a full disk):
        one line naming ``out``, nothing left behind.
    DestinationBusyError
        Another process is writing ``out`` (its lock is held from the check to the rename).
    """
    cluster = ClusterSpec.from_keywords(locals())
    with locked_output(out, overwrite=overwrite, what="predictions") as path:  # before any pass; one writer of out until the rename
        model, st = _model_and_store(model, store, verify, "predict")
        if seed is not None and not model.randomized:
            raise ParameterError("The 'seed' parameter of predict draws a randomized model's labels (threshold_rule='randomized'); this model is deterministic.")
        _check_threshold(threshold, "predict")
        rng = np.random.default_rng(seed) if model.randomized else None
        with open_dataset(st, cluster, owner="predict", worker_row_bytes=0) as ds:
            parts = ds.map_gather(shard_scores_labels, model.coef, model.intercept)
        _write_predictions(path, st.manifest.shard_bounds, parts, threshold, rng, _user_labels(model.encoding))
    return path


def _user_labels(encoding: dict[str, Any] | None) -> np.ndarray | None:
    """``[negative, positive]``: the one label value of the training data that became each class (a model's
    ``encoding["label"]``: an ingest's rule with its ``classes``, or an estimator's ``classes``), numbers as numbers;
    None when a class came from several values (or none: no label rule recorded)."""
    label = (encoding or {}).get("label") or {}
    classes = label.get("classes")
    if isinstance(classes, list):  # DPipeClassifier: classes_, the positive last
        values = list(classes)
    elif isinstance(classes, dict):
        neg, pos = [v for v, c in classes.items() if c == -1], [v for v, c in classes.items() if c == 1]
        if len(neg) != 1 or len(pos) != 1:
            return None
        values = [neg[0], pos[0]]
    else:
        return None
    if len(values) != 2:
        return None
    try:
        numbers = [float(v) for v in values]
    except (TypeError, ValueError):
        return np.array([str(v) for v in values], dtype=object)
    return np.array(numbers, dtype=np.int64) if all(x.is_integer() for x in numbers) else np.array(numbers)


def _check_threshold(threshold: float, owner: str) -> None:
    if not isinstance(threshold, (int, float, np.integer, np.floating)) or isinstance(threshold, bool) or not np.isfinite(threshold):
        raise ParameterError(f"The 'threshold' parameter of {owner} must be a finite number. Got {threshold!r} instead.")


def _write_predictions(out: str, bounds: list[list[int]], parts: list[tuple[np.ndarray, np.ndarray]], threshold: float,
                       rng: np.random.Generator | None, labels: np.ndarray | None = None) -> None:
    """Write the prediction file through a temporary sibling and a rename; an OS error names ``out``, nothing is left.
    ``labels``: ``[negative, positive]`` written as ``label`` (:func:`_user_labels`; None: -1 / +1)."""
    import pyarrow as pa  # here: evaluate and the fits import this module, only predict writes Parquet
    import pyarrow.parquet as pq

    if labels is None:
        labels = np.array([-1, 1], dtype=np.int8)
    label_type = pa.string() if labels.dtype == object else pa.from_numpy_dtype(labels.dtype)
    schema = pa.schema([("row", pa.int64()), ("score", pa.float64()), ("label", label_type), ("y", pa.int8())],
                       metadata={PREDICTIONS_FORMAT_KEY: PREDICTIONS_FORMAT})
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out) + ".tmp-", dir=os.path.dirname(out))
        os.close(fd)
        with pq.ParquetWriter(tmp, schema) as writer:
            for (start, stop), (s, y) in zip(bounds, parts):
                positive = s > threshold if rng is None else rng.random(s.size) < ramp(s - threshold)
                label = labels[positive.astype(np.intp)]
                columns = [pa.array(np.arange(start, stop, dtype=np.int64)), pa.array(s), pa.array(label, type=label_type), pa.array(y)]
                writer.write_table(pa.Table.from_arrays(columns, schema=schema))
        set_default_mode(tmp)  # mkstemp made it 0600: give it the user's umask
        before_rename(out)  # no signal received, and the lock still this process's
        os.replace(tmp, out)
    except BaseException as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, DPipeError):  # pyarrow's error on a full disk is an OSError too
            raise write_error(out, "predictions", exc) from exc
        raise


def metrics_document(metrics: dict[str, Any]) -> dict[str, Any]:
    """``evaluate``'s metrics as the dpipe metrics document: ``{"format": "dpipe-metrics", "format_version": 1, **metrics}``
    (what ``dpipe evaluate --out FILE`` writes and ``dpipe evaluate --json`` prints)."""
    return {"format": METRICS_FORMAT, "format_version": METRICS_FORMAT_VERSION, **metrics}


def write_metrics(path: str | os.PathLike, metrics: dict[str, Any], *, overwrite: bool) -> str:
    """Write ``evaluate``'s metrics as a dpipe metrics file (:func:`metrics_document`, what ``evaluate --out FILE`` writes).

    Checked and locked like every output (:func:`dpipe._output.locked_output`: re-entered
    when the caller holds the lock from before its pass); written through a temporary
    sibling and a rename. Returns the path.

    Raises
    ------
    OutputError
        ``path`` cannot be written (see :func:`dpipe._output.check_output_path`), or an OS
        error while writing (a full disk): one line naming ``path``, nothing left.
    """
    from .io._manifest import write_json_atomic

    with locked_output(path, overwrite=overwrite, what="metrics") as p:
        try:
            write_json_atomic(p, metrics_document(metrics))
        except OSError as exc:
            if isinstance(exc, DPipeError):
                raise
            raise write_error(p, "metrics", exc) from exc
    return p
