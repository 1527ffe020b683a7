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
from .exceptions import DPipeError, ParameterError
from .io import Store, open_store
from .metrics import RankSummary
from .model import LinearModel
from .reduce import ClassMoments, class_moments_of_shard, column_moments_of_shard, merge_column_moments, merge_moments
from .objectives import STRUCTURAL_LOSSES, PreconditionedObjective, RayMinimum, SmoothedAUCObjective, SmoothedPRBEPObjective, StructuralRisk
from .solvers import (
    CONTINUATION_START, MOMENT_PRECONDITION_MAX_FEATURES, FitResult, default_smoothing, fit_auc_moment, fit_cutting_plane, fit_error_moment, fit_smooth,
    moment_preconditioner,
)

__all__ = ["train", "fit_moments", "fit_smooth_on", "fit_structural_on", "fit_on_dataset", "calibrate_threshold", "OBJECTIVES", "open_dataset"]

log = logging.getLogger("dpipe.train")

#: Objective -> solvers that train it (the first is the default).
OBJECTIVES: dict[str, tuple[str, ...]] = {
    "auc-moment": ("closed-form", "lbfgs"),
    "error-moment": ("lbfgs",),
    "auc-smooth": ("lbfgs",),
    "prbep-smooth": ("lbfgs",),
    # SVM-perf's multivariate losses (Joachims 2005), by 1-slack cutting planes
    **{loss: ("cutting-plane",) for loss in STRUCTURAL_LOSSES},
}

MOMENT_OBJECTIVES = ("auc-moment", "error-moment")
SMOOTH_OBJECTIVES = ("auc-smooth", "prbep-smooth")
#: starting points of the smoothed objectives' L-BFGS
INITS = ("zeros", "auc-moment")
#: changes of variables for the smoothed objectives' L-BFGS (``precondition=True`` is "diagonal")
PRECONDITIONERS = ("none", "diagonal", "moments")
STRUCTURAL_OBJECTIVES = tuple(STRUCTURAL_LOSSES)
#: structural losses that come with their own decision threshold (the bias feature);
#: the others rank, so their threshold is calibrated on the training data by default
THRESHOLD_LOSSES = ("error", "f1")

#: Defaults that differ by family: moment objectives follow Ghanbari et al. (penalty
#: weight, L-BFGS memory 20, gradient tolerance 1e-4), smoothed ones Zhang et al.
#: (lam = 1e-4, i.e. SVM-perf's C = 100, L-BFGS memory 6), SVM-perf's losses the same
#: lam with up to 1000 cutting-plane iterations (memory and tol are unused there).
FAMILY_DEFAULTS = {
    "moment": {"lam": 1e-3, "memory": 20, "tol": 1e-4, "max_iter": 500},
    "smooth": {"lam": 1e-4, "memory": 6, "tol": 1e-6, "max_iter": 500},
    "structural": {"lam": 1e-4, "memory": 6, "tol": 1e-6, "max_iter": 1000},
}


def family(objective: str) -> str:
    """``"moment"``, ``"smooth"`` or ``"structural"``."""
    return "moment" if objective in MOMENT_OBJECTIVES else "structural" if objective in STRUCTURAL_OBJECTIVES else "smooth"


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
) -> dict[str, Any]:
    """Validate the hyper-parameters of a fit; returns them with the family defaults filled in."""
    solver = _check_objective_solver(objective, solver, owner)
    fam = family(objective)
    preconditioner = _check_preconditioner(precondition, owner)
    defaults = FAMILY_DEFAULTS[fam]
    if C is not None:
        if fam != "structural" and objective not in SMOOTH_OBJECTIVES:
            raise ParameterError(f"The 'C' parameter of {owner} applies to the smoothed and SVM-perf objectives (lam = 1 / (100 C)), not to {objective!r}; use lam.")
        if lam is not None:
            raise ParameterError(f"The 'C' and 'lam' parameters of {owner} are two names for one weight (lam = 1 / (100 C)); give one.")
        lam = 1.0 / (100.0 * check_number(C, "C", owner, 0.0, np.inf))
    params = {
        "objective": objective,
        "solver": solver,
        "lam": check_number(defaults["lam"] if lam is None else lam, "lam", owner, 0.0, np.inf, closed="neither" if fam == "structural" else "left"),
        "max_iter": check_int(defaults["max_iter"] if max_iter is None else max_iter, "max_iter", owner, low=1),
        "tol": check_number(defaults["tol"] if tol is None else tol, "tol", owner, 0.0, np.inf),
        "memory": check_int(defaults["memory"] if memory is None else memory, "memory", owner, low=1),
    }
    params["calibrate"] = (objective not in THRESHOLD_LOSSES) if calibrate is None else bool(calibrate)
    check_choice(init, "init", owner, INITS)
    if init != "zeros" and objective not in SMOOTH_OBJECTIVES:
        raise ParameterError(f"The 'init' parameter of {owner} applies to the smoothed objectives ({', '.join(SMOOTH_OBJECTIVES)}), not to {objective!r}.")
    if fam != "smooth" and preconditioner != "none":
        reason = "the cutting-plane solver's dual QP does not need it (use standardize to change the objective's scaling)" if fam == "structural" else (
            "the moment objectives are solved in standardized coordinates already")
        raise ParameterError(f"The 'precondition' parameter of {owner} applies to the L-BFGS solver of the smoothed objectives; {reason}.")
    if fam == "moment":
        params["ridge"] = check_number(ridge, "ridge", owner, 0.0, np.inf, closed="left")
    elif fam == "structural":
        params["eps"] = check_number(eps, "eps", owner, 0.0, np.inf)
        params["standardize"] = bool(standardize)
        takes_k = objective in ("prec@k", "rec@k")
        if (k is not None or k_fraction is not None) and not takes_k:
            raise ParameterError(f"The 'k' and 'k_fraction' parameters of {owner} apply to prec@k and rec@k, not to {objective!r}.")
        if k is not None and k_fraction is not None:
            raise ParameterError(f"The 'k' and 'k_fraction' parameters of {owner} exclude each other: give the count or the fraction of positives.")
        params["k"] = None if k is None else check_int(k, "k", owner, low=1)
        params["k_fraction"] = None if k_fraction is None else check_number(k_fraction, "k_fraction", owner, 0.0, np.inf)
        params["bias"] = check_number(bias, "bias", owner, 0.0, np.inf, closed="left")
    else:
        params["smoothing"] = None if smoothing is None else check_number(smoothing, "smoothing", owner, 0.0, np.inf)
        params["epsilon"] = check_number(epsilon, "epsilon", owner, 0.0, np.inf)
        params["mu_scale"] = check_number(mu_scale, "mu_scale", owner, 0.0, np.inf)
        params["continuation"] = bool(continuation)
        params["standardize"] = bool(standardize)
        params["precondition"] = preconditioner
        params["init"] = init
        if params["standardize"] and preconditioner == "diagonal":
            raise ParameterError(
                f"The 'standardize' and 'precondition=\"diagonal\"' parameters of {owner} exclude each other: standardize changes the objective "
                "(ridge on scaled weights) and already solves it in scaled coordinates; precondition='diagonal' keeps the objective and only "
                "rescales the coordinates. Choose one, or precondition='moments', which goes with either."
            )
    return params


def _check_preconditioner(precondition: bool | str, owner: str) -> str:
    """``"none"``, ``"diagonal"`` or ``"moments"`` from the ``precondition`` parameter (True is "diagonal")."""
    if isinstance(precondition, (bool, np.bool_)):
        return "diagonal" if precondition else "none"
    if not isinstance(precondition, str):
        raise ParameterError(f"The 'precondition' parameter of {owner} must be True, False or one of {', '.join(map(repr, PRECONDITIONERS))}. Got {precondition!r} instead.")
    return check_choice(precondition, "precondition", owner, PRECONDITIONERS)


def resolve_k(params: dict[str, Any], n_positive: int, n_rows: int, owner: str = "train") -> int | None:
    """The number of predicted positives for prec@k / rec@k (SVM-perf's ``--p`` convention).

    ``k`` as given; else ``k_fraction`` times the number of positives; else SVM-perf's
    defaults, half the positives for prec@k and twice the positives for rec@k.
    """
    if params["objective"] not in ("prec@k", "rec@k"):
        return None
    if params.get("k") is not None:
        k = int(params["k"])
    else:
        fraction = params.get("k_fraction") or (0.5 if params["objective"] == "prec@k" else 2.0)
        k = max(1, int(round(fraction * n_positive)))
    if k > n_rows:
        raise ParameterError(f"The 'k' of {owner} must be at most the number of training rows ({n_rows}); got {k}.")
    return k


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


def feature_scales(ds: Any) -> tuple[np.ndarray, float]:
    """Per-feature standard deviations from one pass (1 for constant columns), and its seconds."""
    t0 = time.perf_counter()
    std = ds.map_reduce(column_moments_of_shard, merge_column_moments).std
    seconds = time.perf_counter() - t0
    log.info("per-feature scales from one pass (%.3f s)", seconds)
    return np.where(std > 0, std, 1.0), seconds


#: the options that use the auc-moment ray, and what to use instead when the data has no such direction
MOMENT_RAY_FALLBACKS = {"init='auc-moment'": "init='zeros'", "precondition='moments'": "precondition='diagonal'"}


def moment_ray(
    moments: ClassMoments, risk: Any, scale: np.ndarray, penalty: np.ndarray, lam: float, ridge: float, uses: tuple[str, ...]
) -> tuple[np.ndarray, RayMinimum, dict[str, Any]]:
    """The auc-moment closed-form direction and the smoothed objective's minimum along it.

    The direction ``(S+ + S- + ridge I)^-1 (mu+ - mu-)`` (standardized coordinates,
    returned on raw features with unit standardized norm) is the moment model's ranking.
    ``risk`` (built with ``lam = 0``) plus the ridge ``lam/2 sum p_j w_j^2`` is then
    minimized exactly along it (one score pass, :meth:`ray_minimum`), which also
    measures the risk's curvature there. The minimum is ``init="auc-moment"``'s start;
    the curvature sets ``precondition="moments"``'s scale. ``uses`` names the
    parameters that asked for it, for the error when there is no such direction.
    """
    try:
        coef, _, moment_fit = fit_auc_moment(moments, ridge=ridge)
    except DPipeError as error:
        raise DPipeError(f"{' and '.join(uses)}: {error}; use {' and '.join(MOMENT_RAY_FALLBACKS[u] for u in uses)}") from error
    direction = coef / np.linalg.norm(coef * scale)
    ray = risk.ray_minimum(direction, ridge=lam * float(direction @ (penalty * direction)))
    log.info("the auc-moment direction (moment ranking loss %.4g): the objective is lowest at %.4g times it, curvature %.4g there",
             moment_fit.info["rank_loss"], ray.alpha, ray.curvature)
    return direction, ray, {"init_rank_loss": moment_fit.info["rank_loss"]}


def pooled_scales(moments: ClassMoments) -> np.ndarray:
    """Per-feature standard deviations of both classes together (1 for constant columns), from class moments."""
    w, _, m2 = moments.pooled()
    std = np.sqrt(np.clip(np.diag(m2) / max(w, 1e-300), 0.0, None))
    return np.where(std > 0, std, 1.0)


def fit_smooth_on(ds: Any, n_positive: int, n_negative: int, params: dict[str, Any], validate: Callable | None = None) -> tuple[np.ndarray, float, FitResult]:
    """Fit a smoothed rank objective on an opened dataset (two passes per evaluation).

    The objective is ``R_mu(w) + lam/2 sum_j p_j w_j^2`` with ``p = 1`` (SVM-perf's) or,
    with ``standardize``, ``p = scale^2`` (the ridge on standardized weights). L-BFGS
    runs in coordinates ``u`` with ``w = T u``: ``T = 1`` by default, ``1 / scale``
    with ``standardize`` or ``precondition="diagonal"``, the whitening matrix of
    :func:`moment_preconditioner` with ``precondition="moments"``. With
    ``init="auc-moment"`` or ``precondition="moments"`` a moments pass and one score
    pass come first; on unweighted data the moments also give the feature scales (no
    column pass).
    """
    objective = params["objective"]
    width = params["smoothing"]
    if width is None:
        width = default_smoothing(objective, n_positive, n_negative, params["epsilon"], params["mu_scale"])
    cls = SmoothedAUCObjective if objective == "auc-smooth" else SmoothedPRBEPObjective
    preconditioner, init, lam, d = params.get("precondition", "none"), params.get("init", "zeros"), params["lam"], ds.n_features
    if preconditioner == "moments" and d > MOMENT_PRECONDITION_MAX_FEATURES:
        raise ParameterError(
            f"precondition='moments' factors a d x d matrix on the driver; this store has {d} features, more than "
            f"{MOMENT_PRECONDITION_MAX_FEATURES}. Use precondition='diagonal'."
        )
    moments, t_init, setup_passes = None, 0.0, []  # the data passes before L-BFGS, in order
    uses = tuple(u for u, on in zip(MOMENT_RAY_FALLBACKS, (init == "auc-moment", preconditioner == "moments")) if on)
    if uses:
        t0 = time.perf_counter()
        moments = ds.map_reduce(class_moments_of_shard, merge_moments)
        t_init = time.perf_counter() - t0
        setup_passes.append("class moments")
    scale, t_standardize = np.ones(d), 0.0
    if params.get("standardize") or preconditioner != "none":
        if moments is not None and np.array_equal(moments.weight, moments.count):
            scale = pooled_scales(moments)
        else:
            scale, t_standardize = feature_scales(ds)
            setup_passes.append("column scales")
    penalty = scale**2 if params.get("standardize") else np.ones(d)
    transform = 1.0 / scale if params.get("standardize") or preconditioner == "diagonal" else np.ones(d)
    start, info = np.zeros(d), {"init_scale": None}
    if moments is not None:
        t0 = time.perf_counter()
        first_width = width * CONTINUATION_START if params["continuation"] else width  # fit_smooth's first stage
        risk = cls(ds, 0.0, first_width, n_positive, n_negative)
        direction, ray, info_ray = moment_ray(moments, risk, scale, penalty, lam, params.get("ridge", 1e-6), uses)
        setup_passes.append("ray scores")
        if init == "auc-moment":
            start = ray.alpha * direction
            info.update(info_ray, init_scale=ray.alpha)
        if preconditioner == "moments":
            curvature = ray.curvature
            if curvature <= 0:  # no pair in a quadratic piece along the ray: any positive scale will do, L-BFGS rescales after one step
                curvature = max(lam, 1e-12)
            transform = moment_preconditioner(moments, scale, penalty, lam, curvature)
            info.update(precondition_curvature=curvature)
        t_init += time.perf_counter() - t0
        log.info("moments pass and line search along the auc-moment direction: %.3f s", t_init)

    def make(width: float) -> PreconditionedObjective:
        return PreconditionedObjective(cls(ds, 0.0, width, n_positive, n_negative), transform, lam, penalty)

    coordinates = make(width)  # the change of variables does not depend on the width
    w_validate = None if validate is None else (lambda u: validate(coordinates.to_raw(u)))
    result = fit_smooth(
        make, coordinates.from_raw(start), width, memory=params["memory"], max_iter=params["max_iter"], tol=params["tol"],
        continuation=params["continuation"], validate=w_validate, name=f"{objective}: ", whitened=preconditioner == "moments",
    )
    result.info.update(
        standardized=bool(params.get("standardize")), preconditioner=preconditioner, time_standardize=t_standardize,
        init=init, time_init=t_init, setup_passes=setup_passes, **info,
    )
    return coordinates.to_raw(result.x), 0.0, result


def fit_structural_on(
    ds: Any, n_positive: int, n_negative: int, params: dict[str, Any], validate: Callable | None = None
) -> tuple[np.ndarray, float, FitResult]:
    """Fit an SVM-perf loss by 1-slack cutting planes on an opened dataset (two passes per iteration).

    The bias feature (``params["bias"]``, SVM-perf's ``--b``) is used for the losses
    that set a threshold (error, F1); for the ranking losses its weight decouples
    from the others (the planes' bias coefficients are equal or zero), so it is left
    out and the threshold is calibrated instead.
    """
    objective = params["objective"]
    scale, t_standardize = (feature_scales(ds) if params.get("standardize") else (None, 0.0))
    bias = params["bias"] if objective in THRESHOLD_LOSSES else 0.0
    k = resolve_k(params, n_positive, n_positive + n_negative)
    risk = StructuralRisk(ds, objective, n_positive, n_negative, k=k, bias=bias, scale=scale)
    v_validate = None if validate is None else (lambda v: validate(*risk.split(v)))
    result = fit_cutting_plane(
        risk, risk.n_features, params["lam"], eps=params["eps"], max_iter=params["max_iter"], validate=v_validate, name=f"{objective}: "
    )
    coef, intercept = risk.split(result.x)
    result.info.update(standardized=scale is not None, time_standardize=t_standardize, k=k, bias=bias, C=1.0 / (100.0 * params["lam"]))
    return coef, intercept, result


def fit_on_dataset(
    ds: Any, n_positive: int, n_negative: int, params: dict[str, Any], validate: Callable | None = None
) -> tuple[np.ndarray, float, FitResult]:
    """Fit a smoothed (L-BFGS) or structural (cutting-plane) objective on an opened dataset."""
    fit = fit_structural_on if params["objective"] in STRUCTURAL_OBJECTIVES else fit_smooth_on
    return fit(ds, n_positive, n_negative, params, validate)


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

    def validate(w: np.ndarray, intercept: float = 0.0) -> dict[str, float]:
        v = evaluate_dataset(vds, w, intercept)
        return {"validation_auc": v["roc_auc"], "validation_prbep": v["prbep"]}

    return validate


def train(
    store: str | os.PathLike | Store,
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
    validation: str | os.PathLike | Store | None = None,
    engine: str = "dask",
    client: Any = None,
    scheduler: str | None = None,
    workers: int | None = None,
    memory_limit: str | int | None = None,
    cache: str | None = None,
    out: str | os.PathLike | None = None,
    train_metrics: bool = True,
    calibrate: bool | None = None,
) -> LinearModel:
    """Train a linear model on a store for the given objective.

    Parameters
    ----------
    store : str or Store
        Training store (Zarr or Parquet).
    objective : str
        ``auc-moment`` minimizes the moment ranking loss (1 - AUC under the normal
        model); ``error-moment`` the moment expected 0-1 error with a bias (one data
        pass, Ghanbari et al.). ``auc-smooth`` / ``prbep-smooth`` minimize
        ``lam/2 ||w||^2`` plus the smoothed ROCArea / PRBEP risk of SVM-perf (Zhang
        et al.; two passes per evaluation). ``rocarea``, ``prbep``, ``f1``,
        ``prec@k``, ``rec@k``, ``error``: SVM-perf's multivariate losses (Joachims
        2005), ``lam/2 ||w||^2`` plus the structural risk, by 1-slack cutting planes
        (two passes per iteration).
    solver : str, optional
        ``auc-moment``: "closed-form" (default) or "lbfgs" (the paper's route);
        the other moment and smoothed objectives: "lbfgs"; SVM-perf's losses:
        "cutting-plane". A pair not in :data:`OBJECTIVES` is an error listing the
        valid pairs.
    lam : float, optional
        Moment objectives: weight of the unit-norm penalty ``lam (1 - ||w||^2)^2``
        (default 1e-3). Smoothed objectives and SVM-perf's losses: the ridge
        ``lam/2 ||w||^2`` (default 1e-4, SVM-perf's C = 100).
    C : float, optional
        SVM-perf's ``-c`` instead of ``lam``: ``lam = 1 / (100 C)`` (SVM-perf's
        losses are in percent).
    ridge : float
        Ridge added to the standardized covariance of the closed form.
    max_iter, tol, memory : int, float, int
        Iteration limit (default 500; 1000 cutting-plane iterations), L-BFGS
        gradient tolerance and memory (1e-4 / 20 for moment objectives, 1e-6 / 6
        for smoothed ones).
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
    precondition : bool or {"diagonal", "moments"}
        Smoothed objectives: keep the objective and its minimizer, change only the
        coordinates L-BFGS runs in. ``True`` / ``"diagonal"``: ``v = s * w`` with
        ``s`` the per-feature standard deviations (one extra pass; excludes
        ``standardize``, which already does this). ``"moments"``: ``w = T u`` with
        ``T`` whitening the modelled Hessian ``c M + lam diag(p)``, where ``M`` is the
        mean of ``(x_i - x_j)(x_i - x_j)^T`` over positive-negative pairs (from one
        moments pass, d x d on the driver, d <= 4096) and ``c`` the risk's curvature
        along the auc-moment direction (one score pass); it goes with or without
        ``standardize``. Both cut iterations most when raw scales differ widely or
        columns are correlated (kdd99); "moments" also when they are not (a9a).
    init : {"zeros", "auc-moment"}
        Smoothed objectives: L-BFGS's starting point. ``"zeros"`` (default) starts at
        w = 0; ``"auc-moment"`` at the auc-moment closed-form direction, scaled to the
        objective's minimum along it (one moments pass and one score pass, counted in
        the fit's data time). The objective and its minimizer are unchanged; on kdd99
        it cuts the iterations to a given test AUC several-fold.
    eps : float
        Cutting plane: stop when the best ``J`` is within ``eps`` of the lower bound
        (default 1e-3 = SVM-perf's default ``-e 0.1``, which is in percent).
    k, k_fraction : int, float, optional
        ``prec@k`` / ``rec@k``: the number of predicted positives, or it as a
        fraction of the training positives (SVM-perf's ``--p``); default half the
        positives for prec@k and twice the positives for rec@k, as SVM-perf.
    bias : float
        Cutting plane, ``error`` and ``f1``: SVM-perf's ``--b``, the value of a
        regularized constant feature (default 1, as SVM-perf; 0: none, the
        decision threshold is then 0).
    validation : str or Store, optional
        Smoothed and SVM-perf objectives: measure the exact validation AUC and PRBEP after every
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
    calibrate : bool, optional
        Set the intercept to the threshold with the fewest training errors, and for
        ``error-moment`` keep, among both L-BFGS fits and the ``auc-moment``
        direction, the one with the fewest training errors (one score pass per
        candidate; see :func:`calibrate_threshold`). ``False`` keeps the fit's own
        intercept (the moment model's threshold; 0 for smoothed objectives and the
        ranking losses; ``bias * w_bias`` for ``error`` and ``f1``). Default: on,
        except for ``error`` and ``f1``, whose bias feature sets their threshold.

    Returns
    -------
    LinearModel
    """
    check_choice(engine, "engine", "train", ENGINES)
    params = check_fit_params(
        objective, solver, "train", lam=lam, C=C, ridge=ridge, max_iter=max_iter, tol=tol, memory=memory,
        smoothing=smoothing, epsilon=epsilon, mu_scale=mu_scale, continuation=continuation, standardize=standardize,
        precondition=precondition, init=init, eps=eps, k=k, k_fraction=k_fraction, bias=bias, calibrate=calibrate,
    )
    calibrate = params["calibrate"]
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
            coef, intercept, result = fit_on_dataset(ds, m.n_positive, m.n_negative, params, validate)
            result.time_data = getattr(ds, "load_seconds", 0.0) + result.info["time_standardize"] + result.info.get("time_init", 0.0)
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
        params=params,
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
