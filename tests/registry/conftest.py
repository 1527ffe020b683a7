"""The registry tests' shared folder: stores, configurations and a registry whose first retrain promoted v0001."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from retrain_helpers import SECOND, run_retrain, write_config


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
