"""One writer per destination, never a destination inside a store or a registry, OS errors naming the path.

Concurrent writers are real ``python -m dpipe`` processes; a full disk is a real OS error
(the file-size limit RLIMIT_FSIZE of a child process: writes beyond it fail with EFBIG).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import dpipe
from dpipe._locks import destination_lock
from dpipe._output import check_output_path
from dpipe.cli.main import main
from dpipe.exceptions import DestinationBusyError, OutputError, OutputExistsError, StoreError
from dpipe.io import open_store
from dpipe.testing import one_error_line, write_store


def _dpipe(argv: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpipe", *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _svm(path: Path) -> Path:
    path.write_text("1 1:1 2:0.5\n-1 2:1\n1 1:2\n-1 3:1\n")
    return path


def _wait_for(proc: subprocess.Popen, cond, what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"exited before {what}: {proc.communicate()}"
        assert time.monotonic() < end, f"no {what}"
        time.sleep(0.01)


# ---------------------------------------------------------------------------------
# one writer per destination (real processes)
# ---------------------------------------------------------------------------------
def _shard_written(folder: Path) -> bool:
    """Whether a make-data temporary ``.D.tmp-*`` in ``folder`` holds a chunk file of ``y`` (a shard written)."""
    return any(p.name.startswith(".D.tmp-") and any(c.is_file() for c in (p / "y" / "c").rglob("*")) for p in folder.iterdir())


def test_a_deleted_lock_cannot_be_stolen_the_first_writer_fails_and_renames_nothing(tmp_path):
    """The B17 sequence (issue 41): a live writer's ``.D.lock`` is deleted (a tmp cleaner, a user) and a second writer
    takes a fresh lock. The second leaves the first's live temporary alone (it is flock-held) and writes D; the first,
    finding at its final rename that the lock file is no longer the one it locked, fails with one line and renames
    nothing into place (it used to remove nothing of its own and exit 0 with shards missing)."""
    _svm(tmp_path / "a.svm")
    # -q: its error is its one stderr line, without the progress lines a loaded machine's slower run would add
    first = subprocess.Popen([sys.executable, "-m", "dpipe", "-q", "make-data", "D", "--rows", "600000", "--features", "20", "--shard-rows", "50000"],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(first, lambda: _shard_written(tmp_path), "a shard in the temporary")  # the writer holds its temporary by then
        first.send_signal(signal.SIGSTOP)
        temporary = [p for p in tmp_path.iterdir() if p.name.startswith(".D.tmp-")]
        (tmp_path / ".D.lock").unlink()  # the lock deleted under its live holder
        second = _dpipe(["ingest", "a.svm", "D"], tmp_path, timeout=60)
        assert second.returncode == 0, second.stderr
        assert f"left {temporary[0].name} in place: a live dpipe process is writing it" in second.stderr
        assert all(p.is_dir() for p in temporary), "the second writer removed the live temporary"
    finally:
        first.send_signal(signal.SIGCONT)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 1, err
    line = one_error_line(err, "make-data")
    assert f"{tmp_path / 'D'}: the lock {tmp_path / '.D.lock'} was removed while this process was writing the store" in line
    assert "nothing was renamed into place" in line
    assert open_store(tmp_path / "D").manifest.n_rows == 4  # the second writer's store, whole
    assert _dpipe(["verify", "D"], tmp_path).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D", "a.svm"]  # the first's temporary removed by itself, no lock file


def test_a_writer_whose_temporary_lost_its_shards_fails_and_renames_nothing(tmp_path):
    """The writer checks that its temporary still holds every shard it wrote: removed from under it (by a process that
    did not ask the lock), the store is not renamed into place."""
    first = subprocess.Popen([sys.executable, "-m", "dpipe", "make-data", "D", "--rows", "600000", "--features", "20", "--shard-rows", "50000"],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(first, lambda: _shard_written(tmp_path), "a shard in the temporary")
        first.send_signal(signal.SIGSTOP)
        temporary = next(p for p in tmp_path.iterdir() if p.name.startswith(".D.tmp-"))
        for chunk in (temporary / "y").rglob("*"):
            if chunk.is_file() and chunk.name != "zarr.json":
                chunk.unlink()  # the shards written so far
    finally:
        first.send_signal(signal.SIGCONT)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 1, err
    line = one_error_line(err, "make-data")
    assert f"{tmp_path / 'D'} (temporary {temporary.name}): chunk file y/" in line and "is missing" in line
    assert not (tmp_path / "D").exists()


def test_a_second_writer_fails_at_once_and_the_first_finishes_a_sound_store(tmp_path):
    """The probe's bug: an ingest into DEST removed make-data's live temporary. Now it is refused, naming the owner."""
    src = _svm(tmp_path / "a.svm")
    first = subprocess.Popen([sys.executable, "-m", "dpipe", "make-data", "D", "--rows", "600000", "--features", "20", "--shard-rows", "50000"],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(first, lambda: any(p.name.startswith(".D.tmp-") for p in tmp_path.iterdir()), "temporary")
        first.send_signal(signal.SIGSTOP)  # it holds the lock and its temporary, whatever the machine's speed
        temporary = [p for p in tmp_path.iterdir() if p.name.startswith(".D.tmp-")]
        owner = json.loads((tmp_path / ".D.lock").read_text())
        assert owner["pid"] == first.pid and owner["host"] == socket.gethostname() and "make-data D" in owner["command"]

        second = _dpipe(["-q", "ingest", "a.svm", "D"], tmp_path, timeout=60)  # a timeout here would mean it waited
        line = one_error_line(second.stderr, "ingest")
        assert second.returncode == 1
        assert f"{tmp_path / 'D'}: another dpipe process is writing it (pid {first.pid} on host {socket.gethostname()}" in line
        other = _dpipe(["-q", "make-data", "D", "--rows", "100", "--overwrite"], tmp_path, timeout=60)
        assert other.returncode == 1 and f"pid {first.pid} on host" in one_error_line(other.stderr, "make-data")
        with pytest.raises(DestinationBusyError, match=f"pid {first.pid} on host"):  # the library as well
            dpipe.ingest(src, tmp_path / "D")
        assert all(p.is_dir() for p in temporary), "a live temporary was removed"
    finally:
        first.send_signal(signal.SIGCONT)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert _dpipe(["verify", "D"], tmp_path).returncode == 0
    assert open_store(tmp_path / "D").manifest.n_rows == 600000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D", "a.svm"]  # lock file and temporary gone


def test_a_killed_writers_temporary_and_lock_file_are_cleared_by_the_next_writer(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "dpipe", "make-data", "D", "--rows", "3000000", "--features", "20"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(proc, lambda: any(p.name.startswith(".D.tmp-") for p in tmp_path.iterdir()), "temporary")
    proc.kill()
    proc.communicate(timeout=30)
    stale = sorted(p.name for p in tmp_path.iterdir())
    assert len(stale) == 2 and stale[0] == ".D.lock" and stale[1].startswith(".D.tmp-")  # the kernel released the flock; the file stays
    assert json.loads((tmp_path / ".D.lock").read_text())["pid"] == proc.pid
    done = _dpipe(["make-data", "D", "--rows", "1000", "--features", "3"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"removed {stale[1]} left by an interrupted run" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D"]
    assert open_store(tmp_path / "D").manifest.n_rows == 1000


_HOLDER = textwrap.dedent("""
    import sys
    from dpipe._locks import destination_lock
    with destination_lock(sys.argv[1], "model"):
        print("held", flush=True)
        sys.stdin.readline()
""")


def test_a_file_output_held_by_another_process_is_refused_naming_it(tmp_path):
    out = tmp_path / "m.json"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(DestinationBusyError, match=f"^{out}: another dpipe process is writing it \\(pid {holder.pid} on host "):
            dpipe.LinearModel([1.0, 2.0]).save(out)
        with pytest.raises(DestinationBusyError, match=f"pid {holder.pid}"):
            check_output_path(out, overwrite=False, what="model")
        assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [".m.json.lock"]
    finally:
        holder.communicate("\n", timeout=30)
    assert holder.returncode == 0 and list(tmp_path.iterdir()) == []  # released by unlinking
    dpipe.LinearModel([1.0, 2.0]).save(out)
    assert dpipe.LinearModel.load(out).n_features == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_the_lock_is_reentrant_in_its_thread_and_refused_to_another_thread(tmp_path):
    dest = tmp_path / "D"
    stale = tmp_path / ".D.tmp-abcd1234"
    stale.mkdir()
    (tmp_path / ".D.lock").write_text("left by a dead process\n")  # not locked: taken over
    with destination_lock(dest, "store"):
        assert not stale.exists()  # the holder sweeps what a killed run left
        assert json.loads((tmp_path / ".D.lock").read_text())["pid"] == os.getpid()
        manifest = dpipe.make_data(dest, rows=200, features=3)  # re-enters the caller's lock
        errors: list[BaseException] = []

        def other() -> None:
            try:
                with destination_lock(dest, "store"):
                    pass
            except BaseException as exc:  # noqa: BLE001 - inspected below
                errors.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(errors) == 1 and isinstance(errors[0], DestinationBusyError) and "another thread of this process" in str(errors[0])
        assert (tmp_path / ".D.lock").exists()
    assert manifest.n_rows == 200 and sorted(p.name for p in tmp_path.iterdir()) == ["D"]


# ---------------------------------------------------------------------------------
# never inside a store or a registry
# ---------------------------------------------------------------------------------
@pytest.fixture()
def registry(tmp_path) -> Path:
    reg = tmp_path / "reg"
    (reg / "versions" / "v0001").mkdir(parents=True)
    (reg / "registry.json").write_text(json.dumps({"format": "dpipe-registry", "format_version": 1}))
    model = reg / "versions" / "v0001" / "model.json"
    dpipe.LinearModel([0.5, -0.25, 0.0, 1.0]).save(model)
    return reg


def _store(tmp_path: Path) -> str:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4)).astype(np.float32)
    return write_store(tmp_path / "s.zarr", X, np.where(X[:, 0] > 0, 1, -1).astype(np.int8), [60, 60])


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_outputs_inside_a_registry_are_refused(registry, tmp_path, capsys):
    store = _store(tmp_path)
    before = _snapshot(registry)
    model = registry / "versions" / "v0001" / "model.json"
    cases = [
        ("train", ["train", store, "--out", str(model), "--overwrite", "--engine", "local"], model),
        ("predict", ["predict", str(model), store, "--out", str(registry / "p.parquet"), "--engine", "local"], registry / "p.parquet"),
        ("evaluate", ["evaluate", str(model), store, "--out", str(registry / "data" / "m.json"), "--engine", "local"], registry / "data" / "m.json"),
        ("ingest", ["ingest", str(_svm(tmp_path / "a.svm")), str(registry / "versions" / "a.zarr")], registry / "versions" / "a.zarr"),
        ("make-data", ["make-data", str(registry / "d.zarr"), "--rows", "100"], registry / "d.zarr"),
    ]
    (registry / "data").mkdir()
    for command, argv, path in cases:
        assert main(["-q", *argv]) == 1, command
        line = one_error_line(capsys.readouterr().err, command)
        assert line.startswith(f"dpipe {command}: error: {path}: is inside the dpipe model registry {registry}; "), line
    assert _snapshot(registry) == before and sorted(p.name for p in (registry / "data").iterdir()) == []
    with pytest.raises(OutputError, match="inside the dpipe model registry"):
        dpipe.ingest(tmp_path / "a.svm", registry / "versions" / "v0001" / "a.zarr")


def test_a_retrain_ingests_new_stores_into_the_registry_data_folder_and_never_replaces_one(registry, tmp_path, capsys):
    """What ``dpipe retrain`` does with a source file: ``dpipe.io.ingest(src, REGISTRY/data/NAME-HASH.zarr)`` when it is not there yet."""
    dest = registry / "data" / "a.svm-0123456789abcdef.zarr"
    dest.parent.mkdir()
    m = dpipe.ingest(_svm(tmp_path / "a.svm"), dest, log1p="all", scale="minmax")  # the nested raw ingest goes there too
    assert m.n_rows == 4 and open_store(dest).manifest.encoding["transform"]["scale"] == "minmax"
    assert sorted(p.name for p in dest.parent.iterdir()) == [dest.name]
    before = _snapshot(dest)
    with pytest.raises(OutputError, match=f"^{dest}: is a store of the dpipe model registry {registry}'s data folder"):
        dpipe.ingest(tmp_path / "a.svm", dest, overwrite=True)
    assert main(["-q", "make-data", str(dest), "--rows", "100", "--overwrite"]) == 1
    assert "is never replaced" in one_error_line(capsys.readouterr().err, "make-data")
    assert _snapshot(dest) == before


def test_a_store_is_never_written_inside_a_store(tmp_path, capsys):
    store = _store(tmp_path)
    before = _snapshot(Path(store))
    assert main(["-q", "make-data", os.path.join(store, "inner.zarr"), "--rows", "100"]) == 1
    assert "is inside the dpipe store " + store in one_error_line(capsys.readouterr().err, "make-data")
    with pytest.raises(OutputError, match="is inside the dpipe store"):
        dpipe.io.split_store(store, tmp_path / "train.zarr", os.path.join(store, "X", "test.zarr"))
    assert _snapshot(Path(store)) == before and not (tmp_path / "train.zarr").exists()


# ---------------------------------------------------------------------------------
# no overwrite without asking
# ---------------------------------------------------------------------------------
def test_split_checks_both_destinations_before_any_pass(tmp_path):
    store = _store(tmp_path)
    existing = dpipe.make_data(tmp_path / "old.zarr", rows=100, features=3)
    with pytest.raises(StoreError, match="destination exists; pass overwrite=True"):
        dpipe.io.split_store(store, tmp_path / "train.zarr", tmp_path / "old.zarr", log1p="all")
    assert not (tmp_path / "train.zarr").exists() and open_store(tmp_path / "old.zarr").manifest.n_rows == existing.n_rows


def test_plots_replace_only_dpipe_plots(tmp_path):
    from dpipe.plotting import plot_roc

    curves = {"m": (np.array([0.0, 0.5, 1.0]), np.array([0.0, 0.8, 1.0]), 0.65)}
    png = plot_roc(curves, tmp_path / "roc.png")
    assert check_output_path(png, overwrite=True, what="plot") == str(tmp_path / "roc.png")
    with pytest.raises(OutputExistsError, match="exists; pass overwrite"):
        check_output_path(png, overwrite=False, what="plot")
    foreign = tmp_path / "photo.png"
    foreign.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    with pytest.raises(OutputExistsError, match="not a dpipe plot file"):
        check_output_path(foreign, overwrite=True, what="plot")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photo.png", "roc.png"]


def test_demo_refuses_earlier_outputs_before_any_work(tmp_path, capsys):
    work = tmp_path / "w"
    work.mkdir()
    (work / "report.json").write_text('{"mine": true}')
    argv = ["-q", "demo", "--workdir", str(work), "--rows", "2000", "--engine", "local"]
    assert main(argv) == 1
    assert one_error_line(capsys.readouterr().err, "demo") == f"dpipe demo: error: {work / 'report.json'}: exists; pass --overwrite to replace the report"
    assert main([*argv, "--overwrite"]) == 1
    assert "not a dpipe report file" in one_error_line(capsys.readouterr().err, "demo")
    assert sorted(p.name for p in work.iterdir()) == ["report.json"]  # no store generated


# ---------------------------------------------------------------------------------
# OS errors while writing name the path (a real EFBIG: RLIMIT_FSIZE in a child process)
# ---------------------------------------------------------------------------------
_LIMITED = textwrap.dedent("""
    import contextlib, io, json, resource, signal, sys
    from dpipe.cli.main import main
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    results = []
    for limit, argv in json.loads(sys.argv[1]):
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(argv)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        results.append([code, err.getvalue()])
    print(json.dumps(results))
""")


def test_a_write_beyond_the_file_size_limit_is_one_line_naming_the_path(tmp_path):
    store = _store(tmp_path)
    model = tmp_path / "m.json"
    dpipe.train(store, engine="local", out=model)
    runs = {
        "make-data": (["make-data", str(tmp_path / "D.zarr"), "--rows", "20000", "--features", "10", "--shard-rows", "10000"], "D.zarr", "store"),
        "ingest": (["ingest", str(_svm(tmp_path / "a.svm")), str(tmp_path / "E.zarr"), "--format", "parquet"], "E.zarr", "store"),
        "train": (["train", store, "--out", str(tmp_path / "n.json"), "--engine", "local"], "n.json", "model"),
        "predict": (["predict", str(model), store, "--out", str(tmp_path / "p.parquet"), "--engine", "local"], "p.parquet", "predictions"),
        "evaluate": (["evaluate", str(model), store, "--out", str(tmp_path / "e.json"), "--engine", "local"], "e.json", "metrics"),
    }
    limit = 200  # bytes: less than any of these outputs (a lock file whose owner record does not fit still locks)
    r = subprocess.run([sys.executable, "-c", _LIMITED, json.dumps([[limit, ["-q", *argv]] for argv, _, _ in runs.values()])],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for (command, (_, name, what)), (code, err) in zip(runs.items(), json.loads(r.stdout)):
        line = one_error_line(err, command)
        assert code == 1 and line.startswith(f"dpipe {command}: error: {tmp_path / name}: cannot write the {what}: "), line
        assert "File too large" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.svm", "m.json", "s.zarr"]  # no temporary, no lock file, no output


# ---------------------------------------------------------------------------------
# models whose scores could overflow
# ---------------------------------------------------------------------------------
def test_weights_that_can_overflow_a_score_are_refused_at_load(tmp_path, capsys):
    from dpipe.model._linear import MAX_COEF_L1, MAX_INTERCEPT

    store = _store(tmp_path)
    path = tmp_path / "huge.json"
    doc = dpipe.LinearModel([0.5, -0.25, 0.0, 1.0], feature_names=["x0", "x1", "x2", "x3"]).to_dict()
    doc["coef"][1] = 1e308
    path.write_text(json.dumps(doc))
    with pytest.raises(dpipe.exceptions.ParameterError, match=f"^{path}: model field 'coef': the weights are too large"):
        dpipe.LinearModel.load(path)
    assert main(["-q", "predict", str(path), store, "--out", str(tmp_path / "p.parquet"), "--engine", "local"]) == 1
    assert one_error_line(capsys.readouterr().err, "predict").startswith(f"dpipe predict: error: {path}: model field 'coef': the weights are too large")
    assert not (tmp_path / "p.parquet").exists()
    with pytest.raises(ValueError, match="too large"):
        dpipe.LinearModel([1e308, 1.0])
    with pytest.raises(ValueError, match="intercept"):
        dpipe.LinearModel([1.0], 1e308)
    # at the bound, the largest float32 features still score finitely
    edge = dpipe.LinearModel([MAX_COEF_L1 / 2, -MAX_COEF_L1 / 2], MAX_INTERCEPT)
    big = float(np.finfo(np.float32).max)
    s = edge.decision_function(np.array([[big, -big], [-big, big]], dtype=np.float32))
    assert np.all(np.isfinite(s)) and s[0] > 0.5 * np.finfo(np.float64).max and s[1] < 0
    with pytest.raises(ValueError, match="too large"):
        dpipe.LinearModel([MAX_COEF_L1 / 2, -MAX_COEF_L1 / 2 * 1.000001])


def test_a_score_that_is_not_finite_names_the_model_and_the_row(tmp_path):
    path = dpipe.LinearModel([1e10, 1.0], feature_names=["a", "b"]).save(tmp_path / "m.json")
    model = dpipe.LinearModel.load(path)
    X = np.array([[1.0, 2.0], [1e300, 0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match=f"^{path}: row 1: the score is inf: it overflows float64"):
        model.decision_function(X)
    X[1] = [0.0, np.nan]
    with pytest.raises(ValueError, match=f"^{path}: row 1: feature 1 \\(b\\) is nan"):
        model.predict(X)
    np.testing.assert_array_equal(model.decision_function(np.array([[1.0, 2.0]], dtype=np.float32)), [1e10 + 2.0])


def test_threshold_must_be_finite(tmp_path):
    store = _store(tmp_path)
    model = dpipe.LinearModel([0.5, -0.25, 0.0, 1.0])
    with pytest.raises(dpipe.exceptions.ParameterError, match="'threshold' parameter of predict must be a finite number"):
        dpipe.predict(model, store, tmp_path / "p.parquet", threshold=float("inf"), engine="local")
    with pytest.raises(dpipe.exceptions.ParameterError, match="'threshold' parameter of evaluate must be a finite number"):
        dpipe.evaluate(model, store, threshold=float("nan"), engine="local")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr"]
