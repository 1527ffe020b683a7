"""``dpipe.evaluate`` and ``dpipe.predict``: score a store on the cluster.

Evaluation sorts each shard's scores on its worker and merges the sorted runs on
the driver (the driver receives 9 bytes per row: a float64 score and an int8
label), then computes exact metrics — ties in the ROC-AUC counted as half.
Prediction writes one row per store row, in store order, to a Parquet file that
is written under a temporary name and renamed into place.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .io import Store, open_store
from .metrics import RankSummary
from .model import LinearModel
from .reduce import shard_scores_labels, shard_sorted_scores

__all__ = ["evaluate", "predict", "evaluate_dataset", "rank_summary", "merge_sorted_runs"]


def merge_sorted_runs(runs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Merge per-shard runs sorted by decreasing score into one sorted run.

    A stable sort of the concatenation: numpy's timsort finds the k runs and merges
    them in O(n log k).
    """
    runs = [r for r in runs if r[0].size]
    if not runs:
        return np.zeros(0), np.zeros(0, np.int8)
    s = np.concatenate([r[0] for r in runs])
    y = np.concatenate([r[1] for r in runs])
    order = np.argsort(-s, kind="stable")
    return s[order], y[order]


def evaluate_dataset(ds: Any, coef: np.ndarray, intercept: float, *, k: int | float | None = None, threshold: float = 0.0) -> dict[str, Any]:
    """Exact metrics of the model ``(coef, intercept)`` on an opened dataset."""
    return rank_summary(ds, coef, intercept).metrics(threshold=threshold, k=k)


def rank_summary(ds: Any, coef: np.ndarray, intercept: float) -> RankSummary:
    """Scores of every row, sorted on the workers, merged on the driver into a :class:`RankSummary`."""
    s, y = merge_sorted_runs(ds.map_gather(shard_sorted_scores, np.asarray(coef, dtype=np.float64), float(intercept)))
    return RankSummary.from_sorted(s, y)


def evaluate(
    model: LinearModel | str | os.PathLike,
    store: str | os.PathLike | Store,
    *,
    k: int | float | None = None,
    threshold: float = 0.0,
    engine: str = "dask",
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
    k : int or float, optional
        Cut-off of Prec@k / Rec@k: a row count, or a fraction of the rows in (0, 1);
        default the number of positives.
    threshold : float
        Rows with score > threshold are predicted positive.
    engine, client, scheduler, workers, memory_limit, cache
        Where the scoring pass runs (see :func:`dpipe.train`); one pass, so shards
        are streamed by default.

    Returns
    -------
    dict
        Metric name -> value, plus ``n`` and ``n_positive``.
    """
    from ._train import open_dataset

    model, st = _model_and_store(model, store)
    with open_dataset(st, engine=engine, client=client, scheduler=scheduler, workers=workers, memory_limit=memory_limit, cache=cache) as ds:
        return evaluate_dataset(ds, model.coef, model.intercept, k=k, threshold=threshold)


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
    engine: str = "dask",
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
    from ._train import open_dataset

    model, st = _model_and_store(model, store)
    out = os.path.abspath(os.fspath(out))
    if os.path.exists(out) and not overwrite:
        raise FileExistsError(f"{out}: exists; pass overwrite=True (--overwrite) to replace it")
    schema = pa.schema([("row", pa.int64()), ("score", pa.float64()), ("label", pa.int8()), ("y", pa.int8())])
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out) + ".tmp-", dir=os.path.dirname(out))
    os.close(fd)
    try:
        with open_dataset(st, engine=engine, client=client, scheduler=scheduler, workers=workers, memory_limit=memory_limit, cache=cache) as ds:
            parts = ds.map_gather(shard_scores_labels, model.coef, model.intercept)
        with pq.ParquetWriter(tmp, schema) as writer:
            for (start, stop), (s, y) in zip(st.manifest.shard_bounds, parts):
                label = np.where(s > threshold, 1, -1).astype(np.int8)
                columns = [pa.array(np.arange(start, stop, dtype=np.int64)), pa.array(s), pa.array(label), pa.array(y)]
                writer.write_table(pa.Table.from_arrays(columns, schema=schema))
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out
