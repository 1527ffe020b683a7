"""Helpers of the registry tests: retrain configurations, a retrain as a real ``dpipe`` process, a copy of a registry folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from dpipe.registry import Registry

#: the second retrain (the challenger beats the champion trained on 150 rows)
SECOND = "w2.yaml"


def write_config(d: Path, name: str, train: str, **extra: str) -> str:
    lines = ["registry: reg", f"data: {{train: {train}, holdout: hold.zarr, pool: pool.zarr}}",
             extra.get("constraints", "constraints: {churn: 0.1}"), extra.get("promote", "promote: {metric: accuracy}")]
    (d / name).write_text("\n".join(lines) + "\n")
    return str(d / name)


def run_retrain(config: Path | str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpipe", "retrain", str(config), *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=os.path.dirname(config))


def copy_folder(first: Path, tmp_path: Path) -> Path:
    d = tmp_path / "work"
    shutil.copytree(first, d)
    return d


def assert_consistent(reg: Registry) -> None:
    """What a reader must always see: the champion is the top of the promotion stack and a committed version, every
    decision's version exists with its model, and nothing uncommitted is left once a writer has been through."""
    history = reg.history()
    assert reg.champion() == (reg.champion_stack() or [None])[-1]
    for record in history:
        if record["version"] is not None:
            assert os.path.exists(reg.model_path(record["version"]))
    assert len({r["id"] for r in history}) == len(history)
