"""`dpipe retrain` and `dpipe registry` from the command line: decisions, exit codes, idempotence, failures and kills.

Every retrain runs as a real ``dpipe`` process; the kill tests SIGKILL it at each stage
(``DPIPE_KILL_AT``, :mod:`dpipe._faults`) and then check the registry from outside.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from retrain_helpers import SECOND, assert_consistent, copy_folder, run_retrain, write_config

import dpipe
from dpipe.registry import Registry
from dpipe.registry._config import load_config


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
    d = copy_folder(first, tmp_path)
    r = run_retrain(d / SECOND)
    assert r.returncode == 0, r.stderr
    reg = Registry(d / "reg")
    assert reg.champion() == "v0002"
    last = reg.history()[-1]
    assert last["action"] == "promoted" and last["champion_before"] == "v0001"
    texts = " ".join(last["reasons"])
    assert "churn(" in texts and "recall >=" in texts and "above the margin" in texts
    # the validation rule (the default): the threshold was set on held-out training and pool rows, and the record says so
    assert "on the held-out validation rows that set the threshold" in texts
    at_fit = reg.entry("v0002")["constraints_at_fit"]
    assert set(at_fit["validation"]) == set(at_fit["training"]) and len(at_fit["validation"]) == 2
    assert all(v <= 1e-6 for v in at_fit["validation"].values())
    assert reg.model("v0002").params["validation_fraction"] == 0.2
    # the constraints hold on the holdout, measured again from outside
    champion = reg.model_path("v0001")
    challenger = reg.model("v0002")
    holdout = d / "hold.zarr"
    churn = np.mean((challenger.decision_function(dpipe.open_store(holdout).read_all().X) > 0)
                    != (dpipe.LinearModel.load(champion).decision_function(dpipe.open_store(holdout).read_all().X) > 0))
    assert churn <= 0.1
    before = {p: p.read_bytes() for p in (d / "reg").rglob("*") if p.is_file() and p.name != ".lock"}
    again = run_retrain(d / SECOND)
    assert again.returncode == 0 and "already decided" in again.stdout, again.stdout
    after = {p: p.read_bytes() for p in (d / "reg").rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == before  # idempotent: not a byte changed


def test_a_challenger_that_is_not_better_is_kept_with_exit_3(first, tmp_path):
    d = copy_folder(first, tmp_path)
    write_config(d, "margin.yaml", "w2.zarr", promote="promote: {metric: accuracy, margin: 0.5}")
    r = run_retrain(d / "margin.yaml")
    assert r.returncode == 3, r.stderr
    assert r.stdout.startswith("kept v0002; champion v0001") and "not above the margin 0.5" in r.stdout
    reg = Registry(d / "reg")
    assert reg.champion() == "v0001" and reg.versions() == ["v0001", "v0002"]  # the kept challenger stays on record
    assert_consistent(reg)


def test_an_unsatisfiable_constraint_fails_with_exit_1_and_keeps_the_champion(first, tmp_path):
    d = copy_folder(first, tmp_path)
    r = run_retrain(d / "strict.yaml")
    assert r.returncode == 1
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("dpipe retrain: error:")]
    assert "cannot meet" in line and "the champion stays" in line and "Traceback" not in r.stderr
    reg = Registry(d / "reg")
    assert reg.champion() == "v0001" and reg.versions() == ["v0001"]
    assert reg.history()[-1]["action"] == "failed" and "cannot meet" in reg.history()[-1]["reasons"][0]
    assert_consistent(reg)


def test_bad_data_fails_with_one_line_naming_the_file(first, tmp_path):
    d = copy_folder(first, tmp_path)
    write_config(d, "missing.yaml", "no-such.zarr")
    r = run_retrain(d / "missing.yaml")
    assert r.returncode == 1 and "no-such.zarr: no such store or source file" in r.stderr, r.stderr
    assert Registry(d / "reg").champion() == "v0001"


@pytest.mark.parametrize("stage", ["data", "train", "evaluate", "version-written"])
def test_a_kill_before_the_commit_leaves_the_champion_and_a_consistent_registry(first, tmp_path, stage):
    d = copy_folder(first, tmp_path)
    history = (d / "reg" / "history.jsonl").read_bytes()
    r = run_retrain(d / SECOND, env=dict(os.environ, DPIPE_KILL_AT=stage))
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
    reg = Registry(d / "reg")
    assert reg.champion() == "v0001" and reg.versions() == ["v0001"]
    assert (d / "reg" / "history.jsonl").read_bytes() == history
    assert_consistent(reg)
    # the next run repairs what the killed one left and decides as an undisturbed run does
    r = run_retrain(d / SECOND)
    assert r.returncode == 0, r.stderr
    assert reg.champion() == "v0002" and reg.versions() == ["v0001", "v0002"]
    assert not [p for p in (d / "reg" / "versions").iterdir() if p.name.startswith(".tmp-")]
    assert_consistent(reg)


@pytest.mark.parametrize("stage", ["committed", "after-champion"])
def test_a_kill_after_the_commit_is_a_committed_promotion(first, tmp_path, stage):
    """Killed after the rename of the version folder (the commit: its decision record is inside), before or after
    champion.json: readers already see the promotion (they read the records) and the next writer completes the
    pointer and the history line."""
    d = copy_folder(first, tmp_path)
    r = run_retrain(d / SECOND, env=dict(os.environ, DPIPE_KILL_AT=stage))
    assert r.returncode == -signal.SIGKILL
    reg = Registry(d / "reg")
    assert reg.champion() == "v0002" and reg.history()[-1]["action"] == "promoted"
    assert len((d / "reg" / "history.jsonl").read_text().splitlines()) == 1  # the line is not written yet
    pointer = json.loads((d / "reg" / "champion.json").read_text())["version"]
    assert pointer == ("v0001" if stage == "committed" else "v0002")
    assert_consistent(reg)
    again = run_retrain(d / SECOND)  # decided already: nothing to do but the views, brought up to date (issue 41)
    assert again.returncode == 0 and "already decided" in again.stdout
    assert json.loads((d / "reg" / "champion.json").read_text())["version"] == "v0002"
    assert len((d / "reg" / "history.jsonl").read_text().splitlines()) == 2
    reg.rollback("the next writer")
    actions = [json.loads(x)["action"] for x in (d / "reg" / "history.jsonl").read_text().splitlines()]
    assert actions == ["promoted", "promoted", "rollback"]
    assert reg.champion() == "v0001"
    assert_consistent(reg)


def test_a_torn_history_line_is_cut_by_the_next_writer(first, tmp_path):
    d = copy_folder(first, tmp_path)
    with open(d / "reg" / "history.jsonl", "a") as f:
        f.write('{"action": "promoted", "id": "torn", "vers')  # what a kill inside the append leaves
    reg = Registry(d / "reg")
    assert [r["id"] for r in reg.history()] == [r["id"] for r in Registry(first / "reg").history()]  # readers skip it
    r = run_retrain(d / SECOND)
    assert r.returncode == 0, r.stderr
    lines = (d / "reg" / "history.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["id"] != "torn" for x in lines)


def test_registry_list_show_promote_and_rollback(first, tmp_path):
    d = copy_folder(first, tmp_path)
    assert run_retrain(d / SECOND).returncode == 0

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
    assert_consistent(reg)


def test_a_config_error_names_the_file_and_field(first, tmp_path):
    d = copy_folder(first, tmp_path)
    (d / "bad.yaml").write_text("registry: reg\ndata: {train: w2.zarr, holdout: hold.zarr}\npromote: {metric: auc}\n")
    r = run_retrain(d / "bad.yaml")
    assert r.returncode == 1 and f"{d / 'bad.yaml'}: promote.metric must be one of" in r.stderr
    (d / "bad.yaml").write_text("registry: reg\ndata: {train: w2.zarr}\n")
    r = run_retrain(d / "bad.yaml")
    assert r.returncode == 1 and "data" in r.stderr and "holdout" in r.stderr and "Traceback" not in r.stderr


def _svmlight(path: Path, rows: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 4))
    y = np.where(X[:, 0] - X[:, 1] > 0, 1, -1)
    path.write_text("".join(f"{label} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x)) + "\n" for x, label in zip(X, y)))
    return str(path)


def test_the_data_cache_is_keyed_by_the_source_and_the_ingest_options(tmp_path):
    from dpipe.registry._retrain import _as_store

    src = _svmlight(tmp_path / "week.svm", 300, 1)
    reg = Registry(tmp_path / "reg", create=True)
    four = _as_store(src, reg, {"n_features": 4}, True)
    six = _as_store(src, reg, {"n_features": 6}, True)
    assert four != six  # other options: ingested again, not the cached store
    assert dpipe.open_store(four).manifest.n_features == 4 and dpipe.open_store(six).manifest.n_features == 6
    stamp = os.stat(os.path.join(four, "manifest.json")).st_mtime_ns
    assert _as_store(src, reg, {"n_features": 4}, True) == four  # the same source and options: the cache
    assert os.stat(os.path.join(four, "manifest.json")).st_mtime_ns == stamp
    assert _as_store(src, reg, {"n_features": 4}, False) not in (four, six)  # a pool of the same file is another store
    with open(src, "a") as f:  # new content, same name
        f.write("1 1:0.5\n")
    assert _as_store(src, reg, {"n_features": 4}, True) not in (four, six)


def test_an_unknown_ingest_option_fails_before_any_work(tmp_path):
    src = _svmlight(tmp_path / "week.svm", 200, 2)
    _svmlight(tmp_path / "hold.svm", 200, 3)
    (tmp_path / "typo.yaml").write_text(f"registry: reg\ndata: {{train: {src}, holdout: hold.svm, ingest: {{n_feature: 4}}}}\n")
    r = run_retrain(tmp_path / "typo.yaml")
    assert r.returncode == 1
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("dpipe retrain: error:")]
    assert f"{tmp_path / 'typo.yaml'}: data.ingest.n_feature: not an ingest option" in line
    assert not (tmp_path / "reg").exists()  # nothing ingested, no registry made
    (tmp_path / "set.yaml").write_text("registry: reg\ndata: {train: week.svm, holdout: hold.svm, ingest: {unlabeled: true}}\n")
    r = run_retrain(tmp_path / "set.yaml")
    assert r.returncode == 1 and "data.ingest.unlabeled: set by the retrain itself" in r.stderr


@pytest.mark.parametrize("params, field", [
    ("{lamm: 0.001}", "params.lamm: not a parameter of dpipe.train"),
    ("{lam: -1}", "params.lam: must be a float in the range [0.0, inf), or 'auto'. Got -1 instead."),
    ("{surrogate: squared-hinge}", "params.surrogate: does not apply to objective 'error-rate'"),
    ("{constraints: ['recall >= 0.5']}", "params.constraints: the retrain's constraints are constraints.churn"),
])
def test_a_wrong_training_parameter_fails_at_load_before_any_ingest(tmp_path, params, field):
    src = _svmlight(tmp_path / "week.svm", 200, 2)
    _svmlight(tmp_path / "hold.svm", 200, 3)
    (tmp_path / "p.yaml").write_text(f"registry: reg\nparams: {params}\ndata: {{train: {src}, holdout: hold.svm}}\n")
    r = run_retrain(tmp_path / "p.yaml")
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("dpipe retrain: error:")]
    assert r.returncode == 1 and line.startswith(f"dpipe retrain: error: {tmp_path / 'p.yaml'}: {field}"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hold.svm", "p.yaml", "week.svm"]  # nothing ingested, no registry made


def test_a_wrong_extra_constraint_and_objective_fail_at_load(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("registry: reg\ndata: {train: w.svm, holdout: h.svm}\nconstraints: {extra: ['recall >= 0.5', 'recal >= 0.5']}\n")
    with pytest.raises(dpipe.exceptions.ParameterError, match=rf"^{re.escape(str(bad))}: constraints\.extra\[1\]: "):
        load_config(bad)
    bad.write_text("registry: reg\ndata: {train: w.svm, holdout: h.svm}\nobjective: error-rat\n")
    with pytest.raises(dpipe.exceptions.ParameterError, match=rf"^{re.escape(str(bad))}: objective: must be one of "):
        load_config(bad)
