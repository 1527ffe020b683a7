"""``dpipe demo``: the whole path on generated data (or the user's file) in one command."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..engine._cluster_spec import ClusterSpec
from ..exceptions import ParameterError
from ..io._ingest_options import IngestOptions

__all__ = ["DEMO_MODELS", "run_demo"]

#: the demo's models: (name, objective); with a group column, also a fair one (:func:`_fair_constraints`)
DEMO_MODELS = (("auc", "auc"), ("error-moment", "error-moment"))
#: the fair model's name and objective: the fewest errors with every group's positive rate within 80 % of the others', and as
#: many rows predicted positive as the first model predicts on the training rows
FAIR_MODEL = ("error-rate-80%-rule", "error-rate")
#: the four-fifths rule's ratio
FAIR_RATIO = 0.8
#: the generated data's model: an unconstrained fit gives its two groups unequal positive rates (test ratio 0.55 at 200000 rows)
DEMO_MODEL_SEED = 14
#: at most this many groups get a fair model (two constraints per group beyond the first)
MAX_FAIR_GROUPS = 6


def _prepare_stores(a: argparse.Namespace, workdir: str, options: IngestOptions) -> tuple[str, str, str]:
    from ..io import make_data, split_store

    train, test = os.path.join(workdir, "train.zarr"), os.path.join(workdir, "test.zarr")
    if a.data is None:
        print(f"generating {a.rows} training and {a.rows // 4} test rows with {a.features} features ...", flush=True)
        shard_rows = max(1000, a.rows // 8)  # several shards, so the passes are really distributed
        make_data(train, rows=a.rows, features=a.features, seed=1, model_seed=DEMO_MODEL_SEED, shard_rows=shard_rows, overwrite=a.overwrite)
        make_data(test, rows=max(1000, a.rows // 4), features=a.features, seed=2, model_seed=DEMO_MODEL_SEED, shard_rows=shard_rows, overwrite=a.overwrite)
        return train, test, "synthetic (dpipe make-data)"
    from ..io import ingest

    untransformed = options.replace(log1p=None, scale="none")
    if a.test_data is not None:
        ingest(a.data, train, overwrite=a.overwrite, **options.keywords("demo"))
        # the training store's transform is re-applied
        ingest(a.test_data, test, overwrite=a.overwrite, **untransformed.replace(like=train).keywords("demo"))
        return train, test, f"{a.data} / {a.test_data}"
    full = os.path.join(workdir, "full.zarr")
    ingest(a.data, full, overwrite=a.overwrite, **untransformed.keywords("demo"))
    # a transform is fitted on the training part
    split_store(full, train, test, train_fraction=0.75, seed=0, overwrite=a.overwrite, **options.keywords("split"))
    return train, test, f"{a.data} (75/25 random split)"


def _check_ingest_options(a: argparse.Namespace, options: IngestOptions) -> None:
    """The ingest options apply to ``--data``: given without it, they are an error (generated data is not ingested)."""
    if a.data is not None:
        return
    given = sorted(options.given("demo"))
    if given:
        raise ParameterError(f"demo: {', '.join('--' + k.replace('_', '-') for k in given)} appl{'ies' if len(given) == 1 else 'y'} to --data; "
                             "the generated data is not ingested")


def _fair_constraints(groups: list[str] | None) -> tuple[list[str] | None, str]:
    """The 80 % rule between every group and the first (both ways), or None and why not."""
    if not groups or len(groups) < 2:
        return None, "no group column (ingest with --group-col to add a model with the 80 % rule between groups)"
    if len(groups) > MAX_FAIR_GROUPS:
        return None, f"{len(groups)} groups: the 80 % rule model takes at most {MAX_FAIR_GROUPS}"
    unnamed = [g for g in groups if not re.fullmatch(r"[A-Za-z0-9_.+-]+", g)]
    if unnamed:
        return None, f"group {unnamed[0]!r} cannot be named in a constraint (letters, digits, _ . + - only)"
    ref = groups[0]
    out = []
    for g in groups[1:]:
        out += [f"positive_rate(group={g}) >= {FAIR_RATIO} * positive_rate(group={ref})", f"positive_rate(group={ref}) >= {FAIR_RATIO} * positive_rate(group={g})"]
    return out, ""


def _positive_share(train: dict[str, Any]) -> float | None:
    """The share of training rows a model predicts positive, from its training metrics (None when they do not tell)."""
    if not train or not train.get("precision"):
        return None
    return float(train["recall"] * train["n_positive"] / train["precision"] / train["n"])


def run_demo(a: argparse.Namespace, ingest_options: IngestOptions, cluster: ClusterSpec) -> dict[str, Any]:
    """Train auc, error-moment and (with a group column) error-rate under the 80 % rule between groups at the auc model's
    coverage; evaluate them on held-out data; write ``report.json`` and ``roc.png`` (test ROC curves and each group's
    positive rate per model).

    The outputs in ``--workdir`` (stores, models, ``roc.png``, ``report.json``) are checked
    before any work: an existing one is replaced only with ``--overwrite``, and only when
    dpipe wrote it. The table of test metrics is printed unless ``a.json`` is set.

    Returns
    -------
    dict
        The report written to ``report.json``, with ``"workdir"`` and ``"report"`` (its path) added
        and each result's ``"model"`` (the model file).
    """
    _check_ingest_options(a, ingest_options)
    workdir = a.workdir or tempfile.mkdtemp(prefix="dpipe-demo-")
    os.makedirs(workdir, exist_ok=True)
    a.overwrite = bool(getattr(a, "overwrite", False))
    with _claim_outputs(a, workdir):
        return _run(a, workdir, cluster, ingest_options)


@contextlib.contextmanager
def _claim_outputs(a: argparse.Namespace, workdir: str) -> Iterator[None]:
    """Check every output of the demo in ``workdir`` before any work (an existing one only with ``--overwrite``, and only
    when dpipe wrote it) and hold each one's lock until the demo ends (:func:`dpipe._output.locked_output`)."""
    from .._output import locked_output
    from ..io._writer import prepare_destination

    stores = ["train.zarr", "test.zarr"] + (["full.zarr"] if a.data is not None and a.test_data is None else [])
    files = [(f"{name}.json", "model") for name, _ in (*DEMO_MODELS, FAIR_MODEL)] + [("roc.png", "plot"), ("report.json", "report")]
    with contextlib.ExitStack() as held:
        for name in stores:
            path = held.enter_context(locked_output(os.path.join(workdir, name), overwrite=a.overwrite, what="store", directory=True))
            prepare_destination(path, a.overwrite)
        for name, what in files:
            held.enter_context(locked_output(os.path.join(workdir, name), overwrite=a.overwrite, what=what))
        yield


def _run(a: argparse.Namespace, workdir: str, cluster: ClusterSpec, ingest_options: IngestOptions) -> dict[str, Any]:
    from .._evaluate import evaluate
    from .._output import REPORT_FORMAT, write_error
    from ..engine import client_for, describe_client, open_dataset, rank_summary
    from ..fit import train
    from ..io import open_store
    from ..io._manifest import write_json_atomic
    from ..plotting import plot_demo

    train_path, test_path, described = _prepare_stores(a, workdir, ingest_options)
    engine, cache = cluster.engine, cluster.cache
    constraints, why_not = _fair_constraints(open_store(train_path).manifest.groups)
    models: list[tuple[str, str, dict[str, Any]]] = [(name, objective, {}) for name, objective in DEMO_MODELS]
    if constraints is not None:
        models.append((*FAIR_MODEL, {"constraints": constraints}))
    else:
        print(f"no model with the 80 % rule: {why_not}", flush=True)
    rows: list[dict[str, Any]] = []
    curves, rates = {}, {}
    coverage = None
    client_ctx = client_for(cluster) if engine == "dask" else None
    with client_ctx if client_ctx is not None else contextlib.nullcontext() as client:
        if client is not None:
            print(f"cluster: {describe_client(client)}", flush=True)
        test_store = open_store(test_path)
        for name, objective, params in models:
            if name == FAIR_MODEL[0] and coverage:  # as many rows positive as the first model predicts, so that fairness is not bought by predicting none
                params = {"constraints": [*params["constraints"], f"positive_rate >= {coverage:.4g}"]}
            t0 = time.perf_counter()
            path = os.path.join(workdir, f"{name}.json")
            model = train(train_path, objective, engine=engine, client=client, cache=cache, out=path, overwrite=a.overwrite, **params)
            seconds = time.perf_counter() - t0
            metrics = evaluate(model, test_store, by_group=test_store.manifest.groups is not None, engine=engine, client=client, cache="stream")
            with open_dataset(test_store, ClusterSpec(engine=engine, client=client, cache="stream")) as ds:
                summary = rank_summary(ds, model.coef, model.intercept)
            fpr, tpr = summary.roc_curve()
            tp, fp, fn, tn = summary.confusion(0.0)
            metrics["positive_rate"] = float((tp + fp) / max(tp + fp + fn + tn, 1))  # the share predicted positive
            step = max(1, fpr.size // 2000)
            curves[name] = (fpr[::step], tpr[::step], metrics["roc_auc"])
            groups = metrics.get("by_group", {}).get("groups", {})
            if groups:
                rates[name] = {g: v["positive_rate"] for g, v in groups.items()}
            if not rows:
                coverage = _positive_share(model.metrics.get("train", {}))
            rows.append({"name": name, "objective": objective, "constraints": params.get("constraints", []), "model": path, "train_seconds": seconds,
                         "test": metrics, "train": model.metrics.get("train", {}),
                         "fit": {k: model.fit[k] for k in ("fun", "nit", "nfev", "status", "message", "time_data", "time_solve")}})
    table = not getattr(a, "json", False)  # --json: the document, printed by the command, instead of the table
    if table:
        print()
        print(f"data: {described}")
        fairness = bool(rates)
        print(f"{'model':<20}{'train s':>9}{'test AUC':>10}{'accuracy':>10}{'F1':>8}{'positive':>10}" + (f"{'group ratio':>13}" if fairness else ""))
        for r in rows:
            t = r["test"]
            ratio = t.get("by_group", {}).get("selection_rate_ratio")
            print(f"{r['name']:<20}{r['train_seconds']:>9.2f}{t['roc_auc']:>10.4f}{t['accuracy']:>10.4f}{t['f1']:>8.4f}{t['positive_rate']:>10.4f}"
                  + (f"{ratio:>13.3f}" if fairness and ratio is not None else ""))
        if fairness:
            print(f"(group ratio: the lowest group's positive rate over the highest's; the 80 % rule asks for >= {FAIR_RATIO})")
    png = plot_demo(curves, rates, os.path.join(workdir, "roc.png"), title=f"dpipe demo ({described})")
    report = {"format": REPORT_FORMAT, "data": described, "train_store": train_path, "test_store": test_path, "results": rows, "roc_png": png,
              "plotted": {"roc": list(curves), "positive_rate_by_group": list(rates)}}
    report = json.loads(json.dumps(report, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))
    try:
        write_json_atomic(os.path.join(workdir, "report.json"), report)  # a temporary name, then renamed
    except OSError as exc:
        raise write_error(os.path.join(workdir, "report.json"), "report", exc) from exc
    if table:
        print(f"\nreport: {os.path.join(workdir, 'report.json')}\nplot (test ROC, positive rate by group): {png}")
    return {**report, "workdir": os.path.abspath(workdir), "report": os.path.abspath(os.path.join(workdir, "report.json"))}
