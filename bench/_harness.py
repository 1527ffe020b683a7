"""What every suite shares: repeated timing, the local cluster, stores, and the results files."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Config", "spread", "fmt_spread", "local_cluster", "warm_cluster", "table_head", "warm_up", "synthetic_store", "machine",
    "write_results", "pyplot", "save_figure", "quiet_train", "worker_peak_rss", "dense",
]

HERE = Path(__file__).resolve().parent


@dataclass
class Config:
    """Options of one ``python -m bench`` run, shared by every suite."""

    quick: bool
    repeats: int
    data_dir: Path
    work: Path
    out_dir: Path
    tasks: tuple[str, ...] | None = None  # race: a subset of its tasks (--tasks)
    before: Path | None = None  # rate-speed: a checkout of dpipe before a change (--before)


def dense(X: Any) -> np.ndarray:
    """A store's feature block as a NumPy array: a CSR block (``ingest``'s ``auto`` layout stores a9a, adult and kdd99
    sparse) densified, a dense one as it is; for the suites that slice columns or hand rows to scikit-learn."""
    return X.toarray() if hasattr(X, "toarray") else np.asarray(X)


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Median, min and max of repeated measurements, with the runs themselves."""
    v = [float(x) for x in values]
    return {"median": float(np.median(v)), "min": min(v), "max": max(v), "runs": v}


def fmt_spread(s: dict[str, Any] | None, scale: float = 1.0, digits: int = 2) -> str:
    """``median (min-max)`` of a :func:`spread`, times ``scale``; ``-`` when absent."""
    if s is None:
        return "-"
    f = f"{{:.{digits}f}}"
    if len(s["runs"]) == 1:
        return f.format(s["median"] * scale)
    return f"{f.format(s['median'] * scale)} ({f.format(s['min'] * scale)}-{f.format(s['max'] * scale)})"


@contextlib.contextmanager
def local_cluster(n_workers: int = 2, memory_limit: str | int = "auto") -> Iterator[Any]:
    """A client of a LocalCluster of ``n_workers`` processes with one thread each, their allocator set as dpipe's own cluster sets it."""
    import dask
    from distributed import Client, LocalCluster

    from dpipe.engine._memory import worker_environ_config

    with dask.config.set(worker_environ_config()):
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, memory_limit=memory_limit, dashboard_address=":0")
    with cluster, Client(cluster, direct_to_workers=True) as client:
        yield client


@contextlib.contextmanager
def warm_cluster(work: Path, n_workers: int = 2) -> Iterator[Any]:
    """:func:`local_cluster` after :func:`warm_up` (its time printed)."""
    import dpipe

    with local_cluster(n_workers) as client:
        print(f"  warm-up {warm_up(dpipe, client, work):.1f} s", flush=True)
        yield client


def table_head(columns: Sequence[str]) -> list[str]:
    """The header and rule lines of a Markdown table."""
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def quiet_train(dpipe: Any, store: str, objective: str, **kw: Any) -> tuple[Any, list[str]]:
    """``dpipe.train`` with its warnings (iteration limits) recorded, not raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = dpipe.train(store, objective, **kw)
    return model, sorted({str(w.message) for w in caught})


#: every objective the benchmarks train
OBJECTIVES = ("auc-moment", "error-moment", "auc-smooth", "prbep-smooth", "rocarea", "prbep", "f1", "prec@k", "error")


def warm_up(dpipe: Any, client: Any, work: Path, objectives: Sequence[str] = OBJECTIVES) -> float:
    """Train each objective once on a tiny store, so no timed run pays for imports or numba loading.

    ``client=None``: in this process (``engine="local"``), whose passes then have their
    kernels loaded as a cluster's workers do after a warm-up there.
    """
    path = work / "warm-up.zarr"
    if not path.exists():
        dpipe.make_data(str(path), rows=4000, features=8, seed=0, shard_rows=1000)
    from dpipe.fit import OBJECTIVES as SPECS

    t0 = time.perf_counter()
    for objective in objectives:
        spec = SPECS[objective]
        # validation and max_iter only where they apply (the moment objectives take no validation store, the closed form no max_iter)
        opts: dict[str, Any] = {} if spec.family == "moment" else {"validation": str(path)}
        if spec.solvers[0] != "closed-form":
            opts["max_iter"] = 3
        where = {"client": client} if client is not None else {"engine": "local"}
        quiet_train(dpipe, str(path), objective, train_metrics=False, **where, **opts)
    return time.perf_counter() - t0


def synthetic_store(work: Path, rows: int, features: int = 120, shard_rows: int | None = None) -> Path:
    """``dpipe.make_data`` store of ``rows`` x ``features`` (seed 0) under ``work``, made once."""
    import dpipe

    path = work / (f"synthetic-{rows}x{features}" + (f"-s{shard_rows}" if shard_rows else "") + ".zarr")
    if not path.exists():
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        dpipe.make_data(str(path), rows=rows, features=features, seed=0, shard_rows=shard_rows)
        print(f"  made {path.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def worker_peak_rss(client: Any) -> dict[str, int]:
    """Peak resident set size (bytes, ``VmHWM``) of every worker process so far."""

    def peak() -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return -1

    return client.run(peak)


def machine() -> dict[str, Any]:
    """The machine and the library versions a result was measured with."""
    import dask
    import distributed
    import numba
    import psutil
    import scipy
    import zarr

    import dpipe

    return {
        "cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
        "numpy": np.__version__, "scipy": scipy.__version__, "dask": dask.__version__,
        "distributed": distributed.__version__, "numba": numba.__version__, "zarr": zarr.__version__,
        "dpipe": getattr(dpipe, "__version__", "?"),
    }


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_results(cfg: Config, suite: str, payload: dict[str, Any], markdown: str) -> list[Path]:
    """Write ``<suite>.json`` (``payload`` plus the machine) and ``<suite>.md`` into the results folder."""
    payload = {"suite": suite, "quick": cfg.quick, "repeats": cfg.repeats, "machine": machine(), **payload}
    js, md = cfg.out_dir / f"{suite}.json", cfg.out_dir / f"{suite}.md"
    _atomic_write(js, json.dumps(payload, indent=1, default=float) + "\n")
    _atomic_write(md, markdown.rstrip() + "\n")
    return [js, md]


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, dest: Path) -> Path:
    """Save ``fig`` as PNG through a temporary name and close it."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.stem}.tmp.png")
    fig.tight_layout()
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, dest)
    pyplot().close(fig)
    return dest
