"""Workers that die mid-fit: real worker processes on 127.0.0.1, killed with SIGKILL.

A fit whose workers all die and come back (a nanny restart, a new ``dask worker``)
finishes with the weights of an undisturbed fit, bit for bit (every reduction is
combined in shard order: :mod:`dpipe.engine._tree`); one whose workers die for good
fails within ``dpipe.timeout`` with one line. The cluster helpers are in
:mod:`dpipe.testing._clusters` (shared with ``test_deterministic.py``).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import dask
import numpy as np
import pytest

import dpipe
from dpipe.engine._dataset import _n_rows  # importable by the external scheduler and workers (this test module is not)
from dpipe.exceptions import ClusterError
from dpipe.testing import classification_data, write_store
from dpipe.testing._clusters import CLUSTER_ENV as ENV

# The fits stop at their iteration limit on purpose (a fixed amount of work to kill in the middle of).
pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::dpipe.exceptions.ConvergenceWarning")]

#: a fit long enough to be killed in the middle of: plain L-BFGS from w = 0 (no preconditioner), no early stop
FIT = dict(objective="auc-smooth", precondition="none", init="zeros", max_iter=80, tol=1e-14, train_metrics=False)
FIT_CLI = ["--objective", "auc-smooth", "--precondition", "none", "--init", "zeros", "--max-iter", "80", "--tol", "1e-14", "--no-train-metrics"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    X, y = classification_data(20000, 8, seed=31)
    return write_store(tmp_path_factory.mktemp("lost") / "s.zarr", X, y, [5000] * 4)


@pytest.fixture(scope="module")
def undisturbed(store) -> dpipe.LinearModel:
    return dpipe.train(store, **FIT, engine="local")


def test_embedded_workers_killed_and_restarted_by_their_nannies_give_the_same_weights(store, undisturbed, train_killing, caplog):
    got, fired, workers = train_killing(store, FIT)
    assert fired
    assert "a shard host was lost" in caplog.text  # the loss hit the fit, which went on
    assert workers == 2  # both nannies restarted their worker
    assert np.array_equal(got.coef, undisturbed.coef) and got.intercept == undisturbed.intercept


def test_workers_killed_while_they_merge_the_scores_fall_back_to_the_driver(store, undisturbed, train_killing, caplog):
    """With the scores merged on the workers (dpipe.rank-exchange=workers), a kill mid-fit loses a host in the middle of
    an exchange: the objective goes on merging on the driver and the fit ends where an undisturbed one does."""
    got, fired, _ = train_killing(store, FIT, logger="dpipe.fit", settings={"dpipe.rank-exchange": "workers"})
    assert fired
    assert "the driver merges the scores from now on" in caplog.text
    # The workers' route rounds differently (1e-10 relative per evaluation) before the kill, and 80 iterations short of the
    # minimum of an ill-conditioned problem amplify that along L-BFGS's path: undisturbed fits on the two routes end 8.7e-4
    # apart (measured), this one 1.2e-3 from the driver's. Nearly the same objective value and ranking; not the same iteration
    # count, which rounding can move by one (tol 1e-14 is at the rounding floor: a line search may end a step early).
    assert got.fit["fun"] == pytest.approx(undisturbed.fit["fun"], rel=5e-3)
    auc = [dpipe.evaluate(m, store, engine="local")["roc_auc"] for m in (got, undisturbed)]
    assert auc[0] == pytest.approx(auc[1], abs=1e-3)


def test_workers_killed_during_newton_on_the_ranges_fall_back_to_the_driver(tmp_path, train_killing, caplog):
    """auc's Newton-CG on the workers' route (evaluations and Hessian-vector products by score range): a kill mid-fit loses
    a host, the objective goes on on the driver's route and TRON ends where the undisturbed fit does (unit-scale
    features: well conditioned, so that the two routes' last bits do not move TRON's path)."""
    X, y = classification_data(20000, 8, seed=31, scales=False)
    path = write_store(tmp_path / "unit.zarr", X, y, [5000] * 4)
    fit = dict(objective="auc", eps=1e-8, max_iter=50, train_metrics=False)
    undisturbed = dpipe.train(path, **fit, engine="local")
    got, fired, _ = train_killing(path, fit, logger="dpipe.fit", at="iter   2", kill=1, settings={"dpipe.rank-exchange": "workers"})
    assert fired
    assert "the driver merges the scores from now on" in caplog.text
    assert got.fit["info"]["exchange"] == "driver"  # where it ended
    assert got.fit["nit"] == undisturbed.fit["nit"] and got.fit["info"]["cg_steps"] == undisturbed.fit["info"]["cg_steps"]
    assert got.fit["fun"] == pytest.approx(undisturbed.fit["fun"], rel=1e-12)
    assert np.max(np.abs(got.coef - undisturbed.coef)) <= 1e-9 * np.max(np.abs(undisturbed.coef))


class _Fit:
    """``dpipe train`` on the cluster in a subprocess, its stderr read by a thread as it comes."""

    def __init__(self, store: str, out: Path, scheduler_file: str, env: dict) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dpipe", "train", store, *FIT_CLI, "--cache", "memory", "--out", str(out), "--scheduler", scheduler_file],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=dict(env, DASK_DPIPE__PROGRESS_INTERVAL="0"),  # every iteration's line
        )
        self.lines: list[str] = []
        self.iterating = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.append(line)
            if "auc-smooth: iter   10 " in line:  # the solver's progress line: the fit is in the middle of its passes
                self.iterating.set()

    def wait_until_iterating(self) -> None:
        assert self.iterating.wait(timeout=120), "".join(self.lines)

    def finish(self, timeout: float) -> tuple[int, str]:
        returncode = self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)
        self.process.stderr.close()
        return returncode, "".join(self.lines)


def test_external_workers_killed_and_replaced_give_the_same_weights(store, undisturbed, external_cluster, tmp_path):
    external_cluster.start_worker()
    external_cluster.start_worker()
    out = tmp_path / "m.json"
    fit = _Fit(store, out, external_cluster.scheduler_file, ENV)
    fit.wait_until_iterating()
    external_cluster.kill_workers()  # no nanny: nothing restarts them
    time.sleep(2)  # the fit waits with no worker at all
    external_cluster.start_worker()  # one replacement for the two
    returncode, stderr = fit.finish(timeout=300)
    assert returncode == 0, stderr
    assert "a shard host was lost" in stderr
    got = dpipe.LinearModel.load(out)
    assert np.array_equal(got.coef, undisturbed.coef) and got.intercept == undisturbed.intercept


def test_all_workers_lost_for_good_is_one_line_within_the_timeout(store, external_cluster, tmp_path):
    external_cluster.start_worker()
    out = tmp_path / "m.json"
    fit = _Fit(store, out, external_cluster.scheduler_file, dict(ENV, DASK_DPIPE__TIMEOUT="5s"))
    fit.wait_until_iterating()
    external_cluster.kill_workers()
    returncode, stderr = fit.finish(timeout=120)  # the bound is 5 s of no progress: well inside this
    assert returncode == 1, stderr
    errors = [line for line in stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    assert store in errors[0] and "no task finished for 5 s (dpipe.timeout)" in errors[0] and "no worker" in errors[0], errors[0]
    assert not out.exists()


def test_the_timeout_bounds_a_pass_in_process(store, external_cluster):
    worker = external_cluster.start_worker()
    with dask.config.set({"dpipe.timeout": "3s"}), dpipe.engine.open_dataset(store, dpipe.engine.ClusterSpec(client=external_cluster.client, cache="stream")) as ds:
        assert ds.map_gather(_n_rows) == [5000] * 4
        worker.kill()
        worker.wait()
        with pytest.raises(ClusterError, match=r"pass '_n_rows': no task finished for 3 s \(dpipe.timeout\)"):
            ds.map_gather(_n_rows)


def test_a_bad_timeout_setting_is_named(store, external_cluster):
    external_cluster.start_worker()
    with dask.config.set({"dpipe.timeout": "soon"}), dpipe.engine.open_dataset(store, dpipe.engine.ClusterSpec(client=external_cluster.client, cache="stream")) as ds:
        with pytest.raises(dpipe.exceptions.ParameterError, match="dpipe.timeout setting"):
            ds.map_gather(_n_rows)
