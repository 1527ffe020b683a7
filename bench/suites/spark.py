"""spark: Spark MLlib, the distributed engine users would otherwise pick, against dpipe's default on the same data and cores.

Spark MLlib's ``LogisticRegression()`` and ``LinearSVC()`` with their defaults (100
iterations, no regularization, features standardized internally), in ``local[2]`` (the
machine's two cores), the driver bound to 127.0.0.1 (``spark.driver.bindAddress``,
``spark.driver.host``, ``SPARK_LOCAL_IP``), the console progress bar and the UI off, and
``spark.driver.memory`` :data:`DRIVER_MEMORY` (Spark's default of 1g cannot cache the
10^7-row data; 16g ran this shared machine out of memory; the value is recorded).
LinearSVC runs once on the 10^7-row data (:data:`ONCE_ON_BIG`; 18 minutes a run). Each fit is a whole process of its own
(:data:`CHILD`: start the session, read dpipe's Parquet store directly -- ``X`` is a
fixed-size list column, turned into Spark vectors by ``array_to_vector("X")`` -- fit,
write the weights, stop), timed start to exit; its fit time is the ``fit`` call (the
first pass reads and caches the data). dpipe runs ``dpipe train STORE --objective auc``
with its defaults on the same Parquet store (``--engine auto``: one process up to 1 GB of
features, the embedded 2-worker cluster with persisted shards above). Peak memory: the
summed RSS of each process tree (the JVM and its Python workers; dpipe's driver and its
worker processes), sampled every 0.2 s. Test AUC of every model from its weights on the
test store (exact, ties half). The contenders run interleaved, ``--repeats`` rounds.

Data: the generated 10^7 x 120 store of ``scale-race`` (same generator and seeds) written
as Parquet, with its 10^6-row test store; and kdd99 (the 10 % file, attack vs ``normal.``,
raw features, tested on ``corrected.gz``) ingested as Parquet. Quick: 10^6 x 120 and kdd99.

Skipped with a message where ``java`` or ``pyspark`` is absent (``pip install pyspark``;
bench/README.md).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .._harness import Config, fmt_spread, spread, table_head
from ..datasets import DATASETS
from .scale_race import OBJECTIVE, dpipe_train, generated, read_xy, run_tree, test_auc, wait_for_memory

#: the JVM heap of Spark's driver (which is also its executor in local mode): 16g took the process tree to 18.4 GB on the
#: 10^7-row data, and with other jobs on this shared 24 GB machine the run was killed; at 12g the cached data spill to local disk
DRIVER_MEMORY = "12g"
#: estimators run once (not every round) on the full-size generated data: LinearSVC's 100 iterations took 18 minutes there
ONCE_ON_BIG = ("LinearSVC",)
MASTER = "local[2]"
#: (rows, features, test rows) of the generated data, full and quick
SIZE, QUICK_SIZE = (10_000_000, 120, 1_000_000), (1_000_000, 120, 100_000)
ESTIMATORS = ("LogisticRegression", "LinearSVC")
#: a Spark fit longer than this is stopped and reported
TIMEOUT = 3600.0

#: one Spark fit as a whole process: argv = estimator, train store, output JSON, master, driver memory
CHILD = r"""
import json, sys, time
t_start = time.perf_counter()
name, train, out, master, memory = sys.argv[1:6]
from pyspark.sql import SparkSession, functions as F
from pyspark.ml.functions import array_to_vector
from pyspark.ml.classification import LogisticRegression, LinearSVC
spark = (SparkSession.builder.master(master).appName("dpipe-bench-" + name)
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.memory", memory).config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
t_session = time.perf_counter()
df = spark.read.parquet(train.rstrip("/") + "/part-*.parquet")
df = df.select(array_to_vector("X").alias("features"), F.when(F.col("y") > 0, 1.0).otherwise(0.0).alias("label"))
est = {"LogisticRegression": LogisticRegression, "LinearSVC": LinearSVC}[name]()
t0 = time.perf_counter()
model = est.fit(df)
t_fit = time.perf_counter() - t0
summary = model.summary if model.hasSummary else None
summary = summary() if callable(summary) else summary  # LinearSVCModel.summary is a method in pyspark
rec = {"coef": model.coefficients.toArray().tolist(), "intercept": float(model.intercept), "fit_seconds": t_fit,
       "session_seconds": t_session - t_start, "iterations": summary.totalIterations if summary is not None else None,
       "params": {p.name: v for p, v in est.extractParamMap().items() if isinstance(v, (int, float, str, bool))}}
spark.stop()
with open(out, "w") as f:
    json.dump(rec, f)
"""


def available() -> str | None:
    """None when Spark can run here, else why not."""
    if shutil.which("java") is None:
        return "spark skipped: no java on PATH (Spark 4 needs Java 17 or 21)"
    if importlib.util.find_spec("pyspark") is None:
        return "spark skipped: pyspark is not installed (python -m pip install pyspark; bench/README.md)"
    return None


def kdd99_parquet(data_dir: Path, work: Path) -> tuple[Path, Path]:
    """kdd99 attack vs normal (bench/datasets.py's recipe) ingested as Parquet stores, once; dense (``layout="dense"``), the
    layout Spark's reader here takes (a ``X`` column of fixed-size lists): ``auto`` now stores kdd99's one-hot rows as CSR."""
    import dpipe

    train_file, test_file, opts, test_opts = DATASETS["kdd99"]
    folder = work / "spark"
    folder.mkdir(parents=True, exist_ok=True)
    train, test = folder / "kdd99-dense.parquet", folder / "kdd99-dense-test.parquet"
    if not train.exists():
        dpipe.ingest(str(data_dir / train_file), str(train), format="parquet", layout="dense", **opts)
    if not test.exists():
        dpipe.ingest(str(data_dir / test_file), str(test), format="parquet", like=str(train), **test_opts)
    return train, test


def spark_fit(name: str, train: Path, test_data: tuple[np.ndarray, np.ndarray], out: Path) -> dict[str, Any]:
    """One Spark fit as a whole process: seconds, fit seconds, iterations, peak tree RSS, test AUC."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    if out.exists():
        out.unlink()
    import dpipe

    wait_for_memory(min(1.1 * float(DRIVER_MEMORY.rstrip("g")) * 2**30, 4.0 * dpipe.open_store(str(train)).nbytes + 2e9))  # the heap, or the data as doubles
    r = run_tree([sys.executable, "-c", CHILD, name, str(train), str(out), MASTER, DRIVER_MEMORY], env=env, timeout=TIMEOUT)
    rec: dict[str, Any] = {"seconds": r["seconds"], "peak_tree_rss": r["peak_tree_rss"], "returncode": r["returncode"], "timed_out": r["timed_out"]}
    if r["returncode"] != 0 or not out.exists():
        rec["error"] = r["stderr"][-3000:]
        return rec
    m = json.loads(out.read_text())
    rec.update({k: m[k] for k in ("fit_seconds", "session_seconds", "iterations", "params")})
    rec["test_auc"] = test_auc(m["coef"], Path(), m["intercept"], test_data)
    return rec


def _task(cfg: Config, name: str, train: Path, test: Path, once: tuple[str, ...] = ()) -> dict[str, Any]:
    test_data = read_xy(test)
    folder = cfg.work / "spark" / "models"
    folder.mkdir(parents=True, exist_ok=True)
    estimators = [e for e in ESTIMATORS if cfg.tasks is None or e in cfg.tasks]  # --tasks LogisticRegression: without LinearSVC's 15 minutes
    contenders = {f"Spark {e}": (lambda e=e: spark_fit(e, train, test_data, folder / f"{name}-{e}.json")) for e in estimators}
    contenders[f"dpipe {OBJECTIVE}"] = lambda: dpipe_train(train, folder / f"{name}-dpipe.json", OBJECTIVE, [], test, test_data)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in contenders}
    for i in range(cfg.repeats):
        for k, fn in contenders.items():
            if i and any(k == f"Spark {e}" for e in once):
                continue
            r = fn()
            r["load1"] = os.getloadavg()[0]
            r.pop("x", None)
            runs[k].append(r)
            partial = cfg.work / "spark" / "partial.json"  # every run so far, in case the suite is killed
            partial.write_text(json.dumps({"task": name, "runs": runs}, indent=1, default=float))
            if "error" in r:
                print(f"  {name} round {i + 1} {k}: failed ({r['returncode']}): {r['error'][-400:]}", flush=True)
            else:
                print(f"  {name} round {i + 1} {k}: {r['seconds']:.1f} s (fit {r['fit_seconds']:.1f} s), AUC {r['test_auc']:.5f}, "
                      f"peak {r['peak_tree_rss'] / 1e9:.2f} GB (load {r['load1']:.2f})", flush=True)
    import dpipe

    st = dpipe.open_store(str(train))
    summary = {}
    for k, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        if not ok:
            summary[k] = {"failed": True, "error": rs[-1].get("error", "")[-500:]}
            continue
        summary[k] = {"seconds": spread([r["seconds"] for r in ok]), "fit_seconds": spread([r["fit_seconds"] for r in ok]),
                      "peak_tree_rss": spread([r["peak_tree_rss"] for r in ok]), "test_auc": ok[-1]["test_auc"], "load1": spread([r["load1"] for r in ok]),
                      "iterations": ok[-1].get("iterations", ok[-1].get("nit")), "cg_steps": ok[-1].get("cg_steps"), "engine": ok[-1].get("engine"),
                      "failed_runs": len(rs) - len(ok), "runs": len(ok)}
    ref = f"dpipe {OBJECTIVE}"
    ratios = {}
    for k in runs:
        if k != ref and not summary[k].get("failed") and not summary[ref].get("failed"):
            pairs = [(a["seconds"], b["seconds"]) for a, b in zip(runs[k], runs[ref]) if "error" not in a and "error" not in b]
            ratios[k] = spread([a / b for a, b in pairs]) if pairs else None
    return {"task": name, "rows": int(st.manifest.n_rows), "features": int(st.manifest.n_features), "test_rows": int(test_data[1].size),
            "train": str(train), "test": str(test), "runs": runs, "summary": summary, "ratio_to_dpipe": ratios}


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    why = available()
    if why is not None:
        print(f"  {why}", flush=True)
        return {"skipped": why}, why
    rows, d, test_rows = QUICK_SIZE if cfg.quick else SIZE
    tasks = []
    if (cfg.data_dir / DATASETS["kdd99"][0]).exists():
        tasks.append(_task(cfg, "kdd99 attack vs normal", *kdd99_parquet(cfg.data_dir, cfg.work)))
    else:
        print(f"  kdd99 skipped: {cfg.data_dir / DATASETS['kdd99'][0]} is absent", flush=True)
    train, test = generated(cfg.work, rows, d, test_rows, fmt="parquet")
    tasks.append(_task(cfg, f"generated {rows:.0e} x {d}", train, test, () if cfg.quick else ONCE_ON_BIG))
    import pyspark

    payload = {"pyspark": pyspark.__version__, "java": _java_version(), "master": MASTER, "driver_memory": DRIVER_MEMORY, "tasks": tasks}
    return payload, markdown(payload)


def _java_version() -> str:
    import subprocess

    r = subprocess.run(["java", "-version"], capture_output=True, text=True)
    return (r.stderr or r.stdout).splitlines()[0] if (r.stderr or r.stdout) else "?"


def markdown(p: dict[str, Any]) -> str:
    lines = [
        f"Spark MLlib {p['pyspark']} ({p['java']}), `{p['master']}`, driver bound to 127.0.0.1, `spark.driver.memory` {p['driver_memory']}; "
        f"estimators with their defaults. dpipe: `dpipe train STORE --objective {OBJECTIVE}` with its defaults on the same Parquet store. "
        "Seconds of the whole process (fit: the estimator's `fit`, or the model's data loading + solve), median (min-max) of "
        "interleaved rounds; peak memory: the process tree's summed RSS.",
    ]
    for t in p["tasks"]:
        lines += ["", f"**{t['task']}** ({t['rows']:,} rows x {t['features']}, test {t['test_rows']:,} rows):", "",
                  *table_head(["contender", "runs", "whole process s", "fit s", "test AUC", "iterations (dpipe: Newton / CG)", "peak GB", "whole process / dpipe's",
                               "load (1 min)"])]
        for k, s in t["summary"].items():
            if s.get("failed"):
                lines.append(f"| {k} | 0 | failed: {s['error'].strip().splitlines()[-1][:120] if s['error'].strip() else '?'} | | | | | | |")
                continue
            it = f"{s['iterations']} / {s['cg_steps']}" if s.get("cg_steps") is not None else f"{s['iterations']}"
            ratio = t["ratio_to_dpipe"].get(k)
            lines.append(f"| {k} | {s['runs']} | {fmt_spread(s['seconds'])} | {fmt_spread(s['fit_seconds'])} | {s['test_auc']:.5f} | {it} | "
                         f"{fmt_spread(s['peak_tree_rss'], 1e-9)} | {fmt_spread(ratio) + 'x' if ratio else '-'} | {fmt_spread(s['load1'])} |")
    return "\n".join(lines)
