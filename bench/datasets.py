"""The bundled datasets as (train, test) ingest recipes, shared by the benchmark scripts."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["DATASETS", "default_data_dir", "ingest_pair", "bench_parser", "bench_client"]

KDD = dict(label=41)

#: name -> (train file, test file, ingest options, test-only options)
DATASETS: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
    "kdd99": ("kddcup.data_10_percent.gz", "corrected.gz", dict(KDD, negative=["normal."]), {"unseen": "ignore"}),
    "kdd99-normal": ("kddcup.data_10_percent.gz", "corrected.gz", dict(KDD, positive=["normal."]), {"unseen": "ignore"}),
    "kdd99-rare": ("kddcup.data_10_percent.gz", "corrected.gz", dict(KDD, negative=["normal.", "smurf.", "neptune."]), {"unseen": "ignore"}),
    "a9a": ("a9a.gz", "a9a.t.gz", dict(n_features=123), {}),
    "w8a": ("w8a.gz", "w8a.t.gz", dict(n_features=300), {}),
    "adult": ("adult.data.gz", "adult.test.gz", dict(header=False, label=14, positive=[">50K", ">50K."], group_col=9), {"skip_rows": 1}),
}


def default_data_dir() -> Path:
    """``$DPIPE_SHARED_DATA`` or ``../shared/data`` beside the repository."""
    return Path(os.environ.get("DPIPE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def ingest_pair(name: str, data_dir: Path, work: Path, overwrite: bool = False) -> tuple[str, str]:
    """Ingest dataset ``name`` (train and test ``--like`` train) into ``work``; reuse existing stores."""
    import dpipe

    train_file, test_file, opts, test_opts = DATASETS[name]
    train, test = work / f"{name}.zarr", work / f"{name}-test.zarr"
    if overwrite or not train.exists():
        dpipe.ingest(str(data_dir / train_file), str(train), overwrite=True, **opts)
    if overwrite or not test.exists():
        dpipe.ingest(str(data_dir / test_file), str(test), overwrite=True, like=str(train), **test_opts)
    return str(train), str(test)


def bench_parser(doc: str, datasets: str, out: str) -> argparse.ArgumentParser:
    """The options every dataset bench takes: --data-dir, --work, --datasets and --out."""
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=default_data_dir())
    ap.add_argument("--work", type=Path, default=here / "work")
    ap.add_argument("--datasets", default=datasets)
    ap.add_argument("--out", type=Path, default=here / "results" / out)
    return ap


@contextlib.contextmanager
def bench_client(a: argparse.Namespace) -> Iterator[Any]:
    """Create ``--work`` and the results folder; yield a client of a 2-worker, 1-thread LocalCluster."""
    from distributed import Client, LocalCluster

    a.work.mkdir(parents=True, exist_ok=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster, direct_to_workers=True) as client:
        yield client
