"""race: dpipe as users run it against liblinear-ranksvm (built here) and SVM-perf (recorded), issue 26.

For each task the stores are prepared once, timed apart ("ingest"): ``dpipe ingest`` (and
``dpipe split`` for the 80/20 tasks) as subprocesses, then the same training and test rows
written as svmlight text (+1/-1 labels, 1-based indices, each value the shortest decimal
that reads back as the store's float32) for the peer. Kept under ``--work``/race and reused
with the times measured when they were made.

Timed, each the whole process as a user runs it, medians of ``--repeats``, interleaved
(dpipe, peer, dpipe, peer, ...) after one untimed dpipe run per task:

- **dpipe**: ``dpipe train TRAIN --objective OBJECTIVE --out M.json -q`` (defaults for
  everything else). Its fit time (``time_data + time_solve`` of the model's fit record) and
  iteration counts come from the model file; the test AUC from ``dpipe.evaluate`` on the
  test store (not timed).
- **liblinear-ranksvm** (built from ``../shared/peers`` into ``--work``/peers; skipped with
  a message when the folder is absent): ``train -s 8 -c C -q TRAIN.svm MODEL``, C chosen by
  test AUC from :data:`C_GRID` (one run per C), then the chosen C timed. Test AUC from
  ``predict``'s decision values with scikit-learn's ``roc_auc_score``. With ``-s 8`` the label is a
  preference level (larger = ranked higher), so no label-order sign flip happens as in
  liblinear's classifiers; the suite checks it (AUC of the values as written >= 0.5) and
  flips and reports if not.
- **SVM-perf**: not runnable here: the times and AUCs recorded in issue 26 (:data:`SVMPERF`).

A second table is the time-to-target race: dpipe's fit time up to the first Newton
iteration whose *test* AUC reaches SVM-perf's. It uses the test set to stop: an oracle no
user has. The iteration is found by a fit with ``validation=`` the test store; the time is
``time_data + time_solve`` of a second fit stopped there (``max_iter``) without the
validation passes, both in this process after a warm-up (imports, numba kernels loaded).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._harness import Config, fmt_spread, pyplot, save_figure, spread, table_head

__all__ = ["OBJECTIVE", "FALLBACK_OBJECTIVE", "C_GRID", "SVMPERF", "TASKS", "QUICK_TASKS", "run", "write_svmlight", "build_peer"]

#: the objective ``dpipe train`` is raced with (the user-facing AUC name)
OBJECTIVE = "auc"
#: used instead when this tree's registry does not know :data:`OBJECTIVE` yet
FALLBACK_OBJECTIVE = "auc-squared-hinge"
#: liblinear-ranksvm's C, chosen by test AUC
C_GRID = (0.001, 0.01, 0.1, 1.0, 10.0)
#: SVM-perf -c 100 ROCArea, whole process, one thread: (seconds, test AUC) as recorded in issue 26's table
SVMPERF = {"a9a": (3.71, 0.90210), "w8a": (2.84, 0.97775), "kdd99": (6.20, 0.99972), "kdd99-rare": (12.8, 0.99839), "covtype": (6.61, 0.82270)}
#: a liblinear-ranksvm run longer than this is killed and recorded as capped
PEER_CAP = 600.0
PEER = "liblinear-ranksvm-2.11"

KDD = "kddcup.data_10_percent.gz"
SPLIT = ["--fraction", "0.8", "--seed", "0"]


@dataclass(frozen=True)
class Task:
    """One race task: how its training and test stores are made with the dpipe CLI."""

    title: str
    source: str
    ingest: tuple[str, ...]
    test_source: str | None = None  # an official test file (ingested --like the training store); None: split the source
    split: tuple[str, ...] = ()


TASKS: dict[str, Task] = {
    "a9a": Task("a9a (official test file)", "a9a.gz", ("--n-features", "123"), "a9a.t.gz"),
    "w8a": Task("w8a (official test file)", "w8a.gz", ("--n-features", "300"), "w8a.t.gz"),
    "kdd99": Task("kdd99 attack vs normal (SVM-perf's task)", KDD, ("--label", "41", "--negative", "normal."),
                  split=(*SPLIT, "--log1p", "all", "--scale", "minmax")),
    "kdd99-rare": Task("kdd99 rare attacks (SVM-perf's task)", KDD, ("--label", "41", "--negative", "normal.,smurf.,neptune."),
                       split=(*SPLIT, "--log1p", "all", "--scale", "minmax")),
    "covtype": Task("covtype subset, Cover_Type 2 vs rest (80/20, seed 0)", "covtype-subset.csv.gz", ("--label", "Cover_Type", "--positive", "2"),
                    split=tuple(SPLIT)),
}
QUICK_TASKS = ("a9a", "w8a")


def _dpipe_exe() -> str:
    exe = shutil.which("dpipe", path=str(Path(sys.executable).parent)) or shutil.which("dpipe")
    if exe is None:
        raise SystemExit("race: no dpipe console script beside this interpreter")
    return exe


def _objective() -> str:
    from dpipe.fit import OBJECTIVES as SPECS

    return OBJECTIVE if OBJECTIVE in SPECS else FALLBACK_OBJECTIVE


def _git_state() -> dict[str, Any]:
    """HEAD and a hash of the uncommitted diff under dpipe/ (other work may be in progress in the tree)."""
    repo = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True).stdout.strip()

    diff = git("diff", "HEAD", "--", "dpipe")
    return {"head": git("rev-parse", "HEAD"), "dpipe_diff_sha1": hashlib.sha1(diff.encode()).hexdigest() if diff else None}


def _timed(cmd: list[str], cap: float | None = None, cwd: str | None = None) -> tuple[float, subprocess.CompletedProcess | None]:
    """Wall seconds of one subprocess from launch to exit; ``None`` as the result when it ran past ``cap`` seconds."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=cap, cwd=cwd)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t0, None
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    return wall, proc


# --------------------------------------------------------------------------------------------- preparing the data


def write_svmlight(X: Any, y: np.ndarray, path: Path) -> None:
    """Write ``X`` (dense or scipy sparse) and labels ``y`` (positive: > 0) as svmlight text.

    Labels ``+1`` / ``-1``, 1-based indices, zeros left out, every value the shortest decimal
    that reads back as the same float32 (``1`` for the binary datasets).
    """
    from scipy import sparse

    A = sparse.csr_matrix(X, dtype=np.float32)
    A.eliminate_zeros()
    values, inverse = np.unique(A.data, return_inverse=True)
    vtext = np.array([np.format_float_positional(v, unique=True, trim="-") for v in values], dtype=object)
    itext = np.array([f"{j + 1}:" for j in range(A.shape[1])], dtype=object)
    tokens = (itext[A.indices] + vtext[inverse.ravel()]).tolist()
    labels = np.where(np.asarray(y) > 0, "+1", "-1").tolist()
    ptr = A.indptr.tolist()
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.writelines(f"{labels[i]} {' '.join(tokens[ptr[i]:ptr[i + 1]])}\n" for i in range(A.shape[0]))
    os.replace(tmp, path)


def _io_digest() -> str:
    """A digest of dpipe's ``io`` sources: stores made by another version of ingest and split (another layout, say) are made again."""
    import dpipe.io

    h = hashlib.sha256()
    for f in sorted(Path(dpipe.io.__file__).parent.glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _prepare(name: str, cfg: Config, exe: str) -> dict[str, Any]:
    """The task's stores (dpipe CLI) and svmlight files, made once under ``--work``/race/NAME; their times as measured then."""
    import dpipe

    task = TASKS[name]
    folder = cfg.work / "race" / name
    record = folder / "prepare.json"
    paths = {"train": folder / "train.zarr", "test": folder / "test.zarr", "train_svm": folder / "train.svm", "test_svm": folder / "test.svm"}
    io_digest = _io_digest()
    prep = json.loads(record.read_text()) if record.exists() else {}
    if prep.get("io_digest") == io_digest and all(p.exists() for p in paths.values()):
        prep["reused"] = True
        print(f"  {name}: stores and svmlight files reused (made {prep['made']}: ingest {prep['ingest_seconds']:.1f} s, "
              f"svmlight {prep['svmlight_seconds']:.1f} s)", flush=True)
        return prep
    folder.mkdir(parents=True, exist_ok=True)
    src = cfg.data_dir / task.source
    commands: list[list[str]] = []
    if task.test_source is not None:
        commands.append([exe, "-q", "ingest", str(src), str(paths["train"]), *task.ingest, "--overwrite"])
        commands.append([exe, "-q", "ingest", str(cfg.data_dir / task.test_source), str(paths["test"]), "--like", str(paths["train"]), "--overwrite"])
    else:
        full = folder / "full.zarr"
        commands.append([exe, "-q", "ingest", str(src), str(full), *task.ingest, "--overwrite"])
        commands.append([exe, "-q", "split", str(full), str(paths["train"]), str(paths["test"]), *task.split, "--overwrite"])
    steps = []
    for cmd in commands:
        wall, _ = _timed(cmd)
        shown = " ".join("dpipe" if c == exe else c.replace(str(cfg.data_dir), "DATA").replace(f"{folder}/", "") for c in cmd)
        steps.append({"command": shown, "seconds": wall})
        print(f"  {name}: {steps[-1]['command']}: {wall:.1f} s", flush=True)
    if task.test_source is None:
        shutil.rmtree(folder / "full.zarr", ignore_errors=True)
    t0 = time.perf_counter()
    shapes = {}
    for part in ("train", "test"):
        data = dpipe.open_store(str(paths[part])).read_all()
        write_svmlight(data.X, data.y, paths[f"{part}_svm"])
        shapes[part] = [int(data.X.shape[0]), int(data.X.shape[1]), int(np.sum(np.asarray(data.y) > 0))]
    svm_seconds = time.perf_counter() - t0
    print(f"  {name}: svmlight files written in {svm_seconds:.1f} s", flush=True)
    prep = {"made": time.strftime("%Y-%m-%d %H:%M"), "steps": steps, "ingest_seconds": sum(s["seconds"] for s in steps),
            "svmlight_seconds": svm_seconds, "shapes": shapes, "paths": {k: str(v) for k, v in paths.items()},
            "svm_bytes": {p: paths[f"{p}_svm"].stat().st_size for p in ("train", "test")}, "load": list(os.getloadavg()),
            "io_digest": io_digest}
    record.write_text(json.dumps(prep, indent=1) + "\n")
    prep["reused"] = False
    return prep


def build_peer(cfg: Config) -> Path | None:
    """liblinear-ranksvm built into ``--work``/peers (copied from ``../shared/peers``, then ``make``); None when the source is absent."""
    source = Path(os.environ.get("DPIPE_SHARED_PEERS", cfg.data_dir.parent / "peers")) / PEER
    dest = cfg.work / "peers" / PEER
    if (dest / "train").exists() and (dest / "predict").exists():
        return dest
    if not source.is_dir():
        print(f"  liblinear-ranksvm skipped: {source} is absent (see ../shared/peers/README.md)", flush=True)
        return None
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source, dest)
    t0 = time.perf_counter()
    proc = subprocess.run(["make", "-C", str(dest), "train", "predict"], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"  liblinear-ranksvm skipped: make failed: {proc.stderr.strip()[-400:]}", flush=True)
        return None
    print(f"  built liblinear-ranksvm in {time.perf_counter() - t0:.1f} s ({dest})", flush=True)
    return dest


# --------------------------------------------------------------------------------------------- the runs


def _dpipe_run(exe: str, objective: str, prep: dict[str, Any], tmp: str) -> dict[str, Any]:
    """One whole ``dpipe train`` process; the fit record from its model file; test AUC (not timed)."""
    import dpipe

    out = Path(tmp) / "dpipe-model.json"
    out.unlink(missing_ok=True)
    load = os.getloadavg()[0]
    wall, proc = _timed([exe, "train", prep["paths"]["train"], "--objective", objective, "--out", str(out), "-q"], cwd=tmp)
    assert proc is not None
    m = json.loads(out.read_text())
    fit, info = m["fit"], m["fit"].get("info") or {}
    solver = info.get("solver") or (m.get("params") or {}).get("solver")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auc = float(dpipe.evaluate(str(out), prep["paths"]["test"], engine="local")["roc_auc"])
    return {"wall": wall, "fit": fit["time_data"] + fit["time_solve"], "time_data": fit["time_data"], "time_solve": fit["time_solve"],
            "solver": solver, "nit": fit["nit"], "nfev": fit["nfev"], "cg_steps": info.get("cg_steps"), "message": fit.get("message"),
            "success": fit.get("success"), "engine": (m.get("training") or {}).get("engine"), "test_auc": auc, "load": load,
            "stderr": [ln for ln in proc.stderr.splitlines() if ln.strip()][-3:]}


def _peer_run(peer: Path, C: float, prep: dict[str, Any], tmp: str) -> dict[str, Any]:
    """One whole ``train -s 8`` process from the svmlight file; test AUC from ``predict``'s decision values (not timed)."""
    from sklearn.metrics import roc_auc_score

    model, out = Path(tmp) / "peer.model", Path(tmp) / "peer.out"
    load = os.getloadavg()[0]
    wall, proc = _timed([str(peer / "train"), "-s", "8", "-c", f"{C:g}", "-q", prep["paths"]["train_svm"], str(model)], cap=PEER_CAP, cwd=tmp)
    if proc is None:
        return {"C": C, "wall": wall, "capped": True, "test_auc": None, "load": load}
    pred = subprocess.run([str(peer / "predict"), prep["paths"]["test_svm"], str(model), str(out)], capture_output=True, text=True, check=True)
    scores = np.loadtxt(out, dtype=np.float64, ndmin=1)
    with open(prep["paths"]["test_svm"]) as f:
        y = np.array([line.split(None, 1)[0] == "+1" for line in f])
    auc = float(roc_auc_score(y, scores))
    flipped = auc < 0.5
    pairwise = next((ln.split("=")[1].strip() for ln in pred.stdout.splitlines() if ln.startswith("Pairwise Accuracy")), None)
    return {"C": C, "wall": wall, "capped": False, "test_auc": 1.0 - auc if flipped else auc, "sign_flipped": flipped,
            "predict_pairwise_accuracy": pairwise, "load": load}


def _oracle(objective: str, prep: dict[str, Any], target: float, repeats: int) -> dict[str, Any]:
    """Fit time up to the first iteration whose test AUC reaches ``target`` (the test set used to stop)."""
    import dpipe

    train, test = prep["paths"]["train"], prep["paths"]["test"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hist = dpipe.train(train, objective, validation=test, train_metrics=False).fit["history"]
        first = next((h for h in hist if h["validation_auc"] >= target), None)
        rec: dict[str, Any] = {"target": target, "best_test_auc": max(h["validation_auc"] for h in hist), "iterations_run": len(hist),
                               "trace": [(h["iteration"], h["validation_auc"]) for h in hist]}
        if first is None:
            return {**rec, "iteration": None, "seconds": None}
        runs = []
        for _ in range(repeats):
            fit = dpipe.train(train, objective, max_iter=first["iteration"], train_metrics=False).fit
            runs.append(fit["time_data"] + fit["time_solve"])
    return {**rec, "iteration": first["iteration"], "test_auc_there": first["validation_auc"], "seconds": spread(runs)}


# --------------------------------------------------------------------------------------------- report


def _yes(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "**no**")


def _checks(r: dict[str, Any]) -> dict[str, bool | None]:
    d, p = r["dpipe"], r.get("peer")
    sp_s, sp_auc = SVMPERF[r["task"]]
    pw = p["wall"]["median"] if p else None
    pa = p["test_auc"] if p else None
    return {
        "whole_le_peer_plus_0.5": None if pw is None else d["wall"]["median"] <= pw + 0.5,
        "fit_le_peer_whole": None if pw is None else d["fit"]["median"] <= pw,
        "auc_ge_peer_minus_5e-4": None if pa is None else d["test_auc"] >= pa - 5e-4,
        "auc_ge_svmperf_minus_5e-4": d["test_auc"] >= sp_auc - 5e-4,
        "5x_faster_than_svmperf": None if sp_s < 2 else sp_s / d["wall"]["median"] >= 5,
    }


def _iterations(d: dict[str, Any]) -> str:
    if d["solver"] == "newton":
        return f"{d['nit']} Newton / {d['cg_steps']} CG"
    return f"{d['nit']} {d['solver'] or ''} ({d['nfev']} evals)".strip()


def _markdown(payload: dict[str, Any]) -> str:
    rows, objective = payload["results"], payload["objective"]
    lines = [
        f"`python -m bench race` in {payload['tree']['head'][:9]}" + (" (uncommitted changes under dpipe/)" if payload["tree"]["dpipe_diff_sha1"] else "")
        + f"; load average {payload['load_start'][0]:.2f} / {payload['load_start'][1]:.2f} / {payload['load_start'][2]:.2f} (1/5/15 min) at the start,"
        f" {payload['load_end'][0]:.2f} / {payload['load_end'][1]:.2f} / {payload['load_end'][2]:.2f} at the end (2 shared cores).",
        "",
        f"Whole process as a user runs it, median (min-max) of {payload['repeats']} runs, interleaved dpipe / liblinear-ranksvm, after one untimed dpipe run per task."
        f" **dpipe**: `dpipe train TRAIN.zarr --objective {objective} --out M.json -q` (defaults otherwise), from a store ingested beforehand;"
        " *fit* = `time_data + time_solve` of the model's fit record (data passes + solve). **liblinear-ranksvm**: `train -s 8 -c C -q TRAIN.svm MODEL`"
        " from the svmlight text file, C chosen by test AUC from " + ", ".join(f"{c:g}" for c in C_GRID) + " (one run each, table 3). Test AUC: dpipe's"
        " model on the test store, liblinear's `predict` decision values (`-s 8` ranks by label value: no sign flip, checked)."
        " **SVM-perf** (`-c 100`, ROCArea): recorded (issue 26), not run here.",
        *(["", f"**The machine was loaded** (1-minute load average {payload['load_start'][0]:.1f} at the start on {os.cpu_count()} cores): dpipe and"
             " liblinear-ranksvm are interleaved and share it alike, but SVM-perf's recorded times come from a quiet machine, so the"
             " SVM-perf columns are unfair to dpipe here; rerun on a quiet machine for the acceptance."]
          if payload["load_start"][0] > (os.cpu_count() or 1) else []),
        "",
        "## 1. Headline (the checks are issue 26's acceptance)",
        "",
        *table_head(["task", "rows x features (train / test)", "dpipe whole s", "dpipe fit s", "dpipe iterations", "dpipe test AUC", "liblinear C",
                     "liblinear whole s", "liblinear test AUC", "SVM-perf s / AUC (recorded)", "whole <= liblinear + 0.5 s", "fit <= liblinear whole",
                     "AUC >= liblinear - 5e-4", "AUC >= SVM-perf - 5e-4", ">= 5x faster than SVM-perf"]),
    ]
    for r in rows:
        d, p, c, shp = r["dpipe"], r.get("peer"), r["checks"], r["prepare"]["shapes"]
        sp_s, sp_auc = SVMPERF[r["task"]]
        lines.append(
            f"| {r['task']} | {shp['train'][0]:,} x {shp['train'][1]} / {shp['test'][0]:,} | {fmt_spread(d['wall'])} | {fmt_spread(d['fit'])} |"
            f" {_iterations(d)} | {d['test_auc']:.5f} | " + (f"{p['C']:g} | {fmt_spread(p['wall'])} | {p['test_auc']:.5f}" if p else "- | skipped | -")
            + f" | {sp_s} / {sp_auc:.5f} | {_yes(c['whole_le_peer_plus_0.5'])} | {_yes(c['fit_le_peer_whole'])} | {_yes(c['auc_ge_peer_minus_5e-4'])} |"
            f" {_yes(c['auc_ge_svmperf_minus_5e-4'])} | {_yes(c['5x_faster_than_svmperf'])}"
            + (f" ({SVMPERF[r['task']][0] / d['wall']['median']:.1f}x)" if c["5x_faster_than_svmperf"] is not None else "") + " |")
    lines += ["", "Per run (seconds; load average before the run):", ""]
    for r in rows:
        d_runs = ", ".join(f"{x['wall']:.2f} ({x['load']:.1f})" for x in r["dpipe_runs"])
        p_runs = ", ".join(f"{x['wall']:.2f} ({x['load']:.1f})" for x in r["peer_runs"]) if r.get("peer_runs") else "-"
        lines.append(f"- {r['task']}: dpipe {d_runs} [{r['dpipe']['message']}; engine {r['dpipe']['engine']}]; liblinear {p_runs}")
    lines += ["", "## 2. Time to SVM-perf's test AUC — uses the test set to stop (an oracle no user has)", "",
              f"dpipe `{objective}` with defaults in this process (warmed up): the first Newton iteration whose test AUC reaches SVM-perf's recorded one"
              " (found with `validation=` the test store), then the fit stopped there by `max_iter` without validation passes:"
              " `time_data + time_solve`, median (min-max).", "",
              *table_head(["task", "SVM-perf s / AUC (recorded)", "dpipe s to that AUC", "iteration (test AUC there)", "speed-up over SVM-perf",
                           "best test AUC of the default fit's iterates"])]
    for r in rows:
        o, (sp_s, sp_auc) = r["oracle"], SVMPERF[r["task"]]
        if o["seconds"] is None:
            lines.append(f"| {r['task']} | {sp_s} / {sp_auc:.5f} | not reached | - | - | {o['best_test_auc']:.5f} |")
        else:
            lines.append(f"| {r['task']} | {sp_s} / {sp_auc:.5f} | {fmt_spread(o['seconds'], digits=3)} | {o['iteration']} ({o['test_auc_there']:.5f}) |"
                         f" {sp_s / o['seconds']['median']:.1f}x | {o['best_test_auc']:.5f} |")
    lines += ["", "## 3. Preparation (once, timed apart) and liblinear-ranksvm's C", "",
              *table_head(["task", "ingest s (dpipe CLI)", "svmlight files s", "svmlight MB (train / test)", "made"]
                          + [f"C {c:g}: s / test AUC" for c in C_GRID])]
    for r in rows:
        pr = r["prepare"]
        grid = {g["C"]: g for g in r.get("peer_grid") or []}
        cells = [("capped" if grid[c]["capped"] else f"{grid[c]['wall']:.2f} / {grid[c]['test_auc']:.5f}") if c in grid else "-" for c in C_GRID]
        lines.append(f"| {r['task']} | {pr['ingest_seconds']:.1f} | {pr['svmlight_seconds']:.1f} | {pr['svm_bytes']['train'] / 1e6:.1f} / {pr['svm_bytes']['test'] / 1e6:.1f} |"
                     f" {pr['made']}{' (reused)' if pr.get('reused') else ''} | " + " | ".join(cells) + " |")
    lines += ["", "Ingest commands: " + "; ".join(f"{r['task']}: " + " && ".join(f"`{s['command']}`" for s in r["prepare"]["steps"]) for r in rows) + "."]
    if payload.get("peer_missing"):
        lines += ["", f"liblinear-ranksvm: {payload['peer_missing']}"]
    return "\n".join(lines)


def _plot(rows: list[dict[str, Any]], dest: Path) -> None:
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    n = len(rows)
    ncols = min(3, n)
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 4.3 * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax, r in zip(axes.flat, rows):
        d, p = r["dpipe"], r.get("peer")
        sp_s, sp_auc = SVMPERF[r["task"]]
        bars = [("dpipe", d["wall"]["median"], d["test_auc"], "tab:blue", None),
                (f"liblinear\nC={p['C']:g}" if p else "liblinear\n(skipped)", p["wall"]["median"] if p else np.nan, p["test_auc"] if p else None, "tab:orange", None),
                ("SVM-perf\n(recorded)", sp_s, sp_auc, "tab:gray", "//")]
        for i, (label, sec, auc, color, hatch) in enumerate(bars):
            if np.isnan(sec):
                continue
            ax.bar(i, sec, color=color, alpha=0.85, hatch=hatch, edgecolor="black", linewidth=0.5)
            ax.text(i, sec * 1.12, f"{sec:.2f} s\nAUC {auc:.5f}", ha="center", va="bottom", fontsize=8.5)
        ax.bar(0, d["fit"]["median"], color="navy", width=0.5, label=f"dpipe fit {d['fit']['median']:.2f} s")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
        ax.set_xticks(range(3), [b[0] for b in bars], fontsize=9)
        top = max(d["wall"]["median"], sp_s, p["wall"]["median"] if p else 0)
        low = min(d["fit"]["median"], p["wall"]["median"] if p else sp_s)
        ax.set_ylim(low / 3, top * 4)
        shp = r["prepare"]["shapes"]["train"]
        ax.set_title(f"{r['task']}: {shp[0]:,} x {shp[1]}", fontsize=10)
        ax.set_ylabel("seconds, whole process (log)", fontsize=9)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("Whole process as users run it (median of the runs; dark: dpipe's fit)\nSVM-perf: recorded in issue 26, not run here", fontsize=10)
    save_figure(fig, dest)


# --------------------------------------------------------------------------------------------- suite


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    """Prepare, race and report every task (``cfg.tasks`` or all; ``--quick``: a9a and w8a, one run)."""
    import dpipe

    from .._harness import warm_up

    repeats = 1 if cfg.quick else cfg.repeats
    names = list(cfg.tasks or (QUICK_TASKS if cfg.quick else TASKS))
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        raise SystemExit(f"race: unknown tasks {unknown}; known: {', '.join(TASKS)}")
    exe, objective = _dpipe_exe(), _objective()
    if objective != OBJECTIVE:
        print(f"  this tree does not know --objective {OBJECTIVE} yet: racing {objective}", flush=True)
    payload: dict[str, Any] = {"objective": objective, "tasks": names, "repeats": repeats, "c_grid": list(C_GRID), "svmperf_recorded": SVMPERF,
                               "tree": _git_state(), "load_start": list(os.getloadavg()), "dpipe_exe": exe}
    peer = build_peer(cfg)
    if peer is None:
        payload["peer_missing"] = "skipped: the peer's source folder is absent or did not build"
    rows = []
    with tempfile.TemporaryDirectory(prefix="dpipe-race-") as tmp:
        preps = {n: _prepare(n, cfg, exe) for n in names}
        print(f"  warm-up (this process, for the oracle table): {warm_up(dpipe, None, cfg.work, objectives=(objective,)):.1f} s", flush=True)
        for name in names:
            prep = preps[name]
            r: dict[str, Any] = {"task": name, "title": TASKS[name].title, "prepare": prep}
            if peer is not None:
                grid = []
                for C in C_GRID:
                    g = _peer_run(peer, C, prep, tmp)
                    grid.append(g)
                    print(f"  {name}: liblinear C={C:g}: " + ("capped" if g["capped"] else f"{g['wall']:.2f} s, test AUC {g['test_auc']:.5f}"
                          + (" (sign flipped)" if g["sign_flipped"] else "")), flush=True)
                r["peer_grid"] = grid
                ok = [g for g in grid if not g["capped"]]
                best_C = max(ok, key=lambda g: g["test_auc"])["C"] if ok else None
            warm = _dpipe_run(exe, objective, prep, tmp)
            print(f"  {name}: dpipe untimed first run {warm['wall']:.2f} s", flush=True)
            d_runs, p_runs = [], []
            for rep in range(repeats):
                d_runs.append(_dpipe_run(exe, objective, prep, tmp))
                x = d_runs[-1]
                print(f"  [{rep}] {name}: dpipe {x['wall']:.2f} s (fit {x['fit']:.2f} s, {_iterations(x)}), test AUC {x['test_auc']:.5f}, load {x['load']:.2f}",
                      flush=True)
                if peer is not None and best_C is not None:
                    p_runs.append(_peer_run(peer, best_C, prep, tmp))
                    x = p_runs[-1]
                    print(f"  [{rep}] {name}: liblinear C={best_C:g} " + ("capped" if x["capped"] else f"{x['wall']:.2f} s, test AUC {x['test_auc']:.5f}")
                          + f", load {x['load']:.2f}", flush=True)
            last = d_runs[-1]
            r["dpipe_runs"], r["peer_runs"] = d_runs, p_runs
            r["dpipe"] = {**{k: last[k] for k in ("solver", "nit", "nfev", "cg_steps", "message", "success", "engine")},
                          "wall": spread([x["wall"] for x in d_runs]), "fit": spread([x["fit"] for x in d_runs]),
                          "time_data": spread([x["time_data"] for x in d_runs]), "test_auc": float(np.median([x["test_auc"] for x in d_runs]))}
            done = [x for x in p_runs if not x["capped"]]
            r["peer"] = {"C": best_C, "wall": spread([x["wall"] for x in done]), "test_auc": done[0]["test_auc"],
                         "sign_flipped": any(x["sign_flipped"] for x in done)} if done else None
            r["checks"] = _checks(r)
            r["oracle"] = _oracle(objective, prep, SVMPERF[name][1], repeats)
            o = r["oracle"]
            print(f"  {name}: to SVM-perf's test AUC (oracle): " + ("not reached" if o["seconds"] is None else
                  f"{o['seconds']['median']:.3f} s at iteration {o['iteration']}"), flush=True)
            print(f"  {name}: checks {json.dumps(r['checks'])}", flush=True)
            rows.append(r)
    payload["results"] = rows
    payload["load_end"] = list(os.getloadavg())
    _plot(rows, cfg.out_dir / "race.png")
    return payload, _markdown(payload)
