"""``dpipe.train``: open the store where its passes run, fit the objective's family, calibrate, build the model."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from .._evaluate import evaluate_dataset
from .._output import check_output_path, locked_output
from ..engine import open_dataset, rank_summary, resolve_engine
from ..engine._cluster_spec import ClusterSpec
from ..engine._pass_count import Traffic, traffic_record
from ..engine._threshold import best_threshold_on_ranges
from ..exceptions import ParameterError
from ..io import Store
from ..io._store import as_store
from ..io._stored_transform import check_same_features
from ..metrics import RankSummary
from ..model import LinearModel
from ..model._probability import ProbabilityCalibration
from ._calibrate import calibrate
from ._early_stopping import make_validator, stopping_rounds
from ._outcome import FitOutcome
from ._params import numpydoc, resolve, settle_solver
from ._probability import calibrate_probability
from ._records import FitParams, RateParams
from ._registry import DEFAULT_OBJECTIVE, FAMILIES, OBJECTIVES, Family

if TYPE_CHECKING:
    from ..engine._protocols import Dataset
    from ..io._manifest import Manifest

__all__ = ["train", "fit_dataset", "finish_fit", "fit_probability", "model_params"]

log = logging.getLogger("dpipe.train")

#: a store as train takes it: its path or the opened store
_StorePath: TypeAlias = str | os.PathLike | Store


def model_params(params: FitParams) -> dict[str, Any]:
    """The resolved hyper-parameters a model keeps (the record without who resolved it)."""
    out = {f.name: vars(params)[f.name] for f in dataclasses.fields(params) if f.name != "owner"}
    out["given"] = list(out["given"])
    if isinstance(params, RateParams):
        out["constraints"] = [str(c) for c in params.constraints]
    return out


def fit_dataset(ds: Dataset, params: FitParams, validate: Callable[[np.ndarray, float], dict[str, float]] | None = None,
                extra: dict[str, Any] | None = None, constraint_validation: dict[str, Any] | None = None) -> FitOutcome:
    """Fit the resolved ``params`` (a family record from :func:`dpipe.fit.resolve`) on an opened dataset.

    ``extra`` maps aliases to the other opened datasets a rate fit's constraints name; ``constraint_validation`` maps
    aliases to opened validation stores (the rate family's validation rule).
    """
    spec = OBJECTIVES[params.objective]
    family = FAMILIES[spec.family]
    d = int(ds.n_features)
    if spec.max_features is not None and d > spec.max_features:
        raise ParameterError(f"{params.objective} builds d x d class moments on the driver; this store has {d} features, more than "
                             f"{spec.max_features}. Use objective 'auc' (or another pass-based one: O(nnz) per pass on a sparse store).")
    opened = [ds, *(extra or {}).values()]
    marks = [other.passes.mark() for other in opened]
    why = None
    if family.fit_datasets is not None:  # the rate family: on every store its constraints name
        assert isinstance(params, RateParams)  # the rate family's record (resolve)
        outcome = family.fit_datasets.load()({"train": ds, **(extra or {})}, params, validate, constraint_validation)
    else:
        params, why = settle_solver(params, ds.n_rows, d)
        if why is not None:
            log.info("%s: solver=auto: %s (%s)", params.objective, params.solver, why)
        fit = family.fit_for(params.solver)
        if params.lam == "auto":  # the regularization path on held-out rows (dpipe/fit/_lam_path.py)
            from ._lam_path import fit_lam_path

            outcome = fit_lam_path(ds, params, fit, validate, warm_starts=family.warm_starts)
        else:
            outcome = fit(ds, params, validate)
    info = outcome.result.info
    info.setdefault("solver", params.solver)
    if why is not None:
        info["solver_choice"] = why
    made: Counter[str] = Counter()
    traffic: dict[str, Traffic] = {}
    for other, mark in zip(opened, marks):
        made.update(other.passes.since(mark))
        for kind, t in other.passes.traffic_since(mark).items():
            traffic[kind] = traffic.get(kind, Traffic()).plus(t)
    info.update(data_passes=sum(made.values()), data_passes_by_kind=dict(made), pass_traffic=traffic_record(traffic, made))
    log.info("%s: %d data passes; per round: %s", params.objective, info["data_passes"], "; ".join(
        f"{kind} x{t.rounds} {t.seconds / t.rounds:.2f} s, {t.tasks / t.rounds:.0f} tasks, {t.to_driver / t.rounds / 1e6:.2f} MB to the driver, "
        f"{t.from_driver / t.rounds / 1e6:.2f} MB from it" for kind, t in sorted(traffic.items())))
    return outcome


def finish_fit(ds: Dataset, outcome: FitOutcome, params: FitParams, train_metrics: bool = True) -> tuple[np.ndarray, float, dict[str, Any]]:
    """Calibrate the threshold (when ``params.calibrate``) and measure the training metrics.

    Returns the final ``coef``, ``intercept`` and ``{"train": metrics}`` (empty without
    ``train_metrics``); the calibration table goes into ``outcome.result.info``.
    """
    metrics: dict[str, Any] = {}
    if not isinstance(params, RateParams) and params.calibrate:  # the rate family sets its own threshold (no calibrate field)
        t0 = time.perf_counter()
        # on a cluster without training metrics, the driver needs only the threshold: found from range counts, not every score
        ranged = not train_metrics and getattr(ds, "client", None) is not None
        cal = calibrate(outcome, lambda w, b: best_threshold_on_ranges(ds, w, b) if ranged else rank_summary(ds, w, b))
        outcome.result.info.update(calibration=cal.table, time_calibration=time.perf_counter() - t0)
        if train_metrics:
            assert isinstance(cal.summary, RankSummary)  # training metrics: every score (rank_summary, not ranged)
            metrics["train"] = cal.summary.metrics(threshold=cal.threshold)
        return cal.coef, cal.intercept, metrics
    if train_metrics:  # a randomized rate model: the expected threshold metrics
        metrics["train"] = evaluate_dataset(ds, outcome.coef, outcome.intercept, randomized=isinstance(params, RateParams) and params.threshold_rule == "randomized")
    return outcome.coef, outcome.intercept, metrics


def _refit(part: Dataset, params: FitParams) -> tuple[np.ndarray, float]:
    """The fit and its threshold on a part of a dataset (a fold of :func:`fit_probability`)."""
    coef, intercept, _ = finish_fit(part, fit_dataset(part, params), params, train_metrics=False)
    return coef, intercept


def fit_probability(ds: Dataset, params: FitParams, coef: np.ndarray, intercept: float, validation: Any = None) -> ProbabilityCalibration | None:
    """The probability calibration ``params.probability`` asks for (None without it), on ``validation`` or cross-fitted folds of ``ds``."""
    if isinstance(params, RateParams) or params.probability is None:  # the rate family takes none (no probability field)
        return None
    t0 = time.perf_counter()
    calibration = calibrate_probability(ds, params, coef, intercept, _refit, validation)
    log.info("probability: %s calibration on %d held-out rows (%s) in %.2f s", calibration.method, calibration.n_rows, calibration.held_out,
             time.perf_counter() - t0)
    return calibration


def train(
    store: str | os.PathLike | Store,
    objective: str = DEFAULT_OBJECTIVE,
    *,
    validation: str | os.PathLike | Store | None = None,
    datasets: Mapping[str, str | os.PathLike | Store] | None = None,
    constraint_validation: str | os.PathLike | Store | dict[str, str | os.PathLike | Store] | None = None,
    engine: str = "auto",
    client: Any = None,
    scheduler: str | None = None,
    workers: int | None = None,
    memory_limit: str | int | None = None,
    cache: str | None = None,
    verify: bool | None = None,
    out: str | os.PathLike | None = None,
    overwrite: bool = False,
    train_metrics: bool = True,
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
) -> LinearModel:
    """Train a linear model on a store for the given objective."""
    # BEGIN: the hyper-parameters as given, by name (generated by python -m dpipe.fit._codegen; do not edit)
    given = {"solver": solver, "lam": lam, "constraints": constraints, "mm_steps": mm_steps, "multiplier_bound": multiplier_bound,
        "threshold_rule": threshold_rule, "validation_fraction": validation_fraction, "validation_seed": validation_seed, "slack": slack,
        "confidence": confidence, "C": C, "ridge": ridge, "max_iter": max_iter, "tol": tol, "memory": memory, "smoothing": smoothing,
        "surrogate": surrogate, "epsilon": epsilon, "mu_scale": mu_scale, "continuation": continuation, "continuation_factor": continuation_factor,
        "standardize": standardize, "precondition": precondition, "init": init, "eps": eps, "k": k, "k_fraction": k_fraction, "bias": bias,
        "calibrate": calibrate, "early_stopping_rounds": early_stopping_rounds, "probability": probability, "probability_folds": probability_folds}
    # END of the generated mapping
    cluster = ClusterSpec.from_keywords({"engine": engine, "client": client, "scheduler": scheduler, "workers": workers, "memory_limit": memory_limit,
                                         "cache": cache})
    p = resolve(objective, {name: value for name, value in given.items() if value is not None}, "train")
    spec = OBJECTIVES[objective]
    family = FAMILIES[spec.family]
    _check_stores(objective, family, p, validation, datasets)
    constraint_stores = _constraint_validation_stores(objective, family, constraint_validation, datasets)
    _check_output(out, overwrite)
    st = as_store(store, verify, "train")
    st.require_labels("training")
    m = st.manifest
    engine = resolve_engine(cluster, st)
    if engine != "local":  # here, not at the top: the local engine never imports distributed
        from ..engine import client_for
    with contextlib.ExitStack() as stack:
        c = None if engine == "local" else stack.enter_context(client_for(cluster))
        opened = cluster.replace(engine=engine, client=c)  # every store of this fit on the one cluster
        ds = stack.enter_context(open_dataset(st, opened, worker_row_bytes=spec.worker_row_bytes))
        validate, validation_ds = _open_validation(stack, validation, verify, m, opened, p)
        others = _other_stores(datasets, verify, m)
        extra = {alias: stack.enter_context(open_dataset(other, opened, worker_row_bytes=spec.worker_row_bytes)) for alias, other in others.items()}
        checked = _open_constraint_validation(stack, constraint_stores, verify, m, others, opened)
        log.info("%s: %s on %d rows, %d features, %d shards", st.path, objective, m.n_rows, m.n_features, st.n_shards)
        outcome = fit_dataset(ds, p, validate, extra, checked)
        outcome.result.time_data += getattr(ds, "load_seconds", 0.0)  # an optional capability of a dataset (engine/_protocols.py)
        log.info("%s fit: %.3f s, objective %.8g", objective, outcome.result.time_solve, outcome.result.fun)
        coef, intercept, metrics = finish_fit(ds, outcome, p, train_metrics)
        calibration = fit_probability(ds, p, coef, intercept, validation_ds)
        # every pass over the training store in this call: the load, the fit's, calibration, training metrics, probability folds
        outcome.result.info["data_passes_total"] = ds.passes.total
    model = LinearModel(coef, intercept, feature_names=m.feature_names, objective=objective, params=model_params(p), encoding=m.encoding,
                        training=_training_record(st, engine), fit=outcome.result.to_dict(), metrics=metrics, probability=calibration)
    if out is not None:
        with locked_output(out, overwrite=bool(overwrite), what="model"):  # again (the fit took a while), then one writer of out to the rename
            model.save(out)
        log.info("model written to %s", out)
    return model


def _check_stores(objective: str, family: Family, p: FitParams, validation: _StorePath | None, datasets: Mapping[str, _StorePath] | None) -> None:
    """A :class:`ParameterError` when ``validation`` or ``datasets`` is given to an objective that takes none, or is missing."""
    if validation is not None and family.validates is not None:
        why = family.validates
        raise ParameterError(f"The 'validation' parameter of train applies to the smoothed and structural objectives, not to {objective!r} ({why}); "
                             "evaluate the model on the store instead.")
    if stopping_rounds(p) is not None and validation is None:
        raise ParameterError("The 'early_stopping_rounds' parameter of train needs the 'validation' parameter: the store whose metric "
                             "decides when to stop.")
    if datasets and family.fit_datasets is None:
        raise ParameterError(f"The 'datasets' parameter of train names the stores rate constraints use; objective {objective!r} "
                             "takes no constraints: use objective='error-rate' (or another *-rate).")
    if datasets and "train" in datasets:
        raise ParameterError("The 'datasets' parameter of train cannot name a store 'train': that alias is the training store.")


def _constraint_validation_stores(objective: str, family: Family, constraint_validation: _StorePath | dict[str, _StorePath] | None,
                                  datasets: Mapping[str, _StorePath] | None) -> dict[str, _StorePath] | None:
    """``constraint_validation`` by alias (one store: ``"train"``'s), checked: a rate objective's, naming the training store or ``datasets``."""
    stores: dict[str, _StorePath] | None
    if constraint_validation is None or isinstance(constraint_validation, dict):
        stores = constraint_validation
    else:
        stores = {"train": constraint_validation}
    if stores and family.fit_datasets is None:
        raise ParameterError(f"The 'constraint_validation' parameter of train names stores on which rate constraints must hold; objective "
                             f"{objective!r} takes no constraints: use objective='error-rate' (or another *-rate).")
    unknown = sorted(set(stores or {}) - {"train", *(datasets or {})})
    if unknown:
        raise ParameterError(f"The 'constraint_validation' parameter of train names {', '.join(map(repr, unknown))}, which is not 'train' nor "
                             "an alias of datasets=.")
    return stores


def _check_output(out: str | os.PathLike | None, overwrite: object) -> None:
    """``out`` writable before any pass (a fit must not be lost to an unwritable path); ``overwrite`` a bool, and only with ``out``."""
    if overwrite and out is None:
        raise ParameterError("The 'overwrite' parameter of train applies to out=, which is not given.")
    if out is not None:
        if not isinstance(overwrite, (bool, np.bool_)):
            raise ParameterError(f"The 'overwrite' parameter of train must be a bool. Got {overwrite!r} instead.")
        check_output_path(out, overwrite=bool(overwrite), what="model")


def _open_validation(stack: contextlib.ExitStack, validation: _StorePath | None, verify: bool | None, m: Manifest, opened: ClusterSpec,
                     p: FitParams) -> tuple[Callable[[np.ndarray, float], dict[str, float]] | None, Dataset | None]:
    """The validation store opened on ``stack`` (scored only: streamed) and its validator, or None and None without one."""
    if validation is None:
        return None, None
    vst = as_store(validation, verify, "train")
    vst.require_labels("validation")
    check_same_features(m.feature_names, m.encoding, vst, "training store")
    validation_ds = stack.enter_context(open_dataset(vst, opened.replace(cache="stream"), worker_row_bytes=0))  # scored only
    return make_validator(validation_ds, p), validation_ds


def _other_stores(datasets: Mapping[str, _StorePath] | None, verify: bool | None, m: Manifest) -> dict[str, Store]:
    """The stores ``datasets`` names, by alias, each with the training store's features."""
    others = {alias: as_store(other, verify, "train") for alias, other in (datasets or {}).items()}
    for other in others.values():
        check_same_features(m.feature_names, m.encoding, other, "training store")
    return others


def _open_constraint_validation(stack: contextlib.ExitStack, constraint_validation: dict[str, _StorePath] | None, verify: bool | None, m: Manifest,
                                others: dict[str, Store], opened: ClusterSpec) -> dict[str, Dataset]:
    """The constraint validation stores opened on ``stack``, by alias; each with the features and groups of the store it validates."""
    checked = {}
    for alias, path in (constraint_validation or {}).items():
        vst = as_store(path, verify, "train")
        if alias == "train":
            vst.require_labels("constraint validation")
        check_same_features(m.feature_names, m.encoding, vst, "training store")
        own = m if alias == "train" else others[alias].manifest
        if vst.manifest.groups != own.groups:  # the cells are the fitted store's: group codes must mean the same groups
            raise ParameterError(f"The 'constraint_validation' store {vst.path} ({alias!r}) has groups {vst.manifest.groups}, the store it "
                                 f"validates {own.groups}; ingest it like= that store.")
        checked[alias] = stack.enter_context(open_dataset(vst, opened))
    return checked


def _training_record(st: Store, engine: str) -> dict[str, Any]:
    """What the model keeps of its training store (path, manifest digest, class counts) and the engine that fitted it."""
    m = st.manifest
    return {
        "store": st.path,
        "manifest_sha256": m.digest(),
        "n_rows": m.n_rows,
        "n_negative": m.n_negative,
        "n_positive": m.n_positive,
        "weighted": bool(m.has_weight),
        "engine": engine,
    }


_RUN_DOC = """
Parameters
----------
store : str or Store
    Training store (Zarr or Parquet). Its weight column, if any, weights every
    objective, the calibration and the metrics (a row of weight v counts as v rows).
objective : str
    What to minimize; one of :data:`dpipe.fit.OBJECTIVES` (see the table in docs/training.md).
validation : str or Store, optional
    Iterative objectives (smoothed and structural): the exact validation AUC and PRBEP
    after every iteration (one more pass each; for error, f1, prec@k and rec@k also the
    metric of their loss), in the fit history; with ``early_stopping_rounds``, the store
    whose metric decides when to stop.
datasets : dict of str to str or Store, optional
    Rate objectives: the other stores the constraints name by alias (``on=pool``),
    e.g. an unlabelled pool for churn or coverage, an egregious set. ``"train"`` is
    the training store.
constraint_validation : str, Store, or dict of str to str or Store, optional
    Rate objectives: the validation rule. The stores (by alias; one store: ``"train"``'s)
    on which the constraints must hold: the model's direction and multipliers are fitted on
    the training datasets, its exact threshold so that the constraints hold on these rows
    (see ``validation_fraction`` to hold out a seeded share of a store instead). The
    model records the rates on both, with 95 % intervals.
engine : {"auto", "dask", "local"}
    Run the passes on a dask cluster or in this process. ``"auto"`` (default) stays in
    this process for stores whose features fit half the memory available (at 1.4 bytes
    a feature byte; ``dpipe.local-max-bytes`` sets a fixed bound) unless a cluster is
    named (``client``, ``scheduler``, ``workers``, ``memory_limit``), and logs its choice.
client, scheduler, workers, memory_limit : optional
    Cluster selection, see :func:`dpipe.engine.cluster_client`.
cache : {"auto", "memory", "stream"}, optional
    Keep shards in worker memory or stream them on every pass.
verify : bool, optional
    Re-hash every shard read (each pass's, when streamed) and compare it with the checksums
    recorded at write time; a mismatch is a :class:`~dpipe.exceptions.StoreError` naming the
    store and the shard. ``None`` (default): the dask config key ``dpipe.verify`` (``auto``:
    on; see :class:`dpipe.Store`); ``False`` opts out; ``True`` also refuses a store written
    without checksums. Applies to every store named here.
out : path, optional
    Save the model there (JSON; written to a temporary sibling, then renamed). Never
    a file inside a store.
overwrite : bool
    Replace an existing ``out``; only a dpipe model file (``"format":
    "dpipe-linear-model"``) is ever replaced.
train_metrics : bool
    Keep the model's exact metrics on the training store in the model.
"""

train.__doc__ = (train.__doc__ or "") + "\n" + _RUN_DOC + numpydoc() + "\n\nReturns\n-------\nLinearModel\n"
