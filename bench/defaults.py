"""Wall time of the default ``dpipe train STORE --objective auc-smooth`` against the best flags, before and after.

Usage::

    python bench/defaults.py [--repeats 3] [--datasets a9a,w8a,kdd99,adult] [--before /tmp/base] [--cap 600]

Every run is a subprocess ``dpipe -q train STORE --objective auc-smooth ... --out TMP`` (the
venv's ``dpipe`` console script) timed from launch to exit: imports, the cluster if any, the
data passes, the solve, the training metrics and the model file, i.e. what a user waits for.
"after" runs this tree (no ``PYTHONPATH``); "before" runs the same script with
``PYTHONPATH=--before`` (a checkout of the previous version), both from a temporary working
directory so neither tree shadows the other; a probe checks which ``dpipe`` each imports.

Variants (all on the training store only):

- after, default: no flags (engine auto, precondition auto = moments, init auto = auc-moment);
- after, best local: ``--engine local --precondition moments --init auc-moment``;
- after, best dask: ``--engine dask --precondition moments --init auc-moment``;
- after, best + ``--standardize`` (kdd99 only; a different objective: the ridge acts on the
  standardized weights, as in SVM-perf's race; reported apart, not counted as "best");
- before, default: no flags (engine dask, no preconditioner, w = 0);
- before, best: ``--engine local --precondition moments --init auc-moment``.

Each dataset first gets one untimed warm-up round (every variant with ``--max-iter 3``: numba's
on-disk cache of each tree and the page cache of the store). Then ``--repeats`` rounds, each
running every variant once, in an order rotated by one per round, so machine load falls on all
variants alike. A run longer than ``--cap`` seconds is killed (its process group) and recorded
as capped; a capped variant is not run again. Reported per variant: the median wall time (min-max),
``nit``, ``nfev``, the fit's ``fun`` (J) and the training ROC-AUC from the model file, and the
engine it ran on. "x best" is a variant's median over the fastest median among the same tree's
best-flag variants (standardize excluded).

Writes ``bench/results/defaults.json`` (every run, the machine, load averages, library versions,
the commits of both trees) and ``bench/results/defaults.md``, each through a temporary name.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from datasets import DATASETS, bench_parser, ingest_pair  # noqa: E402

from bench._harness import _atomic_write, machine  # noqa: E402

BEST = ["--precondition", "moments", "--init", "auc-moment"]

#: key -> (tree, label, flags, role); role "default", "best" or "apart"
VARIANTS: dict[str, tuple[str, str, list[str], str]] = {
    "after-default": ("after", "after: default", [], "default"),
    "after-best-local": ("after", "after: --engine local " + " ".join(BEST), ["--engine", "local", *BEST], "best"),
    "after-best-dask": ("after", "after: --engine dask " + " ".join(BEST), ["--engine", "dask", *BEST], "best"),
    "after-best-standardize": ("after", "after: --engine local " + " ".join(BEST) + " --standardize",
                               ["--engine", "local", *BEST, "--standardize"], "apart"),
    "before-default": ("before", "before: default", [], "default"),
    "before-best-local": ("before", "before: --engine local " + " ".join(BEST), ["--engine", "local", *BEST], "best"),
}

#: datasets that also run the standardized variant
STANDARDIZE = {"kdd99"}


def variants_for(name: str) -> list[str]:
    return [k for k in VARIANTS if k != "after-best-standardize" or name in STANDARDIZE]


def env_for(tree: str, before: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if tree == "before":
        env["PYTHONPATH"] = str(before)
    return env


def git_state(repo: Path) -> dict[str, Any]:
    """HEAD and a hash of the uncommitted diff of ``repo`` (the tree may change under us)."""
    def git(*args: str) -> str:
        r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
        return r.stdout.strip()

    diff = git("diff", "HEAD", "--", "dpipe")
    return {"head": git("rev-parse", "HEAD"), "subject": git("log", "-1", "--format=%s")[:120],
            "dpipe_diff_sha1": hashlib.sha1(diff.encode()).hexdigest() if diff else None}


def probe(tree: str, before: Path, cwd: str) -> dict[str, Any]:
    """Which dpipe the tree's subprocesses import (the console script's own interpreter)."""
    code = "import json, dpipe, dpipe.cli.main as m; print(json.dumps({'file': dpipe.__file__, 'version': getattr(dpipe, '__version__', '?')}))"
    r = subprocess.run([sys.executable, "-c", code], env=env_for(tree, before), cwd=cwd, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_one(dpipe_exe: str, store: str, flags: list[str], env: dict[str, str], cwd: str, cap: float) -> dict[str, Any]:
    """One timed ``dpipe -q train`` subprocess; the model file's fit record and metrics."""
    out = Path(cwd) / "model.json"
    if out.exists():
        out.unlink()
    cmd = [dpipe_exe, "-q", "train", store, "--objective", "auc-smooth", *flags, "--out", str(out)]
    load = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    capped = False
    try:
        stdout, stderr = proc.communicate(timeout=cap)
    except subprocess.TimeoutExpired:
        capped = True
        os.killpg(proc.pid, signal.SIGKILL)  # the run's own process group (its dask workers too)
        stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    rec: dict[str, Any] = {"wall": wall, "capped": capped, "returncode": proc.returncode, "load_before": list(load),
                           "stderr": [ln for ln in stderr.splitlines() if ln.strip()][-5:], "flags": flags}
    if capped or proc.returncode != 0 or not out.exists():
        rec["ok"] = False
        return rec
    m = json.loads(out.read_text())
    fit, info = m["fit"], m["fit"].get("info", {})
    rec.update(
        ok=True, nit=fit["nit"], nfev=fit["nfev"], fun=fit["fun"], J_exact=info.get("J"), success=fit.get("success"),
        message=fit.get("message"), time_data=fit.get("time_data"), time_solve=fit.get("time_solve"),
        train_auc=m.get("metrics", {}).get("train", {}).get("roc_auc"), engine=m.get("training", {}).get("engine"),
        preconditioner=info.get("preconditioner"), init=info.get("init"), standardized=info.get("standardized"),
        setup_passes=info.get("setup_passes"), params=m.get("params"),
        monitor_seconds=sum(h.get("seconds_monitor", 0.0) for h in fit.get("history") or []),
    )
    return rec


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r.get("ok")]
    walls = [r["wall"] for r in runs]
    s: dict[str, Any] = {"n": len(runs), "n_ok": len(ok), "capped": any(r["capped"] for r in runs)}
    if walls:
        s.update(median=float(np.median(walls)), min=min(walls), max=max(walls))
    for key in ("nit", "nfev", "fun", "train_auc", "engine", "time_data", "time_solve", "monitor_seconds"):
        vals = [r[key] for r in ok if r.get(key) is not None]
        if not vals:
            continue
        if isinstance(vals[0], str):
            s[key] = sorted(set(vals))
        else:
            s[key] = {"median": float(np.median(vals)), "min": min(vals), "max": max(vals)}
    s["success"] = [bool(r.get("success")) for r in ok]
    s["max_iter"] = max([(r.get("params") or {}).get("max_iter", 500) for r in ok], default=500)
    return s


def fmt_range(s: dict[str, Any] | None, fmt: str) -> str:
    if not s:
        return "-"
    lo, hi = fmt.format(s["min"]), fmt.format(s["max"])
    return lo if lo == hi else f"{fmt.format(s['median'])} ({lo}-{hi})"


def ratios(ds: dict[str, Any]) -> dict[str, float | None]:
    """Median of each variant over the fastest best-flag median of its own tree, plus cross-tree ratios."""
    summ = ds["summary"]
    med = {k: v.get("median") for k, v in summ.items() if not v.get("capped") and v.get("n_ok") == v.get("n")}
    out: dict[str, Any] = {}
    for tree in ("after", "before"):
        best = [k for k, (t, _, _, role) in VARIANTS.items() if t == tree and role == "best" and med.get(k)]
        if not best:
            continue
        b = min(best, key=lambda k: med[k])
        out[f"{tree}_best_variant"] = b
        for k in summ:
            if VARIANTS[k][0] == tree and med.get(k):
                out[k] = med[k] / med[b]
    if med.get("after-default") and med.get("before-default"):
        out["before_default_over_after_default"] = med["before-default"] / med["after-default"]
    if med.get("after-best-local") and med.get("before-best-local"):
        out["after_best_local_over_before_best_local"] = med["after-best-local"] / med["before-best-local"]
    return out


def markdown(payload: dict[str, Any]) -> str:
    m = payload["machine"]
    lines = [
        "# Default `dpipe train STORE --objective auc-smooth` against the best flags, before and after",
        "",
        f"`python bench/defaults.py --repeats {payload['repeats']} --datasets {','.join(payload['datasets'])} --before {payload['before']}`;"
        f" {m['cpus']} CPUs, load average {payload['load_start'][0]:.2f} / {payload['load_start'][1]:.2f} / {payload['load_start'][2]:.2f} (1/5/15 min) at the start,"
        f" {payload['load_end'][0]:.2f} / {payload['load_end'][1]:.2f} / {payload['load_end'][2]:.2f} at the end; the whole run took {payload['seconds'] / 60:.1f} minutes.",
        f"after = {payload['trees']['after']['head'][:9]} ({payload['trees']['after']['probe']['file']}),"
        f" before = {payload['trees']['before']['head'][:9]} ({payload['trees']['before']['probe']['file']}).",
        "",
        "Wall time of the whole `dpipe -q train` subprocess (imports, cluster, passes, solve, metrics, model file), median (min-max) of"
        f" {payload['repeats']} runs interleaved within each round. nit, J (the fit's `fun`) and the training ROC-AUC are from the model file."
        " solve s: the fit's own `time_solve` (median). converged: L-BFGS met its tolerance (`fit.success`)."
        " x best: median over the fastest best-flag median of the same tree (the standardized row is a different objective and is not a candidate).",
        "",
    ]
    for name, ds in payload["results"].items():
        lines += [f"## {name}", "", "| variant | engine | median wall s (min-max) | solve s | nit | nfev | converged | J | train AUC | x best |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        r = ds["ratios"]
        for k, s in ds["summary"].items():
            wall = fmt_range(s, "{:.2f}") if "median" in s else "-"
            if s.get("capped"):
                wall = f">{payload['cap']:.0f} (capped)"
            ratio = f"{r[k]:.2f}" if k in r else "-"
            eng = ",".join(s.get("engine", ["-"]))
            conv = {(True,): "yes", (False,): "no (iteration limit)" if s.get("nit") and s["nit"]["max"] >= s.get("max_iter", 500) else "no"}.get(
                tuple(sorted(set(s.get("success", [])))), "mixed" if s.get("success") else "-")
            solve = f"{s['time_solve']['median']:.2f}" if s.get("time_solve") else "-"
            lines.append(f"| {VARIANTS[k][1]} | {eng} | {wall} | {solve} | {fmt_range(s.get('nit'), '{:.0f}')} | {fmt_range(s.get('nfev'), '{:.0f}')} | {conv} |"
                         f" {fmt_range(s.get('fun'), '{:.8f}')} | {fmt_range(s.get('train_auc'), '{:.6f}')} | {ratio} |")
        lines.append("")
        notes = []
        if "after-default" in r:
            notes.append(f"after: default / best ({r['after_best_variant']}) = {r['after-default']:.2f}")
        if "before-default" in r:
            notes.append(f"before: default / best = {r['before-default']:.2f}")
        if "before_default_over_after_default" in r:
            notes.append(f"before default / after default = {r['before_default_over_after_default']:.2f}")
        if "after_best_local_over_before_best_local" in r:
            notes.append(f"after best local / before best local = {r['after_best_local_over_before_best_local']:.2f}")
        if notes:
            lines += ["; ".join(notes) + ".", ""]
    return "\n".join(lines)


def write(a: Any, payload: dict[str, Any]) -> None:
    js, md = a.out.with_suffix(".json"), a.out.with_suffix(".md")
    _atomic_write(js, json.dumps(payload, indent=1, default=float) + "\n")
    if payload["results"]:
        _atomic_write(md, markdown(payload).rstrip() + "\n")


def main() -> None:
    ap = bench_parser(__doc__, "a9a,w8a,kdd99,adult", "defaults")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--before", type=Path, default=Path("/tmp/base"))
    ap.add_argument("--cap", type=float, default=600.0, help="seconds after which a run is killed and recorded as capped")
    ap.add_argument("--warmup-iter", type=int, default=3, help="max-iter of the untimed warm-up round per dataset (0: none)")
    a = ap.parse_args()
    datasets = a.datasets.split(",")
    unknown = [d for d in datasets if d not in DATASETS]
    if unknown:
        ap.error(f"unknown datasets {unknown}; known: {sorted(DATASETS)}")
    a.work.mkdir(parents=True, exist_ok=True)
    dpipe_exe = shutil.which("dpipe", path=str(Path(sys.executable).parent)) or shutil.which("dpipe")
    if dpipe_exe is None:
        raise SystemExit("no dpipe console script beside this interpreter")
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpipe-defaults-") as cwd:
        trees = {"after": {**git_state(HERE.parent), "probe": probe("after", a.before, cwd)},
                 "before": {**git_state(a.before), "probe": probe("before", a.before, cwd)}}
        if not trees["after"]["probe"]["file"].startswith(str(HERE.parent)):
            raise SystemExit(f"after imports {trees['after']['probe']['file']}, not this tree")
        if not trees["before"]["probe"]["file"].startswith(str(a.before.resolve())):
            raise SystemExit(f"before imports {trees['before']['probe']['file']}, not {a.before}")
        print(f"after  -> {trees['after']['probe']['file']} @ {trees['after']['head'][:9]}", flush=True)
        print(f"before -> {trees['before']['probe']['file']} @ {trees['before']['head'][:9]}", flush=True)
        payload: dict[str, Any] = {
            "suite": "defaults", "repeats": a.repeats, "datasets": datasets, "before": str(a.before), "cap": a.cap,
            "warmup_iter": a.warmup_iter, "dpipe_exe": dpipe_exe, "machine": machine(), "trees": trees,
            "load_start": list(os.getloadavg()), "variants": {k: {"tree": t, "label": label, "flags": f, "role": r} for k, (t, label, f, r) in VARIANTS.items()},
            "results": {},
        }
        for name in datasets:
            train, _ = ingest_pair(name, a.data_dir, a.work)
            keys = variants_for(name)
            ds: dict[str, Any] = {"store": train, "warmup": {}, "runs": {k: [] for k in keys}, "order": [],
                                  "after_state_start": git_state(HERE.parent)}
            print(f"{name}: {train}", flush=True)
            if a.warmup_iter > 0:
                for k in keys:
                    tree, _, flags, _ = VARIANTS[k]
                    w = run_one(dpipe_exe, train, [*flags, "--max-iter", str(a.warmup_iter)], env_for(tree, a.before), cwd, a.cap)
                    ds["warmup"][k] = {"wall": w["wall"], "ok": w.get("ok")}
                    print(f"  warm-up {k:24s} {w['wall']:7.2f} s", flush=True)
            capped: set[str] = set()
            for rep in range(a.repeats):
                order = keys[rep % len(keys):] + keys[:rep % len(keys)]
                ds["order"].append(order)
                for k in order:
                    if k in capped:
                        continue
                    tree, _, flags, _ = VARIANTS[k]
                    rec = run_one(dpipe_exe, train, flags, env_for(tree, a.before), cwd, a.cap)
                    rec["repeat"] = rep
                    ds["runs"][k].append(rec)
                    if rec["capped"]:
                        capped.add(k)
                    desc = (f"nit {rec['nit']:4d} J {rec['fun']:.8f} AUC {rec['train_auc']:.6f} {rec['engine']}" if rec.get("ok")
                            else ("CAPPED" if rec["capped"] else f"FAILED rc={rec['returncode']}: {rec['stderr'][-1:] }"))
                    print(f"  [{rep}] {k:24s} {rec['wall']:7.2f} s  {desc}  (load {rec['load_before'][0]:.2f})", flush=True)
            ds["summary"] = {k: summarize(ds["runs"][k]) for k in keys}
            ds["after_state_end"] = git_state(HERE.parent)
            ds["ratios"] = ratios(ds)
            payload["results"][name] = ds
            payload["load_end"] = list(os.getloadavg())
            payload["seconds"] = time.perf_counter() - t_start
            write(a, payload)
        payload["load_end"] = list(os.getloadavg())
        payload["seconds"] = time.perf_counter() - t_start
        write(a, payload)
    print(markdown(payload))


if __name__ == "__main__":
    main()
