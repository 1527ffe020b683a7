"""Real ``dask scheduler`` / ``dask worker`` processes on 127.0.0.1, driven through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import dpipe
from dpipe.testing import classification_data, write_store

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def scheduler_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster")
    sf = d / "scheduler.json"
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    sched = subprocess.Popen(
        [*dask, "--host", "127.0.0.1", "--port", "0", "--dashboard-address", ":0", "--scheduler-file", str(sf)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=d,
    )
    workers = []
    try:
        deadline = time.time() + 60
        while not sf.exists() and time.time() < deadline:
            time.sleep(0.2)
        assert sf.exists(), "dask scheduler did not write its scheduler file"
        for i in range(2):
            workers.append(
                subprocess.Popen(
                    [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(sf), "--nthreads", "1",
                     "--nworkers", "1", "--host", "127.0.0.1", "--dashboard-address", ":0", "--name", f"w{i}", "--memory-limit", "1GiB"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=d,
                )
            )
        from distributed import Client

        with Client(scheduler_file=str(sf), set_as_default=False, timeout=60) as c:
            c.wait_for_workers(2, timeout=90)
        yield str(sf)
    finally:
        for p in [*workers, sched]:
            p.terminate()
        for p in [*workers, sched]:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpipe", *args], capture_output=True, text=True, env=env, timeout=300)


def test_cli_train_evaluate_predict_on_real_scheduler(tmp_path, scheduler_file):
    X, y = classification_data(5000, 6, seed=21)
    store = write_store(tmp_path / "s.zarr", X, y, [1200, 1300, 0, 2500])
    model = tmp_path / "m.json"
    r = _cli("train", store, "--objective", "error-moment", "--out", str(model), "--scheduler-file", scheduler_file)
    assert r.returncode == 0, r.stderr
    assert "error-moment: objective" in r.stdout
    local = dpipe.train(store, "error-moment", engine="local", train_metrics=False)
    got = dpipe.LinearModel.load(model)
    assert np.abs(got.coef - local.coef).max() <= 1e-8 * np.abs(local.coef).max()

    # the same cluster through the environment variable, and through its address
    with open(scheduler_file) as f:
        address = json.load(f)["address"]
    env = dict(os.environ, DPIPE_SCHEDULER=address)
    r = _cli("evaluate", str(model), store, "--out", str(tmp_path / "metrics.json"), env=env)
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "metrics.json") as f:
        metrics = json.load(f)
    assert metrics["roc_auc"] == pytest.approx(local.metrics.get("train", {}).get("roc_auc", metrics["roc_auc"]))
    assert metrics["n"] == 5000
    r = _cli("predict", str(model), store, "--out", str(tmp_path / "p.parquet"), "--scheduler", address)
    assert r.returncode == 0, r.stderr
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "p.parquet").num_rows == 5000


def test_dask_config_key_selects_the_scheduler(tmp_path, scheduler_file):
    X, y = classification_data(800, 5, seed=22)
    store = write_store(tmp_path / "s.zarr", X, y, [400, 400])
    with open(scheduler_file) as f:
        address = json.load(f)["address"]
    env = dict(os.environ, DASK_DPIPE__SCHEDULER=address)
    r = _cli("-v", "train", store, "--out", str(tmp_path / "m.json"), env=env)
    assert r.returncode == 0, r.stderr
    assert f"connected to scheduler {address}" in r.stderr


def test_bad_scheduler_value_is_a_clear_error(tmp_path):
    X, y = classification_data(100, 5)
    store = write_store(tmp_path / "s.zarr", X, y)
    r = _cli("train", store, "--out", str(tmp_path / "m.json"), "--scheduler", "no-such-file.json")
    assert r.returncode == 1
    assert "error: --scheduler must be a scheduler address" in r.stderr and "no-such-file.json" in r.stderr
    assert not Path(tmp_path / "m.json").exists()
