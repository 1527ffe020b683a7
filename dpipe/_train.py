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
from .reduce import ClassMoments, class_moments_of_shard, column_moments_of_shard, merge_column_moments, merge_moments
from .objectives import SmoothedAUCObjective, SmoothedPRBEPObjective, StandardizedObjective
from .solvers import FitResult, default_smoothing, fit_auc_moment, fit_error_moment, fit_smooth

__all__ = ["train", "fit_moments", "calibrate_threshold", "OBJECTIVES", "open_dataset"]

log = logging.getLogger("dpipe.train")

#: Objective -> solvers that train it (the first is the default).
OBJECTIVES: dict[str, tuple[str, ...]] = {
    "auc-moment": ("closed-form", "lbfgs"),
    "error-moment": ("lbfgs",),
    "auc-smooth": ("lbfgs",),
    "prbep-smooth": ("lbfgs",),
}

MOMENT_OBJECTIVES = ("auc-moment", "error-moment")

#: Defaults that differ by family: moment objectives follow Ghanbari et al. (penalty
#: weight, L-BFGS memory 20, gradient tolerance 1e-4), smoothed ones Zhang et al.
#: (lam = 1e-4, i.e. SVM-perf's C = 100, L-BFGS memory 6).
FAMILY_DEFAULTS = {
    "moment": {"lam": 1e-3, "memory": 20, "tol": 1e-4},
    "smooth": {"lam": 1e-4, "memory": 6, "tol": 1e-6},
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


def check_fit_params(
    objective: str,
    solver: str | None,
    owner: str,
    *,
    lam: float | None = None,
    ridge: float = 1e-6,
    max_iter: int = 500,
    tol: float | None = None,
    memory: int | None = None,
    smoothing: float | None = None,
    epsilon: float = 1e-3,
    mu_scale: float = 1.0,
    continuation: bool = False,
    standardize: bool = False,
    precondition: bool = False,
) -> dict[str, Any]:
    """Validate the hyper-parameters of a fit; returns them with the family defaults filled in."""
    solver = _check_objective_solver(objective, solver, owner)
    defaults = FAMILY_DEFAULTS["moment" if objective in MOMENT_OBJECTIVES else "smooth"]
    params = {
        "objective": objective,
        "solver": solver,
        "lam": check_number(defaults["lam"] if lam is None else lam, "lam", owner, 0.0, np.inf, closed="left"),
        "max_iter": check_int(max_iter, "max_iter", owner, low=1),
        "tol": check_number(defaults["tol"] if tol is None else tol, "tol", owner, 0.0, np.inf),
        "memory": check_int(defaults["memory"] if memory is None else memory, "memory", owner, low=1),
    }
    if objective in MOMENT_OBJECTIVES:
        params["ridge"] = check_number(ridge, "ridge", owner, 0.0, np.inf, closed="left")
    else:
        params["smoothing"] = None if smoothing is None else check_number(smoothing, "smoothing", owner, 0.0, np.inf)
        params["epsilon"] = check_number(epsilon, "epsilon", owner, 0.0, np.inf)
        params["mu_scale"] = check_number(mu_scale, "mu_scale", owner, 0.0, np.inf)
        params["continuation"] = bool(continuation)
        params["standardize"] = bool(standardize)
        params["precondition"] = bool(precondition)
        if params["standardize"] and params["precondition"]:
            raise ParameterError(
                f"The 'standardize' and 'precondition' parameters of {owner} exclude each other: standardize changes the objective "
                "(ridge on scaled weights), precondition keeps it and only rescales the solver's coordinates. Choose one."
            )
    return params


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


def fit_smooth_on(ds: Any, n_positive: int, n_negative: int, params: dict[str, Any], validate: Callable | None = None) -> tuple[np.ndarray, float, FitResult]:
    """Fit a smoothed rank objective on an opened dataset (two passes per evaluation)."""
    objective = params["objective"]
    width = params["smoothing"]
    if width is None:
        width = default_smoothing(objective, n_positive, n_negative, params["epsilon"], params["mu_scale"])
    cls = SmoothedAUCObjective if objective == "auc-smooth" else SmoothedPRBEPObjective
    scale = np.ones(ds.n_features)
    t_standardize = 0.0
    if params.get("standardize") or params.get("precondition"):
        t0 = time.perf_counter()
        std = ds.map_reduce(column_moments_of_shard, merge_column_moments).std
        scale = np.where(std > 0, std, 1.0)
        t_standardize = time.perf_counter() - t0
        log.info("per-feature scales from one pass (%.3f s)", t_standardize)
    if params.get("standardize"):
        make = lambda width: StandardizedObjective(cls(ds, 0.0, width, n_positive, n_negative), scale, params["lam"])  # noqa: E731
    elif params.get("precondition"):  # the same objective in the coordinates v = scale * w
        make = lambda width: StandardizedObjective(cls(ds, params["lam"], width, n_positive, n_negative), scale, 0.0)  # noqa: E731
    else:
        make = lambda width: cls(ds, params["lam"], width, n_positive, n_negative)  # noqa: E731
    w_validate = None if validate is None else (lambda v: validate(v / scale))
    result = fit_smooth(
        make, np.zeros(ds.n_features), width, memory=params["memory"], max_iter=params["max_iter"], tol=params["tol"],
        continuation=params["continuation"], validate=w_validate, name=f"{objective}: ",
    )
    result.info.update(standardized=bool(params.get("standardize")), preconditioned=bool(params.get("precondition")), time_standardize=t_standardize)
    return result.x / scale, 0.0, result


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


def _validator(vds: Any) -> Callable[[np.ndarray], dict[str, float]]:
    """Per-iteration exact validation AUC and PRBEP on an opened dataset (one pass each)."""
    from ._evaluate import evaluate_dataset

    def validate(w: np.ndarray) -> dict[str, float]:
        v = evaluate_dataset(vds, w, 0.0)
        return {"validation_auc": v["roc_auc"], "validation_prbep": v["prbep"]}

    return validate


def train(
    store: str | os.PathLike | Store,
    objective: str = "auc-moment",
    *,
    solver: str | None = None,
    lam: float | None = None,
    ridge: float = 1e-6,
    max_iter: int = 500,
    tol: float | None = None,
    memory: int | None = None,
    smoothing: float | None = None,
    epsilon: float = 1e-3,
    mu_scale: float = 1.0,
    continuation: bool = False,
    standardize: bool = False,
    precondition: bool = False,
    validation: str | os.PathLike | Store | None = None,
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
    objective : {"auc-moment", "error-moment", "auc-smooth", "prbep-smooth"}
        ``auc-moment`` minimizes the moment ranking loss (1 - AUC under the normal
        model); ``error-moment`` the moment expected 0-1 error with a bias (one data
        pass, Ghanbari et al.). ``auc-smooth`` / ``prbep-smooth`` minimize
        ``lam/2 ||w||^2`` plus the smoothed ROCArea / PRBEP risk of SVM-perf (Zhang
        et al.; two passes per evaluation).
    solver : str, optional
        ``auc-moment``: "closed-form" (default) or "lbfgs" (the paper's route);
        the others: "lbfgs".
    lam : float, optional
        Moment objectives: weight of the unit-norm penalty ``lam (1 - ||w||^2)^2``
        (default 1e-3). Smoothed objectives: the ridge ``lam/2 ||w||^2`` (default
        1e-4, SVM-perf's C = 100; ``lam = 1 / (100 C)``).
    ridge : float
        Ridge added to the standardized covariance of the closed form.
    max_iter, tol, memory : int, float, int
        L-BFGS iteration limit, gradient tolerance and memory (defaults: 500, and
        1e-4 / 20 for moment objectives, 1e-6 / 6 for smoothed ones).
    smoothing : float, optional
        Smoothed objectives: the Huber width t (auc-smooth) or mu (prbep-smooth);
        default the paper's ``mu = epsilon / D`` times ``mu_scale``.
    epsilon, mu_scale : float
        The paper's accuracy epsilon (1e-3) and a factor on its smoothing (the paper
        studies 1, 100 and 1000).
    continuation : bool
        Smoothed objectives: start with a 1000 times wider smoothing and shrink it
        tenfold per stage, warm-starting.
    standardize : bool
        Smoothed objectives: fit on features scaled to unit standard deviation (one
        extra pass; the ridge then applies to the scaled weights, so the objective is
        not SVM-perf's on raw features). The model keeps raw-feature weights. Helps
        much when raw columns differ in scale by orders of magnitude (kdd99).
    precondition : bool
        Smoothed objectives: keep the objective (SVM-perf's, ridge on the raw
        weights) but run L-BFGS in the coordinates ``v = s * w`` with ``s`` the
        per-feature standard deviations (one extra pass). A diagonal preconditioner:
        same minimizer, far fewer iterations when raw scales differ widely.
    validation : str or Store, optional
        Smoothed objectives: measure the exact validation AUC and PRBEP after every
        iteration (one more pass each).
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
        candidate; see :func:`calibrate_threshold`). ``False`` keeps the fit's own
        intercept (the moment model's threshold; 0 for smoothed objectives).

    Returns
    -------
    LinearModel
    """
    check_choice(engine, "engine", "train", ENGINES)
    params = check_fit_params(
        objective, solver, "train", lam=lam, ridge=ridge, max_iter=max_iter, tol=tol, memory=memory,
        smoothing=smoothing, epsilon=epsilon, mu_scale=mu_scale, continuation=continuation, standardize=standardize,
        precondition=precondition,
    )
    st = store if isinstance(store, Store) else open_store(store)
    m = st.manifest
    from ._evaluate import evaluate_dataset, rank_summary

    with contextlib.ExitStack() as stack:
        c = None if engine == "local" else stack.enter_context(cluster_client(client=client, scheduler=scheduler, workers=workers, memory_limit=memory_limit))
        ds = stack.enter_context(open_dataset(st, engine=engine, client=c, cache=cache))
        t0 = time.perf_counter()
        if objective in MOMENT_OBJECTIVES:
            log.info("%s: moments pass over %d rows, %d features, %d shards", st.path, m.n_rows, m.n_features, st.n_shards)
            moments = ds.map_reduce(class_moments_of_shard, merge_moments)
            t_data = time.perf_counter() - t0
            log.info("moments pass: %.3f s (%d negative, %d positive rows)", t_data, moments.count[0], moments.count[1])
            coef, intercept, result = fit_moments(moments, params)
            result.time_data = t_data + getattr(ds, "load_seconds", 0.0)
        else:
            validate = None
            if validation is not None:
                vst = validation if isinstance(validation, Store) else open_store(validation)
                validate = _validator(stack.enter_context(open_dataset(vst, engine=engine, client=c, cache="stream")))
            log.info("%s: %s on %d rows, %d features, %d shards", st.path, objective, m.n_rows, m.n_features, st.n_shards)
            coef, intercept, result = fit_smooth_on(ds, m.n_positive, m.n_negative, params, validate)
            result.time_data = getattr(ds, "load_seconds", 0.0) + result.info["time_standardize"]
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
