"""A named scheduler that is not there, is not a dask scheduler, or dies mid-fit: one line, a bounded wait.

Real processes on 127.0.0.1: ``dask scheduler`` / ``dask worker`` (the helpers of
:mod:`dpipe.testing._clusters`), a plain ``python -m http.server`` and a server that answers every
connection with an HTTP error at once. The bound is ``dpipe.connect-timeout`` (5 s by
default); a lost scheduler must be back within it too.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_lost_workers import _Fit  # the same CLI fit

import dpipe
from dpipe.exceptions import ClusterError, ParameterError
from dpipe.testing import classification_data, write_store
from dpipe.testing._clusters import CLUSTER_ENV as ENV
from dpipe.testing._clusters import ExternalCluster

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::dpipe.exceptions.ConvergenceWarning")]

#: an answer as an HTTP server (nginx, a proxy) gives to bytes it does not understand, at once
_REPLYING_SERVER = """
import socket, sys
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(8)
print(srv.getsockname()[1], flush=True)
while True:
    conn, _ = srv.accept()
    conn.sendall(b"HTTP/1.1 400 Bad Request\\r\\nconnection: close\\r\\ncontent-length: 0\\r\\n\\r\\n")
    conn.close()
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    X, y = classification_data(20000, 8, seed=31)
    return write_store(tmp_path_factory.mktemp("faults") / "s.zarr", X, y, [5000] * 4)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server(args: list[str], port_from_stdout: bool) -> tuple[subprocess.Popen, int]:
    """Start a server process on 127.0.0.1 and wait until it accepts connections."""
    port = None if port_from_stdout else _free_port()
    proc = subprocess.Popen([sys.executable, *args, *([] if port_from_stdout else [str(port), "--bind", "127.0.0.1"])],
                            stdout=subprocess.PIPE if port_from_stdout else subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    if port_from_stdout:
        port = int(proc.stdout.readline())
        proc.stdout.close()
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)


@pytest.fixture
def http_server():
    proc, port = _server(["-m", "http.server"], port_from_stdout=False)
    yield f"tcp://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


@pytest.fixture
def replying_server():
    proc, port = _server(["-c", _REPLYING_SERVER], port_from_stdout=True)
    yield f"tcp://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


def _train(store: str, scheduler: str) -> None:
    dpipe.train(store, "auc-moment", scheduler=scheduler)


def _cli(store: str, tmp_path: Path, scheduler: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpipe", "train", store, "--out", str(tmp_path / "m.json"), "--scheduler", scheduler],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, **env))


def _one_error_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_nothing_listening_fails_within_the_default_bound(store):
    address = f"tcp://127.0.0.1:{_free_port()}"
    # the bound that ended it is named: dpipe's 5 s, not distributed's own 30 s (times: python -m bench faults)
    with pytest.raises(ClusterError, match=rf"cannot connect to the scheduler at {address} within 5 s \(dpipe.connect-timeout\)"):
        _train(store, address)


def test_an_http_server_fails_within_the_default_bound(store, http_server):
    # it accepts the connection and then waits for a request line that never comes: hung for good before the bound
    with pytest.raises(ClusterError, match=rf"no dask scheduler answered at {http_server} within 5 s"):
        _train(store, http_server)


def test_the_cli_line_names_the_address_and_the_setting(store, tmp_path, replying_server):
    """A server that answers with an HTTP error (distributed reads it as frame lengths: a MemoryError) is one line too."""
    line = _one_error_line(_cli(store, tmp_path, replying_server))
    assert line.startswith(f"dpipe train: error: {replying_server} did not answer as a dask scheduler"), line
    nothing = f"tcp://127.0.0.1:{_free_port()}"
    line = _one_error_line(_cli(store, tmp_path, nothing, DASK_DPIPE__CONNECT_TIMEOUT="1s"))
    # the last attempt's reason when it has one (under load a short bound may cut the last attempt short)
    assert re.fullmatch(rf"dpipe train: error: cannot connect to the scheduler at {nothing} within 1 s \(dpipe.connect-timeout\)(: Connection refused)?", line), line
    assert not (tmp_path / "m.json").exists()


def test_a_scheduler_file_of_a_dead_scheduler_names_both(store, tmp_path):
    cluster = ExternalCluster(tmp_path)
    address = cluster.client.scheduler.address
    cluster.close()  # the file stays, its scheduler is gone
    line = _one_error_line(_cli(store, tmp_path, cluster.scheduler_file, DASK_DPIPE__CONNECT_TIMEOUT="2s"))
    assert f"cannot connect to the scheduler at {address} (from the scheduler file {cluster.scheduler_file}) within 2 s" in line, line


def test_bad_scheduler_files_and_tls_without_certificates_are_named(tmp_path):
    bad = tmp_path / "sched.json"
    bad.write_text("{}")
    with pytest.raises(ParameterError, match=rf"The scheduler file {bad} is not one 'dask scheduler --scheduler-file' writes"):
        with dpipe.engine.cluster_client(scheduler=str(bad)):
            pass
    with pytest.raises(ParameterError, match=r"asks for TLS, but no client certificate is configured"):
        with dpipe.engine.cluster_client(scheduler=f"tls://127.0.0.1:{_free_port()}"):
            pass


def test_a_worker_address_is_not_a_scheduler(external_cluster):
    external_cluster.start_worker()
    (worker,) = external_cluster.client.scheduler_info()["workers"]
    with pytest.raises(ClusterError, match=rf"{worker} is not a dask scheduler \(it answered as Worker\)"):
        with dpipe.engine.cluster_client(scheduler=worker):
            pass


def test_scheduler_killed_mid_fit_is_one_line_within_the_connect_timeout(store, external_cluster, tmp_path):
    external_cluster.start_worker()
    out = tmp_path / "m.json"
    fit = _Fit(store, out, external_cluster.scheduler_file, dict(ENV, DASK_DPIPE__CONNECT_TIMEOUT="3s"))
    fit.wait_until_iterating()
    external_cluster.client.close()  # the test's own client would reconnect in vain for its own timeout
    external_cluster.scheduler.kill()
    external_cluster.scheduler.wait()
    returncode, stderr = fit.finish(timeout=120)  # a hang guard; the time from the kill to the line: python -m bench faults
    assert returncode == 1, stderr
    errors = [line for line in stderr.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "Traceback" not in stderr and "ERROR" not in stderr, stderr
    assert errors[0].startswith("dpipe train: error: lost the scheduler tcp://127.0.0.1:"), errors[0]
    assert "not back within 3 s (dpipe.connect-timeout)" in errors[0], errors[0]
    assert not out.exists()
