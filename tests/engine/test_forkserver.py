"""The embedded cluster's workers, forked from dpipe's warm fork server (dpipe.engine._forkserver)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dpipe.engine._cluster_spec import ClusterSpec
from dpipe.engine._forkserver import PRELOAD, embeds_cluster, forks_workers, worker_start_method
from dpipe.engine._memory import WORKER_ALLOCATOR

# in a fresh interpreter, as the command line: no fork server of pytest's own in the way
_PROBE = """
import json, os, sys
from multiprocessing import forkserver
from dpipe.engine._client import client_for
from dpipe.engine._cluster_spec import ClusterSpec

def probe():
    import os, sys
    return {"ppid": os.getppid(), "modules": sorted(m for m in sys.modules if m.startswith("dpipe")),
            "environ": {k: os.environ.get(k) for k in %(allocator)r}}

with client_for(ClusterSpec(engine="dask", workers=2)) as c:
    seen = list(c.run(probe).values())
    server = forkserver._forkserver._forkserver_pid
    c.restart()  # a worker its nanny starts again comes from the same fork server
    again = list(c.run(probe).values())
print(json.dumps({"server": server, "seen": seen, "again": again}))
"""


@pytest.mark.skipif(worker_start_method() != "forkserver", reason="no fork server on this platform")
def test_embedded_workers_are_forked_warm_with_the_worker_environment():
    out = subprocess.run([sys.executable, "-c", _PROBE % {"allocator": sorted(WORKER_ALLOCATOR)}], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["server"] is not None
    for worker in got["seen"] + got["again"]:
        assert worker["ppid"] == got["server"]  # a child of the fork server, not spawned by a nanny
        assert set(PRELOAD[1:]) <= set(worker["modules"])  # dpipe's preload and the warmed kernels came with the fork
        assert worker["environ"] == {k: str(v) for k, v in WORKER_ALLOCATOR.items()}  # the nannies' pre-spawn environment
    assert len(got["seen"]) == len(got["again"]) == 2
    assert "Traceback" not in out.stderr and "still alive" not in out.stderr  # the workers' exit leaves no error behind


@pytest.mark.parametrize(
    ("spec", "embeds"),
    [
        (ClusterSpec(engine="dask"), True),
        (ClusterSpec(engine="dask", cluster="local"), True),
        (ClusterSpec(engine="local"), False),
        (ClusterSpec(engine="auto"), False),  # decided later by the store's size: no fork server up front
        (ClusterSpec(engine="dask", scheduler="tcp://127.0.0.1:8786"), False),
        (ClusterSpec(engine="dask", client=object()), False),
    ],
)
def test_embeds_cluster_only_where_dpipe_starts_local_workers(spec, embeds):
    assert embeds_cluster(spec) is embeds


@pytest.mark.parametrize(("limit", "forks"), [(None, True), ("auto", True), (" Auto ", True), ("1GB", False), (2**30, False)])
def test_workers_are_forked_only_where_no_memory_limit_is_given(limit, forks):
    """A limit the user sets is measured against spawned workers, whose footprint is their own resident memory."""
    assert forks_workers(limit) is forks


def _resident_and_server() -> tuple[int, int | None]:
    import psutil

    me = psutil.Process()
    parent = me.parent()
    forked = parent is not None and "multiprocessing.forkserver" in " ".join(parent.cmdline())
    return int(me.memory_info().rss), int(parent.memory_info().rss) if forked else None


@pytest.mark.skipif(worker_start_method() != "forkserver", reason="no fork server on this platform")
def test_a_forked_workers_footprint_counts_every_page_it_shares_with_the_fork_server():
    """What a forked worker may grow to without allocating: its own pages and all of the server's (its resident set starts
    at about half of that); the memory model's limits are computed from this bound."""
    from dpipe.engine import cluster_client
    from dpipe.engine._memory import measure_workers

    with cluster_client(workers=1) as client:
        (measured,) = measure_workers(client, 5).values()
        ((rss, server),) = client.run(_resident_and_server).values()
    if server is None:
        pytest.skip("this process's fork server was started by someone else: the workers were spawned")
    assert measured.footprint >= server > 0
    assert measured.footprint > rss
