"""faults: how long a named scheduler that is not there, not dask, or killed mid-fit takes to become one error line.

Three cases, each a real process on 127.0.0.1, with the default ``dpipe.connect-timeout``
(5 s): ``dpipe.train`` against a port where nothing listens, against a plain
``python -m http.server``, and ``dpipe train`` (a subprocess) whose ``dask scheduler`` is
SIGKILLed in the middle of the fit (seconds from the kill to the process's exit).
The tests check the lines; the times live here.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .._harness import Config, fmt_spread, spread, table_head

FIT_CLI = ["--objective", "auc-smooth", "--precondition", "none", "--init", "zeros", "--max-iter", "200", "--tol", "1e-14", "--no-train-metrics"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _refused(store: str, address: str) -> float:
    import dpipe
    from dpipe.exceptions import ClusterError

    t0 = time.perf_counter()
    try:
        dpipe.train(store, "auc-moment", scheduler=address)
    except ClusterError:
        return time.perf_counter() - t0
    raise RuntimeError(f"{address}: train did not fail")


def _killed_scheduler(store: str, directory: Path) -> float:
    from dpipe.testing._clusters import CLUSTER_ENV, ExternalCluster

    cluster = ExternalCluster(directory)
    try:
        cluster.start_worker()
        proc = subprocess.Popen([sys.executable, "-m", "dpipe", "train", store, *FIT_CLI, "--cache", "memory", "--out", str(directory / "m.json"),
                                 "--scheduler", cluster.scheduler_file], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=dict(CLUSTER_ENV, DASK_DPIPE__PROGRESS_INTERVAL="0"))  # every iteration's line: the kill's clock
        for line in proc.stderr:
            if "iter   10" in line:
                break
        cluster.client.close()
        t0 = time.perf_counter()
        cluster.scheduler.kill()
        proc.communicate(timeout=120)
        return time.perf_counter() - t0
    finally:
        cluster.close()


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    from dpipe.testing import classification_data, write_store

    repeats = 1 if cfg.quick else cfg.repeats
    with tempfile.TemporaryDirectory() as tmp:
        X, y = classification_data(20000, 8, seed=31)
        store = write_store(Path(tmp) / "s.zarr", X, y, [5000] * 4)
        http_port = _free_port()
        server = subprocess.Popen([sys.executable, "-m", "http.server", str(http_port), "--bind", "127.0.0.1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.0)
            results = {
                "nothing listening": spread([_refused(store, f"tcp://127.0.0.1:{_free_port()}") for _ in range(repeats)]),
                "an HTTP server": spread([_refused(store, f"tcp://127.0.0.1:{http_port}") for _ in range(repeats)]),
            }
        finally:
            server.kill()
        results["scheduler killed mid-fit"] = spread([_killed_scheduler(store, Path(tempfile.mkdtemp(dir=tmp))) for _ in range(repeats)])
    for name, s in results.items():
        print(f"  {name}: {fmt_spread(s)} s", flush=True)
    lines = ["Seconds until one error line, with the default dpipe.connect-timeout (5 s); the kill case from the SIGKILL of the "
             f"scheduler to the exit of `dpipe train`. Median (min-max) of {repeats}.", "", *table_head(["case", "seconds"])]
    lines += [f"| {name} | {fmt_spread(s)} |" for name, s in results.items()]
    return {"results": results}, "\n".join(lines)
