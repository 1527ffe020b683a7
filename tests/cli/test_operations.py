"""Issue 17 item 4, faults and operations at the command line: any error is one line, progress on long work,
per-iteration lines that fit a terminal, the dashboard's address.

Real subprocesses and files; the cluster ones start real embedded clusters on 127.0.0.1.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import dask
import pytest

import dpipe
from dpipe.cli import main
from dpipe.exceptions import ParameterError
from dpipe.testing import classification_data, write_store


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpipe", *args], capture_output=True, text=True, timeout=300, env=dict(os.environ, **env))


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> str:
    X, y = classification_data(4000, 6, seed=3)
    return write_store(tmp_path_factory.mktemp("ops") / "s.zarr", X, y, [2000, 2000])


# -- any exception is one line -------------------------------------------------------------------------------------
def test_an_unexpected_exception_is_one_line_naming_its_type(tmp_path, capsys):
    """make-data with 10^15 features: numpy cannot allocate the model (a MemoryError, neither a DPipeError, a
    ValueError nor an OSError): one line naming the type, exit 1, the traceback only with -v."""
    args = ["make-data", str(tmp_path / "d.zarr"), "--rows", "10", "--features", str(10**15)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("dpipe make-data: error: MemoryError: Unable to allocate") and err.rstrip().endswith("(-v shows the traceback)"), err
    assert main(["-v", *args]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.splitlines()[-1].startswith("dpipe make-data: error: MemoryError:"), err
    assert not (tmp_path / "d.zarr").exists()


# -- progress --------------------------------------------------------------------------------------------------------
_PROGRESS = re.compile(r"dpipe\.io make-data (\S+): ([\d,]+)/([\d,]+) rows, ([\d.,]+) MB of features, (\d+) %, \d+ s( \(done\))?$")


def test_make_data_logs_progress_lines_when_stderr_is_not_a_terminal(tmp_path):
    dest = tmp_path / "d.zarr"
    r = _run("make-data", str(dest), "--rows", "200000", "--features", "5", DASK_DPIPE__PROGRESS_INTERVAL="0")  # a line at every step
    assert r.returncode == 0, r.stderr
    matches = [_PROGRESS.search(line) for line in r.stderr.splitlines() if "make-data" in line]
    assert len(matches) >= 3 and all(matches), r.stderr
    rows = [int(m.group(2).replace(",", "")) for m in matches]
    assert rows == sorted(rows) and rows[-1] == 200000 and matches[-1].group(6) == " (done)", r.stderr
    assert {m.group(3) for m in matches} == {"200,000"} and matches[-1].group(4) == "4.0" and "\r" not in r.stderr
    default = _run("make-data", str(dest), "--rows", "200000", "--features", "5", "--overwrite")  # every 10 s: here the final line alone
    lines = [line for line in default.stderr.splitlines() if "make-data" in line]
    assert len(lines) <= 2 and re.search(r"200,000/200,000 rows, 4.0 MB of features, 100 %, \d+ s \(done\)$", lines[-1]), default.stderr


def test_ingest_logs_both_passes(tmp_path):
    X, y = classification_data(30000, 4, seed=5)
    src = tmp_path / "d.svm"
    src.write_text("".join(f"{int(t)} " + " ".join(f"{j + 1}:{v:.5g}" for j, v in enumerate(row)) + "\n" for row, t in zip(X, y)))
    r = _run("ingest", str(src), str(tmp_path / "d.zarr"), DASK_DPIPE__PROGRESS_INTERVAL="0", DASK_DPIPE__READ_ROWS="10000")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    reading = [line for line in lines if "ingest: reading" in line and "(pass 1 of 2)" in line]
    writing = [line for line in lines if "ingest: writing" in line and "(pass 2 of 2)" in line]
    size = f"{src.stat().st_size / 1e6:,.1f} MB read"
    assert reading and re.search(r"100 %, \d+ s \(done\)$", reading[-1]) and f"/{size}" in reading[-1], r.stderr
    assert len(writing) >= 2 and "30,000/30,000 rows, 0.5 MB of features, 100 %" in writing[-1], r.stderr


def test_a_bad_progress_interval_is_named(tmp_path):
    with dask.config.set({"dpipe.progress-interval": "often"}), pytest.raises(ParameterError, match="dpipe.progress-interval setting"):
        dpipe.io.make_data(tmp_path / "d.zarr", rows=10, features=2)


# -- per-iteration lines ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("objective", [["--objective", "auc-smooth"], ["--objective", "rocarea", "--solver", "cutting-plane"]])
def test_iteration_lines_fit_a_terminal_line_and_verbose_has_the_details(small, tmp_path, objective):
    name = objective[1]

    def iteration_lines(r: subprocess.CompletedProcess) -> list[str]:
        assert r.returncode == 0, r.stderr
        return [line for line in r.stderr.splitlines() if f"dpipe.solvers {name}: iter " in line]

    argv = ("train", small, *objective, "--max-iter", "15", "--out", str(tmp_path / "m.json"), "--overwrite", "--engine", "local")
    default = _run(*argv, DASK_DPIPE__PROGRESS_INTERVAL="1h")  # throttled: the first iteration's line, then one an hour
    assert len(iteration_lines(default)) == 1 and f"dpipe.solvers {name}: done" in default.stderr, default.stderr
    every = iteration_lines(_run(*argv, DASK_DPIPE__PROGRESS_INTERVAL="0"))  # 0: every iteration
    assert len(every) >= 5 and all(len(line) <= 100 for line in every), max(every, key=len)
    detailed = iteration_lines(_run("-v", *argv, DASK_DPIPE__PROGRESS_INTERVAL="1h"))
    assert len(detailed) == len(every)  # -v: every iteration whatever the interval, with every figure
    details = ("evals=", "seconds_score=", "train_auc=") if name == "auc-smooth" else ("lower=", "loss=", "planes=")
    assert all(all(d in line for d in details) for line in detailed), detailed[0]


# -- the dashboard ---------------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.integration
def test_the_dashboard_address_is_a_setting(small, tmp_path):
    """The default (127.0.0.1, any free port) is covered by tests/engine/test_closed_cluster.py; here another port."""
    pytest.importorskip("bokeh")
    port = _free_port()
    r = _run("-v", "train", small, "--workers", "1", "--out", str(tmp_path / "m.json"), DASK_DPIPE__DASHBOARD_ADDRESS=f"127.0.0.1:{port}")
    assert r.returncode == 0, r.stderr
    (line,) = [line for line in r.stderr.splitlines() if "dashboard:" in line]
    assert line.rstrip().endswith(f"http://127.0.0.1:{port}/status"), line


@pytest.mark.integration
def test_no_dashboard_when_the_setting_is_null():
    """null: no dashboard page; the scheduler's own HTTP routes (/health) stay, on 127.0.0.1 and a free port."""
    import urllib.error
    import urllib.request

    with dask.config.set({"dpipe.dashboard-address": None}), dpipe.engine.cluster_client(workers=1) as c:
        port = c.scheduler_info()["services"]["dashboard"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as health:
            assert health.status == 200
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30)


def test_a_bad_dashboard_address_is_named(small):
    with dask.config.set({"dpipe.dashboard-address": "8787"}), pytest.raises(ParameterError, match="dpipe.dashboard-address setting must be host:port"):
        dpipe.train(small, "auc-moment", workers=1)
