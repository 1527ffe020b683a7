"""Destinations: dpipe never replaces what it did not write, and an interrupted run leaves nothing behind.

Refusals and permitted overwrites run the CLI in this process; interruptions run
``python -m dpipe`` in a real subprocess and send it real signals.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import dpipe
from dpipe.cli.main import main
from dpipe.exceptions import StoreError
from dpipe.io import open_store, split_store
from dpipe.testing import one_error_line, write_store


def _one_line(capsys, command: str) -> str:
    return one_error_line(capsys.readouterr().err, command)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("dest")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    y = np.where(X[:, 0] > 0, 1, -1).astype(np.int8)
    store = write_store(d / "s.zarr", X, y, [100, 100])
    model = str(d / "model.json")
    dpipe.train(store, engine="local", out=model)
    return {"store": os.path.abspath(store), "model": model}


def _foreign_dir(tmp_path: Path) -> Path:
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "keep.txt").write_text("precious")
    return dest


def _svm(tmp_path: Path) -> str:
    src = tmp_path / "a.svm"
    src.write_text("1 1:1\n-1 2:1\n1 1:2\n")
    return str(src)


# ---------------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["ingest", "make-data"])
def test_overwrite_refuses_a_directory_that_is_not_a_store(tmp_path, capsys, command):
    dest = _foreign_dir(tmp_path)
    argv = ["ingest", _svm(tmp_path), str(dest)] if command == "ingest" else ["make-data", str(dest), "--rows", "100", "--features", "3"]
    assert main(["-q", *argv, "--overwrite"]) == 1
    line = _one_line(capsys, command)
    assert f"{dest}: " in line and "not a dpipe store" in line
    assert (dest / "keep.txt").read_text() == "precious" and sorted(p.name for p in dest.iterdir()) == ["keep.txt"]
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_split_refuses_a_directory_that_is_not_a_store(data, tmp_path):
    dest = _foreign_dir(tmp_path)
    with pytest.raises(StoreError, match="not a dpipe store"):
        split_store(data["store"], str(tmp_path / "train"), str(dest), overwrite=True)
    assert (dest / "keep.txt").read_text() == "precious"
    assert not (tmp_path / "train").exists()


@pytest.mark.parametrize("command", ["predict", "train"])
def test_overwrite_refuses_a_file_dpipe_did_not_write(data, tmp_path, capsys, command):
    out = tmp_path / "notes.txt"
    out.write_text("precious")
    argv = ["predict", data["model"], data["store"]] if command == "predict" else ["train", data["store"]]
    assert main(["-q", *argv, "--out", str(out), "--engine", "local", "--overwrite"]) == 1
    line = _one_line(capsys, command)
    assert line.startswith(f"dpipe {command}: error: {out}: ") and "not a dpipe" in line
    assert out.read_text() == "precious"
    # a Parquet file without dpipe's marker, a JSON file without the model format: refused as well
    other = tmp_path / "other.parquet"
    pq.write_table(pq.read_table(_predictions(data, tmp_path)).replace_schema_metadata(None), other)
    foreign = other if command == "predict" else tmp_path / "other.json"
    if command == "train":
        foreign.write_text(json.dumps({"coef": [1.0], "intercept": 0.0}))
    before = foreign.read_bytes()
    assert main(["-q", *argv, "--out", str(foreign), "--engine", "local", "--overwrite"]) == 1
    assert "not a dpipe" in _one_line(capsys, command) and foreign.read_bytes() == before


def test_evaluate_out_replaces_only_a_dpipe_metrics_file_and_only_with_overwrite(data, tmp_path, capsys):
    out = tmp_path / "metrics.json"
    evaluate = ["-q", "evaluate", data["model"], data["store"], "--out", str(out), "--engine", "local"]
    assert main(evaluate) == 0
    written = json.loads(out.read_text())
    assert written["format"] == "dpipe-metrics" and 0.5 < written["roc_auc"] <= 1.0
    capsys.readouterr()
    assert main(evaluate) == 1  # an existing file, even dpipe's own, needs --overwrite
    assert "exists" in _one_line(capsys, "evaluate") and json.loads(out.read_text()) == written
    assert main([*evaluate, "--overwrite"]) == 0
    capsys.readouterr()
    for foreign in ('{"roc_auc": 1.0}', "precious notes"):  # JSON without the marker, not JSON at all
        out.write_text(foreign)
        assert main([*evaluate, "--overwrite"]) == 1
        assert "not a dpipe metrics file" in _one_line(capsys, "evaluate") and out.read_text() == foreign
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]  # no temporary left


def _predictions(data, tmp_path: Path) -> str:
    return dpipe.predict(data["model"], data["store"], tmp_path / "p.parquet", engine="local", overwrite=True)


def test_train_out_needs_overwrite(data, tmp_path, capsys):
    out = tmp_path / "m.json"
    out.write_text(Path(data["model"]).read_text())  # even a dpipe model
    before = out.read_bytes()
    assert main(["-q", "train", data["store"], "--out", str(out), "--engine", "local"]) == 1
    line = _one_line(capsys, "train")
    assert line.startswith(f"dpipe train: error: {out}: exists") and "--overwrite" in line
    assert out.read_bytes() == before
    with pytest.raises(dpipe.exceptions.OutputExistsError):
        dpipe.train(data["store"], engine="local", out=out)


@pytest.mark.parametrize("overwrite", [False, True])
def test_train_out_never_a_store_manifest(data, tmp_path, capsys, overwrite):
    store = write_store(tmp_path / "t.zarr", *_xy(), [60])
    manifest = Path(store) / "manifest.json"
    before = manifest.read_bytes()
    argv = ["-q", "train", store, "--out", str(manifest), "--engine", "local"] + (["--overwrite"] if overwrite else [])
    assert main(argv) == 1
    line = _one_line(capsys, "train")
    assert line.startswith(f"dpipe train: error: {os.path.abspath(manifest)}: ") and "inside the dpipe store" in line
    assert manifest.read_bytes() == before
    assert open_store(store).manifest.n_rows == 60


def _xy():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 4)).astype(np.float32)
    return X, np.where(X[:, 1] > 0, 1, -1).astype(np.int8)


# ---------------------------------------------------------------------------------
# permitted overwrites
# ---------------------------------------------------------------------------------
def test_overwrite_replaces_a_dpipe_store(tmp_path, capsys):
    dest = tmp_path / "s"
    assert main(["-q", "make-data", str(dest), "--rows", "100", "--features", "3"]) == 0
    assert main(["-q", "make-data", str(dest), "--rows", "150", "--features", "3", "--overwrite"]) == 0
    assert open_store(dest).manifest.n_rows == 150
    assert main(["-q", "ingest", _svm(tmp_path), str(dest), "--overwrite"]) == 0
    assert open_store(dest).manifest.n_rows == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.svm", "s"]


def test_overwrite_of_a_symlink_replaces_the_link_only(tmp_path):
    target = tmp_path / "target"
    dpipe.make_data(target, rows=100, features=3)
    link = tmp_path / "link"
    link.symlink_to(target)
    assert main(["-q", "make-data", str(link), "--rows", "120", "--features", "3", "--overwrite"]) == 0
    assert not link.is_symlink() and open_store(link).manifest.n_rows == 120
    assert open_store(target).manifest.n_rows == 100  # what the link pointed to is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "target"]  # no .link.old-*


def test_overwrite_replaces_a_dpipe_model_and_predictions(data, tmp_path, capsys):
    model = tmp_path / "m.json"
    model.write_text(Path(data["model"]).read_text())
    assert main(["-q", "train", data["store"], "--out", str(model), "--engine", "local", "--objective", "error-moment", "--overwrite"]) == 0
    assert json.loads(model.read_text())["objective"] == "error-moment"
    out = tmp_path / "p.parquet"
    assert main(["-q", "predict", data["model"], data["store"], "--out", str(out), "--engine", "local"]) == 0
    assert pq.read_schema(out).metadata[b"dpipe.format"] == b"dpipe-predictions"
    assert main(["-q", "predict", str(model), data["store"], "--out", str(out), "--engine", "local"]) == 1  # no --overwrite
    assert main(["-q", "predict", str(model), data["store"], "--out", str(out), "--engine", "local", "--overwrite"]) == 0
    assert pq.read_table(out).num_rows == 200
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "p.parquet"]


def test_stale_temporaries_of_a_file_are_removed(data, tmp_path, capsys):
    out = tmp_path / "m.json"
    stale = tmp_path / ".m.json.tmp-abcd1234"
    stale.write_text("{")
    keep = [tmp_path / ".m.json.tmp-abcd1234.bak", tmp_path / ".m.json.tmp-x", tmp_path / ".n.json.tmp-abcd1234", tmp_path / "m.json.old-abcd1234"]
    for k in keep:
        k.write_text("mine")
    assert main(["train", data["store"], "--out", str(out), "--engine", "local"]) == 0
    assert "removed .m.json.tmp-abcd1234" in capsys.readouterr().err
    assert not stale.exists() and all(k.read_text() == "mine" for k in keep)


# ---------------------------------------------------------------------------------
# interruptions (real processes)
# ---------------------------------------------------------------------------------
def _run(argv: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dpipe", *argv], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _temporaries(parent: Path, dest: str) -> list[str]:
    return [p.name for p in parent.iterdir() if p.name.startswith(f".{dest}.tmp-") or p.name.startswith(f".{dest}.old-")]


def _wait_for_temporary(proc: subprocess.Popen, parent: Path, dest: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not _temporaries(parent, dest):
        assert proc.poll() is None, f"exited before writing: {proc.communicate()}"
        assert time.monotonic() < end, "no temporary appeared"
        time.sleep(0.02)
    time.sleep(0.3)  # a few shards into the write


def _interrupt(proc: subprocess.Popen, signum: int, parent: Path, dest: str) -> str:
    _wait_for_temporary(proc, parent, dest)
    assert proc.poll() is None, "finished before the signal: make the job larger"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum, err
    lines = [x for x in err.strip().splitlines() if not x.startswith("dpipe.io ", 9)]  # "HH:MM:SS dpipe.io ...": the progress log
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_make_data(tmp_path, signum):
    proc = _run(["make-data", "D", "--rows", "3000000", "--features", "40"], tmp_path)
    line = _interrupt(proc, signum, tmp_path, "D")
    assert line == f"dpipe make-data: interrupted by {signal.Signals(signum).name}"
    assert list(tmp_path.iterdir()) == []


def test_sigterm_during_ingest(tmp_path):
    rng = np.random.default_rng(0)
    block = "".join(",".join([str(int(rng.integers(0, 2)))] + [f"{v:.3f}" for v in rng.normal(size=10)]) + "\n" for _ in range(1000))
    src = tmp_path / "big.csv"
    with open(src, "w") as f:
        f.write("y," + ",".join(f"f{i}" for i in range(10)) + "\n")
        for _ in range(1500):  # 1.5e6 rows, 100 MB: a few seconds
            f.write(block)
    proc = _run(["ingest", "big.csv", "D", "--label", "y"], tmp_path)
    assert _interrupt(proc, signal.SIGTERM, tmp_path, "D") == "dpipe ingest: interrupted by SIGTERM"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.csv"]


def test_sigkill_leaves_a_temporary_the_next_run_removes(tmp_path):
    proc = _run(["make-data", "D", "--rows", "3000000", "--features", "40"], tmp_path)
    _wait_for_temporary(proc, tmp_path, "D")
    proc.kill()
    proc.communicate(timeout=30)
    stale = _temporaries(tmp_path, "D")
    assert len(stale) == 1 and proc.returncode == -signal.SIGKILL
    old = tmp_path / ".D.old-zz99zz99"  # as left by a kill between the renames of an overwrite
    old.mkdir()
    decoys = [tmp_path / ".D.tmp-keep", tmp_path / ".D.tmp-abcd1234x", tmp_path / ".E.tmp-abcd1234", tmp_path / "D.tmp-abcd1234"]
    for d in decoys:
        d.write_text("mine")
    done = subprocess.run([sys.executable, "-m", "dpipe", "make-data", "D", "--rows", "1000", "--features", "3"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"removed {stale[0]} left by an interrupted run" in done.stderr
    assert "removed .D.old-zz99zz99 left by an interrupted run" in done.stderr
    assert all(d.read_text() == "mine" for d in decoys)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["D", *(d.name for d in decoys)])
    assert open_store(tmp_path / "D").manifest.n_rows == 1000


# ---------------------------------------------------------------------------------
# --overwrite over a real store: one INFO line of what it removes; a user's file inside refuses it
# ---------------------------------------------------------------------------------
def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes), links as their target's name."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = os.readlink(p).encode()
        elif p.is_file():
            out[rel] = p.read_bytes()
        else:
            out[rel + "/"] = b""
    return out


def _csv(tmp_path: Path, rows: int) -> str:
    src = tmp_path / f"t{rows}.csv"
    rng = np.random.default_rng(rows)
    lines = ["a,b,kind,g,w,label"] + [f"{rng.normal():.3f},{rng.normal():.3f},{'xyz'[i % 3]},{'pq'[i % 2]},{1 + i % 3},{i % 2}" for i in range(rows)]
    src.write_text("\n".join(lines) + "\n")
    return str(src)


@pytest.mark.parametrize("format, layout", [("zarr", "dense"), ("zarr", "sparse"), ("parquet", "dense"), ("parquet", "sparse")])
def test_overwrite_of_a_store_logs_what_it_removes_in_one_info_line(tmp_path, caplog, format, layout):
    dest = tmp_path / f"s.{format}"
    options = dict(format=format, layout=layout, group_col="g", weight_col="w", shard_rows=40)
    dpipe.ingest(_csv(tmp_path, 100), str(dest), **options)  # 3 shards, with group and weight arrays
    old = _files(dest)
    n_files = sum(not k.endswith("/") for k in old)
    size = sum(len(v) for v in old.values())
    with caplog.at_level("INFO", logger="dpipe"):
        dpipe.ingest(_csv(tmp_path, 70), str(dest), overwrite=True, **options)
    removing = [r.getMessage() for r in caplog.records if "removing" in r.getMessage()]
    assert removing == [f"{dest}: removing the dpipe store it replaces ({n_files} file(s), {size / 2**20:.1f} MB)"]
    assert open_store(dest).manifest.n_rows == 70
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["t100.csv", "t70.csv", dest.name])


@pytest.mark.parametrize("plant", ["notes.txt", "y/c/notes.txt", "X/mine/", "link"])
def test_overwrite_refuses_a_store_holding_a_user_file_and_deletes_nothing(tmp_path, capsys, plant):
    dest = tmp_path / "s.zarr"
    dpipe.make_data(dest, rows=100, features=3)
    if plant == "link":
        (dest / plant).symlink_to(tmp_path)
    elif plant.endswith("/"):
        (dest / plant).mkdir()
        (dest / plant / "keep.txt").write_text("precious")
    else:
        (dest / plant).write_text("precious")
    before = _files(dest)
    with pytest.raises(OSError) as exc:  # OutputExistsError
        dpipe.make_data(dest, rows=120, features=3, overwrite=True)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{dest}: the dpipe store holds 1 file(s) that are not part of it ({plant});")
    assert "overwrite=True" in msg
    assert main(["make-data", str(dest), "--rows", "120", "--features", "3", "--overwrite"]) != 0
    line = _one_line(capsys, "make-data")
    assert plant in line and "--overwrite" in line and "overwrite=True" not in line
    assert _files(dest) == before and open_store(dest).manifest.n_rows == 100  # nothing deleted, nothing replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr"]  # no temporary, no .s.zarr.old-*
