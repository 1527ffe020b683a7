"""``dpipe demo``: the whole path on generated data (or the user's file) in one command."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..exceptions import ParameterError

__all__ = ["run_demo"]


def _prepare_stores(a: argparse.Namespace, workdir: str, ingest_kwargs: dict[str, Any]) -> tuple[str, str, str]:
    from ..io import make_data, split_store

    train, test = os.path.join(workdir, "train.zarr"), os.path.join(workdir, "test.zarr")
    if a.data is None:
        print(f"generating {a.rows} training and {a.rows // 4} test rows with {a.features} features ...", flush=True)
        shard_rows = max(1000, a.rows // 8)  # several shards, so the passes are really distributed
        make_data(train, rows=a.rows, features=a.features, seed=1, model_seed=0, shard_rows=shard_rows, overwrite=a.overwrite)
        make_data(test, rows=max(1000, a.rows // 4), features=a.features, seed=2, model_seed=0, shard_rows=shard_rows, overwrite=a.overwrite)
        return train, test, "synthetic (dpipe make-data)"
    from ..io import ingest

    if a.test_data is not None:
        ingest(a.data, train, overwrite=a.overwrite, **ingest_kwargs)
        like = dict(ingest_kwargs, like=train, log1p=None, scale="none")  # the training store's transform is re-applied
        ingest(a.test_data, test, overwrite=a.overwrite, **like)
        return train, test, f"{a.data} / {a.test_data}"
    full = os.path.join(workdir, "full.zarr")
    transform = {k: ingest_kwargs[k] for k in ("log1p", "scale") if k in ingest_kwargs}
    ingest(a.data, full, overwrite=a.overwrite, **dict(ingest_kwargs, log1p=None, scale="none"))
    split_store(full, train, test, train_fraction=0.75, seed=0, overwrite=a.overwrite, **transform)  # a transform is fitted on the training part
    return train, test, f"{a.data} (75/25 random split)"


def _check_ingest_options(a: argparse.Namespace, ingest_kwargs: dict[str, Any]) -> None:
    """The ingest options apply to ``--data``: given without it, they are an error (generated data is not ingested)."""
    if a.data is not None:
        return
    import inspect

    from ..io import ingest

    defaults = inspect.signature(ingest).parameters  # the CLI's defaults are ingest's
    given = sorted(k for k, v in ingest_kwargs.items() if v != defaults[k].default)
    if given:
        raise ParameterError(f"demo: {', '.join('--' + k.replace('_', '-') for k in given)} appl{'ies' if len(given) == 1 else 'y'} to --data; "
                             "the generated data is not ingested")


def run_demo(a: argparse.Namespace, ingest_kwargs: dict[str, Any], cluster_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Train auc-moment and error-moment, evaluate on held-out data, write ``report.json`` and ``roc.png``.

    The outputs in ``--workdir`` (stores, models, ``roc.png``, ``report.json``) are checked
    before any work: an existing one is replaced only with ``--overwrite``, and only when
    dpipe wrote it. The table of test metrics is printed unless ``a.json`` is set.

    Returns
    -------
    dict
        The report written to ``report.json``, with ``"workdir"`` and ``"report"`` (its path) added
        and each result's ``"model"`` (the model file).
    """
    _check_ingest_options(a, ingest_kwargs)
    workdir = a.workdir or tempfile.mkdtemp(prefix="dpipe-demo-")
    os.makedirs(workdir, exist_ok=True)
    a.overwrite = bool(getattr(a, "overwrite", False))
    with _claim_outputs(a, workdir):
        return _run(a, workdir, cluster_kwargs, ingest_kwargs)


@contextlib.contextmanager
def _claim_outputs(a: argparse.Namespace, workdir: str) -> Iterator[None]:
    """Check every output of the demo in ``workdir`` before any work (an existing one only with ``--overwrite``, and only
    when dpipe wrote it) and hold each one's lock until the demo ends (:func:`dpipe._output.locked_output`)."""
    from .._output import locked_output
    from ..io._writer import prepare_destination

    stores = ["train.zarr", "test.zarr"] + (["full.zarr"] if a.data is not None and a.test_data is None else [])
    files = [("auc-moment.json", "model"), ("error-moment.json", "model"), ("roc.png", "plot"), ("report.json", "report")]
    with contextlib.ExitStack() as held:
        for name in stores:
            path = held.enter_context(locked_output(os.path.join(workdir, name), overwrite=a.overwrite, what="store", directory=True))
            prepare_destination(path, a.overwrite)
        for name, what in files:
            held.enter_context(locked_output(os.path.join(workdir, name), overwrite=a.overwrite, what=what))
        yield


def _run(a: argparse.Namespace, workdir: str, cluster_kwargs: dict[str, Any], ingest_kwargs: dict[str, Any]) -> dict[str, Any]:
    from .._output import REPORT_FORMAT, write_error
    from ..engine import cluster_client, describe_client, open_dataset, rank_summary
    from ..fit import train
    from ..io import open_store
    from ..io._manifest import write_json_atomic
    from ..plotting import plot_roc

    train_path, test_path, described = _prepare_stores(a, workdir, ingest_kwargs)
    engine = cluster_kwargs.pop("engine")
    cache = cluster_kwargs.pop("cache")
    rows, curves = [], {}
    client_ctx = cluster_client(scheduler=cluster_kwargs["scheduler"], workers=cluster_kwargs["workers"], memory_limit=cluster_kwargs["memory_limit"]) if engine == "dask" else None
    with client_ctx if client_ctx is not None else contextlib.nullcontext() as client:
        if client is not None:
            print(f"cluster: {describe_client(client)}", flush=True)
        test_store = open_store(test_path)
        for objective in ("auc-moment", "error-moment"):
            t0 = time.perf_counter()
            model = train(train_path, objective, engine=engine, client=client, cache=cache, out=os.path.join(workdir, f"{objective}.json"),
                          overwrite=a.overwrite)
            seconds = time.perf_counter() - t0
            with open_dataset(test_store, engine=engine, client=client, cache="stream") as ds:
                summary = rank_summary(ds, model.coef, model.intercept)
            metrics = summary.metrics()
            fpr, tpr = summary.roc_curve()
            step = max(1, fpr.size // 2000)
            curves[objective] = (fpr[::step], tpr[::step], metrics["roc_auc"])
            rows.append({"objective": objective, "model": os.path.join(workdir, f"{objective}.json"), "train_seconds": seconds, "test": metrics, "train": model.metrics.get("train", {}), "fit": {k: model.fit[k] for k in ("fun", "nit", "nfev", "status", "message", "time_data", "time_solve")}})
    table = not getattr(a, "json", False)  # --json: the document, printed by the command, instead of the table
    if table:
        print()
        print(f"data: {described}")
        print(f"{'objective':<14}{'train s':>9}{'test AUC':>10}{'PRBEP':>9}{'accuracy':>10}{'F1':>8}")
        for r in rows:
            t = r["test"]
            print(f"{r['objective']:<14}{r['train_seconds']:>9.2f}{t['roc_auc']:>10.4f}{t['prbep']:>9.4f}{t['accuracy']:>10.4f}{t['f1']:>8.4f}")
    png = plot_roc(curves, os.path.join(workdir, "roc.png"), title=f"dpipe demo: test ROC ({described})")
    report = {"format": REPORT_FORMAT, "data": described, "train_store": train_path, "test_store": test_path, "results": rows, "roc_png": png}
    report = json.loads(json.dumps(report, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))
    try:
        write_json_atomic(os.path.join(workdir, "report.json"), report)  # a temporary name, then renamed
    except OSError as exc:
        raise write_error(os.path.join(workdir, "report.json"), "report", exc) from exc
    if table:
        print(f"\nreport: {os.path.join(workdir, 'report.json')}\nROC curves: {png}")
    return {**report, "workdir": os.path.abspath(workdir), "report": os.path.abspath(os.path.join(workdir, "report.json"))}

