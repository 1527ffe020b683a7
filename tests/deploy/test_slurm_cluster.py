"""``--cluster slurm``: dask workers as Slurm jobs (dpipe.engine._jobqueue).

The first tests need no Slurm. The integration tests start a real one-node Slurm on this
machine (deploy/slurm/local-slurm.sh: munged, slurmctld, slurmd, on free ports, everything in a
temporary directory), train through it, and stop it; they are skipped, with the reason, where
its programs are missing (``apt-get install -y slurm-wlm munge``; .ci/run tries) or without
root (slurmd launches the jobs).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import dask.config
import numpy as np
import pytest

from dpipe.cli.main import main
from dpipe.engine import ClusterSpec, cluster_client, resolve_engine
from dpipe.exceptions import ClusterError, ParameterError
from dpipe.io import open_store
from dpipe.testing import classification_data, write_store

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "slurm" / "local-slurm.sh"
SLURM_TOOLS = ("sbatch", "squeue", "scancel", "sinfo", "slurmctld", "slurmd", "munged")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    X, y = classification_data(n=20000, d=10, seed=3)
    path = tmp_path_factory.mktemp("slurm-store") / "train.zarr"
    write_store(path, X, y, shard_sizes=[7000, 7000, 6000])
    return str(path)


# -- without Slurm ---------------------------------------------------------------------------


def test_cluster_must_be_local_or_slurm():
    with pytest.raises(ParameterError, match=r"The 'cluster' parameter of cluster_client must be one of 'local', 'slurm'. Got 'pbs' instead."):
        with cluster_client(cluster="pbs"):
            pass


def test_slurm_and_a_scheduler_are_refused():
    with pytest.raises(ParameterError, match=r"starts a cluster, but a scheduler is named \(tcp://127.0.0.1:1"):
        with cluster_client(cluster="slurm", scheduler="tcp://127.0.0.1:1"):
            pass


def test_missing_dask_jobqueue_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # what an environment without it imports
    with pytest.raises(ClusterError, match=r"needs the dask-jobqueue package .*: pip install 'dpipe\[slurm\]'$"):
        with cluster_client(cluster="slurm", memory_limit="1GiB"):
            pass


def test_memory_per_job_is_required():
    pytest.importorskip("dask_jobqueue")
    with dask.config.set({"jobqueue.slurm.memory": None}):
        with pytest.raises(ParameterError, match=r"needs the memory of a worker job: 'memory_limit', .* jobqueue.slurm.memory"):
            with cluster_client(cluster="slurm"):
                pass


def test_sbatch_missing(monkeypatch, tmp_path):
    pytest.importorskip("dask_jobqueue")
    monkeypatch.setenv("PATH", str(tmp_path))  # a host without Slurm's commands
    with pytest.raises(ClusterError, match=r"^cluster 'slurm': sbatch not found on PATH"):
        with cluster_client(cluster="slurm", memory_limit="1GiB"):
            pass


def test_start_timeout_must_be_a_positive_time():
    pytest.importorskip("dask_jobqueue")
    with dask.config.set({"dpipe.slurm-start-timeout": "soon"}):
        with pytest.raises(ParameterError, match=r"dpipe.slurm-start-timeout setting must be a positive time"):
            with cluster_client(cluster="slurm", memory_limit="1GiB"):
                pass


def test_slurm_setting_means_a_dask_engine(store):
    st = open_store(store)
    assert resolve_engine(ClusterSpec(engine="auto"), st) == "local"  # 20,000 rows: below dpipe.local-max-bytes
    with dask.config.set({"dpipe.cluster": "slurm"}):
        assert resolve_engine(ClusterSpec(engine="auto"), st) == "dask"
        assert resolve_engine(ClusterSpec(engine="local"), st) == "local"


def test_cli_cluster_option_is_scoped_to_the_command(store, tmp_path, capsys):
    status = main(["-q", "train", store, "--out", str(tmp_path / "m.json"), "--cluster", "slurm", "--scheduler", "tcp://127.0.0.1:1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert err[-1].startswith("dpipe train: error: --cluster is 'slurm', which starts a cluster")
    assert dask.config.get("dpipe.cluster") == "local"  # the setting does not outlive the command
    with pytest.raises(SystemExit) as exc:
        main(["train", store, "--cluster", "pbs"])
    assert exc.value.code == 2


# -- a real one-node Slurm -------------------------------------------------------------------


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture(scope="module")
def local_slurm(tmp_path_factory):
    """SLURM_CONF of a one-node Slurm started for this module and stopped after it."""
    missing = [tool for tool in SLURM_TOOLS if shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing): apt-get install -y slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("the one-node Slurm runs slurmd as the calling user, which must be root to launch jobs")
    pytest.importorskip("dask_jobqueue")
    directory = tmp_path_factory.mktemp("slurm")
    ctld, slurmd = _free_ports(2)
    env = dict(os.environ, SLURMCTLD_PORT=str(ctld), SLURMD_PORT=str(slurmd), PATH=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    started = time.monotonic()
    run = subprocess.run(["bash", str(SCRIPT), "start", str(directory)], capture_output=True, text=True, env=env, timeout=120, check=False)
    if run.returncode != 0:
        subprocess.run(["bash", str(SCRIPT), "stop", str(directory)], capture_output=True, env=env, timeout=120, check=False)
        pytest.fail(f"the one-node Slurm did not start:\n{run.stderr}")
    print(f"local Slurm up in {time.monotonic() - started:.1f} s: {run.stdout.strip()}")
    try:
        yield directory / "slurm.conf"
    finally:
        stop = subprocess.run(["bash", str(SCRIPT), "stop", str(directory)], capture_output=True, text=True, env=env, timeout=120, check=False)
        assert stop.returncode == 0, stop.stderr
        for name in ("slurmctld.pid", "slurmd.pid", "munged.pid"):
            assert not (directory / name).exists()


def _slurm_env(conf: Path, tmp_path: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPIPE_", "DASK_DPIPE__", "DASK_JOBQUEUE__"))}
    env.update(
        SLURM_CONF=str(conf),
        DASK_JOBQUEUE__SLURM__LOG_DIRECTORY=str(tmp_path / "logs"),
        DASK_JOBQUEUE__SLURM__SHARED_TEMP_DIRECTORY=str(tmp_path),
        DASK_JOBQUEUE__SLURM__WALLTIME="00:10:00",
        DASK_DPIPE__SLURM_START_TIMEOUT="60",
    )
    env.update(settings)
    (tmp_path / "logs").mkdir(exist_ok=True)
    return env


def _dpipe(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpipe", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=180, check=False)


def _slurm(conf: Path, *args: str) -> str:
    env = dict(os.environ, SLURM_CONF=str(conf))
    return subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=30, check=True).stdout


def _wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return predicate()


def _jobcomp(conf: Path, job: str) -> str:
    """The job's line of the controller's job completion log ("" while it has not ended)."""
    path = conf.parent / "jobcomp.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return next((line for line in lines if line.startswith(f"JobId={job} ")), "")


def _active(conf: Path, job: str) -> bool:
    return bool(_slurm(conf, "squeue", "-h", "-t", "PENDING,RUNNING,COMPLETING", "-j", job, "-o", "%i").strip())


def _job_ids(stderr: str) -> list[str]:
    return re.findall(r"\bjob (\d+)\b", stderr)


@pytest.mark.integration
def test_train_on_slurm_matches_the_local_engine(local_slurm, store, tmp_path):
    env = _slurm_env(local_slurm, tmp_path)
    started = time.monotonic()
    run = _dpipe(env, tmp_path, "-v", "train", store, "--objective", "auc-smooth", "--out", str(tmp_path / "slurm.json"),
                 "--cluster", "slurm", "--workers", "1", "--memory-limit", "1GiB")
    seconds = time.monotonic() - started
    assert run.returncode == 0, run.stderr
    found = re.search(r"started Slurm cluster: 1 job\(s\) \((\d+)\), 1 core\(s\) and 1GiB each, 1 worker\(s\) connected in ([\d.]+) s", run.stderr)
    assert found, run.stderr
    job = found.group(1)
    print(f"Slurm job {job}: worker connected in {found.group(2)} s, train command {seconds:.1f} s")
    assert f"cancelling Slurm job(s) {job}" in run.stderr
    # the job ran on the node, and it is gone (scancel) once dpipe has finished
    assert _wait_for(lambda: not _active(local_slurm, job)), _slurm(local_slurm, "squeue", "-t", "all")
    assert _wait_for(lambda: bool(_jobcomp(local_slurm, job)))
    record = _jobcomp(local_slurm, job)
    assert "NodeList=localhost" in record and "Name=dask-worker" in record and "mem=1G" in record, record
    assert re.search(r"JobState=(CANCELLED|COMPLETED)\b", record), record
    worker_log = (tmp_path / "logs" / f"dask-worker-{job}.err").read_text()
    assert "Registered to:" in worker_log and "tls://" in worker_log  # the workers spoke TLS
    assert not list(tmp_path.glob(".dpipe-slurm-tls-*"))  # the key was removed with the cluster
    slurm_model = json.loads((tmp_path / "slurm.json").read_text())
    assert slurm_model["training"]["engine"] == "dask"

    run = _dpipe(env, tmp_path, "-q", "train", store, "--objective", "auc-smooth", "--out", str(tmp_path / "local.json"), "--engine", "local")
    assert run.returncode == 0, run.stderr
    local_model = json.loads((tmp_path / "local.json").read_text())
    assert local_model["training"]["engine"] == "local"
    np.testing.assert_allclose(slurm_model["coef"], local_model["coef"], rtol=1e-9, atol=0)
    np.testing.assert_allclose(slurm_model["intercept"], local_model["intercept"], rtol=1e-9, atol=0)


@pytest.mark.integration
def test_jobs_that_do_not_start_in_time_fail_in_one_line_and_are_cancelled(local_slurm, store, tmp_path):
    env = _slurm_env(local_slurm, tmp_path, DASK_DPIPE__SLURM_START_TIMEOUT="3",
                     DASK_JOBQUEUE__SLURM__JOB_EXTRA_DIRECTIVES='["--begin=now+1hour"]')
    run = _dpipe(env, tmp_path, "train", store, "--out", str(tmp_path / "m.json"), "--cluster", "slurm", "--workers", "1", "--memory-limit", "1GiB")
    assert run.returncode == 1
    (line,) = run.stderr.strip().splitlines()
    assert re.fullmatch(r"dpipe train: error: 0 of 1 Slurm worker\(s\) connected within 3 s \(dpipe.slurm-start-timeout\): "
                        r"job \d+ PENDING \(BeginTime\)", line), line
    (job,) = _job_ids(line)
    assert _wait_for(lambda: "JobState=CANCELLED" in _jobcomp(local_slurm, job))
    assert not (tmp_path / "m.json").exists()


@pytest.mark.integration
def test_a_job_slurm_refuses_fails_with_sbatchs_words(local_slurm, store, tmp_path):
    env = _slurm_env(local_slurm, tmp_path, DASK_JOBQUEUE__SLURM__QUEUE="no-such-partition")
    run = _dpipe(env, tmp_path, "train", store, "--out", str(tmp_path / "m.json"), "--cluster", "slurm", "--memory-limit", "1GiB")
    assert run.returncode == 1
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("dpipe train: error: cluster 'slurm': sbatch refuses the worker job: ") and "Invalid partition name" in line, line


@pytest.mark.integration
def test_a_job_that_dies_before_its_worker_connects_fails_early(local_slurm, store, tmp_path):
    env = _slurm_env(local_slurm, tmp_path, DASK_JOBQUEUE__SLURM__PYTHON="/bin/false")  # a node without the environment
    run = _dpipe(env, tmp_path, "train", store, "--out", str(tmp_path / "m.json"), "--cluster", "slurm", "--memory-limit", "1GiB")
    assert run.returncode == 1  # the line below says it ended early (a job gone), not at the start timeout
    (line,) = run.stderr.strip().splitlines()
    assert re.fullmatch(r"dpipe train: error: Slurm worker job\(s\) ended before their dask worker connected \(0 of 1 connected\): "
                        r"job \d+ [A-Z_]+ \(.*\); see the job log\(s\) in .*/logs", line), line
    assert "FAILED (NonZeroExitCode)" in line or "COMPLETING" in line, line


@pytest.mark.integration
def test_sigterm_while_waiting_for_the_workers_cancels_the_jobs(local_slurm, store, tmp_path):
    env = _slurm_env(local_slurm, tmp_path, DASK_JOBQUEUE__SLURM__JOB_EXTRA_DIRECTIVES='["--begin=now+1hour"]')
    proc = subprocess.Popen([sys.executable, "-m", "dpipe", "train", store, "--out", str(tmp_path / "m.json"), "--cluster", "slurm",
                             "--memory-limit", "1GiB"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        pending = lambda: _slurm(local_slurm, "squeue", "-h", "-t", "PENDING", "-n", "dask-worker", "-o", "%i").split()  # noqa: E731
        assert _wait_for(lambda: bool(pending()), timeout=60)
        (job,) = pending()
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "dpipe train: interrupted by SIGTERM"
    assert _wait_for(lambda: "JobState=CANCELLED" in _jobcomp(local_slurm, job))
