"""The default fit over a real, capped network: the scheduler, the driver and three workers each in a Linux network
namespace, every link capped at 1 Gb/s each way (:class:`dpipe.testing._netns.NetnsCluster`), driven through the CLI.
Skipped where namespaces cannot be made (not root, no iproute2)."""

from __future__ import annotations

import json
import subprocess
import sys

import dask
import numpy as np
import pytest

import dpipe
from dpipe.testing._netns import NetnsCluster, netns_unavailable

pytestmark = pytest.mark.integration

WORKERS = ("w0", "w1", "w2")
#: rows of the test store: below EXCHANGE_AUTO_ROWS and AUC_LBFGS_MIN_ROWS, so the default is Newton with the scores merged on the driver
ROWS = 30_000


@pytest.fixture(scope="module")
def netns(tmp_path_factory):
    why = netns_unavailable()
    if why:
        pytest.skip(f"network namespaces cannot be made here: {why}")
    with NetnsCluster(("scheduler", "driver", *WORKERS), rate_bits=1e9) as cluster:
        address = cluster.start_dask("scheduler", WORKERS, waiter="driver", memory_limit="1GiB")
        store = str(tmp_path_factory.mktemp("netns") / "s.zarr")
        dpipe.make_data(store, rows=ROWS, features=10, seed=0, model_seed=0, shard_rows=5000)
        yield cluster, address, store


def _train(argv: list[str], out: str, where: list[str] | None = None, env: dict[str, str] | None = None) -> dict:
    """``dpipe train ARGV --out OUT`` (``where``: a prefix running it in a namespace) and its model."""
    r = subprocess.run([*(where or []), "env", *(f"{k}={v}" for k, v in (env or {}).items()), sys.executable, "-m", "dpipe", "train", *argv,
                        "--out", out, "-q"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        return json.load(f)


def test_the_default_fit_over_capped_links_has_the_local_engines_bits(netns, tmp_path):
    cluster, address, store = netns
    assert all("tbf" in line and "rate 1Gbit" in line for line in cluster.qdiscs().splitlines())
    before = cluster.counters()
    remote = _train([store, "--scheduler", address], str(tmp_path / "remote.json"), cluster.command("driver", []))
    after = cluster.counters()
    local = dpipe.train(store, engine="local")  # what `dpipe train STORE --engine local` writes
    assert remote["fit"]["info"]["solver"] == "newton"
    assert np.array_equal(remote["coef"], local.coef) and remote["intercept"] == local.intercept
    sent = {h: after[h][0] - before[h][0] for h in after}
    assert all(sent[w] > 8 * ROWS / len(WORKERS) for w in WORKERS), sent  # every worker sent its scores over its link


def test_lbfgs_with_the_scores_merged_on_the_workers_does_not_depend_on_the_hosts(netns, tmp_path, one_worker_client):
    """The default at 10^6 rows and more: L-BFGS from the class moments, the scores merged and weighed on the workers (from
    500,000 rows). Over three hosts on capped links it gives the bits of one worker process and of the local engine,
    whose hosts are threads of its own process (dpipe.engine._ranges: the ranges depend on the rows only)."""
    cluster, address, store = netns
    env = {"DASK_DPIPE__RANK_EXCHANGE": "workers"}
    before = cluster.counters()
    remote = _train([store, "--scheduler", address, "--solver", "lbfgs"], str(tmp_path / "remote.json"), cluster.command("driver", []), env)
    after = cluster.counters()
    with dask.config.set({"dpipe.rank-exchange": "workers"}):
        one = dpipe.train(store, "auc", solver="lbfgs", client=one_worker_client, cache="memory", train_metrics=False)
        local = dpipe.train(store, "auc", solver="lbfgs", engine="local", train_metrics=False)
    for fit in (remote["fit"]["info"], local.fit["info"]):
        assert fit["data_passes_by_kind"].get("range_scores", 0) > 0  # the workers' route ran
    assert np.array_equal(remote["coef"], one.coef)
    assert np.array_equal(remote["coef"], local.coef) and remote["intercept"] == local.intercept
    received = {w: after[w][1] - before[w][1] for w in WORKERS}
    assert all(b > 4 * ROWS / len(WORKERS) for b in received.values()), received  # pieces of the score axis came in from the peers
