"""Stores are verified by default: real ``dpipe`` processes refuse a damaged store, ``--no-verify`` opts out.

The damage here is what only a re-hash sees (the labels, the chunk files and their sizes
are untouched): two X chunks swapped, an X chunk overwritten with zeros of the same size,
one flipped byte. Every refusal is exit 1, one line on stderr naming the store and the
shard, and nothing written: no model, no metrics, no predictions, no temporary.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import dask.config
import numpy as np
import pytest

import dpipe
from dpipe.cli.main import main
from dpipe.engine import LocalDataset, ShardedDataset
from dpipe.exceptions import StoreError
from dpipe.reduce import class_moments_of_shard, merge_moments
from dpipe.testing import classification_data, write_store

SIZES = [50, 50, 50, 50]


def _swap(store: str) -> str:
    a, b = (os.path.join(store, "X", "c", str(i), "0") for i in (1, 2))
    os.rename(a, a + ".swap")
    os.rename(b, a)
    os.rename(a + ".swap", b)
    return "shard 1 (rows 50..100)"


def _raw_chunk(store: str, shard: int) -> str:
    fn = os.path.join(store, "X", "c", str(shard), "0")
    assert os.path.getsize(fn) == 50 * 6 * 4  # uncompressed (dpipe.store-codec auto keeps dense data raw)
    return fn


def _zero(store: str) -> str:
    fn = _raw_chunk(store, 2)
    with open(fn, "r+b") as f:
        f.write(bytes(os.path.getsize(fn)))
    return "shard 2 (rows 100..150)"


def _flip(store: str) -> str:
    fn = _raw_chunk(store, 3)
    with open(fn, "r+b") as f:
        f.seek(4 * 11)
        b = f.read(1)[0]
        f.seek(4 * 11)
        f.write(bytes([b ^ 0x01]))  # the lowest bit of one float32: a value off in its last place
    return "shard 3 (rows 150..200)"


DAMAGE = {"swapped-chunks": _swap, "zeroed-chunk": _zero, "flipped-byte": _flip}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    """A model trained on an undamaged copy of the store (the same rows, the same features)."""
    d = tmp_path_factory.mktemp("model")
    X, y = classification_data(200, 6, seed=3)
    store = write_store(d / "train.zarr", X, y, SIZES)
    return os.fspath(dpipe.train(store, engine="local", out=d / "m.json") and d / "m.json")


@pytest.fixture
def work(tmp_path):
    """``(folder, store)``: a fresh undamaged store in a folder of its own (for the nothing-written checks)."""
    X, y = classification_data(200, 6, seed=3)
    d = tmp_path / "work"
    d.mkdir()
    return d, write_store(d / "s.zarr", X, y, SIZES)


def dpipe_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m dpipe ARGS`` in a real process, with no dpipe.verify from the environment unless ``env`` sets it."""
    full = {k: v for k, v in os.environ.items() if k != "DASK_DPIPE__VERIFY"}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "dpipe", *args], capture_output=True, text=True, env=full, timeout=300, check=False)


def _refused(r: subprocess.CompletedProcess, command: str, store: str, shard: str) -> None:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1, r.stderr
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"dpipe {command}: error: {store}, {shard}: content hash of X differs"), lines[0]


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_train_refuses_damage_by_default(work, damage):
    d, store = work
    shard = DAMAGE[damage](store)
    out = d / "m.json"
    r = dpipe_cli("train", store, "--objective", "auc-moment", "--out", str(out), "--engine", "local")
    _refused(r, "train", store, shard)
    assert sorted(os.listdir(d)) == ["s.zarr"]


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_evaluate_and_predict_refuse_damage_by_default(work, model, damage):
    d, store = work
    shard = DAMAGE[damage](store)
    r = dpipe_cli("evaluate", model, store, "--engine", "local", "--out", str(d / "metrics.json"))
    _refused(r, "evaluate", store, shard)
    assert r.stdout == ""
    r = dpipe_cli("predict", model, store, "--out", str(d / "p.parquet"), "--engine", "local")
    _refused(r, "predict", store, shard)
    assert sorted(os.listdir(d)) == ["s.zarr"]


def test_train_on_the_dask_engine_refuses_damage_by_default(work):
    """The flag travels to the workers' reads (Store.shard_args): an embedded LocalCluster of one worker. The error is
    one line: the embedded worker's own "Compute Failed" record of a dpipe error is dropped (the driver reports it)."""
    d, store = work
    _swap(store)  # shards 1 and 2 both hold the other's features: a worker may find either first
    r = dpipe_cli("-q", "train", store, "--objective", "auc-moment", "--out", str(d / "m.json"), "--engine", "dask", "--workers", "1")
    assert r.returncode == 1, r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert re.match(rf"dpipe train: error: {re.escape(store)}, shard (1 \(rows 50\.\.100\)|2 \(rows 100\.\.150\)): content hash of X differs", line), line
    assert sorted(os.listdir(d)) == ["s.zarr"]


def test_no_verify_trains_evaluates_and_predicts_on_a_damaged_store(work, model):
    d, store = work
    _zero(store)
    r = dpipe_cli("train", store, "--objective", "auc-moment", "--out", str(d / "m.json"), "--engine", "local", "--no-verify")
    assert r.returncode == 0, r.stderr
    assert dpipe.LinearModel.load(d / "m.json").coef.shape == (6,)
    r = dpipe_cli("evaluate", model, store, "--engine", "local", "--out", str(d / "metrics.json"), "--no-verify")
    assert r.returncode == 0 and (d / "metrics.json").exists(), r.stderr
    r = dpipe_cli("predict", model, store, "--out", str(d / "p.parquet"), "--engine", "local", "--no-verify")
    assert r.returncode == 0, r.stderr
    import pyarrow.parquet as pq

    assert pq.read_table(d / "p.parquet").num_rows == 200


def test_dask_config_false_opts_out(work):
    """``DASK_DPIPE__VERIFY=false``: how a cluster job or a retraining schedule opts out without a flag."""
    d, store = work
    _flip(store)
    r = dpipe_cli("train", store, "--objective", "auc-moment", "--out", str(d / "m.json"), "--engine", "local", env={"DASK_DPIPE__VERIFY": "false"})
    assert r.returncode == 0, r.stderr
    assert os.path.exists(d / "m.json")


def test_python_api_verifies_by_default_and_opts_out(work, model):
    d, store = work
    _swap(store)
    with pytest.raises(StoreError, match=r"shard 1 \(rows 50..100\): content hash of X differs"):
        dpipe.train(store, engine="local")
    with pytest.raises(StoreError, match="content hash of X differs"):
        dpipe.evaluate(model, store, engine="local")
    with pytest.raises(StoreError, match="content hash of X differs"):
        dpipe.predict(model, store, d / "p.parquet", engine="local")
    assert not (d / "p.parquet").exists()
    a = dpipe.train(store, engine="local", verify=False)
    b = dpipe.train(dpipe.open_store(store), engine="local", verify=False)  # an open store, switched off for this call
    np.testing.assert_array_equal(a.coef, b.coef)
    assert dpipe.evaluate(model, store, engine="local", verify=False)["n"] == 200
    assert dpipe.predict(model, store, d / "p.parquet", engine="local", verify=False) == os.fspath(d / "p.parquet")
    with dask.config.set({"dpipe.verify": False}), pytest.raises(StoreError, match="content hash of X differs"):
        dpipe.train(store, engine="local", verify=True)  # the parameter wins over the setting


@pytest.mark.parametrize("cache", ["memory", "stream"])
def test_every_engine_and_cache_rehashes(work, client, cache):
    """Persisted shards are checked when they are loaded on the workers; streamed ones on every pass's read."""
    _, store = work
    _flip(store)
    damaged = r"shard 3 \(rows 150..200\): content hash of X differs"
    with pytest.raises(StoreError, match=damaged), ShardedDataset(store, client, cache=cache) as ds:
        ds.map_reduce(class_moments_of_shard, merge_moments)
    with pytest.raises(StoreError, match=damaged), LocalDataset(store, cache=cache) as ds:
        ds.map_reduce(class_moments_of_shard, merge_moments)
    with ShardedDataset(dpipe.open_store(store, verify=False), client, cache=cache) as ds:
        assert ds.map_reduce(class_moments_of_shard, merge_moments) is not None


def test_split_verifies_by_default(work, capsys):
    d, store = work
    shard = _zero(store)
    assert main(["split", store, str(d / "tr.zarr"), str(d / "te.zarr")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"dpipe split: error: {store}, {shard}: content hash of X differs") and "\n" not in err
    assert sorted(os.listdir(d)) == ["s.zarr"]
    assert main(["split", store, str(d / "tr.zarr"), str(d / "te.zarr"), "--no-verify"]) == 0
    assert dpipe.open_store(d / "tr.zarr").manifest.n_rows == 150
