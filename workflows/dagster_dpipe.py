"""dpipe's scheduled retraining in Dagster: the champion as an asset, a weekly schedule, a sensor on new data.

Install and run (``pip install 'dpipe[workflows]'``)::

    export DPIPE_RETRAIN_CONFIG=/srv/dpipe/retrain.yaml   # the retrain configuration (dpipe retrain's)
    export DPIPE_INCOMING=/srv/dpipe/incoming              # where new batches arrive (the sensor)
    dagster dev -f workflows/dagster_dpipe.py

* ``champion_model`` (asset): one :func:`dpipe.registry.retrain`; its materialization
  carries the decision, the versions and the reasons as metadata. A lost cluster
  (:class:`dpipe.exceptions.ClusterError`) is retried (twice, 60 s apart); any other
  failure (bad data, an unmet constraint) fails the run at once - retrying cannot fix it.
  A ``kept`` decision is a success: the champion stays, by design.
* ``weekly_retrain`` (schedule): Mondays 03:00 UTC, on the configuration as it is.
* ``new_batch`` (sensor): a batch is a directory ``$DPIPE_INCOMING/<batch>/`` holding a
  ``train`` and a ``holdout`` store (``train.zarr`` / ``holdout.zarr``, or ``.parquet``); it is
  complete when both stores' manifests exist (dpipe writes a store under a temporary
  name and renames it, so a half-written store is never seen). Each complete batch
  starts one run on the configuration with ``data.train`` / ``data.holdout`` replaced,
  once (the run key is the batch's name), oldest name first.

Why Dagster rather than Prefect: a retrain *produces* something - the champion model
in the registry - and Dagster's assets model exactly that (lineage, metadata per
materialization, sensors on new data); and its definitions run in-process with no
server (``materialize``, ``build_sensor_context``), which is how CI tests this file.
"""


import os  # no `from __future__ import annotations`: Dagster reads the annotations at run time
from pathlib import Path

import dagster as dg
import msgspec

from dpipe.exceptions import ClusterError, DPipeError
from dpipe.registry import load_config, retrain

__all__ = ["champion_model", "retrain_job", "weekly_retrain", "new_batch", "defs", "complete_batches"]

#: the retrain configuration the schedule and the sensor run
CONFIG = os.environ.get("DPIPE_RETRAIN_CONFIG", "retrain.yaml")
#: where the sensor looks for new batches
INCOMING = os.environ.get("DPIPE_INCOMING", "incoming")


class RetrainRun(dg.Config):
    """One retrain: the configuration file, and optionally the batch that replaces its training and holdout stores."""

    config: str
    train: str | None = None
    holdout: str | None = None
    force: bool = False


@dg.asset(retry_policy=dg.RetryPolicy(max_retries=2, delay=60), kinds={"python"},
          description="The registry's champion after a retrain: challenger under churn and recall constraints, promoted only when it beats the champion on a fresh holdout.")
def champion_model(context: dg.AssetExecutionContext, config: RetrainRun) -> dg.MaterializeResult:
    """Run one retrain and describe its decision."""
    cfg = load_config(config.config)
    if config.train or config.holdout:
        data = msgspec.structs.replace(cfg.data, train=config.train or cfg.data.train, holdout=config.holdout or cfg.data.holdout)
        cfg = msgspec.structs.replace(cfg, data=data)
    try:
        result = retrain(cfg, force=config.force)
    except ClusterError:
        raise  # the retry policy tries again: a cluster may come back
    except DPipeError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    context.log.info("%s %s; champion %s", result.action, result.version, result.champion)
    challenger = result.record.get("challenger") or {}
    return dg.MaterializeResult(metadata={
        "action": result.action,
        "challenger": result.version,
        "champion": result.champion,
        "repeated": result.repeated,
        "registry": dg.MetadataValue.path(cfg.registry),
        "training store": dg.MetadataValue.path(cfg.data.train),
        "reasons": dg.MetadataValue.md("\n".join(f"- {r}" for r in result.reasons)),
        **{f"holdout {k}": float(v) for k, v in challenger.items() if isinstance(v, float)},
    })


retrain_job = dg.define_asset_job("retrain", selection=[champion_model])


def _run_config(config: str, train: str | None = None, holdout: str | None = None) -> dict:
    return {"ops": {"champion_model": {"config": {"config": config, "train": train, "holdout": holdout}}}}


@dg.schedule(job=retrain_job, cron_schedule="0 3 * * 1", execution_timezone="UTC")
def weekly_retrain(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    """Mondays 03:00 UTC: retrain on the configuration's stores (a rerun on unchanged data changes nothing)."""
    return dg.RunRequest(run_config=_run_config(CONFIG), tags={"dpipe/registry": "retrain"})


def _store(batch: Path, name: str) -> Path | None:
    for suffix in (".zarr", ".parquet"):
        if (batch / f"{name}{suffix}" / "manifest.json").exists():
            return batch / f"{name}{suffix}"
    return None


def complete_batches(incoming: str | os.PathLike) -> list[tuple[str, str, str]]:
    """``(batch name, train store, holdout store)`` of every complete batch under ``incoming``, by name."""
    root = Path(incoming)
    out = []
    for batch in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []:
        train, holdout = _store(batch, "train"), _store(batch, "holdout")
        if train is not None and holdout is not None:
            out.append((batch.name, str(train), str(holdout)))
    return out


@dg.sensor(job=retrain_job, minimum_interval_seconds=300)
def new_batch(context: dg.SensorEvaluationContext) -> dg.RunRequest | dg.SkipReason:
    """A run for the oldest complete batch under ``$DPIPE_INCOMING`` not started yet (the cursor is the last started).

    One batch per evaluation: each retrain compares with the champion the previous one
    left, so batches go in name order (``week-01``, ``week-02``, ...). Runs that could still
    overlap (a retrain longer than the sensor's interval) are serialised by the
    registry's lock; limit ``retrain`` runs to one at a time in the instance's run queue
    (tag ``dpipe/registry``, see workflows/README.md) so that none waits for it.
    """
    batches = [b for b in complete_batches(INCOMING) if context.cursor is None or b[0] > context.cursor]
    if not batches:
        return dg.SkipReason(f"no new complete batch under {INCOMING}")
    name, train, holdout = batches[0]
    context.update_cursor(name)
    return dg.RunRequest(run_key=name, run_config=_run_config(CONFIG, train, holdout), tags={"dpipe/batch": name, "dpipe/registry": "retrain"})


defs = dg.Definitions(assets=[champion_model], jobs=[retrain_job], schedules=[weekly_retrain], sensors=[new_batch])
