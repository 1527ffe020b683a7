"""``dpipe.train``: one moments pass on the cluster, then the fit on the coordinator."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ._validation import check_choice, check_int, check_number
from .engine import LocalDataset, ShardedDataset, cluster_client
from .exceptions import ParameterError
from .io import Store, open_store
from .metrics import RankSummary
from .model import LinearModel
from .reduce import ClassMoments, class_moments_of_shard, merge_moments
from .solvers import FitResult, fit_auc_moment, fit_error_moment

__all__ = ["train", "fit_moments", "calibrate_threshold", "OBJECTIVES", "open_dataset"]

log = logging.getLogger("dpipe.train")

#: Objective -> solvers that train it (the first is the default).
OBJECTIVES: dict[str, tuple[str, ...]] = {
    "auc-moment": ("closed-form", "lbfgs"),
    "error-moment": ("lbfgs",),
}

ENGINES = ("dask", "local")


def _check_objective_solver(objective: str, solver: str | None, owner: str) -> str:
    check_choice(objective, "objective", owner, OBJECTIVES)
    valid = OBJECTIVES[objective]
    if solver is None:
        return valid[0]
    if solver not in valid:
        pairs = "; ".join(f"{o}: {', '.join(s)}" for o, s in OBJECTIVES.items())
        raise ParameterError(f"The 'solver' parameter of {owner} cannot be {solver!r} for objective {objective!r}. Valid pairs: {pairs}.")
    return solver


def check_fit_params(objective: str, solver: str | None, lam: float, ridge: float, max_iter: int, tol: float, memory: int, owner: str) -> dict[str, Any]:
    """Validate the hyper-parameters of a fit; returns them normalised."""
    return {
        "objective": objective,
        "solver": _check_objective_solver(objective, solver, owner),
        "lam": check_number(lam, "lam", owner, 0.0, np.inf, closed="left"),
        "ridge": check_number(ridge, "ridge", owner, 0.0, np.inf, closed="left"),
        "max_iter": check_int(max_iter, "max_iter", owner, low=1),
        "tol": check_number(tol, "tol", owner, 0.0, np.inf),
        "memory": check_int(memory, "memory", owner, low=1),
    }


def calibrate_threshold(
    coef: np.ndarray, intercept: float, result: FitResult, summarise: Callable[[np.ndarray, float], RankSummary]
) -> tuple[np.ndarray, float, RankSummary, float]:
    """Choose among the fit's candidate models by exact training error, at their best threshold.

    The moment objectives model the score distributions as normal; the threshold
    that minimizes the *modelled* error can be off where they are not. One pass per
    candidate sorts the training scores and finds the threshold with the fewest
    training errors (exact); the candidate with the fewest errors is kept and its
    intercept shifted to that threshold. ``result.info["calibration"]`` records
    every candidate's modelled error, training error and threshold.

    Parameters
    ----------
    coef, intercept : ndarray, float
        The fit's model (used when it lists no candidates).
    result : FitResult
        The fit record; its ``info["candidates"]`` is consumed.
    summarise : callable
        ``(coef, intercept) -> RankSummary`` of the training scores.

    Returns
    -------
    coef, intercept, summary, threshold
        The chosen model with its calibrated intercept, the RankSummary of its
        uncalibrated training scores and the threshold that was subtracted.
    """
    candidates = result.info.pop("candidates", None) or [{"label": "fit", "raw": (coef, intercept), "modelled_error": None}]
    table, best = [], None
    for cand in candidates:
        w, b = cand["raw"]
        summary = summarise(w, b)
        t, errors = summary.best_threshold()
        table.append({"label": cand["label"], "modelled_error": cand.get("modelled_error"), "train_error": errors / summary.n, "threshold": t})
        if best is None or errors < best[0]:
            best = (errors, w, b, t, summary)
    assert best is not None
    _, w, b, t, summary = best
    result.info["calibration"] = table
    log.info("threshold calibration: %s", "; ".join(f"{r['label']}: training error {r['train_error']:.5f}" for r in table))
    return w, b - t, summary, t


def fit_moments(moments: ClassMoments, params: dict[str, Any]) -> tuple[np.ndarray, float, FitResult]:
    """Fit a moment objective from class moments (no data access).

    Parameters
    ----------
    moments : ClassMoments
        Moments of the training data.
    params : dict
        Output of :func:`check_fit_params`.

    Returns
    -------
    coef, intercept, FitResult
    """
    common = {k: params[k] for k in ("lam", "ridge", "max_iter", "tol", "memory")}
    if params["objective"] == "auc-moment":
        return fit_auc_moment(moments, solver=params["solver"], **common)
    return fit_error_moment(moments, **common)


@contextlib.contextmanager
def open_dataset(
    store: Store,
    *,
    engine: str = "dask",
    client: Any = None,
    scheduler: str | None = None,
    workers: int | None = None,
    memory_limit: str | int | None = None,
    cache: str | None = None,
) -> Iterator[ShardedDataset | LocalDataset]:
    """Open ``store`` on the resolved cluster (or in this process with ``engine="local"``)."""
    check_choice(engine, "engine", "open_dataset", ENGINES)
    if engine == "local":
        with LocalDataset(store, cache=cache) as ds:
            yield ds
        return
    with cluster_client(client=client, scheduler=scheduler, workers=workers, memory_limit=memory_limit) as c:
        with ShardedDataset(store, c, cache=cache) as ds:
            yield ds


def train(
    store: str | os.PathLike | Store,
    objective: str = "auc-moment",
    *,
    solver: str | None = None,
    lam: float = 1e-3,
    ridge: float = 1e-6,
    max_iter: int = 500,
    tol: float = 1e-4,
    memory: int = 20,
    engine: str = "dask",
    client: Any = None,
    scheduler: str | None = None,
    workers: int | None = None,
    memory_limit: str | int | None = None,
    cache: str | None = None,
    out: str | os.PathLike | None = None,
    train_metrics: bool = True,
    calibrate: bool = True,
) -> LinearModel:
    """Train a linear model on a store for the given objective.

    Parameters
    ----------
    store : str or Store
        Training store (Zarr or Parquet).
    objective : {"auc-moment", "error-moment"}
        ``auc-moment`` minimizes the moment ranking loss (1 - AUC under the normal
        model); ``error-moment`` the moment expected 0-1 error with a bias.
    solver : str, optional
        ``auc-moment``: "closed-form" (default) or "lbfgs" (the paper's route);
        ``error-moment``: "lbfgs".
    lam : float
        Weight of the unit-norm penalty ``lam (1 - ||w||^2)^2`` (L-BFGS routes).
    ridge : float
        Ridge added to the standardized covariance of the closed form.
    max_iter, tol, memory : int, float, int
        L-BFGS iteration limit, gradient tolerance and memory.
    engine : {"dask", "local"}
        Run the passes on a dask cluster (default) or in this process.
    client, scheduler, workers, memory_limit : optional
        Cluster selection, see :func:`dpipe.engine.cluster_client`.
    cache : {"auto", "memory", "stream"}, optional
        Keep shards in worker memory or stream them on every pass.
    out : path, optional
        Save the model there (JSON).
    train_metrics : bool
        Keep the model's exact metrics on the training store in the model.
    calibrate : bool
        Set the intercept to the threshold with the fewest training errors, and for
        ``error-moment`` keep, among both L-BFGS fits and the ``auc-moment``
        direction, the one with the fewest training errors (one score pass per
        candidate; see :func:`calibrate_threshold`). ``False`` keeps the moment
        model's own threshold and choice (the paper's method, no extra pass).

    Returns
    -------
    LinearModel
    """
    params = check_fit_params(objective, solver, lam, ridge, max_iter, tol, memory, "train")
    st = store if isinstance(store, Store) else open_store(store)
    from ._evaluate import evaluate_dataset, rank_summary

    with open_dataset(st, engine=engine, client=client, scheduler=scheduler, workers=workers, memory_limit=memory_limit, cache=cache) as ds:
        log.info("%s: moments pass over %d rows, %d features, %d shards", st.path, st.manifest.n_rows, st.manifest.n_features, st.n_shards)
        t0 = time.perf_counter()
        moments = ds.map_reduce(class_moments_of_shard, merge_moments)
        t_data = time.perf_counter() - t0
        log.info("moments pass: %.3f s (%d negative, %d positive rows)", t_data, moments.count[0], moments.count[1])
        coef, intercept, result = fit_moments(moments, params)
        result.time_data = t_data + getattr(ds, "load_seconds", 0.0)
        log.info("%s fit: %.3f s, objective %.8g", objective, result.time_solve, result.fun)
        metrics = {}
        if calibrate:
            t0 = time.perf_counter()
            coef, intercept, summary, threshold = calibrate_threshold(coef, intercept, result, lambda w, b: rank_summary(ds, w, b))
            result.info["time_calibration"] = time.perf_counter() - t0
            if train_metrics:
                metrics["train"] = summary.metrics(threshold=threshold)
        else:
            result.info.pop("candidates", None)
            if train_metrics:
                metrics["train"] = evaluate_dataset(ds, coef, intercept)
    m = st.manifest
    model = LinearModel(
        coef,
        intercept,
        feature_names=m.feature_names,
        objective=objective,
        params=dict(params, calibrate=calibrate),
        encoding=m.encoding,
        training={
            "store": st.path,
            "manifest_sha256": m.digest(),
            "n_rows": m.n_rows,
            "n_negative": m.n_negative,
            "n_positive": m.n_positive,
            "engine": engine,
        },
        fit=result.to_dict(),
        metrics=metrics,
    )
    if out is not None:
        model.save(out)
        log.info("model written to %s", out)
    return model
