"""Outputs checked before the work, and non-finite store values refused on read.

Every output case runs against a store whose second shard holds a NaN feature: had a
data pass run, the error would name that shard; it names the output path instead.
"""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest
import zarr

import dpipe
from dpipe.cli.main import main
from dpipe.exceptions import OutputError, ShardValueError
from dpipe.io import record_checksums
from dpipe.model import LinearModel
from dpipe.testing import one_error_line, write_store

N, D = 120, 5
SIZES = [50, 40, 30]  # shard 1 starts at row 50
BAD_SHARD, BAD_ROW = 1, 7  # row 57 of the store


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)).astype(np.float32)
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=N) > 0, 1, -1).astype(np.int8)
    return X, y


def _poison(path: str, value: float = np.nan, array: str = "X") -> str:
    """Overwrite one stored value through zarr (the store's chunk now decodes to ``value``), then record the checksums
    again: a value that was already there when they were taken, which the re-hash on read cannot see and the passes'
    own checks must (a value changed after them is refused by the re-hash first: tests/io/test_verify_default.py)."""
    root = zarr.open_group(path, mode="r+")
    row = SIZES[0] + BAD_ROW
    if array == "X":
        root["X"][row, 3] = value
    else:
        root[array][row] = value
    _record_again(path)
    return path


def _record_again(path: str) -> None:
    """Drop the store's checksums (back to manifest schema 1) and let ``dpipe verify --record`` take them anew."""
    def old(d: dict) -> dict:
        d.pop("shards"), d.pop("checksum_algorithm")
        return {**d, "schema_version": 1}
    for fn, key in (("manifest.json", None), ("zarr.json", "dpipe_manifest")):
        with open(os.path.join(path, fn)) as f:
            d = json.load(f)
        if key is None:
            d = old(d)
        else:
            d["attributes"][key] = old(d["attributes"][key])
        with open(os.path.join(path, fn), "w") as f:
            json.dump(d, f)
    record_checksums(path)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("outputs")
    X, y = _data()
    good = write_store(d / "good.zarr", X, y, SIZES)
    bad = _poison(write_store(d / "bad.zarr", X, y, SIZES))
    inf = _poison(write_store(d / "inf.zarr", X, y, SIZES), np.inf)
    weighted = _poison(write_store(d / "w.zarr", X, y, SIZES, weight=np.ones(N, np.float32)), -1.0, "weight")
    model = str(d / "model.json")
    dpipe.train(good, "auc-moment", engine="local", out=model)
    return {"good": good, "bad": os.path.abspath(bad), "inf": os.path.abspath(inf), "weighted": os.path.abspath(weighted), "model": model}


def _one_line(capsys, command: str) -> str:
    """The one line of stderr (commands run with -q: no log lines)."""
    return one_error_line(capsys.readouterr().err, command)


def _argv(command: str, stores, out: str) -> list[str]:
    if command == "train":
        return ["train", stores["bad"], "--out", out, "--engine", "local"]
    if command == "predict":
        return ["predict", stores["model"], stores["bad"], "--out", out, "--engine", "local"]
    return ["evaluate", stores["model"], stores["bad"], "--out", out, "--engine", "local"]


COMMANDS = ["train", "predict", "evaluate"]


@pytest.mark.parametrize("command", COMMANDS)
def test_missing_directory(stores, tmp_path, capsys, command):
    out = tmp_path / "nope" / "out.json"
    assert main(["-q", *_argv(command, stores, str(out))]) == 1
    line = _one_line(capsys, command)
    assert line.startswith(f"dpipe {command}: error: {out}: ") and "does not exist" in line
    assert "shard" not in line  # no pass ran: it would have met the NaN
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("simulated", [False, True])
@pytest.mark.parametrize("command", COMMANDS)
def test_read_only_directory(stores, tmp_path, capsys, monkeypatch, command, simulated):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if simulated:  # as root a 0o500 directory is writable: deny it to the check (a read-only mount answers the same way)
            real = os.access
            monkeypatch.setattr("dpipe._output.os.access", lambda p, mode: False if os.fspath(p) == str(ro) else real(p, mode))
        elif os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write into a 0o500 directory (root)")
        out = ro / "out.json"
        assert main(["-q", *_argv(command, stores, str(out))]) == 1
        line = _one_line(capsys, command)
        assert line.startswith(f"dpipe {command}: error: {out}: ") and "not writable" in line and "shard" not in line
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)


@pytest.mark.parametrize("command", COMMANDS)
def test_path_is_a_directory(stores, tmp_path, capsys, command):
    out = tmp_path / "adir"
    out.mkdir()
    assert main(["-q", *_argv(command, stores, str(out))]) == 1
    line = _one_line(capsys, command)
    assert line.startswith(f"dpipe {command}: error: {out}: is a directory") and "shard" not in line
    assert list(out.iterdir()) == []


def test_python_api_checks_before_the_pass(stores, tmp_path):
    with pytest.raises(OutputError, match="does not exist"):
        dpipe.train(stores["bad"], engine="local", out=tmp_path / "no" / "m.json")
    with pytest.raises(OutputError, match="is a directory"):
        dpipe.predict(stores["model"], stores["bad"], tmp_path, engine="local")


@pytest.mark.parametrize("command", ["make-data", "ingest"])
def test_store_destination_parent_missing(tmp_path, capsys, command):
    dest = tmp_path / "nope" / "s.zarr"
    if command == "make-data":
        argv = ["make-data", str(dest), "--rows", "100"]
    else:
        src = tmp_path / "a.svm"
        src.write_text("1 1:1\n-1 2:1\n")
        argv = ["ingest", str(src), str(dest)]
    assert main(["-q", *argv]) == 1
    line = _one_line(capsys, command)
    assert line.startswith(f"dpipe {command}: error: {dest}: ") and "does not exist" in line


def test_os_error_is_one_line_and_verbose_shows_the_traceback(stores, tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "m.json")

    def full(self, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path))

    monkeypatch.setattr(LinearModel, "save", full)
    argv = ["train", stores["good"], "--out", out, "--engine", "local"]
    assert main(["-q", *argv]) == 1
    assert _one_line(capsys, "train") == f"dpipe train: error: {out}: No space left on device"
    assert main(["-v", *argv]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1] == f"dpipe train: error: {out}: No space left on device"


# ---------------------------------------------------------------------------------
# non-finite values on read
# ---------------------------------------------------------------------------------
def _where(store: str) -> str:
    return f"{store}, shard {BAD_SHARD}, row {BAD_ROW} (row {SIZES[0] + BAD_ROW} of the store): "


@pytest.mark.parametrize("kind", ["bad", "inf"])
@pytest.mark.parametrize("command", COMMANDS)
def test_nan_on_read_cli(stores, tmp_path, capsys, command, kind):
    out = tmp_path / "out"
    argv = _argv(command, stores, str(out))
    argv[argv.index(stores["bad"])] = stores[kind]
    assert main(["-q", *argv]) == 1
    line = _one_line(capsys, command)
    assert line.startswith(f"dpipe {command}: error: {_where(stores[kind])}feature 3 is {'nan' if kind == 'bad' else 'inf'}"), line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("objective", ["auc-moment", "auc-smooth", "error-moment"])
def test_nan_on_read_every_first_pass(stores, objective):
    with pytest.raises(ShardValueError) as info:
        dpipe.train(stores["bad"], objective, engine="local")
    assert str(info.value).startswith(_where(stores["bad"]))


def test_bad_weight_on_read(stores, capsys, tmp_path):
    for argv in (["train", stores["weighted"], "--out", str(tmp_path / "m.json"), "--engine", "local"],
                 ["evaluate", stores["model"], stores["weighted"], "--engine", "local"]):
        assert main(["-q", *argv]) == 1
        line = _one_line(capsys, argv[0])
        assert _where(stores["weighted"]) + "sample weight is -1.0" in line


@pytest.mark.parametrize("cache", ["memory", "stream"])
def test_nan_on_read_dask(stores, tmp_path, client, cache):
    where = _where(stores["bad"])
    with pytest.raises(ShardValueError) as info:
        dpipe.train(stores["bad"], "auc-moment", client=client, cache=cache)
    assert str(info.value).startswith(where)
    with pytest.raises(ShardValueError) as info:
        dpipe.train(stores["bad"], "auc-smooth", client=client, cache=cache, max_iter=3)
    assert str(info.value).startswith(where)
    with pytest.raises(ShardValueError) as info:
        dpipe.evaluate(stores["model"], stores["bad"], client=client, cache=cache)
    assert str(info.value).startswith(where)
    with pytest.raises(ShardValueError) as info:
        dpipe.predict(stores["model"], stores["bad"], tmp_path / "p.parquet", client=client, cache=cache)
    assert str(info.value).startswith(where) and (info.value.shard, info.value.row) == (BAD_SHARD, BAD_ROW)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("row, col", [(0, 0), (5, 3), (999, 7)])
def test_every_pass_function_names_shard_and_row(value, row, col):
    """Each worker-side pass checks its own result (the numba X @ w included: fastmath must still propagate NaN / inf)."""
    from dpipe.io import Shard
    from dpipe.reduce import class_moments_of_shard, class_scores, column_moments_of_shard, score_shard, shard_scores, shard_sorted_scores

    rng = np.random.default_rng(1)
    X = rng.normal(size=(1000, 8)).astype(np.float32)
    X[row, col] = value
    shard = Shard(X, np.where(rng.random(1000) < 0.3, 1, -1).astype(np.int8), index=4)
    w = rng.normal(size=8)
    w[col] = 0.0  # a zero weight on the bad feature still gives NaN (0 * inf, 0 * nan)
    calls = [(score_shard, (w,)), (class_scores, (w,)), (shard_scores, (w, 0.5)), (shard_sorted_scores, (w, 0.5)),
             (class_moments_of_shard, ()), (column_moments_of_shard, ())]
    for fn, args in calls:
        with pytest.raises(ShardValueError) as info:
            fn(shard, *args)
        assert (info.value.shard, info.value.row) == (4, row), fn.__name__
