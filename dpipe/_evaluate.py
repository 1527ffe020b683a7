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

import os
import tempfile
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ._modes import set_default_mode
from ._output import PREDICTIONS_FORMAT, PREDICTIONS_FORMAT_KEY, check_output_path, lock_temporary
from .engine import open_dataset, rank_summary
from .io import Store, open_store
from .model import LinearModel
from .reduce import shard_scores_labels

__all__ = ["evaluate", "predict", "evaluate_dataset"]


def evaluate_dataset(
    ds: Any, coef: np.ndarray, intercept: float, *, k: float | None = None, k_fraction: float | None = None, threshold: float = 0.0
) -> dict[str, Any]:
    """Exact (weighted, when the store has a weight column) metrics of the model ``(coef, intercept)`` on an opened dataset."""
    return rank_summary(ds, coef, intercept).metrics(threshold=threshold, k=k, k_fraction=k_fraction)


def evaluate(
    model: LinearModel | str | os.PathLike,
    store: str | os.PathLike | Store,
    *,
    k: float | None = None,
    k_fraction: float | None = None,
    threshold: float = 0.0,
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
    engine, client, scheduler, workers, memory_limit, cache
        Where the scoring pass runs (see :func:`dpipe.train`; ``"auto"`` stays in this
        process for small stores); one pass, so shards are streamed by default.

    Returns
    -------
    dict
        Metric name -> value, plus ``n`` and ``n_positive``.
    """
    model, st = _model_and_store(model, store)
    with open_dataset(st, engine=engine, client=client, scheduler=scheduler, workers=workers, memory_limit=memory_limit, cache=cache) as ds:
        return evaluate_dataset(ds, model.coef, model.intercept, k=k, k_fraction=k_fraction, threshold=threshold)


def _model_and_store(model: LinearModel | str | os.PathLike, store: str | os.PathLike | Store) -> tuple[LinearModel, Store]:
    """Load both and check that the store has the model's features, in order."""
    model = model if isinstance(model, LinearModel) else LinearModel.load(model)
    st = store if isinstance(store, Store) else open_store(store)
    m = st.manifest
    if m.n_features != model.n_features:
        raise ValueError(f"{st.path}: the store has {m.n_features} features, the model {model.n_features}; ingest it with --like the training store")
    if m.feature_names != model.feature_names:
        bad = next(i for i, (a, b) in enumerate(zip(m.feature_names, model.feature_names)) if a != b)
        raise ValueError(f"{st.path}: feature {bad} is {m.feature_names[bad]!r} in the store but {model.feature_names[bad]!r} in the model; ingest it with --like the training store")
    return model, st


def predict(
    model: LinearModel | str | os.PathLike,
    store: str | os.PathLike | Store,
    out: str | os.PathLike,
    *,
    threshold: float = 0.0,
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
    store's label. Rows keep the store's order; one row group per shard.

    Returns
    -------
    str
        The path written.
    """
    out = check_output_path(out, overwrite=overwrite, what="predictions")  # before any pass
    model, st = _model_and_store(model, store)
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
                label = np.where(s > threshold, 1, -1).astype(np.int8)
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
