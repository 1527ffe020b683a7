"""``dpipe demo``: the whole path on generated data (or the user's file) in one command."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
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

__all__ = ["DEMO_MODELS", "DemoModel", "run_demo"]


@dataclasses.dataclass(frozen=True)
class DemoModel:
    """One model of the demo: its name (table, report, plot, model file), its objective, the test measure it optimizes
    (a key of the report's ``measures``) and what to say about it."""

    name: str
    objective: str
    measure: str
    higher_is_better: bool
    about: str
    constraints: tuple[str, ...] = ()
    #: its options on generated data (and what they change, for the table)
    generated: tuple[tuple[str, Any], ...] = ()


#: the four-fifths rule's ratio
FAIR_RATIO = 0.8
#: the Neyman-Pearson model's bound on the false-positive rate
NP_FPR_BOUND = 0.05
#: the demo's models; the fair one only with a group column (its constraints: :func:`_fair_constraints`)
DEMO_MODELS = (
    DemoModel("auc", "auc", "roc_auc", True, "ROC-AUC, the ranking (no threshold of its own: score >= 0 is positive)"),
    DemoModel("f1", "f1", "f1", True, "F1, at the threshold it picks", (),
              # the generated data's cutting plane needs 1000+ iterations (70 s at 50000 rows) to eps 1e-3; 0.01 takes 5 s
              (("eps", 0.01),)),
    DemoModel("error-rate-80%-rule", "error-rate", "error", False,
              f"the error rate subject to the 80 % rule: every group's positive rate >= {FAIR_RATIO} x every other group's"),
    DemoModel("neyman-pearson", "false-negative-rate", "fnr", False,
              f"the false-negative rate subject to a false-positive rate <= {NP_FPR_BOUND} (a Neyman-Pearson bound)",
              (f"false_positive_rate <= {NP_FPR_BOUND}",)),
)
#: the model that needs a group column
FAIR_MODEL = DEMO_MODELS[2]
#: the generated data's model: an unconstrained fit gives its two groups unequal positive rates (test ratio 0.55 at 200000 rows)
DEMO_MODEL_SEED = 14
#: the generated data's share of positive rows. With 0.2, 40,000 x 20 gave two empty models (no test row positive: f1's
#: cutting plane ends at w = 0, and the error rate under the 80 % rule is lowest predicting nobody; 0.1 did so at 50,000 x
#: 40 too). With 0.35 (2026-12-07) every model predicts positives at 10,000 x 10, 40,000 x 20, 50,000 x 40 and 20,000 x
#: 80: test F1 of the f1 model 0.60-0.64 against the auc model's 0.55-0.59, group ratio of the 80 % rule model 0.80-0.83
#: (at 50,000 x 40 0.75: the rule binds on the training rows, the test rows' ratio is within sampling error of it)
DEMO_POSITIVE_RATE = 0.35
#: the generated data's default size (at 200000 rows f1's cutting plane takes 86 s on a loaded 2-core machine)
DEMO_ROWS, DEMO_FEATURES = 50_000, 40
#: a model predicting at most this share of the test rows positive, or at least 1 minus it, gets a line saying so
ONE_CLASS_SHARE = 0.005
#: at most this many groups get a fair model (two constraints per group beyond the first)
MAX_FAIR_GROUPS = 6
#: how the bundled adult is ingested: its label rule and the group column of the 80 % rule
ADULT_INGEST = {"label": "income", "positive": ">50K", "group_col": "sex"}


def _bundled_adult() -> str | None:
    """The shared data folder when it holds adult's two files (:func:`dpipe.io._bundled.find_shared_data`), else None."""
    from ..io._bundled import BUNDLED, find_shared_data

    folder = find_shared_data()
    if folder is None or not all(os.path.isfile(os.path.join(folder, src)) for _, src in BUNDLED["adult"].files):
        return None
    return folder


def _use_generated(a: argparse.Namespace) -> bool:
    """Generated data: asked for (``--generated``, ``--rows``, ``--features``), or no ``--data`` and no bundled adult."""
    if a.data is not None:
        return False
    return bool(getattr(a, "generated", False)) or a.rows is not None or a.features is not None or _bundled_adult() is None


def _prepare_stores(a: argparse.Namespace, workdir: str, options: IngestOptions) -> tuple[str, str, str]:
    from ..io import ingest, make_data, split_store

    train, test = os.path.join(workdir, "train.zarr"), os.path.join(workdir, "test.zarr")
    if a.data is None and _use_generated(a):
        rows, features = a.rows or DEMO_ROWS, a.features or DEMO_FEATURES
        print(f"generating {rows} training and {rows // 4} test rows with {features} features ...", flush=True)
        shard_rows = max(1000, rows // 8)  # several shards, so the passes are really distributed
        common = {"features": features, "positive_rate": DEMO_POSITIVE_RATE, "model_seed": DEMO_MODEL_SEED, "shard_rows": shard_rows,
                  "overwrite": a.overwrite}
        make_data(train, rows=rows, seed=1, **common)
        make_data(test, rows=max(1000, rows // 4), seed=2, **common)
        return train, test, "synthetic (dpipe make-data)"
    if a.data is None:
        from ..io._bundled import write_datasets

        folder = _bundled_adult()
        (csv, _), (test_csv, _) = write_datasets(["adult"], workdir, source=folder, overwrite=a.overwrite)
        print(f"adult (census income) from {folder}: {os.path.basename(csv)}, {os.path.basename(test_csv)}", flush=True)
        ingest(csv, train, overwrite=a.overwrite, **ADULT_INGEST)
        ingest(test_csv, test, overwrite=a.overwrite, like=train)
        return train, test, "adult (census income), its training and test files; groups: sex"
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
    """The ingest options apply to ``--data``: given without it, they are an error (generated data and the bundled adult are
    ingested the demo's way)."""
    if a.data is not None:
        return
    given = sorted(options.given("demo"))
    if given:
        raise ParameterError(f"demo: {', '.join('--' + k.replace('_', '-') for k in given)} appl{'ies' if len(given) == 1 else 'y'} to --data; "
                             "the generated data is not ingested" if _use_generated(a) else
                             f"demo: {', '.join('--' + k.replace('_', '-') for k in given)} appl{'ies' if len(given) == 1 else 'y'} to --data; "
                             "the bundled adult is ingested with --label income --positive '>50K' --group-col sex")


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


def run_demo(a: argparse.Namespace, ingest_options: IngestOptions, cluster: ClusterSpec) -> dict[str, Any]:
    """Train models that optimize different measures (:data:`DEMO_MODELS`: ROC-AUC, F1, the error rate under the 80 % rule
    between groups when the data have a group column, the false-negative rate under a false-positive bound), evaluate them
    on held-out data, write ``report.json`` and ``roc.png`` (test ROC curves with each model's operating point, and each
    model's group ratio against the 80 % rule's 0.8).

    The data: ``--data`` (and ``--test-data``); else adult from the shared data folder when it is there; else generated
    (also with ``--generated``, ``--rows`` or ``--features``). The outputs in ``--workdir`` (stores, models,
    ``roc.png``, ``report.json``) are checked before any work: an existing one is replaced only with ``--overwrite``, and
    only when dpipe wrote it. The table of test metrics is printed unless ``a.json`` is set.

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
    files = [(f"{m.name}.json", "model") for m in DEMO_MODELS] + [("roc.png", "plot"), ("report.json", "report")]
    with contextlib.ExitStack() as held:
        for name in stores:
            path = held.enter_context(locked_output(os.path.join(workdir, name), overwrite=a.overwrite, what="store", directory=True))
            prepare_destination(path, a.overwrite)
        for name, what in files:
            held.enter_context(locked_output(os.path.join(workdir, name), overwrite=a.overwrite, what=what))
        yield


def _compile_seconds(client: Any) -> float:
    """Seconds numba has spent compiling dpipe's kernels: in this process, plus the longest of the workers' (they compile at
    the same time), from the compile events :func:`dpipe._compiles.watch_compiles` counts."""
    from .._compiles import compile_seconds

    seconds = compile_seconds()
    if client is not None:
        per_worker = client.run(compile_seconds)
        seconds += max(per_worker.values(), default=0.0)
    return seconds


def _measures(tp: float, fp: float, fn: float, tn: float) -> dict[str, float | None]:
    """The thresholded measures of one confusion matrix (None where a denominator is 0)."""

    def ratio(num: float, den: float) -> float | None:
        return float(num / den) if den > 0 else None

    return {"error": ratio(fp + fn, tp + fp + fn + tn), "fpr": ratio(fp, fp + tn), "fnr": ratio(fn, fn + tp),
            "positive_rate": ratio(tp + fp, tp + fp + fn + tn)}


#: the table's columns: (report key, header, width)
_COLUMNS = (("roc_auc", "AUC", 8), ("prbep", "PRBEP", 8), ("f1", "F1", 8), ("error", "error", 8), ("fpr", "FPR", 8), ("fnr", "FNR", 8),
            ("group_ratio", "group ratio", 13))


def _print_table(rows: list[dict[str, Any]], described: str, fairness: bool, engine_note: str) -> None:
    columns = [c for c in _COLUMNS if fairness or c[0] != "group_ratio"]
    print()
    print(f"data: {described}")
    print(f"{'model':<21}{'train s':>8}" + "".join(f"{h:>{w}}" for _, h, w in columns))
    for r in rows:
        cells = []
        for key, _, w in columns:
            v = r["measures"].get(key)
            text = "-" if v is None else f"{v:.4f}" if key != "group_ratio" else f"{v:.3f}"
            cells.append(f"{text + ('*' if key == r['optimizes']['measure'] else ' '):>{w}}")
        print(f"{r['name']:<21}{r['train_seconds']:>8.2f}" + "".join(cells))
    print("* the measure each model optimizes, on the test rows:")
    for r in rows:
        print(f"  {r['name']}: {r['optimizes']['about']}")
        for c in r["constraints"]:
            print(f"      constraint: {c}")
    notes = ["FPR / FNR: false-positive / false-negative rate at the model's threshold; error: 1 - accuracy",
             "the constraints hold on the training rows; on the test rows a rate can miss its bound by sampling error"]
    if fairness:
        notes.append(f"group ratio: the lowest group's positive rate over the highest's (the 80 % rule asks for >= {FAIR_RATIO})")
    notes.append(f"train s: each fit's seconds without numba's compiles (their compile events subtracted); {engine_note}")
    for r in rows:  # a (nearly) empty or full model is the optimum of its objective on these data: said, not left to the table
        rate = r["measures"].get("positive_rate")
        if rate is not None and not ONE_CLASS_SHARE < rate < 1 - ONE_CLASS_SHARE:
            notes.append(f"{r['name']} predicts {100 * rate:.2f} % of the test rows positive: on these data its objective is best met by "
                         "predicting (nearly) one class (more rows, more features or another positive share may change that)")
    for n in notes:
        print(n)


def _run(a: argparse.Namespace, workdir: str, cluster: ClusterSpec, ingest_options: IngestOptions) -> dict[str, Any]:
    from .._compiles import watch_compiles
    from .._evaluate import evaluate
    from .._output import write_error
    from .._written import REPORT_FORMAT
    from ..engine import client_for, describe_client, open_dataset, rank_summary, resolve_engine
    from ..fit import train
    from ..io import open_store
    from ..io._manifest import write_json_atomic
    from ..plotting import plot_demo

    generated = a.data is None and _use_generated(a)
    train_path, test_path, described = _prepare_stores(a, workdir, ingest_options)
    engine, cache = cluster.engine, cluster.cache
    if engine == "auto":
        engine = resolve_engine(cluster, open_store(train_path), "demo")
    fair, why_not = _fair_constraints(open_store(train_path).manifest.groups)
    models = [m if m is not FAIR_MODEL else dataclasses.replace(m, constraints=tuple(fair or ())) for m in DEMO_MODELS if m is not FAIR_MODEL or fair]
    if fair is None:
        print(f"no model with the 80 % rule: {why_not}", flush=True)
    rows: list[dict[str, Any]] = []
    curves, ratios = {}, {}
    watch_compiles()
    client_ctx = client_for(cluster) if engine == "dask" else None
    with client_ctx if client_ctx is not None else contextlib.nullcontext() as client:
        if client is not None:
            print(f"cluster: {describe_client(client)}", flush=True)
            client.run(watch_compiles)
            engine_note = f"the passes ran on the cluster ({describe_client(client)})"
        else:
            engine_note = "the passes ran in this process (--engine dask: on a local cluster)"
        test_store = open_store(test_path)
        for m in models:
            params: dict[str, Any] = {"constraints": list(m.constraints)} if m.constraints else {}
            if generated:
                params.update(m.generated)
            compiled, t0 = _compile_seconds(client), time.perf_counter()
            path = os.path.join(workdir, f"{m.name}.json")
            model = train(train_path, m.objective, engine=engine, client=client, cache=cache, out=path, overwrite=a.overwrite, **params)
            wall = time.perf_counter() - t0
            compile_s = _compile_seconds(client) - compiled
            metrics = evaluate(model, test_store, by_group=test_store.manifest.groups is not None, engine=engine, client=client, cache="stream")
            with open_dataset(test_store, ClusterSpec(engine=engine, client=client, cache="stream")) as ds:
                summary = rank_summary(ds, model.coef, model.intercept)
            fpr, tpr = summary.roc_curve()
            counts = _measures(*summary.confusion(0.0))
            metrics["positive_rate"] = counts["positive_rate"]  # the share predicted positive
            step = max(1, fpr.size // 2000)
            curves[m.name] = (fpr[::step], tpr[::step], metrics["roc_auc"], counts["fpr"], None if counts["fnr"] is None else 1 - counts["fnr"])
            ratio = metrics.get("by_group", {}).get("selection_rate_ratio")
            if ratio is not None:
                ratios[m.name] = ratio
            measures = {"roc_auc": metrics["roc_auc"], "prbep": metrics["prbep"], "f1": metrics["f1"], **counts, "group_ratio": ratio}
            about = m.about + (f" (options: {', '.join(f'{k}={v}' for k, v in m.generated)})" if generated and m.generated else "")
            rows.append({"name": m.name, "objective": m.objective, "constraints": list(m.constraints), "model": path,
                         "optimizes": {"measure": m.measure, "higher_is_better": m.higher_is_better, "about": about},
                         "train_seconds": max(0.0, wall - compile_s), "compile_seconds": compile_s, "measures": measures,
                         "test": metrics, "train": model.metrics.get("train", {}),
                         "fit": {k: model.fit[k] for k in ("fun", "nit", "nfev", "status", "message", "time_data", "time_solve")}})
    if not getattr(a, "json", False):  # --json: the document, printed by the command, instead of the table
        _print_table(rows, described, bool(ratios), engine_note)
    png = plot_demo(curves, ratios, os.path.join(workdir, "roc.png"), title=f"dpipe demo: {described}", ratio=FAIR_RATIO,
                    fpr_bound=NP_FPR_BOUND)
    note = ("train_seconds: each fit's wall seconds less the seconds numba spent compiling dpipe's kernels meanwhile (compile_seconds: "
            "numba's compile events, counted in this process and, on a cluster, the longest of the workers'); " + engine_note)
    report = {"format": REPORT_FORMAT, "data": described, "train_store": train_path, "test_store": test_path, "engine": engine, "results": rows,
              "roc_png": png, "note": note, "plotted": {"roc": list(curves), "group_ratio": list(ratios)}}
    report = json.loads(json.dumps(report, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))
    try:
        write_json_atomic(os.path.join(workdir, "report.json"), report)  # a temporary name, then renamed
    except OSError as exc:
        raise write_error(os.path.join(workdir, "report.json"), "report", exc) from exc
    if not getattr(a, "json", False):
        print(f"\nreport: {os.path.join(workdir, 'report.json')}\nplot (test ROC with each model's operating point, group ratios): {png}")
    return {**report, "workdir": os.path.abspath(workdir), "report": os.path.abspath(os.path.join(workdir, "report.json"))}
