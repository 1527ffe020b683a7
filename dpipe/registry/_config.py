"""The retrain configuration file (YAML): what to train on, under which constraints, and when to promote.

Example (paths are relative to the file's directory)::

    registry: registry                 # created on the first run
    objective: error-rate              # any rate objective (the churn constraint needs one)
    params: {}                         # hyper-parameters of dpipe.train
    data:
      train: week-07.zarr              # new labelled data: a store, or a source file to ingest
      holdout: holdout-07.zarr         # fresh labelled rows for the champion / challenger comparison
      pool: pool.zarr                  # unlabelled rows whose decisions should not flip (default: the training rows)
      ingest: {like: base.zarr}        # dpipe.ingest options for sources (``like``: the champion's encoding)
    constraints:
      churn: 0.02                      # churn against the champion (on the pool) <= 2 %; null: none
      recall-no-worse: true            # recall >= the champion's (on the training data)
      extra: []                        # more constraint strings, e.g. "coverage <= 0.3"
      validation-fraction: 0.2         # the validation rule: 20 % of the training rows and of the pool (seed 0) set the
                                       # threshold, so that the constraints hold on rows the direction was not fitted to; null: off
      confidence: 0.5                  # ... at their point values there (0.95: one-sided 95 %, which on small batches
                                       # costs the challenger accuracy; see dpipe.train's confidence)
    promote:
      metric: roc_auc                  # a metric of dpipe.evaluate, higher is better
      margin: 0.0                      # promote when the challenger beats the champion by more than this
    cluster: {engine: auto}            # the fields of dpipe.engine.ClusterSpec: engine, scheduler, scheduler-file, workers,
                                       # memory-limit, cluster (local or slurm), cache
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, TypeAlias

import msgspec

from .._options import check_choices, config_struct
from ..engine._cluster_spec import ClusterSpec
from ..exceptions import ParameterError
from ..io._ingest_options import RETRAIN_SETS, IngestOptions
from ..io._manifest import _field_of, canonical_json
from ..io._source_cache import resolved_ingest_options  # re-exported: what keys a retrain's data cache

__all__ = [
    "RetrainConfig", "DataConfig", "ConstraintConfig", "PromoteConfig", "ClusterConfig", "IngestConfig", "load_config", "PROMOTE_METRICS", "resolved_ingest_options",
]

#: ingest arguments a retrain sets itself: never in ``data.ingest``
_RETRAIN_SETS = ("src", "dest", *RETRAIN_SETS)

#: metrics of :func:`dpipe.evaluate` a promotion rule may compare (all: higher is better)
PROMOTE_METRICS = ("roc_auc", "prbep", "accuracy", "precision", "recall", "f1", "prec_at_k", "rec_at_k")


class DataConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="kebab"):
    """Where the retrain's rows come from."""

    train: str
    holdout: str
    pool: str | None = None
    ingest: dict[str, Any] = msgspec.field(default_factory=dict)


class ConstraintConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="kebab"):
    """The challenger's constraints."""

    churn: float | None = 0.02
    recall_no_worse: bool = True
    extra: list[str] = msgspec.field(default_factory=list)
    #: the rate fit's validation_fraction (seed 0: a rerun draws the same rows); None: the training-rows rule
    validation_fraction: float | None = 0.2
    #: the rate fit's confidence on those rows: 0.5, the point value ("no worse than the champion" as measured, not "surely
    #: better"): at 95 % a batch of 2,500 rows could not promote a better challenger under recall-no-worse and churn 10 %
    confidence: float = 0.5


class PromoteConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="kebab"):
    """When the challenger replaces the champion."""

    metric: str = "roc_auc"
    margin: float = 0.0


#: ``ClusterConfig``: where the passes run, the fields of :class:`~dpipe.engine.ClusterSpec` a file may set (kebab-case names),
#: ``options()`` the spec; ``IngestConfig``: the ``data.ingest`` options, checked at load, the fields of
#: :class:`~dpipe.io.IngestOptions` but those a retrain sets (Python names)
if TYPE_CHECKING:  # made at run time from the declarations, so the type checker sees them as Any
    ClusterConfig: TypeAlias = Any
    IngestConfig: TypeAlias = Any
else:
    ClusterConfig = config_struct(ClusterSpec, "ClusterConfig", doc="Where the passes run: the fields of dpipe.engine.ClusterSpec, kebab-case.")
    IngestConfig = config_struct(IngestOptions, "IngestConfig", exclude=RETRAIN_SETS, rename=None,
                                 doc="The dpipe.io.ingest options of a retrain's sources (data.ingest), by their Python names.")


class RetrainConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="kebab"):
    """A retrain configuration (see the module docstring)."""

    registry: str
    data: DataConfig
    objective: str = "error-rate"
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    constraints: ConstraintConfig = msgspec.field(default_factory=ConstraintConfig)
    promote: PromoteConfig = msgspec.field(default_factory=PromoteConfig)
    cluster: ClusterConfig = msgspec.field(default_factory=ClusterConfig)

    def canonical(self) -> str:
        """Canonical JSON of the settings that decide the challenger and the rule (not where the passes run)."""
        d = msgspec.to_builtins(self)
        d.pop("cluster")
        return canonical_json(d)


def _check(cfg: RetrainConfig, where: str) -> None:
    known = msgspec.structs.fields(IngestConfig)
    for name in cfg.data.ingest:
        if name in _RETRAIN_SETS:
            raise ParameterError(f"{where}: data.ingest.{name}: set by the retrain itself; remove it")
        if name not in {f.name for f in known}:
            raise ParameterError(f"{where}: data.ingest.{name}: not an ingest option (options: {', '.join(sorted(f.name for f in known))})")
    try:
        ingest = msgspec.convert(cfg.data.ingest, IngestConfig)
    except msgspec.ValidationError as exc:
        field, problem = _field_of(exc)
        raise ParameterError(f"{where}: data.ingest.{field}: {problem}") from None
    check_choices(IngestOptions, msgspec.structs.asdict(ingest), f"{where}: data.ingest", rename=str)
    check_choices(ClusterSpec, msgspec.structs.asdict(cfg.cluster), f"{where}: cluster")
    churn = cfg.constraints.churn
    if churn is not None and not 0.0 <= churn < 1.0:
        raise ParameterError(f"{where}: constraints.churn must be in [0, 1) (a fraction of rows). Got {churn!r} instead.")
    vf = cfg.constraints.validation_fraction
    if vf is not None and not 0.0 < vf < 1.0:
        raise ParameterError(f"{where}: constraints.validation-fraction must be in (0, 1) (a share of the rows), or null. Got {vf!r} instead.")
    if not 0.5 <= cfg.constraints.confidence < 1.0:
        raise ParameterError(f"{where}: constraints.confidence must be in [0.5, 1). Got {cfg.constraints.confidence!r} instead.")
    if "confidence" in cfg.params:
        raise ParameterError(f"{where}: the rule's confidence is constraints.confidence, not params.confidence.")
    if vf is not None and "validation_fraction" in cfg.params:
        raise ParameterError(f"{where}: params.validation_fraction and constraints.validation-fraction say the same thing; give one.")
    _check_training(cfg, where)
    if cfg.promote.metric not in PROMOTE_METRICS:
        raise ParameterError(f"{where}: promote.metric must be one of {', '.join(PROMOTE_METRICS)}. Got {cfg.promote.metric!r} instead.")
    if not cfg.promote.margin >= 0.0:
        raise ParameterError(f"{where}: promote.margin must be >= 0. Got {cfg.promote.margin!r} instead.")


def _check_training(cfg: RetrainConfig, where: str) -> None:
    """The objective, ``params`` and ``constraints.extra`` checked as :func:`dpipe.train` will check them, at load: a wrong
    field is one line naming it before any ingest or pass."""
    from ..fit import resolve
    from ..rates._parse import check_constraints

    if "constraints" in cfg.params:
        raise ParameterError(f"{where}: params.constraints: the retrain's constraints are constraints.churn, constraints.recall-no-worse "
                             "and constraints.extra; put more in constraints.extra")
    if cfg.constraints.validation_fraction is not None and "validation_seed" in cfg.params:
        raise ParameterError(f"{where}: params.validation_seed: the validation rule of constraints.validation-fraction draws with seed 0 "
                             "(a rerun holds out the same rows)")
    for i, text in enumerate(cfg.constraints.extra):
        try:
            check_constraints(text, "constraints", "retrain")
        except ParameterError as exc:
            raise ParameterError(f"{where}: constraints.extra[{i}]: {exc}") from None
    try:
        resolve(cfg.objective, dict(cfg.params), "retrain")
    except ParameterError as exc:
        text = str(exc)
        unknown = re.match(r"retrain got unknown parameter\(s\) '([^']+)'", text)
        named = re.match(r"The '(\w+)' parameter of retrain (.*)", text, re.S)
        if unknown:
            raise ParameterError(f"{where}: params.{unknown.group(1)}: not a parameter of dpipe.train (the table of docs/training.md lists them)") from None
        if named and named.group(1) == "objective":
            raise ParameterError(f"{where}: objective: {named.group(2)}") from None
        if named:
            raise ParameterError(f"{where}: params.{named.group(1)}: {named.group(2)}") from None
        raise ParameterError(f"{where}: params: {text}") from None


def load_config(path: str | os.PathLike) -> RetrainConfig:
    """Read and check a retrain configuration; relative paths become relative to its directory.

    Raises
    ------
    ParameterError
        One line naming the file and the field that is wrong.
    """
    import yaml

    path = os.fspath(path)
    try:
        with open(path) as f:
            raw = yaml.safe_load(f)
    except yaml.YAMLError as exc:
        raise ParameterError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    try:
        cfg = msgspec.convert(raw, RetrainConfig)
    except msgspec.ValidationError as exc:
        field, problem = _field_of(exc)
        raise ParameterError(f"{path}: {field}: {problem}") from None
    _check(cfg, path)
    base = os.path.dirname(os.path.abspath(path))

    def here(p: str | None) -> str | None:
        return None if p is None else os.path.normpath(os.path.join(base, os.path.expanduser(p)))

    data = msgspec.structs.replace(cfg.data, train=here(cfg.data.train), holdout=here(cfg.data.holdout), pool=here(cfg.data.pool),
                                   ingest={k: (here(v) if k == "like" else v) for k, v in cfg.data.ingest.items()})
    return msgspec.structs.replace(cfg, registry=here(cfg.registry), data=data)
