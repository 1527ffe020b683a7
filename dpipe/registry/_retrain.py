"""One retrain: ingest, train a challenger under a churn constraint, compare it with the champion, decide, record.

The stages, in order (each logs one line at INFO on logger ``dpipe.registry``):

1. **data** - the training, holdout and pool rows: stores are taken as they are,
   source files are ingested once into ``REGISTRY/data/`` (named by their content hash,
   so a second run finds them);
2. **key** - a hash of the configuration's decisive settings and of the three stores'
   manifests: a ``promoted`` or ``kept`` decision already recorded under it ends the run
   with that decision and changes nothing (idempotence);
3. **train** - the challenger: the configured objective under ``recall >= r`` (``r`` the
   champion's recall on the training rows, on their held-out part under the validation rule) and ``churn(champion, on=pool) <= target``,
   plus the configured extra constraints; no champion (the first run) means no
   champion-relative constraint. The validation rule (``constraints.validation-fraction``,
   default 0.2): a seeded 20 % of the training rows and of the pool (seed 0, so a rerun
   draws the same rows) is held out, and the challenger's threshold is set so that the
   constraints hold there (at their point values: ``constraints.confidence``, default 0.5),
   where the rows were not fitted to; the history records the constraints on both parts;
4. **evaluate** - champion and challenger on the holdout, and the challenger's
   constraints there (churn against the champion's decisions on the holdout, recall no
   worse than the champion's holdout recall, the extra constraints);
5. **decide and commit** - promote when the challenger's metric beats the champion's by
   more than the margin and every constraint holds on the holdout; the challenger is
   registered either way, and the decision with its reasons is committed under the
   registry's lock (see :mod:`dpipe.registry._registry` for why a kill anywhere leaves
   the registry consistent and the champion in place until the commit).

A failure (bad data, a lost cluster, a constraint the challenger cannot meet on its
training rows) is recorded as ``failed`` with its reason and re-raised; the champion
stays.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
import warnings
from typing import Any

import dask.config

from .._faults import kill_point
from ..engine._cluster_spec import ClusterSpec
from ..exceptions import ConvergenceWarning, ParameterError, RegistryError
from ..io._source_cache import cached_store
from ..rates._report import reports_from_records
from ._config import RetrainConfig, load_config
from ._registry import Registry

__all__ = ["retrain", "RetrainResult", "EXIT_CODES"]

log = logging.getLogger("dpipe.registry")

#: process exit status of ``dpipe retrain`` for each outcome (cron and orchestrators act on it)
EXIT_CODES = {"promoted": 0, "failed": 1, "kept": 3}


@dataclasses.dataclass(frozen=True)
class RetrainResult:
    """What a retrain decided.

    Attributes
    ----------
    action : str
        ``"promoted"`` or ``"kept"``.
    version : str
        The challenger's version in the registry.
    champion : str
        The champion after the run.
    reasons : list of str
        Why, one sentence each.
    record : dict
        The decision's history record.
    repeated : bool
        True when the decision was already recorded for these inputs (nothing changed).
    """

    action: str
    version: str
    champion: str
    reasons: list[str]
    record: dict[str, Any]
    repeated: bool = False

    @property
    def exit_code(self) -> int:
        """``dpipe retrain``'s exit status: 0 promoted, 3 kept."""
        return EXIT_CODES[self.action]


def _as_store(path: str, reg: Registry, ingest: dict[str, Any], labelled: bool) -> str:
    """``path`` itself when it is a store, else its rows ingested into ``REGISTRY/data`` (once per content and ingest options:
    :func:`dpipe.io._source_cache.cached_store`)."""
    if os.path.isdir(path):
        return path
    return cached_store(path, os.path.join(reg.path, "data"), ingest, unlabeled=not labelled, who="retrain")[0]


def _key(cfg: RetrainConfig, stores: dict[str, str]) -> str:
    from ..io import open_store

    h = hashlib.sha256(cfg.canonical().encode())
    for name in sorted(stores):
        h.update(f"{name}={open_store(stores[name]).manifest.digest()}".encode())
    return h.hexdigest()


def _constraints(cfg: RetrainConfig, champion_path: str | None, champion_recall: float | None, pool: str | None) -> list[str]:
    """The challenger's constraints: against the champion (none for the first model), then the configured extra ones.

    ``pool``: the alias churn is measured on in training; None in an evaluation, where it
    is measured on the evaluated store (the holdout).
    """
    out = []
    if champion_path is not None:
        if cfg.constraints.recall_no_worse:
            out.append(f"recall >= {champion_recall!r}")
        if cfg.constraints.churn is not None:
            on = "" if pool is None else f", on={pool}"
            out.append(f"churn('{champion_path}'{on}) <= {cfg.constraints.churn!r}")
    return out + list(cfg.constraints.extra)


def _decide(cfg: RetrainConfig, metric: str, challenger: dict[str, Any], champion: dict[str, Any] | None) -> tuple[str, list[str]]:
    reasons = []
    ok = True
    for c in reports_from_records(challenger.get("constraints")):
        reasons.append(f"{c.text} on the holdout: {'holds' if c.holds else 'VIOLATED'} (lhs - rhs {c.value:+.4g})")
        ok &= c.holds
    if champion is None:
        reasons.insert(0, f"no champion yet: the first model ({metric} {challenger[metric]:.6f} on the holdout)")
        return ("promoted" if ok else "kept"), reasons
    delta = challenger[metric] - champion[metric]
    better = delta > cfg.promote.margin
    reasons.insert(0, f"{metric} on the holdout {challenger[metric]:.6f} vs champion {champion[metric]:.6f} "
                      f"({delta:+.6f}; {'above' if better else 'not above'} the margin {cfg.promote.margin:g})")
    return ("promoted" if ok and better else "kept"), reasons


def retrain(config: RetrainConfig | str | os.PathLike, *, force: bool = False, client: Any = None) -> RetrainResult:
    """Run one retrain (see the module docstring) and return its decision.

    Parameters
    ----------
    config : RetrainConfig or path
        The configuration, or its YAML file.
    force : bool
        Decide again even when these inputs were decided before.
    client : distributed.Client, optional
        Run the passes on this client (default: the configuration's ``cluster``).

    Raises
    ------
    Exception
        The run failed (a :class:`~dpipe.exceptions.DPipeError` for bad data, an
        unmet constraint or a lost cluster); a ``failed`` record with the reason is in the history and the
        champion is unchanged.
    """
    cfg = config if isinstance(config, RetrainConfig) else load_config(config)
    reg = Registry(cfg.registry, create=True)
    reg.check_writable()  # damage the files cannot settle stops the run here, not after training
    champion = reg.champion()
    settings = {"dpipe.cluster": cfg.cluster.cluster} if cfg.cluster.cluster else {}
    try:
        with dask.config.set(settings):  # where a cluster dpipe starts runs (dpipe.engine.cluster_client)
            return _run(cfg, reg, champion, force, client)
    except Exception as exc:  # recorded, then raised as it came
        if not isinstance(exc, RegistryError):  # a registry that cannot be written cannot record it either
            _record_failure(reg, exc)
        raise


def _record_failure(reg: Registry, exc: Exception) -> None:
    """Commit a ``failed`` decision for ``exc``; when that fails too (a full disk, a damaged registry), the first error wins:
    the recording's error is logged and noted on ``exc``, which the caller raises as it came."""
    reason = (str(exc).splitlines() or [type(exc).__name__])[0]
    try:
        with reg.writing():
            reg.commit("failed", reasons=[reason], error=type(exc).__name__)
    except Exception as recording:  # noqa: BLE001 - any error of the recording: the run's own error is what the user must see
        why = (str(recording).splitlines() or [type(recording).__name__])[0]
        log.warning("retrain: the failure could not be recorded in %s (%s: %s); the run failed with: %s", reg.path, type(recording).__name__, why, reason)
        exc.add_note(f"(not recorded in the registry: {type(recording).__name__}: {why})")


def _run(cfg: RetrainConfig, reg: Registry, champion: str | None, force: bool, client: Any) -> RetrainResult:
    from .._evaluate import evaluate, evaluate_part
    from ..engine._split import RowSplit
    from ..fit import train

    t0 = time.perf_counter()
    where = (cfg.cluster.options() if client is None else ClusterSpec(client=client)).keywords()
    log.info("retrain: data")
    stores = {"train": _as_store(cfg.data.train, reg, cfg.data.ingest, True), "holdout": _as_store(cfg.data.holdout, reg, cfg.data.ingest, True)}
    if cfg.data.pool is not None:
        stores["pool"] = _as_store(cfg.data.pool, reg, cfg.data.ingest, False)
    key = _key(cfg, stores)
    done = None if force else reg.find(key)
    if done is not None:
        log.info("retrain: these inputs were decided at %s: %s %s; nothing to do", done["time"], done["action"], done["version"])
        with reg.writing():  # but the views: a writer killed after its commit left champion.json / history.jsonl behind
            pass
        return RetrainResult(done["action"], done["version"], reg.champion() or "", done["reasons"], done, repeated=True)
    kill_point("data")

    champion_path = reg.checked_model_path(champion) if champion else None  # the registered file, or one line
    split = None if cfg.constraints.validation_fraction is None else RowSplit(cfg.constraints.validation_fraction, 0)
    champion_recall = None
    if champion_path:  # on the rows the challenger's recall is held on: the held-out part under the validation rule
        champion_recall = (evaluate(champion_path, stores["train"], **where) if split is None
                           else evaluate_part(champion_path, stores["train"], split, "validation", cluster=ClusterSpec(cache="stream").replace(**where)))["recall"]
    pool = "pool" if "pool" in stores else "train"
    constraints = _constraints(cfg, champion_path, champion_recall, pool)
    log.info("retrain: training the challenger (%s%s)", cfg.objective, f" s.t. {'; '.join(constraints)}" if constraints else "")
    datasets = {"pool": stores["pool"]} if "pool" in stores and any("on=pool" in c for c in constraints) else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # judged by its constraints and the holdout below
        validation: dict[str, Any] = {} if split is None or not constraints else {
            "validation_fraction": split.fraction, "validation_seed": split.seed, "confidence": cfg.constraints.confidence}
        model = train(stores["train"], cfg.objective, constraints=constraints or None, datasets=datasets, **validation, **cfg.params, **where)
    training, validated = model.constraint_reports, model.validation_constraint_reports
    deciding = training if validated is None else validated  # where the threshold was set: held-out rows, else the training rows
    unmet = [c.text for c in deciding if not c.holds]
    if unmet:
        rows = "training rows" if validated is None else "held-out validation rows"
        raise ParameterError(f"retrain: the challenger cannot meet {'; '.join(unmet)} on its {rows} ({stores['train']}); "
                             "the champion stays - loosen the constraint or add data")
    kill_point("train")

    log.info("retrain: evaluating champion and challenger on the holdout")
    metric = cfg.promote.metric
    champion_holdout = evaluate(champion_path, stores["holdout"], **where) if champion_path else None
    checks = _constraints(cfg, champion_path, champion_holdout["recall"] if champion_holdout else None, None)
    challenger_holdout = evaluate(model, stores["holdout"], constraints=checks or None, **where)
    action, reasons = _decide(cfg, metric, challenger_holdout, champion_holdout)
    at_training = {c.text: c.value for c in training}
    at_fit = {"training": at_training, "validation": {c.text: c.value for c in validated or []} or None}
    for c in validated or []:
        reasons.append(f"{c.text} on the held-out validation rows that set the threshold: lhs - rhs {c.value:+.4g} "
                       f"(training rows {at_training.get(c.text, float('nan')):+.4g})")
    kill_point("evaluate")

    entry = {"training": model.training, "objective": cfg.objective, "params": cfg.params, "constraints": constraints,
             "key": key, "stores": stores, "metrics": {"holdout": challenger_holdout, "champion_holdout": champion_holdout},
             "fit": {k: model.fit.get(k) for k in ("fun", "nit", "success")}, "constraints_at_fit": at_fit, "seconds": time.perf_counter() - t0}
    with reg.writing():
        if reg.champion() != champion:
            raise ParameterError(f"{reg.path}: the champion changed from {champion} to {reg.champion()} during this retrain; run it again")
        if not force and (done := reg.find(key)) is not None:  # a concurrent run with the same inputs decided first
            return RetrainResult(done["action"], done["version"], reg.champion() or "", done["reasons"], done, repeated=True)
        record = reg.commit(action, model=model, entry=entry, reasons=reasons, key=key, metric=metric, churn_target=cfg.constraints.churn,
                            holdout_churn=_churn(challenger_holdout, cfg.constraints.churn),
                            challenger=_summary(challenger_holdout, metric), champion=_summary(champion_holdout, metric) if champion_holdout else None)
    log.info("retrain: %s %s (champion %s)", action, record["version"], record["champion_after"])
    return RetrainResult(action, record["version"], record["champion_after"], reasons, record)


def _churn(metrics: dict[str, Any], target: float | None) -> float | None:
    """The challenger's churn against the champion on the holdout (from its constraint's ``lhs - rhs``), if constrained."""
    for c in reports_from_records(metrics.get("constraints")):
        if c.text.startswith("churn(") and target is not None:
            return c.value + target
    return None


def _summary(metrics: dict[str, Any], metric: str) -> dict[str, Any]:
    """The holdout figures a history line keeps: the rule's metric, recall, accuracy and the constraints' values."""
    out = {k: metrics[k] for k in dict.fromkeys((metric, "roc_auc", "recall", "accuracy")) if k in metrics}
    out["constraints"] = {c.text: c.value for c in reports_from_records(metrics.get("constraints"))}
    return out
