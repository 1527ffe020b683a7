"""A dask DataFrame fit of adult against the same fit in memory: where the time goes, and where the cluster's break-even is.

Usage::

    python bench/dask_frame.py [--data-dir ../shared/data] [--repeats 3] [--objectives auc,auc-moment,constraint] [--out bench/results]
    python bench/dask_frame.py --break-even [--repeats 3]

adult's training file (14 columns, 8 of them strings; labels ``<=50K`` / ``>50K``) is written as
a CSV and read back two ways: ``pandas.read_csv`` (fitted in this process) and
``dask.dataframe.read_csv(blocksize="1MB")`` (3 partitions, on a ``LocalCluster`` of 2 worker
processes with one thread each, started once and not timed). The dask DataFrame is fitted twice:
with the default ``engine="auto"`` (adult is below the cluster's break-even: its shards are built
on the workers and fitted in this process) and with ``engine="dask"`` (fitted where the partitions
live). Each objective is fitted once untimed each way (numba's compiles, the workers' imports),
then ``--repeats`` times each way, interleaved (the order rotates). Printed per objective: the
medians, their ratios to the in-memory fit, the data passes and, for the cluster route, the
seconds building the shards on the workers and the remaining seconds per data pass (the labels,
the vocabulary scan and the workers' kernels included), with the load averages. ``constraint``
is ``error-rate`` subject to ``recall >= 0.8``. Written: ``dask-frame.json`` and ``dask-frame.md``
in ``--out``.

``--break-even`` measures the two figures ``engine="auto"``'s bound is made of
(:func:`dpipe.engine._collection.break_even_bytes`): the cluster's least seconds per data pass
(``auc``'s Newton passes on a 4,000-row dask array, ``engine="dask"``: no arithmetic to speak
of) and this process's bytes of features per second in the same passes (``auc`` on 4x10^5 x 50
float32 rows in memory, 80 MB, against 10^5 rows: the difference of a fit's seconds over its passes, per thread), and prints the
break-even they give against clusters of 2 and 8 times this process's threads on other machines.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench._harness when run as a script

WAYS = ("memory", "auto", "dask")


def _objectives() -> dict:
    import dpipe.rates as R

    return {"auc": {}, "auc-moment": {"objective": "auc-moment"},
            "constraint": {"objective": "error-rate", "constraints": [R.recall() >= 0.8]}}


class _LoadSeconds(logging.Handler):
    """The collection's "built on N workers in S s" log line: the seconds the cluster route spent before its first pass."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seconds: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "built on" in text:
            self.seconds = float(text.rsplit(" in ", 1)[1].split(" s")[0])


def _pass_seconds(fit: object, repeats: int) -> tuple[float, int]:
    """Median seconds of ``fit()`` (which returns a fitted estimator) over ``repeats`` runs after one untimed, and its data passes."""
    fit()
    times, passes = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        clf = fit()
        times.append(time.perf_counter() - t0)
        passes = int(clf.fit_result_.info.get("data_passes", 0))
    return float(np.median(times)), passes


def break_even(repeats: int) -> int:
    """Print the cluster's least seconds a pass, this process's bytes a second and the break-even they give."""
    import dask.array as da
    from distributed import Client, LocalCluster

    from dpipe import DPipeClassifier
    from dpipe.engine import _collection
    from dpipe.engine._local import local_threads
    from dpipe.testing import classification_data

    handler = _LoadSeconds()
    logger = logging.getLogger("dpipe.engine._collection")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    X, y = classification_data(n=400_000, d=50, seed=3)
    X = np.asarray(X, dtype=np.float32)
    print(f"load {os.getloadavg()}")
    per_pass = {}
    for n in (100_000, 400_000):  # a fit's seconds over its passes at two sizes: the difference is the bytes' share
        seconds, passes = _pass_seconds(lambda: DPipeClassifier("auc").fit(X[:n], y[:n]), repeats)
        per_pass[n] = seconds / max(1, passes)
        print(f"this process: auc on {n} x {X.shape[1]} ({X[:n].nbytes / 1e6:.0f} MB) {seconds:.2f} s, {passes} passes, "
              f"{1000 * per_pass[n]:.1f} ms a pass; load {os.getloadavg()}")
    threads = local_threads()
    rate = (X.nbytes - X[:100_000].nbytes) / max(1e-9, per_pass[400_000] - per_pass[100_000]) / threads
    print(f"this process: {rate / 1e9:.2f} GB of features a second in a pass, each of its {threads} threads")
    with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster):
        dX, dy = da.from_array(X[:4000], chunks=(2000, -1)), da.from_array(y[:4000], chunks=2000)
        whole, passes = _pass_seconds(lambda: DPipeClassifier("auc", engine="dask").fit(dX, dy), repeats)
        floor = (whole - (handler.seconds or 0.0)) / max(1, passes)
        print(f"cluster: auc on 4,000 rows in 2 partitions, engine='dask': {whole:.2f} s, {passes} passes, the shards built in "
              f"{handler.seconds or 0.0:.2f} s: {1000 * floor:.1f} ms a pass at least; load {os.getloadavg()}")
    print(f"dpipe's constants: {1000 * _collection.CLUSTER_PASS_SECONDS:.0f} ms a pass, {_collection.THREAD_PASS_BYTES_PER_SECOND / 1e9:.2f} GB/s a thread")
    for w in (2 * threads, 8 * threads):
        print(f"break-even against {w} worker threads on other machines: {floor * rate / (1 / threads - 1 / w) / 1e6:.0f} MB measured, "
              f"{_collection.break_even_bytes(threads, 0, w, threads)[0] / 1e6:.0f} MB by dpipe's constants")
    return 0


def main(argv: list[str] | None = None) -> int:
    import dask.dataframe as dd
    import pandas as pd
    from distributed import Client, LocalCluster

    from bench._harness import Config, write_results
    from dpipe import DPipeClassifier

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get("DPIPE_SHARED_DATA", HERE.parents[1] / "shared" / "data")))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--objectives", default="auc,auc-moment,constraint")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--ways", default=",".join(WAYS), help="a subset of memory,auto,dask (dask: engine='dask', the cluster route)")
    ap.add_argument("--break-even", action="store_true", help="measure the cluster's least pass and this process's pass rate instead")
    a = ap.parse_args(argv)
    if a.break_even:
        return break_even(a.repeats)
    kinds = _objectives()
    names = a.objectives.split(",")
    ways = tuple(w for w in WAYS if w in a.ways.split(","))
    frame = pd.read_csv(a.data_dir / "adult.data.gz", header=None, skipinitialspace=True)
    frame.columns = [f"c{i}" for i in range(14)] + ["income"]
    handler = _LoadSeconds()
    logger = logging.getLogger("dpipe.engine._collection")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    started, rows, loads = time.perf_counter(), [], [os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster):
        path = os.path.join(tmp, "adult.csv")
        frame.to_csv(path, index=False)
        memory = pd.read_csv(path)
        lazy = dd.read_csv(path, blocksize="1MB")
        data = {"memory": (memory.drop(columns="income"), memory["income"]), "auto": (lazy.drop(columns="income"), lazy["income"]),
                "dask": (lazy.drop(columns="income"), lazy["income"])}
        engine = {"memory": {}, "auto": {}, "dask": {"engine": "dask"}}
        print(f"adult: {len(memory)} rows, {lazy.npartitions} partitions; load {os.getloadavg()}")
        for name in names:
            for way in ways:
                DPipeClassifier(**kinds[name], **engine[way]).fit(*data[way])
            times: dict[str, list[float]] = {w: [] for w in ways}
            setup, passes = [], 0
            for r in range(a.repeats):
                for way in ways[r % len(ways):] + ways[: r % len(ways)]:
                    t0 = time.perf_counter()
                    clf = DPipeClassifier(**kinds[name], **engine[way]).fit(*data[way])
                    times[way].append(time.perf_counter() - t0)
                    if way == "dask":
                        setup.append(handler.seconds or 0.0)
                        passes = int(clf.fit_result_.info.get("data_passes", 0))
            m, auto, d = (float(np.median(times[w])) if times.get(w) else float("nan") for w in WAYS)
            per_pass = (d - np.median(setup)) / max(1, passes) if setup else float("nan")
            loads.append(os.getloadavg())
            rows.append({"objective": name, "times": times, "memory": m, "auto": auto, "dask": d, "passes": passes,
                         "dask_setup": float(np.median(setup)) if setup else float("nan"), "dask_pass_ms": 1000 * per_pass, "load": loads[-1]})
            print(f"{name}: memory {m:.2f} s, dask DataFrame (auto: in this process) {auto:.2f} s ({auto / m:.1f}x), engine='dask' "
                  f"{d:.2f} s ({d / m:.1f}x); the cluster: shards built in {np.median(setup) if setup else float('nan'):.2f} s, {passes} data passes, "
                  f"{1000 * per_pass:.1f} ms a pass with the rest (labels, vocabulary scan, kernels) spread over them; "
                  f"load {os.getloadavg()}", flush=True)
    lines = ["# A dask DataFrame fit of adult against the in-memory fit", "",
             f"`python bench/dask_frame.py --repeats {a.repeats}`: adult (32,561 rows, 108 encoded features) read by "
             f"`dd.read_csv(blocksize=\"1MB\")` ({lazy.npartitions} partitions) on a `LocalCluster` of 2 worker processes, one thread each, "
             "against `pandas.read_csv` fitted in memory; medians, interleaved. `auto` is the default engine (adult is below the "
             "cluster's break-even: shards built on the workers, fitted in this process); `engine='dask'` forces the cluster route "
             f"(ways run: {', '.join(ways)}).", "",
             "| objective | in memory (s) | dask DataFrame, auto (s) | ratio | engine='dask' (s) | ratio | data passes | cluster: shards built (s) | cluster: ms a pass | load (1, 5, 15 min) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    def cell(v: float, fmt: str = ".2f") -> str:
        return "not run" if np.isnan(v) else format(v, fmt)

    for r in rows:
        lines.append(f"| {r['objective']} | {r['memory']:.2f} | {cell(r['auto'])} | {cell(r['auto'] / r['memory'], '.1f')}x | {cell(r['dask'])} | "
                     f"{cell(r['dask'] / r['memory'], '.1f')}x | {r['passes'] or 'not run'} | {cell(r['dask_setup'])} | {cell(r['dask_pass_ms'], '.1f')} | "
                     + ", ".join(f"{v:.1f}" for v in r["load"]) + " |")
    lines += ["", f"`constraint` is `error-rate` subject to `recall >= 0.8`. Load at the start: {', '.join(f'{v:.1f}' for v in loads[0])}. "
              f"Ran {time.perf_counter() - started:.0f} s."]
    cfg = Config(quick=False, repeats=a.repeats, data_dir=a.data_dir, work=HERE / "work", out_dir=a.out)
    for path in write_results(cfg, "dask-frame", {"rows": rows, "loads": loads}, "\n".join(lines)):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
