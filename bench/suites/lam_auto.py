"""lam-auto: ``lam="auto"`` (the regularization path on held-out folds) against the fixed default ``lam``, whole process.

For every task (the race's a9a, w8a, kdd99, kdd99-rare and covtype stores, adult, Reuters money-fx, and a generated wide
TF-IDF text store: Zipf term frequencies, 10^5 features, 10^4 training rows, :func:`dpipe.testing.tfidf_text_data`),
``dpipe train TRAIN --out M -q`` with the defaults and with ``--lam auto``, interleaved, ``--repeats`` runs each: whole
process seconds (median), the test ROC-AUC (Reuters: also ``prbep-smooth``'s test PRBEP), the ``lam`` the path chose and
its held-out measure per ``lam`` (the folds' mean; plotted with each fold's), the ``lam`` of the best mean (with several folds
the path takes the one nearest the fixed default within a paired standard error of it), the ``lam`` a one-standard-error rule
would have chosen from the same folds, and the data passes (the model file's: the load-free cost). The peers' figures are the recorded ones (race.md, text.md: liblinear-ranksvm's
best C by test AUC, SVM-perf ``-c 100``).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import warnings
from pathlib import Path
from typing import Any

from .._harness import Config, table_head

#: recorded peers' test ROC-AUC: task -> (liblinear-ranksvm's best C by test AUC, SVM-perf -c 100) (bench/results/race.md, text.md)
PEERS = {"a9a": (0.90214, 0.90210), "w8a": (0.97889, 0.97775), "kdd99": (0.99980, 0.99972), "kdd99-rare": (0.99842, 0.99839),
         "covtype": (0.82203, 0.82270), "reuters": (0.98785, 0.98796)}
#: Reuters' recorded SVM-perf PRBEP run (text.py's SVMPERF_REUTERS_PRBEP): test PRBEP
SVMPERF_REUTERS_PRBEP = 0.7486
RACE_TASKS = ("a9a", "w8a", "kdd99", "kdd99-rare", "covtype")
TASKS = (*RACE_TASKS, "adult", "reuters", "text")
QUICK_TASKS = ("a9a", "reuters", "text")


def _text_stores(cfg: Config) -> tuple[str, str]:
    import shutil

    from dpipe.testing import tfidf_text_data, write_store

    folder = cfg.work / "lam-auto"
    folder.mkdir(parents=True, exist_ok=True)
    X, y = tfidf_text_data(rows=20_000, features=100_000, per_row=30, signal_terms=300, noise=0.3)
    paths = []
    for name, rows in (("text-train.zarr", slice(0, 10_000)), ("text-test.zarr", slice(10_000, 20_000))):
        shutil.rmtree(folder / name, ignore_errors=True)
        paths.append(write_store(folder / name, X[rows], y[rows], [5_000, 5_000], layout="csr"))
    return paths[0], paths[1]


def _stores(task: str, cfg: Config, exe: str) -> tuple[str, str]:
    from ..datasets import ingest_pair
    from . import race, text

    if task in RACE_TASKS:
        prep = race._prepare(task, cfg, exe)
        return prep["paths"]["train"], prep["paths"]["test"]
    if task == "reuters":
        prep = text._reuters(cfg, exe)
        if prep is None:
            raise FileNotFoundError("Reuters money-fx is absent")
        return prep["paths"]["train"], prep["paths"]["test"]
    if task == "text":
        return _text_stores(cfg)
    return ingest_pair(task, cfg.data_dir, cfg.work)


def _run(exe: str, train: str, test: str, extra: list[str]) -> dict[str, Any]:
    import dpipe

    from .race import _timed

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "m.json"
        wall, _ = _timed([exe, "train", train, "--out", str(out), "-q", *extra], cwd=tmp)
        model = json.loads(out.read_text())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ev = dpipe.evaluate(str(out), test, engine="local")
    info = model["fit"].get("info") or {}
    return {"wall": wall, "test_auc": float(ev["roc_auc"]), "test_prbep": float(ev["prbep"]), "lam": info.get("lam"), "nit": model["fit"]["nit"],
            "passes": info.get("data_passes"), "lam_path": info.get("lam_path")}


def _plot(rows: list[dict[str, Any]], path: Path) -> str:
    from dpipe.plotting import plot_lam_path

    return plot_lam_path({f"{r['task']} ({r['objective']})": r["auto"][0]["lam_path"] for r in rows}, path)


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    import os

    from .race import _dpipe_exe

    exe = _dpipe_exe()
    tasks = list(cfg.tasks or (QUICK_TASKS if cfg.quick else TASKS))
    rows: list[dict[str, Any]] = []
    start_load = os.getloadavg()
    for task in tasks:
        train, test = _stores(task, cfg, exe)
        for objective in ("auc", "prbep-smooth") if task == "reuters" else ("auc",):
            base = [] if objective == "auc" else ["--objective", objective]
            _run(exe, train, test, base)  # warm-up (numba caches, page cache)
            fixed, auto, loads = [], [], []
            for _ in range(cfg.repeats):
                loads.append(os.getloadavg()[0])
                fixed.append(_run(exe, train, test, base))
                auto.append(_run(exe, train, test, [*base, "--lam", "auto"]))
            row = {"task": task, "objective": objective, "fixed": fixed, "auto": auto, "load": loads,
                   "wall_fixed": statistics.median(r["wall"] for r in fixed), "wall_auto": statistics.median(r["wall"] for r in auto)}
            rows.append(row)
            lp = auto[0]["lam_path"]
            print(f"  {task} {objective}: fixed lam {fixed[0]['lam']:.3g} AUC {fixed[0]['test_auc']:.5f} PRBEP {fixed[0]['test_prbep']:.4f} "
                  f"{row['wall_fixed']:.2f} s; auto lam {lp['chosen']:.3g} AUC {auto[0]['test_auc']:.5f} PRBEP {auto[0]['test_prbep']:.4f} "
                  f"{row['wall_auto']:.2f} s ({row['wall_auto'] / row['wall_fixed']:.2f}x); passes {auto[0]['passes']} / {fixed[0]['passes']}; "
                  f"best mean lam {lp.get('best', lp['chosen']):.3g}; path {lp['lams']} {[round(s, 5) for s in lp['scores']]}",
                  flush=True)
    figure = _plot(rows, cfg.out_dir / "lam-auto.png")
    payload = {"rows": rows, "load_start": start_load, "load_end": os.getloadavg(), "figure": figure}
    return payload, markdown(payload)


def _one_se(lp: dict[str, Any]) -> str:
    """The ``lam`` a one-standard-error rule would have chosen from the recorded folds (the strongest whose mean is within one
    standard error of the best mean): not what the path chooses, shown beside it ("-" with one fold)."""
    se = lp.get("score_se") or []
    if not se or se[0] is None:
        return "-"
    i = lp["lams"].index(lp["chosen"])
    return f"{next(lam for lam, s in zip(lp['lams'], lp['scores']) if s >= lp['scores'][i] - se[i]):.3g}"


def markdown(payload: dict[str, Any]) -> str:
    lines = ["Whole process `dpipe train TRAIN --out M -q` (defaults) against `... --lam auto`, interleaved, median of the runs; "
             f"load average {payload['load_start'][0]:.2f} at the start, {payload['load_end'][0]:.2f} at the end (2 shared cores). "
             "Peers: recorded (race.md, text.md). The data passes (the fit's own, from the model file) are the load-free cost.", ""]
    lines += table_head(["task", "objective", "fixed lam", "fixed test AUC", "auto lam", "folds", "1-SE lam", "auto test AUC", "auto test PRBEP",
                         "best-mean lam", "fixed s", "auto s", "auto / fixed", "passes auto / fixed", "liblinear best C AUC", "SVM-perf AUC", "auto >= peers - 5e-4",
                         "held-out measure along the path (mean of the folds; h: a half-step)"])
    for r in payload["rows"]:
        f, a = r["fixed"][0], r["auto"][0]
        peers = PEERS.get(r["task"])
        ok = "-" if peers is None or r["objective"] != "auc" else ("yes" if a["test_auc"] >= max(peers) - 5e-4 else "**no**")
        if r["task"] == "reuters" and r["objective"] == "prbep-smooth":
            ok = "yes" if a["test_prbep"] >= SVMPERF_REUTERS_PRBEP - 5e-4 else "**no**"
        lp = a["lam_path"]
        path = ", ".join(f"{lam:.3g}{'h' if half else ''}: {s:.5f}" for lam, s, half in zip(lp["lams"], lp["scores"], lp.get("refined") or [False] * len(lp["lams"])))
        lines.append(f"| {r['task']} | {r['objective']} | {f['lam']:.3g} | {f['test_auc']:.5f} | {lp['chosen']:.3g} | {lp.get('folds', 1)} | "
                     f"{_one_se(lp)} | {a['test_auc']:.5f} | "
                     f"{a['test_prbep']:.4f} | {lp.get('best', lp['chosen']):.3g} | {r['wall_fixed']:.2f} | {r['wall_auto']:.2f} | {r['wall_auto'] / r['wall_fixed']:.2f}x | "
                     f"{a['passes']} / {f['passes']} = {a['passes'] / f['passes']:.1f}x | "
                     f"{peers[0] if peers else '-'} | {peers[1] if peers else '-'} | {ok} | {path} |")
    worse = [f"{r['task']} ({r['objective']})" for r in payload["rows"]
             if (r["auto"][0]["test_prbep"] - r["fixed"][0]["test_prbep"] if r["objective"].startswith("prbep") else
                 r["auto"][0]["test_auc"] - r["fixed"][0]["test_auc"]) < -5e-4]
    slow = [r["task"] for r in payload["rows"] if r["wall_auto"] > 3 * r["wall_fixed"]]
    lines += ["", f"lam='auto' below the fixed default by more than 5e-4 (test AUC; PRBEP for prbep-smooth): {', '.join(worse) or 'none'}; "
              f"more than 3x the fixed fit's whole process: {', '.join(slow) or 'none'}. The default stays the fixed lam where auto loses."]
    if payload.get("figure"):
        lines += ["", f"![lam path]({Path(payload['figure']).name})"]
    return "\n".join(lines) + "\n"
