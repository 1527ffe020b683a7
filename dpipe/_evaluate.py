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
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ._modes import set_default_mode
from ._output import PREDICTIONS_FORMAT, PREDICTIONS_FORMAT_KEY, check_output_path, lock_temporary
from ._ramp import ramp
from .engine import open_dataset, rank_summary
from .exceptions import ParameterError
from .io import Store, open_store
from .model import LinearModel
from .reduce import shard_scores_labels

__all__ = ["evaluate", "predict", "evaluate_dataset", "group_rates", "constraint_values"]


def evaluate_dataset(
    ds: Any, coef: np.ndarray, intercept: float, *, k: float | None = None, k_fraction: float | None = None, threshold: float = 0.0,
    randomized: bool = False,
) -> dict[str, Any]:
    """Exact (weighted, when the store has a weight column) metrics of the model ``(coef, intercept)`` on an opened dataset;
    with ``randomized``, the threshold metrics are the randomized classifier's expected ones."""
    return rank_summary(ds, coef, intercept).metrics(threshold=threshold, k=k, k_fraction=k_fraction, randomized=randomized)


def group_rates(ds: Any, coef: np.ndarray, intercept: float, randomized: bool = False) -> dict[str, Any]:
    """Per value of the store's group column: its weight and its positive, true-positive, false-positive and error rates;
    and across the groups the selection-rate ratio (smallest over largest positive rate) and the TPR and FPR gaps (one pass).
    With ``randomized``, expected rates of the randomized classifier."""
    from .rates._cells import DataInfo, decode_cell
    from .reduce._rates import CellLayout, cell_predictions

    info = DataInfo.of(ds)
    if info.group_names is None:
        raise ParameterError(f"{info.path}: --by-group needs a group column (ingest the store with --group-col)")
    layout = CellLayout(len(info.group_names))
    weight, positive = ds.map_reduce(cell_predictions, np.add, np.asarray(coef, dtype=np.float64), float(intercept), layout, randomized)
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


def constraint_values(datasets: dict[str, Any], coef: np.ndarray, intercept: float, constraints: Any, randomized: bool = False) -> list[dict[str, Any]]:
    """Each constraint's left-hand side minus right-hand side with exact rates of the model on ``datasets`` (alias -> opened
    dataset, ``"train"`` the evaluated store), and whether it holds (``<= 0``); one pass per dataset. With ``randomized``,
    expected rates of the randomized classifier."""
    from .fit._rates import deployed_model
    from .fit._params import PARAMS
    from .rates._cells import DataInfo, compile_rows, plan_stores
    from .reduce._rates import cell_predictions

    constraints = PARAMS["constraints"].check(constraints, "evaluate")
    plans = plan_stores(None, constraints, {a: DataInfo.of(ds) for a, ds in datasets.items()}, deployed_model)
    sums = {a: ds.map_reduce(cell_predictions, np.add, np.asarray(coef, dtype=np.float64), float(intercept), plans[a].layout, randomized)
            for a, ds in datasets.items()}
    rows = compile_rows(None, constraints, plans, {a: s[0] for a, s in sums.items()})
    values = rows.evaluate({a: s[1] for a, s in sums.items()})
    return [{"text": text, "value": float(v), "holds": bool(v <= 0)} for text, v in zip(rows.texts[1:], values[1:])]


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
    engine: str = "auto",
    client: Any = None,
    scheduler: str | None = None,
    workers: int | None = None,
    memory_limit: str | int | None = None,
    cache: str | None = "stream",
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

    Returns
    -------
    dict
        Metric name -> value, plus ``n`` and ``n_positive``. For a randomized model
        (``threshold_rule="randomized"``) accuracy, precision, recall, F1, the group rates
        and the constraints are expected values, and ``"randomized"`` is True.
    """
    model, st = _model_and_store(model, store)
    st.require_labels("evaluate")
    if datasets and not constraints:
        raise ParameterError("The 'datasets' parameter of evaluate names the stores constraints use; no constraint is given.")
    intercept = model.intercept - threshold
    with contextlib.ExitStack() as stack:
        ds = stack.enter_context(open_dataset(st, engine=engine, client=client, scheduler=scheduler, workers=workers, memory_limit=memory_limit, cache=cache))
        metrics = evaluate_dataset(ds, model.coef, model.intercept, k=k, k_fraction=k_fraction, threshold=threshold, randomized=model.randomized)
        if model.randomized:
            metrics["randomized"] = True  # accuracy, precision, recall, F1 and the rates below are expectations
        if by_group:
            metrics["by_group"] = group_rates(ds, model.coef, intercept, model.randomized)
        if constraints:
            others = {alias: stack.enter_context(open_dataset(_model_and_store(model, other)[1], engine=engine, client=client, scheduler=scheduler,
                                                               workers=workers, memory_limit=memory_limit, cache=cache))
                      for alias, other in (datasets or {}).items()}
            metrics["constraints"] = constraint_values({"train": ds, **others}, model.coef, intercept, constraints, model.randomized)
    return metrics


def _model_and_store(model: LinearModel | str | os.PathLike, store: str | os.PathLike | Store) -> tuple[LinearModel, Store]:
    """Load both and check that the store has the model's features, in order, stored with the model's transform."""
    from .io._transform import check_same_features

    model = model if isinstance(model, LinearModel) else LinearModel.load(model)
    st = store if isinstance(store, Store) else open_store(store)
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
    engine: str = "auto",
    client: Any = None,
    scheduler: str | None = None,
    workers: int | None = None,
    memory_limit: str | int | None = None,
    cache: str | None = "stream",
) -> str:
    """Score every row of a store and write ``row, score, label, y`` to a Parquet file.

    ``label`` is the predicted label (+1 where score > threshold, else -1), ``y`` the
    store's label (0 in an unlabelled store). Rows keep the store's order; one row group per shard. A randomized
    model's (``threshold_rule="randomized"``) labels are drawn, each row +1 with
    probability ``clip(1/2 + score - threshold, 0, 1)``, from ``seed`` (the same seed, the
    same labels); ``seed`` is an error for a deterministic model.

    Returns
    -------
    str
        The path written.
    """
    out = check_output_path(out, overwrite=overwrite, what="predictions")  # before any pass
    model, st = _model_and_store(model, store)
    if seed is not None and not model.randomized:
        raise ParameterError("The 'seed' parameter of predict draws a randomized model's labels (threshold_rule='randomized'); this model is deterministic.")
    rng = np.random.default_rng(seed) if model.randomized else None
    schema = pa.schema([("row", pa.int64()), ("score", pa.float64()), ("label", pa.int8()), ("y", pa.int8())],
                       metadata={PREDICTIONS_FORMAT_KEY: PREDICTIONS_FORMAT})
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out) + ".tmp-", dir=os.path.dirname(out))
    os.close(fd)
    lock = None
    try:
        lock = lock_temporary(tmp)  # another run's stale-temporary sweep leaves it alone
        with open_dataset(st, engine=engine, client=client, scheduler=scheduler, workers=workers, memory_limit=memory_limit, cache=cache) as ds:
            parts = ds.map_gather(shard_scores_labels, model.coef, model.intercept)
        with pq.ParquetWriter(tmp, schema) as writer:
            for (start, stop), (s, y) in zip(st.manifest.shard_bounds, parts):
                positive = s > threshold if rng is None else rng.random(s.size) < ramp(s - threshold)
                label = np.where(positive, 1, -1).astype(np.int8)
                columns = [pa.array(np.arange(start, stop, dtype=np.int64)), pa.array(s), pa.array(label), pa.array(y)]
                writer.write_table(pa.Table.from_arrays(columns, schema=schema))
        set_default_mode(tmp)  # mkstemp made it 0600: give it the user's umask
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        if lock is not None:
            os.close(lock)
    return out
