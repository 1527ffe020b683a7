"""Issue 18 item 6: the embedded cluster is closed by default (TLS, temporary credentials, loopback only).

Real scheduler / nanny / worker processes on 127.0.0.1.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
from distributed import Client
from distributed.security import Security

import dpipe
from dpipe.engine import cluster_client
from dpipe.testing import classification_data, write_store

pytestmark = pytest.mark.integration

psutil = pytest.importorskip("psutil")


@pytest.fixture(scope="module")
def embedded():
    with cluster_client(workers=1) as c:
        c.wait_for_workers(1, timeout=60)
        yield c


def test_scheduler_uses_tls_on_loopback(embedded):
    assert embedded.scheduler.address.startswith("tls://127.0.0.1:")
    for addr in embedded.scheduler_info()["workers"]:
        assert addr.startswith("tls://127.0.0.1:")


@pytest.mark.parametrize(
    "how",
    ["no credentials", "plain tcp", "other temporary credentials"],
)
def test_client_without_the_credentials_cannot_connect(embedded, how):
    addr = embedded.scheduler.address
    kwargs = {}
    if how == "plain tcp":
        addr = addr.replace("tls://", "tcp://", 1)
    elif how == "other temporary credentials":
        kwargs["security"] = Security.temporary()
    # no credentials: TypeError (no ssl context for tls://); plain tcp: CommClosedError (the server
    # resets the non-TLS connection); a foreign certificate: FatalCommClosedError (unknown CA).
    # Both comm errors are OSErrors.
    with pytest.raises((OSError, TimeoutError, TypeError)):
        other = Client(addr, timeout=5, set_as_default=False, **kwargs)
        other.close()
    gc.collect()  # finalize the half-made client while the cluster still runs


def _cluster_pids(client: Client) -> set[int]:
    pids = {psutil.Process().pid}  # the scheduler (and its dashboard) run in this process
    for pid in client.run(os.getpid).values():
        proc = psutil.Process(pid)
        pids.add(proc.pid)
        parent = proc.parent()
        if parent is not None:
            pids.add(parent.pid)  # the nanny
    return pids


def _port(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1].split("/")[0])


def test_every_listener_is_on_loopback(embedded):
    info = embedded.scheduler_info()
    cluster_ports = {_port(info["address"])}
    for addr, w in info["workers"].items():
        cluster_ports.add(_port(addr))
        if w.get("nanny"):
            cluster_ports.add(_port(w["nanny"]))
    dash = info.get("services", {}).get("dashboard")
    assert dash, "no dashboard: bokeh (a test extra) is not installed, so its listener cannot be checked"
    cluster_ports.add(int(dash))
    listeners = []
    for pid in _cluster_pids(embedded):
        for conn in psutil.Process(pid).net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                listeners.append((pid, conn.laddr.ip, conn.laddr.port))
    own = psutil.Process().pid
    # every cluster port is listened on, and only on 127.0.0.1
    seen = {port for _, _, port in listeners}
    assert cluster_ports <= seen, (cluster_ports, listeners)
    for pid, ip, port in listeners:
        # this (test) process may also hold listeners of other fixtures' clusters: judge only ours there
        if pid == own and port not in cluster_ports:
            continue
        assert ip == "127.0.0.1", (pid, ip, port, listeners)


def test_small_fit_through_the_closed_cluster(tmp_path):
    X, y = classification_data(2000, 5)
    path = write_store(tmp_path / "s.zarr", X, y, [1000, 1000])
    res = dpipe.train(path, "auc-moment", engine="dask", workers=1)
    local = dpipe.train(path, "auc-moment", engine="local")
    np.testing.assert_allclose(np.asarray(res.coef), np.asarray(local.coef), rtol=1e-4, atol=1e-6)


def test_the_dashboard_link_is_printed_at_verbose(tmp_path):
    import subprocess
    import sys

    X, y = classification_data(2000, 5)
    path = write_store(tmp_path / "s.zarr", X, y, [1000, 1000])
    r = subprocess.run([sys.executable, "-m", "dpipe", "-v", "train", path, "--workers", "1", "--out", str(tmp_path / "m.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (line,) = [line for line in r.stderr.splitlines() if "dashboard:" in line]
    assert "http://127.0.0.1:" in line and line.rstrip().endswith("/status"), line
    quiet = subprocess.run([sys.executable, "-m", "dpipe", "train", path, "--workers", "1", "--out", str(tmp_path / "m2.json")],
                           capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0 and "dashboard:" not in quiet.stderr, quiet.stderr
