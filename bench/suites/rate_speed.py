"""rate-speed: the rate-constraint commands of docs/constraints.md, whole ``dpipe train`` processes, before and after a change.

The four commands of issue 26 (and a9a's coverage bound), each run as a user runs it:
``python -m dpipe train STORE --objective ... --constraint ... --out MODEL`` from a store
ingested beforehand (ingest not timed), with the objective's defaults:

* **kdd99 Neyman-Pearson**: ``false-negative-rate`` subject to ``false_positive_rate <= 0.01``
  (kdd99's 10 % file, attack = positive, raw columns);
* **adult 80 % rule**: ``error-rate`` subject to
  ``positive_rate(group=Female) >= 0.8 * positive_rate(group=Male)`` (adult ingested with
  its sex column as the group column);
* **a9a churn + recall**: ``error-rate`` subject to ``recall >= 0.9`` and
  ``churn(deployed.json, on=unlabeled) <= 0.05`` with ``--dataset unlabeled=POOL`` (the pool:
  a9a's test file without labels; the deployed model: error-rate under ``recall >= 0.9`` on
  a shuffled third of a9a's training file, trained once and kept);
* **adult auc-rate**: ``auc-rate`` subject to ``recall >= 0.6``, ``false_positive_rate <= 0.3``
  and the 80 % rule;
* **a9a coverage**: ``error-rate`` subject to ``coverage <= 0.1``.

``--before DIR`` (a checkout of dpipe before the change, e.g. ``git worktree add DIR HEAD``)
runs each command with ``PYTHONPATH=DIR`` too, interleaved with the current package
(before, after, before, after, ...), medians of ``--repeats``. The model files give the
training objective and each constraint's value (left minus right side; it holds at <= 0),
compared as "no worse" when the objective is at most the old one's (plus 1e-9) and every
constraint that held still holds. The machine's load average is recorded with every run
(the reference machine is shared).

A second table compares the inner problems' solvers in this process
(:func:`dpipe.fit._rates.fit_rates` with ``inner_solver="lbfgs"``, the default, and
``"newton"``, TRON with the Hessian-vector products of :mod:`dpipe.reduce._rates`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .._harness import Config, dense, fmt_spread, spread, table_head
from ..datasets import ingest_pair

FAIR = "positive_rate(group=Female) >= 0.8 * positive_rate(group=Male)"

#: name -> (label, training store key, objective, constraints, extra datasets {alias: store key})
COMMANDS: dict[str, tuple[str, str, str, list[str], dict[str, str]]] = {
    "kdd99-neyman-pearson": ("kdd99 Neyman-Pearson", "kdd99", "false-negative-rate", ["false_positive_rate <= 0.01"], {}),
    "adult-80-rule": ("adult 80 % rule", "adult", "error-rate", [FAIR], {}),
    "a9a-churn-recall": ("a9a churn + recall", "a9a", "error-rate", ["recall >= 0.9", "churn('DEPLOYED', on=unlabeled) <= 0.05"],
                         {"unlabeled": "a9a-pool"}),
    "adult-auc-rate": ("adult auc-rate, three constraints", "adult", "auc-rate", ["recall >= 0.6", "false_positive_rate <= 0.3", FAIR], {}),
    "a9a-coverage": ("a9a coverage", "a9a", "error-rate", ["coverage <= 0.1"], {}),
}
#: the acceptance's commands (issue 26: each >= 4x faster, objective and constraints no worse)
ACCEPTANCE = ("kdd99-neyman-pearson", "adult-80-rule", "a9a-churn-recall", "adult-auc-rate")
QUICK = ("adult-80-rule", "a9a-coverage")


def _stores(cfg: Config) -> dict[str, str]:
    """The training stores, the unlabelled pool and the deployed model (made once under ``cfg.work``)."""
    import dpipe
    from dpipe.testing import write_store

    out = {"kdd99": ingest_pair("kdd99", cfg.data_dir, cfg.work)[0], "adult": ingest_pair("adult", cfg.data_dir, cfg.work)[0]}
    out["a9a"] = ingest_pair("a9a", cfg.data_dir, cfg.work)[0]
    pool = cfg.work / "a9a-unlabeled-pool.zarr"
    if not pool.exists():
        dpipe.ingest(str(cfg.data_dir / "a9a.t.gz"), str(pool), like=out["a9a"], unlabeled=True, overwrite=True)
    out["a9a-pool"] = str(pool)
    deployed = cfg.work / "rate-speed-deployed.json"
    if not deployed.exists():
        sh = dpipe.open_store(out["a9a"]).read_all()
        third = np.random.RandomState(0).permutation(sh.n_rows)[: sh.n_rows // 3]
        part = cfg.work / "a9a-first-third.zarr"
        if not part.exists():
            write_store(part, dense(sh.X)[third], sh.y[third])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpipe.ConvergenceWarning)
            dpipe.train(str(part), "error-rate", engine="local", train_metrics=False, constraints=["recall >= 0.9"], out=str(deployed))
    out["deployed"] = str(deployed)
    return out


def _argv(name: str, stores: dict[str, str], out: Path) -> list[str]:
    _, train, objective, constraints, extra = COMMANDS[name]
    argv = [sys.executable, "-m", "dpipe", "-q", "train", stores[train], "--objective", objective]
    for c in constraints:
        argv += ["--constraint", c.replace("DEPLOYED", stores["deployed"])]
    for alias, key in extra.items():
        argv += ["--dataset", f"{alias}={stores[key]}"]
    return argv + ["--out", str(out), "--overwrite"]


def _run(name: str, stores: dict[str, str], out: Path, pythonpath: str) -> dict[str, Any]:
    """One whole ``dpipe train`` process: its seconds and what its model file says."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    # cwd: a folder without a dpipe package (``python -m`` puts the working directory first on sys.path, before PYTHONPATH)
    proc = subprocess.run(_argv(name, stores, out), env=env, capture_output=True, text=True, timeout=7200, cwd=out.parent)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{name} ({pythonpath}): exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    model = json.loads(out.read_text())
    fit = model["fit"]
    constraints = fit["info"]["constraints"]
    return {"seconds": seconds, "load_before": load, "load_after": os.getloadavg()[0], "objective": float(fit["fun"]),
            "constraints": [float(c["value"]) for c in constraints], "satisfied": [bool(c["satisfied"]) for c in constraints],
            "mm_steps": int(fit["nit"]), "evaluations": int(fit["nfev"]), "solve_seconds": float(fit.get("time_solve") or float("nan"))}


def _no_worse(before: dict[str, Any], after: dict[str, Any]) -> bool:
    held = all(a or not b for a, b in zip(after["satisfied"], before["satisfied"]))
    return after["objective"] <= before["objective"] + 1e-9 and held


def _inner_solvers(cfg: Config, stores: dict[str, str], names: tuple[str, ...]) -> dict[str, Any]:
    """In this process: each command's fit with L-BFGS and with TRON on the inner problems (interleaved, medians)."""
    import dpipe
    from dpipe.engine import LocalDataset
    from dpipe.fit import resolve
    from dpipe.fit._rates import deployed_model, fit_rates
    from dpipe.rates import parse_constraint

    out: dict[str, Any] = {}
    for name in names:
        _, train, objective, constraints, extra = COMMANDS[name]
        datasets = {"train": LocalDataset(stores[train]), **{a: LocalDataset(stores[k]) for a, k in extra.items()}}
        parsed = [parse_constraint(c.replace("DEPLOYED", stores["deployed"])) for c in constraints]
        params = resolve(objective, {"constraints": parsed}, "bench")
        runs: dict[str, list[dict[str, Any]]] = {"lbfgs": [], "newton": []}
        for _ in range(cfg.repeats):
            for solver in runs:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", dpipe.ConvergenceWarning)
                    fit = fit_rates(datasets, params, load_model=deployed_model, inner_solver=solver)
                runs[solver].append({"seconds": fit.seconds, "evaluations": fit.evaluations, "hess_products": fit.hess_products,
                                     "mm_steps": fit.mm_steps, "objective": fit.reports[0].value,
                                     "satisfied": all(r.satisfied for r in fit.reports[1:])})
        for ds in datasets.values():
            ds.close()
        out[name] = {s: {"seconds": spread([r["seconds"] for r in rs]), **{k: rs[-1][k] for k in rs[-1] if k != "seconds"}}
                     for s, rs in runs.items()}
        print(f"  inner solvers, {name}: L-BFGS {out[name]['lbfgs']['seconds']['median']:.2f} s, "
              f"Newton {out[name]['newton']['seconds']['median']:.2f} s", flush=True)
    return out


def _row(res: dict[str, Any]) -> str:
    """One command's line of the Markdown table."""
    b, a = res.get("before"), res["after"]

    def cons(x: dict[str, Any]) -> str:
        return ", ".join(f"{c:+.4g}" for c in x["constraints"])

    cells = [res["label"], fmt_spread(b["seconds"], digits=1) if b else "-", fmt_spread(a["seconds"], digits=1),
             f"{res['speedup']:.1f}x" if b else "-", f"{b['objective']:.6g} / {a['objective']:.6g}" if b else f"{a['objective']:.6g}",
             cons(b) if b else "-", cons(a), f"{b['mm_steps']}, {b['evaluations']} / {a['mm_steps']}, {a['evaluations']}" if b
             else f"{a['mm_steps']}, {a['evaluations']}", str(res.get("no_worse", "-")), fmt_spread(a["load"], digits=1)]
    return "| " + " | ".join(cells) + " |"


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    import dpipe

    names = QUICK if cfg.quick else tuple(COMMANDS)
    before_dir = cfg.before
    current = str(Path(dpipe.__file__).resolve().parents[1])
    stores = _stores(cfg)
    out_dir = cfg.work / "rate-speed-models"
    out_dir.mkdir(parents=True, exist_ok=True)
    sides = [("before", str(before_dir)), ("after", current)] if before_dir else [("after", current)]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {n: {s: [] for s, _ in sides} for n in names}
    for r in range(cfg.repeats):
        for name in names:
            for side, path in sides:
                got = _run(name, stores, out_dir / f"{name}-{side}.json", path)
                runs[name][side].append(got)
                print(f"  run {r + 1} {name} {side}: {got['seconds']:.1f} s, objective {got['objective']:.6g}, "
                      f"constraints {np.round(got['constraints'], 6).tolist()}, load {got['load_before']:.1f}", flush=True)
    results: dict[str, Any] = {}
    for name in names:
        res: dict[str, Any] = {"label": COMMANDS[name][0], "command": " ".join(_argv(name, stores, Path("MODEL.json"))[2:-1])}
        for side, rs in runs[name].items():
            res[side] = {"seconds": spread([x["seconds"] for x in rs]), "load": spread([x["load_before"] for x in rs]),
                         **{k: rs[-1][k] for k in ("objective", "constraints", "satisfied", "mm_steps", "evaluations", "solve_seconds")}}
        if "before" in res:
            res["speedup"] = res["before"]["seconds"]["median"] / res["after"]["seconds"]["median"]
            res["no_worse"] = _no_worse(res["before"], res["after"])
        results[name] = res
    inner = _inner_solvers(cfg, stores, names)
    lines = ["Whole `dpipe train` processes (Python start-up, reading the store, the fit, writing the model and its training "
             "metrics) from stores ingested beforehand, defaults otherwise; medians (min-max) of "
             f"{cfg.repeats} runs, before and after interleaved. Objective: the model's training objective (the rate, or "
             "1 - training ROC-AUC for auc-rate); constraints: left minus right side on the training data (holds at <= 0).", ""]
    if before_dir:
        lines += [f"Before: `PYTHONPATH={before_dir}`; after: this checkout.", ""]
    lines += table_head(["command", "before s", "after s", "speed-up", "objective before / after", "constraints before",
                         "constraints after", "MM steps, evaluations before / after", "no worse", "load average"])
    for res in results.values():
        lines.append(_row(res))
    lines += ["", "## The inner problems' solver", "",
              "The same fits in one process (`fit_rates`, local engine), L-BFGS (the default) against TRON with the Hessian-vector "
              "products that read only the rows in a Huber zone; medians of the repeats, interleaved.", "",
              *table_head(["command", "L-BFGS s", "evaluations", "objective", "Newton s", "evaluations", "Hessian products", "objective"])]
    for name, r in inner.items():
        lb, nt = r["lbfgs"], r["newton"]
        lines.append(f"| {COMMANDS[name][0]} | {fmt_spread(lb['seconds'])} | {lb['evaluations']} | {lb['objective']:.6g} | "
                     f"{fmt_spread(nt['seconds'])} | {nt['evaluations']} | {nt['hess_products']} | {nt['objective']:.6g} |")
    return {"results": results, "inner_solvers": inner, "acceptance": list(ACCEPTANCE), "before": str(before_dir) if before_dir else None}, "\n".join(lines)
