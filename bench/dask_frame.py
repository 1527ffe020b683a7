"""A dask DataFrame fit of adult against the same fit in memory: where the time goes.

Usage::

    python bench/dask_frame.py [--data-dir ../shared/data] [--repeats 3] [--objectives auc,auc-moment,constraint]

adult's training file (14 columns, 8 of them strings; labels ``<=50K`` / ``>50K``) is written as
a CSV and read back two ways: ``pandas.read_csv`` (fitted in this process) and
``dask.dataframe.read_csv(blocksize="1MB")`` (3 partitions, fitted where they live on a
``LocalCluster`` of 2 worker processes with one thread each, started once and not timed). Each
objective is fitted once untimed (numba's compiles, the workers' imports), then ``--repeats``
times each way, interleaved. Printed per objective: the medians, their ratio, the data passes of
the fit and, for the dask fit, the seconds building the shards on the workers and the remaining
seconds per data pass (the labels, the vocabulary scan and the workers' check included), with the
load averages.
``constraint`` is ``error-rate`` subject to ``recall >= 0.8``.
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


def _objectives() -> dict:
    import dpipe.rates as R

    return {"auc": {}, "auc-moment": {"objective": "auc-moment"},
            "constraint": {"objective": "error-rate", "constraints": [R.recall() >= 0.8]}}


class _LoadSeconds(logging.Handler):
    """The collection's "built on N workers in S s" log line: the seconds the dask fit spent before its first pass."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seconds: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "built on" in text:
            self.seconds = float(text.rsplit(" in ", 1)[1].split(" s")[0])


def main(argv: list[str] | None = None) -> int:
    import dask.dataframe as dd
    import pandas as pd
    from distributed import Client, LocalCluster

    from dpipe import DPipeClassifier

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get("DPIPE_SHARED_DATA", HERE.parents[1] / "shared" / "data")))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--objectives", default="auc,auc-moment,constraint")
    a = ap.parse_args(argv)
    kinds = _objectives()
    names = a.objectives.split(",")
    frame = pd.read_csv(a.data_dir / "adult.data.gz", header=None, skipinitialspace=True)
    frame.columns = [f"c{i}" for i in range(14)] + ["income"]
    handler = _LoadSeconds()
    logger = logging.getLogger("dpipe.engine._collection")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster):
        path = os.path.join(tmp, "adult.csv")
        frame.to_csv(path, index=False)
        memory = pd.read_csv(path)
        lazy = dd.read_csv(path, blocksize="1MB")
        X, y, dX, dy = memory.drop(columns="income"), memory["income"], lazy.drop(columns="income"), lazy["income"]
        print(f"adult: {len(memory)} rows, {lazy.npartitions} partitions; load {os.getloadavg()}")
        for name in names:
            DPipeClassifier(**kinds[name]).fit(X, y)
            DPipeClassifier(**kinds[name]).fit(dX, dy)
            times: dict[str, list[float]] = {"memory": [], "dask": []}
            setup, passes = [], 0
            for r in range(a.repeats):
                for way in (("memory", "dask") if r % 2 == 0 else ("dask", "memory")):
                    t0 = time.perf_counter()
                    clf = DPipeClassifier(**kinds[name]).fit(*((X, y) if way == "memory" else (dX, dy)))
                    times[way].append(time.perf_counter() - t0)
                    if way == "dask":
                        setup.append(handler.seconds or 0.0)
                        passes = int(clf.fit_result_.info.get("data_passes", 0))
            m, d = np.median(times["memory"]), np.median(times["dask"])
            per_pass = (d - np.median(setup)) / max(1, passes)
            print(f"{name}: memory {m:.2f} s, dask {d:.2f} s ({d / m:.1f}x); dask: the shards built in {np.median(setup):.2f} s, "
                  f"{passes} data passes, {1000 * per_pass:.1f} ms a pass with the rest (labels, vocabulary scan, worker check) spread "
                  f"over them; load {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
