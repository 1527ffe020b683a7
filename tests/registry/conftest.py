"""The registry tests' shared folder: stores, configurations and a registry whose first retrain promoted v0001."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from retrain_helpers import SECOND, run_retrain, write_config

from dpipe.registry import Registry


@pytest.fixture(scope="module")
def first(retrain_stores, tmp_path_factory) -> Path:
    """A folder with the stores, the configurations and a registry whose champion (v0001) came from the first retrain."""
    d = tmp_path_factory.mktemp("retrain") / "work"
    shutil.copytree(retrain_stores, d)
    write_config(d, "w1.yaml", "w1.zarr")
    write_config(d, SECOND, "w2.zarr")
    write_config(d, "strict.yaml", "w2.zarr", constraints="constraints: {churn: 0.0, extra: ['coverage >= 0.97']}")
    r = run_retrain(d / "w1.yaml")
    assert r.returncode == 0, r.stderr
    return d


def _registry(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpipe", "registry", *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def busy(first, tmp_path_factory) -> Path:
    """A registry with every kind of decision: promoted (v0001, v0002), kept (v0003), failed, rollback, promote."""
    d = tmp_path_factory.mktemp("busy") / "work"
    shutil.copytree(first, d)
    assert run_retrain(d / SECOND).returncode == 0
    write_config(d, "margin.yaml", "w2.zarr", promote="promote: {metric: accuracy, margin: 0.5}")
    assert run_retrain(d / "margin.yaml").returncode == 3
    assert run_retrain(d / "strict.yaml").returncode == 1
    assert _registry("rollback", str(d / "reg")).returncode == 0
    assert _registry("promote", str(d / "reg"), "v0002").returncode == 0
    reg = Registry(d / "reg")
    assert [r["action"] for r in reg.history()] == ["promoted", "promoted", "kept", "failed", "rollback", "promote"]
    assert reg.versions() == ["v0001", "v0002", "v0003"] and reg.champion() == "v0002"
    return d


