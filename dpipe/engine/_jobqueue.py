"""Dask workers as Slurm batch jobs, for ``cluster_client(cluster="slurm")`` (``--cluster slurm``).

The scheduler runs in this process; every worker is one Slurm job submitted with ``sbatch``
by :class:`dask_jobqueue.SLURMCluster` (the optional extra ``dpipe[slurm]``). The jobs are
described by dask-jobqueue's own dask config section ``jobqueue.slurm`` (``queue``,
``account``, ``walltime``, ``cores``, ``memory``, ``processes``, ``job-extra-directives``,
``log-directory``, ``python``, ...: ``~/.config/dask/jobqueue.yaml`` or
``DASK_JOBQUEUE__SLURM__QUEUE=...``), with these choices of dpipe's own:

- ``workers`` jobs (default: ``dpipe.workers``, else 1);
- ``memory_limit`` is the memory of a job (``--mem``) when given, else ``jobqueue.slurm.memory``;
  one of the two is required;
- ``threads_per_worker`` is a job's cores when given, else ``jobqueue.slurm.cores``, else
  ``dpipe.threads-per-worker`` (1);
- the workers run this process's Python (``sys.executable``) unless ``jobqueue.slurm.python``
  says otherwise, so the job's node must see the same environment (a shared file system);
- like the embedded cluster it is closed to others: every connection uses TLS with a
  throw-away key/certificate pair, written for the jobs (mode 0600, in a 0700 directory) into
  ``jobqueue.slurm.shared-temp-directory``, else the current directory (a file system the
  nodes share), and removed when the cluster closes;
- the dashboard listens on a free port (``jobqueue.slurm.scheduler-options`` overrides it).

Starting waits at most ``dpipe.slurm-start-timeout`` (default 300 s) for every worker to
connect and fails with one line naming what went wrong: ``sbatch`` missing, a job Slurm
refuses (``sbatch --test-only`` of the worker job first, with sbatch's own message), a job
that ended without starting its worker, or jobs still pending at the deadline (with
squeue's state and reason). Closing the context cancels
the jobs (``scancel``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import dask.config
from distributed import Client
from distributed.security import Security

from .._config import get_setting, seconds_setting
from .._interrupts import deferred_interrupts
from .._validation import check_choice, check_int
from ..exceptions import ClusterError, ParameterError
from ._cluster_spec import CLUSTERS

__all__ = ["CLUSTERS", "cluster_kind", "slurm_client", "slurm_start_timeout"]

log = logging.getLogger("dpipe.engine")

#: squeue states of a job that may still start its worker
_ALIVE = {"PENDING", "CONFIGURING", "RUNNING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT"}


def cluster_kind(cluster: str | None = None, scheduler: str | None = None) -> str:
    """``cluster``, else the ``dpipe.cluster`` setting: one of :data:`CLUSTERS`.

    ``"slurm"`` together with a named scheduler (``scheduler``: the argument,
    ``DPIPE_SCHEDULER`` or ``dpipe.scheduler``) is a :class:`ParameterError`: either
    dpipe starts the cluster or it connects to one.
    """
    kind = check_choice(get_setting("cluster", cluster), "cluster", "cluster_client", CLUSTERS)
    if kind != "local" and scheduler:
        raise ParameterError(f"The 'cluster' parameter of cluster_client is {kind!r}, which starts a cluster, but a scheduler is named "
                             f"({scheduler}: scheduler=, DPIPE_SCHEDULER or dpipe.scheduler). Drop one.")
    return kind


def slurm_start_timeout() -> float:
    """``dpipe.slurm-start-timeout`` in seconds (a number of seconds or a dask time string such as ``"5 minutes"``)."""
    return seconds_setting("slurm-start-timeout", "300 or '5 minutes'")


def _slurm_classes() -> tuple[Any, Any]:
    """dask-jobqueue's SLURMCluster and a job class whose ``close`` also marks it closed.

    ``SLURMJob.close`` cancels the job but leaves its status "running", and
    :meth:`distributed.SpecCluster.close` asserts that every job it created is closed: a
    job still referenced (one whose worker never connected, named in an error) made closing
    the cluster fail with ``AssertionError: Status.running``.
    """
    try:
        from dask_jobqueue import SLURMCluster
        from dask_jobqueue.slurm import SLURMJob
        from distributed.deploy.spec import ProcessInterface
    except ImportError as error:
        raise ClusterError(f"cluster 'slurm' needs the dask-jobqueue package ({error}): pip install 'dpipe[slurm]'") from None

    class _SlurmJob(SLURMJob):
        async def close(self) -> None:
            await super().close()  # scancel
            await ProcessInterface.close(self)  # status closed

    return SLURMCluster, _SlurmJob


def _job_resources(workers: int | None, memory_limit: str | int | None, threads_per_worker: int | None) -> tuple[int, int, str | int]:
    """(jobs, cores per job, memory per job) from the arguments and the dask config."""
    n = get_setting("workers", workers)
    jobs = 1 if n is None else check_int(n, "workers", "cluster_client", low=1)
    cores = threads_per_worker if threads_per_worker is not None else dask.config.get("jobqueue.slurm.cores", None)
    cores = check_int(get_setting("threads-per-worker", cores), "threads_per_worker", "cluster_client", low=1)
    memory = memory_limit if memory_limit not in (None, "auto") else dask.config.get("jobqueue.slurm.memory", None)
    if memory in (None, "auto"):
        raise ParameterError("cluster 'slurm' needs the memory of a worker job: 'memory_limit', e.g. 4GiB, or jobqueue.slurm.memory "
                             "in the dask config (~/.config/dask/jobqueue.yaml or DASK_JOBQUEUE__SLURM__MEMORY)")
    return jobs, cores, memory


def _tls_files(directory: str) -> Security:
    """A throw-away key/certificate pair as files in ``directory`` (0700, key 0600), for the jobs to read."""
    temporary = Security.temporary()
    cert, key = temporary.tls_worker_cert, temporary.tls_worker_key
    cert_path, key_path = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    for path, text in ((cert_path, cert), (key_path, key)):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    return Security(
        require_encryption=True,
        tls_ca_file=cert_path,
        tls_client_cert=cert_path,
        tls_client_key=key_path,
        tls_scheduler_cert=cert_path,
        tls_scheduler_key=key_path,
        tls_worker_cert=cert_path,
        tls_worker_key=key_path,
    )


def _squeue(job_ids: list[str]) -> tuple[dict[str, str], str | None]:
    """Each listed job's ``"STATE (reason)"`` (a job squeue no longer knows is absent), or squeue's error."""
    try:
        run = subprocess.run(["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", "%i %T %r"],
                             capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return {}, f"squeue failed: {error}"
    if run.returncode != 0:
        if "Invalid job id" in run.stderr:  # every job already purged from the controller
            return {}, None
        return {}, f"squeue failed: {(run.stderr.strip().splitlines() or [f'exit status {run.returncode}'])[-1]}"
    states = {}
    for line in run.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2:
            states[parts[0]] = f"{parts[1]} ({parts[2] if len(parts) > 2 else 'None'})"
    return states, None


def _check_submission(job_script: str, directory: str) -> None:
    """``sbatch --test-only`` the worker job: a refused job (partition, account, memory, time) fails here with sbatch's own words."""
    path = os.path.join(directory, "worker-job.sh")
    with open(path, "w") as f:
        f.write(job_script)
    try:
        run = subprocess.run(["sbatch", "--test-only", path], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ClusterError(f"cluster 'slurm': sbatch --test-only did not answer: {error}") from None
    if run.returncode != 0:
        lines = [line.strip() for line in (run.stderr + run.stdout).splitlines() if line.strip()]
        why = "; ".join(lines[-2:]) if lines else f"exit status {run.returncode}"
        raise ClusterError(f"cluster 'slurm': sbatch refuses the worker job: {why}")


async def _settle(cluster: Any) -> None:
    """Wait until the scaled jobs are submitted."""
    await cluster


def _wait_for_jobs(client: Client, cluster: Any, expected: int, timeout: float) -> list[str]:
    """Wait until ``expected`` workers connected; the job ids. Fail early when every job is gone."""
    jobs = list(cluster.workers.values())
    job_ids = [str(job.job_id) for job in jobs if getattr(job, "job_id", None)]
    if len(job_ids) < len(jobs):
        raise ClusterError(f"cluster 'slurm': sbatch failed for {len(jobs) - len(job_ids)} of {len(jobs)} worker job(s) (its error is logged above)")
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.wait_for_workers(expected, timeout=min(2.0, max(0.1, deadline - time.monotonic())))
            return job_ids
        except TimeoutError:
            pass
        connected = len(client.nthreads())
        states, problem = _squeue(job_ids)
        ended = [j for j in job_ids if j not in states or states[j].split()[0] not in _ALIVE]
        if problem is None and ended and len(ended) == len(job_ids):
            where = dask.config.get("jobqueue.slurm.log-directory", None) or os.getcwd()
            listed = ", ".join(f"job {j} {states.get(j, 'ended')}" for j in ended)
            raise ClusterError(f"Slurm worker job(s) ended before their dask worker connected ({connected} of {expected} connected): "
                               f"{listed}; see the job log(s) in {where}")
        if time.monotonic() >= deadline:
            listed = ", ".join(f"job {j} {states.get(j, 'not in squeue')}" for j in job_ids) or "no job id"
            raise ClusterError(f"{connected} of {expected} Slurm worker(s) connected within {timeout:g} s (dpipe.slurm-start-timeout): "
                               f"{listed}{'; ' + problem if problem else ''}")


@contextlib.contextmanager
def slurm_client(workers: int | None, memory_limit: str | int | None, threads_per_worker: int | None) -> Iterator[Client]:
    """Yield a client of a scheduler in this process whose workers are Slurm jobs (see the module docstring); the options
    are a :class:`~dpipe.engine.ClusterSpec`'s (None: their dask config).

    Parameters
    ----------
    workers : int, optional
        Slurm jobs to submit (default: dask config ``dpipe.workers``, else 1); each runs
        ``jobqueue.slurm.processes`` worker processes (default 1).
    memory_limit : str or int, optional
        Memory of one job ("4GiB" or bytes; default ``jobqueue.slurm.memory``).
    threads_per_worker : int, optional
        Cores of one job (default ``jobqueue.slurm.cores``, else ``dpipe.threads-per-worker``).

    Yields
    ------
    distributed.Client
        Connected once every worker is; the jobs are cancelled when the context ends.

    Raises
    ------
    ClusterError
        dask-jobqueue is not installed, ``sbatch`` is not on PATH, a submission was refused,
        or the workers did not connect within ``dpipe.slurm-start-timeout``.
    ParameterError
        No memory per job is given or configured.
    """
    SLURMCluster, job_cls = _slurm_classes()
    jobs, cores, memory = _job_resources(workers, memory_limit, threads_per_worker)
    timeout = slurm_start_timeout()
    if shutil.which("sbatch") is None:
        raise ClusterError("cluster 'slurm': sbatch not found on PATH: run dpipe on a host that submits Slurm jobs (or add Slurm's bin directory to PATH)")
    shared = dask.config.get("jobqueue.slurm.shared-temp-directory", None)
    shared = os.path.expanduser(os.path.expandvars(shared)) if shared else os.getcwd()
    python = dask.config.get("jobqueue.slurm.python", None) or sys.executable
    scheduler_options = {"dashboard_address": ":0", **(dask.config.get("jobqueue.slurm.scheduler-options", None) or {})}
    with contextlib.ExitStack() as stack:
        try:
            tls_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix=".dpipe-slurm-tls-", dir=shared))
        except OSError as error:
            raise ClusterError(f"cluster 'slurm': cannot write the workers' TLS files in {shared} ({error.strerror or error}): "
                               "set jobqueue.slurm.shared-temp-directory to a directory the nodes share") from None
        security = _tls_files(tls_dir)
        with deferred_interrupts():  # a cluster or client interrupted in its constructor would never be closed
            try:
                cluster = SLURMCluster(cores=cores, memory=memory, python=python, security=security, scheduler_options=scheduler_options, job_cls=job_cls)
            except (ValueError, TypeError) as error:
                raise ClusterError(f"cluster 'slurm': dask-jobqueue refused the configuration: {' '.join(str(error).split())}") from None
            stack.callback(cluster.close)
        _check_submission(cluster.job_script(), tls_dir)
        cluster.scale(jobs=jobs)
        cluster.sync(_settle, cluster)
        with deferred_interrupts():
            client = Client(cluster, security=security, set_as_default=False)
            stack.callback(client.close)
        expected = len(cluster.plan)
        started = time.monotonic()
        job_ids = _wait_for_jobs(client, cluster, expected, timeout)
        log.info("started Slurm cluster: %d job(s) (%s), %d core(s) and %s each, %d worker(s) connected in %.1f s",
                 jobs, ", ".join(job_ids), cores, memory, expected, time.monotonic() - started)
        log.debug("Slurm job script:\n%s", cluster.job_script())
        yield client
        log.info("cancelling Slurm job(s) %s", ", ".join(job_ids))
