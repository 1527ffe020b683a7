"""Real clusters for the integration tests: workers SIGKILLed mid-fit, and a ``dask scheduler`` with ``dask worker --no-nanny`` processes.

Test helpers only (never imported by production code).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import dask

__all__ = ["CLUSTER_ENV", "KillAtLog", "ExternalCluster", "train_killing_workers"]

#: the environment of the external processes: workers that may start their own processes (actors, the embedded pool)
CLUSTER_ENV = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")

#: the loggers whose progress lines can trigger a kill: the solvers' iterations and the rate fit's majorization steps
PROGRESS_LOGGERS = ("dpipe.solvers", "dpipe.fit")


class KillAtLog(logging.Handler):
    """Calls ``kill`` once, when a record containing ``at`` is logged (a solver's ``"iter   10"``: between two passes of a fit).

    Parameters
    ----------
    kill : callable
        What to do (e.g. SIGKILL some worker processes).
    at : str
        The text that triggers it.
    """

    def __init__(self, kill: Callable[[], None], at: str = "iter   10") -> None:
        super().__init__(logging.INFO)
        self.kill, self.at, self.fired = kill, at, False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.fired and self.at in record.getMessage():
            self.fired = True
            self.kill()


def train_killing_workers(store: str, fit: dict[str, Any], *, kill: int | None = None, at: str = "iter   10",
                          settings: dict[str, Any] | None = None, n_workers: int = 2) -> tuple[Any, bool, int]:
    """Train on a fresh LocalCluster of ``n_workers`` worker processes (each with a nanny) and SIGKILL ``kill`` of them mid-fit.

    Parameters
    ----------
    store : str
        The training store (its shards are persisted: ``cache="memory"``).
    fit : dict
        Keyword arguments of :func:`dpipe.train`.
    kill : int, optional
        How many workers to kill (the first ones by address); all of them by default.
    at : str
        The progress line (of :data:`PROGRESS_LOGGERS`) at which they are killed.
    settings : dict, optional
        ``dask.config`` settings for the fit.
    n_workers : int
        Workers of the cluster.

    Returns
    -------
    model : LinearModel
    fired : bool
        Whether the kill happened (the fit reached ``at``).
    workers : int
        Workers up at the end (their nannies restart the killed ones).
    """
    from distributed import Client, LocalCluster

    from ..fit import train

    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        pids = [pid for _, pid in sorted(client.run(os.getpid).items())][: n_workers if kill is None else kill]
        def kill_workers() -> None:
            for pid in pids:
                os.kill(pid, signal.SIGKILL)

        killer = KillAtLog(kill_workers, at)
        loggers = [logging.getLogger(name) for name in PROGRESS_LOGGERS]
        levels = [lg.level for lg in loggers]
        for lg in loggers:
            lg.setLevel(logging.INFO)
            lg.addHandler(killer)
        try:
            # every iteration's progress line: they are the kill's clock (by default the solvers log one every progress-interval)
            with dask.config.set({"dpipe.progress-interval": 0, **(settings or {})}):
                model = train(store, **fit, client=client, cache="memory")
        finally:
            for lg, level in zip(loggers, levels):
                lg.removeHandler(killer)
                lg.setLevel(level)
        return model, killer.fired, len(client.scheduler_info()["workers"])


class ExternalCluster:
    """A real ``dask scheduler`` and ``dask worker --no-nanny`` processes on 127.0.0.1 (one BLAS thread per core: no nanny sets it to 1).

    Parameters
    ----------
    directory : Path
        A fresh directory for the scheduler file.
    """

    def __init__(self, directory: Path) -> None:
        from distributed import Client

        self.directory = Path(directory)
        self.scheduler_file = str(self.directory / "scheduler.json")
        self.workers: list[subprocess.Popen] = []
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address", "127.0.0.1:0",
             "--scheduler-file", self.scheduler_file],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=CLUSTER_ENV, cwd=self.directory,
        )
        deadline = time.monotonic() + 60
        while not os.path.exists(self.scheduler_file) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not os.path.exists(self.scheduler_file):
            self.scheduler.kill()
            raise RuntimeError("dask scheduler did not write its scheduler file")
        self.client = Client(scheduler_file=self.scheduler_file, set_as_default=False, timeout=60)

    def start_worker(self) -> subprocess.Popen:
        """One more ``dask worker --no-nanny`` (1 thread, 1 GiB); returns once the scheduler has it."""
        n = len(self.client.scheduler_info()["workers"])
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", self.scheduler_file, "--nthreads", "1", "--no-nanny",
             "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0", "--memory-limit", "1GiB"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=CLUSTER_ENV, cwd=self.directory,
        )
        self.workers.append(worker)
        self.client.wait_for_workers(n + 1, timeout=90)
        return worker

    def kill_workers(self, workers: Sequence[subprocess.Popen] | None = None) -> None:
        """SIGKILL ``workers`` (all by default); nothing restarts them."""
        for w in list(self.workers if workers is None else workers):
            w.kill()
            w.wait()
            self.workers.remove(w)

    def close(self) -> None:
        """Close the client, kill every process."""
        self.client.close()
        for p in [*self.workers, self.scheduler]:
            p.kill()
            p.wait()
