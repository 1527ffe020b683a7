"""The Dagster definitions in workflows/dagster_dpipe.py, run in-process: the asset, the schedule, the sensor, the failure policy."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

dg = pytest.importorskip("dagster")

from dpipe.registry import Registry  # noqa: E402
from workflows import dagster_dpipe as flow  # noqa: E402

CONFIG = """registry: reg
data: {train: w1.zarr, holdout: hold.zarr, pool: pool.zarr}
constraints: {churn: 0.1}
promote: {metric: accuracy}
"""


@pytest.fixture
def folder(retrain_stores, tmp_path, monkeypatch) -> Path:
    d = tmp_path / "work"
    shutil.copytree(retrain_stores, d)
    (d / "retrain.yaml").write_text(CONFIG)
    monkeypatch.setattr(flow, "CONFIG", str(d / "retrain.yaml"))
    monkeypatch.setattr(flow, "INCOMING", str(d / "incoming"))
    return d


def _run(instance: dg.DagsterInstance, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    return flow.defs.resolve_job_def("retrain").execute_in_process(run_config=request.run_config, instance=instance, tags=request.tags)


def test_the_definitions_load():
    defs = flow.defs
    assert defs.resolve_job_def("retrain") is not None
    assert defs.resolve_schedule_def("weekly_retrain").cron_schedule == "0 3 * * 1"
    assert defs.resolve_sensor_def("new_batch").minimum_interval_seconds == 300


def test_the_schedule_materializes_the_champion_and_records_the_decision(folder):
    with dg.instance_for_test() as instance:
        request = flow.weekly_retrain(dg.build_schedule_context(instance=instance))
        result = _run(instance, request)
        assert result.success
        (event,) = result.get_asset_materialization_events()
        metadata = event.materialization.metadata
        assert metadata["action"].value == "promoted" and metadata["champion"].value == "v0001"
        assert "no champion yet" in metadata["reasons"].value
    assert Registry(folder / "reg").champion() == "v0001"


def test_the_sensor_starts_one_run_per_new_batch_in_order_and_each_decides(folder):
    with dg.instance_for_test() as instance:
        assert _run(instance, flow.weekly_retrain(dg.build_schedule_context(instance=instance))).success  # the first champion
        context = dg.build_sensor_context(instance=instance)
        assert isinstance(flow.new_batch(context), dg.SkipReason)  # nothing arrived yet
        incoming = folder / "incoming"
        for week, train in (("week-02", "w2.zarr"), ("week-01", "w1.zarr")):
            (incoming / week).mkdir(parents=True)
            shutil.copytree(folder / train, incoming / week / "train.zarr")
            shutil.copytree(folder / "hold.zarr", incoming / week / "holdout.zarr")
        (incoming / "week-03").mkdir()  # incomplete: no stores yet
        actions = []
        for expected in ("week-01", "week-02"):
            request = flow.new_batch(context)
            assert isinstance(request, dg.RunRequest) and request.run_key == expected
            assert request.run_config["ops"]["champion_model"]["config"]["train"] == str(incoming / expected / "train.zarr")
            context = dg.build_sensor_context(instance=instance, cursor=context.cursor)
            result = _run(instance, request)
            assert result.success
            actions.append(result.get_asset_materialization_events()[0].materialization.metadata["action"].value)
        assert isinstance(flow.new_batch(context), dg.SkipReason)  # week-03 is not complete
    reg = Registry(folder / "reg")
    # week-01 repeats the first champion's data and config but under another holdout path: decided again, not better
    assert actions == ["kept", "promoted"]
    assert [r["action"] for r in reg.history()] == ["promoted", "kept", "promoted"]
    assert reg.champion() == "v0003"


def test_a_failure_that_retrying_cannot_fix_fails_the_run_once(folder):
    (folder / "retrain.yaml").write_text(CONFIG.replace("w1.zarr", "missing.zarr"))
    with dg.instance_for_test() as instance:
        result = flow.defs.resolve_job_def("retrain").execute_in_process(
            run_config=flow.weekly_retrain(dg.build_schedule_context(instance=instance)).run_config, instance=instance, raise_on_error=False)
        assert not result.success
        failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
        assert len(failures) == 1 and "missing.zarr: no such store or source file" in failures[0].event_specific_data.error.message
        assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert [r["action"] for r in Registry(folder / "reg").history()] == ["failed"]
