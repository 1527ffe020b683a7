"""`dpipe retrain` and `dpipe registry` from the command line: decisions, exit codes, idempotence, failures and kills.

Every retrain runs as a real ``dpipe`` process; the kill tests SIGKILL it at each stage
(``DPIPE_KILL_AT``, :mod:`dpipe._faults`) and then check the registry from outside.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpipe
from dpipe.registry import Registry

#: the second retrain (the challenger beats the champion trained on 150 rows)
SECOND = "w2.yaml"


def _config(d: Path, name: str, train: str, **extra: str) -> str:
    lines = ["registry: reg", f"data: {{train: {train}, holdout: hold.zarr, pool: pool.zarr}}",
             extra.get("constraints", "constraints: {churn: 0.1}"), extra.get("promote", "promote: {metric: accuracy}")]
    (d / name).write_text("\n".join(lines) + "\n")
    return str(d / name)


@pytest.fixture(scope="module")
def first(retrain_stores, tmp_path_factory) -> Path:
    """A folder with the stores, the configurations and a registry whose champion (v0001) came from the first retrain."""
    d = tmp_path_factory.mktemp("retrain") / "work"
    shutil.copytree(retrain_stores, d)
    _config(d, "w1.yaml", "w1.zarr")
    _config(d, SECOND, "w2.zarr")
    _config(d, "strict.yaml", "w2.zarr", constraints="constraints: {churn: 0.0, extra: ['coverage >= 0.97']}")
    r = _retrain(d / "w1.yaml")
    assert r.returncode == 0, r.stderr
    return d


def _retrain(config: Path | str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpipe", "retrain", str(config), *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=os.path.dirname(config))


def _copy(first: Path, tmp_path: Path) -> Path:
    d = tmp_path / "work"
    shutil.copytree(first, d)
    return d


def _consistent(reg: Registry) -> None:
    """What a reader must always see: the champion is the top of the promotion stack and a committed version, every
    decision's version exists with its model, and nothing uncommitted is left once a writer has been through."""
    history = reg.history()
    assert reg.champion() == (reg.champion_stack() or [None])[-1]
    for record in history:
        if record["version"] is not None:
            assert os.path.exists(reg.model_path(record["version"]))
    assert len({r["id"] for r in history}) == len(history)


def test_the_first_retrain_promotes_and_records_why(first):
    reg = Registry(first / "reg")
    assert reg.champion() == "v0001" and reg.versions() == ["v0001"]
    (record,) = reg.history()
    assert record["action"] == "promoted" and record["champion_before"] is None and "no champion yet" in record["reasons"][0]
    entry = reg.entry("v0001")
    assert entry["training"]["manifest_sha256"] == dpipe.open_store(first / "w1.zarr").manifest.digest()
    assert entry["model_digest"] == reg.model().digest()
    assert entry["metrics"]["holdout"]["accuracy"] == pytest.approx(dpipe.evaluate(reg.model(), first / "hold.zarr", engine="local")["accuracy"])


def test_a_better_challenger_under_the_churn_constraint_is_promoted_and_a_rerun_changes_nothing(first, tmp_path):
    d = _copy(first, tmp_path)
    r = _retrain(d / SECOND)
    assert r.returncode == 0, r.stderr
    reg = Registry(d / "reg")
    assert reg.champion() == "v0002"
    last = reg.history()[-1]
    assert last["action"] == "promoted" and last["champion_before"] == "v0001"
    texts = " ".join(last["reasons"])
    assert "churn(" in texts and "recall >=" in texts and "above the margin" in texts
    # the constraints hold on the holdout, measured again from outside
    champion = reg.model_path("v0001")
    challenger = reg.model("v0002")
    holdout = d / "hold.zarr"
    churn = np.mean((challenger.decision_function(dpipe.open_store(holdout).read_all().X) > 0)
                    != (dpipe.LinearModel.load(champion).decision_function(dpipe.open_store(holdout).read_all().X) > 0))
    assert churn <= 0.1
    before = {p: p.read_bytes() for p in (d / "reg").rglob("*") if p.is_file() and p.name != ".lock"}
    again = _retrain(d / SECOND)
    assert again.returncode == 0 and "already decided" in again.stdout, again.stdout
    after = {p: p.read_bytes() for p in (d / "reg").rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == before  # idempotent: not a byte changed


def test_a_challenger_that_is_not_better_is_kept_with_exit_3(first, tmp_path):
    d = _copy(first, tmp_path)
    _config(d, "margin.yaml", "w2.zarr", promote="promote: {metric: accuracy, margin: 0.5}")
    r = _retrain(d / "margin.yaml")
    assert r.returncode == 3, r.stderr
    assert r.stdout.startswith("kept v0002; champion v0001") and "not above the margin 0.5" in r.stdout
    reg = Registry(d / "reg")
    assert reg.champion() == "v0001" and reg.versions() == ["v0001", "v0002"]  # the kept challenger stays on record
    _consistent(reg)


def test_an_unsatisfiable_constraint_fails_with_exit_1_and_keeps_the_champion(first, tmp_path):
    d = _copy(first, tmp_path)
    r = _retrain(d / "strict.yaml")
    assert r.returncode == 1
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("dpipe retrain: error:")]
    assert "cannot meet" in line and "the champion stays" in line and "Traceback" not in r.stderr
    reg = Registry(d / "reg")
    assert reg.champion() == "v0001" and reg.versions() == ["v0001"]
    assert reg.history()[-1]["action"] == "failed" and "cannot meet" in reg.history()[-1]["reasons"][0]
    _consistent(reg)


def test_bad_data_fails_with_one_line_naming_the_file(first, tmp_path):
    d = _copy(first, tmp_path)
    _config(d, "missing.yaml", "no-such.zarr")
    r = _retrain(d / "missing.yaml")
    assert r.returncode == 1 and "no-such.zarr: no such store or source file" in r.stderr, r.stderr
    assert Registry(d / "reg").champion() == "v0001"


@pytest.mark.parametrize("stage", ["data", "train", "evaluate", "version-written", "before-champion"])
def test_a_kill_before_the_commit_leaves_the_champion_and_a_consistent_registry(first, tmp_path, stage):
    d = _copy(first, tmp_path)
    history = (d / "reg" / "history.jsonl").read_bytes()
    r = _retrain(d / SECOND, env=dict(os.environ, DPIPE_KILL_AT=stage))
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
    reg = Registry(d / "reg")
    assert reg.champion() == "v0001" and reg.versions() == ["v0001"]
    assert (d / "reg" / "history.jsonl").read_bytes() == history
    _consistent(reg)
    # the next run repairs what the killed one left and decides as an undisturbed run does
    r = _retrain(d / SECOND)
    assert r.returncode == 0, r.stderr
    assert reg.champion() == "v0002" and reg.versions() == ["v0001", "v0002"]
    assert not [p for p in (d / "reg" / "versions").iterdir() if p.name.startswith(".tmp-")]
    _consistent(reg)


def test_a_kill_after_the_champion_rename_is_a_committed_promotion(first, tmp_path):
    """Killed between the rename of champion.json (the commit) and the history append: readers already see the
    promotion (champion.json carries its record) and the next writer appends the missing line."""
    d = _copy(first, tmp_path)
    r = _retrain(d / SECOND, env=dict(os.environ, DPIPE_KILL_AT="after-champion"))
    assert r.returncode == -signal.SIGKILL
    reg = Registry(d / "reg")
    assert reg.champion() == "v0002" and reg.history()[-1]["action"] == "promoted"
    assert len((d / "reg" / "history.jsonl").read_text().splitlines()) == 1  # the line is not written yet
    _consistent(reg)
    again = _retrain(d / SECOND)  # decided already: reads, writes nothing
    assert again.returncode == 0 and "already decided" in again.stdout
    reg.rollback("the next writer")
    actions = [json.loads(x)["action"] for x in (d / "reg" / "history.jsonl").read_text().splitlines()]
    assert actions == ["promoted", "promoted", "rollback"]  # the missing line appended under the writer's lock, first
    assert reg.champion() == "v0001"
    _consistent(reg)


def test_a_torn_history_line_is_cut_by_the_next_writer(first, tmp_path):
    d = _copy(first, tmp_path)
    with open(d / "reg" / "history.jsonl", "a") as f:
        f.write('{"action": "promoted", "id": "torn", "vers')  # what a kill inside the append leaves
    reg = Registry(d / "reg")
    assert [r["id"] for r in reg.history()] == [r["id"] for r in Registry(first / "reg").history()]  # readers skip it
    r = _retrain(d / SECOND)
    assert r.returncode == 0, r.stderr
    lines = (d / "reg" / "history.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["id"] != "torn" for x in lines)


def test_registry_list_show_promote_and_rollback(first, tmp_path):
    d = _copy(first, tmp_path)
    assert _retrain(d / SECOND).returncode == 0

    def registry(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dpipe", "registry", *args], capture_output=True, text=True, timeout=120)

    listing = registry("list", str(d / "reg"))
    assert listing.returncode == 0
    rows = [x for x in listing.stdout.splitlines() if " v000" in x]
    assert rows[0].startswith("  v0001") and rows[1].startswith("* v0002")
    shown = json.loads(registry("show", str(d / "reg")).stdout)
    assert shown["champion"] and shown["entry"]["version"] == "v0002" and shown["decisions"][0]["action"] == "promoted"
    r = registry("rollback", str(d / "reg"), "--reason", "alerts on v0002")
    assert r.returncode == 0 and "v0002 -> v0001" in r.stdout
    reg = Registry(d / "reg")
    assert reg.champion() == "v0001" and reg.history()[-1]["reasons"] == ["alerts on v0002"]
    r = registry("rollback", str(d / "reg"))
    assert r.returncode == 1 and "nothing to roll back to" in r.stderr
    r = registry("promote", str(d / "reg"), "v0002")
    assert r.returncode == 0 and reg.champion() == "v0002"
    r = registry("promote", str(d / "reg"), "v0009")
    assert r.returncode == 1 and "no version 'v0009'" in r.stderr
    _consistent(reg)


def test_a_config_error_names_the_file_and_field(first, tmp_path):
    d = _copy(first, tmp_path)
    (d / "bad.yaml").write_text("registry: reg\ndata: {train: w2.zarr, holdout: hold.zarr}\npromote: {metric: auc}\n")
    r = _retrain(d / "bad.yaml")
    assert r.returncode == 1 and f"{d / 'bad.yaml'}: promote.metric must be one of" in r.stderr
    (d / "bad.yaml").write_text("registry: reg\ndata: {train: w2.zarr}\n")
    r = _retrain(d / "bad.yaml")
    assert r.returncode == 1 and "data" in r.stderr and "holdout" in r.stderr and "Traceback" not in r.stderr
