"""The kdd99 weekly-retrain example, small: four real `dpipe retrain` runs from one command, checked from outside."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpipe
from dpipe.registry import Registry, load_config

REPO = Path(__file__).resolve().parents[2]



@pytest.mark.slow
def test_the_weekly_example_runs_end_to_end_and_every_decision_follows_the_rule(shared_data, tmp_path):
    out, work, cwd = tmp_path / "results", tmp_path / "work", tmp_path / "cwd"
    cwd.mkdir()
    r = subprocess.run([sys.executable, str(REPO / "workflows" / "kdd99_weekly.py"), "--data", str(shared_data / "kddcup.data_10_percent.gz"),
                        "--rows", "12000", "--out", str(out), "--work", str(work)], capture_output=True, text=True, timeout=600, cwd=cwd)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "results", "work"] and not any(cwd.iterdir())  # only where told
    made_by = f"Made by `python workflows/kdd99_weekly.py --rows 12000 --out {out}`."  # the command run, not the committed results'
    assert made_by in (out / "kdd99_weekly.md").read_text() and "workflows/results" not in r.stdout
    summary = json.loads((out / "kdd99_weekly.json").read_text())
    assert [w["week"] for w in summary["weeks"]] == [0, 1, 2, 3]
    assert (out / "kdd99_weekly.png").stat().st_size > 10_000 and "| 3 |" in (out / "kdd99_weekly.md").read_text()
    history = [json.loads(line) for line in (out / "kdd99_weekly_history.jsonl").read_text().splitlines()]
    reg = Registry(work / "registry")
    assert history == reg.history() and [r["action"] for r in history][0] == "promoted"
    for week, record in zip(summary["weeks"], history):
        assert week["exit_code"] == {"promoted": 0, "kept": 3}[record["action"]]
        if record["champion_before"] is None:
            continue
        cfg = load_config(work / f"week-{week['week']}.yaml")
        holdout = dpipe.open_store(reg.entry(record["version"])["stores"]["holdout"]).read_all()
        old = reg.model(record["champion_before"]).decision_function(holdout.X) > 0
        new = reg.model(record["version"]).decision_function(holdout.X) > 0
        churn = float(np.mean(old != new))
        assert churn == pytest.approx(record["holdout_churn"], abs=1e-12)  # the recorded churn, measured again
        better = record["challenger"]["roc_auc"] > record["champion"]["roc_auc"] + cfg.promote.margin
        holds = churn <= cfg.constraints.churn and record["challenger"]["recall"] >= record["champion"]["recall"]
        assert (record["action"] == "promoted") == (better and holds), record["reasons"]
    assert summary["champion"] == reg.champion() == Registry(work / "registry").champion_stack()[-1]


def test_a_scratch_folder_the_example_did_not_make_is_refused_and_kept(tmp_path):
    work = tmp_path / "mine"
    work.mkdir()
    (work / "notes.txt").write_text("a user's file\n")
    data = tmp_path / "kdd.gz"
    data.write_bytes(b"")  # never read: the folder is refused first
    r = subprocess.run([sys.executable, str(REPO / "workflows" / "kdd99_weekly.py"), "--data", str(data), "--out", str(tmp_path / "out"),
                        "--work", str(work)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.strip().endswith("exists and was not made by this example (no .kdd99-weekly-work); name another --work or remove it")
    assert (work / "notes.txt").read_text() == "a user's file\n"
