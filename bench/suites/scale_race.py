"""scale-race: dpipe's default AUC fit beyond one core, against liblinear-ranksvm on one core.

Three parts, every process timed whole (start to exit) with the peak resident set size of
its process tree (psutil, the summed RSS of the process and its descendants, sampled every
0.2 s):

*2x10^6 rows x 50.* A generated store (``dpipe.make_data``: binary, Student-t, log-normal
and Gaussian features, labels from a nonlinear model with 2 % label noise, 20 %
positives; seed 0) and a test store of 2x10^5 rows from the same model (seed 1), the
training rows also written as svmlight text for the peer. liblinear-ranksvm (built from
``../shared/peers/liblinear-ranksvm-2.11`` into ``--work``; skipped with a message when the
folder is absent) runs ``train -s 8 -c C -q TRAIN.svm MODEL`` on one core; ``C`` is chosen
from :data:`C_GRID` by test AUC (one run each, whose TRON lines give the Newton and CG
counts), then the chosen ``C`` is timed. Its test AUC comes from ``predict``'s decision
values (``w.x``, larger means positive). dpipe runs ``dpipe train STORE --objective auc``
(:data:`OBJECTIVE`) on the embedded 2-worker cluster with the shards persisted
(``--engine dask --cache memory``) and in one process (``--engine local``), and
``auc-smooth`` (L-BFGS) on the cluster for the cost model's evaluation count; the
contenders run interleaved, ``--repeats`` rounds. dpipe's test AUC is computed from the
model file's weights on the test store (exact, ties half).

*10^7 rows x 120 on the cluster* (dpipe only, same generator, test store 10^6 rows):
whole process and fit, and one ``auc-smooth`` run. liblinear-ranksvm is not run; what it
would need is computed from the store's non-zero count and the peer's allocations
(:func:`ranksvm_bytes`).

*Newton's parts, for the cost model.* On a LocalCluster of one and of two workers with
persisted shards, at 10^6 and 10^7 rows x 120 (at the weights of the 10^7-row fit): one
Newton iteration's score pass, merge, risk and gradient pass; one CG step's direction pass
(``X d`` in the kept order), the driver's prefix sums and the product pass (``X^T m``),
with the bytes each moves through the driver; one auc-smooth evaluation on each route.
``cost-model`` reads them.

Quick: 2x10^5 x 50 (test 2x10^4) and 10^6 x 120 (test 10^5); parts at 10^5 and 10^6 rows.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._harness import Config, fmt_spread, local_cluster, spread, table_head

#: dpipe's default AUC path: the squared pairwise hinge by trust-region Newton (one name for every run here)
OBJECTIVE = "auc"
#: the L-BFGS path it replaced, timed for the cost model's evaluation count
LBFGS_OBJECTIVE = "auc-smooth"
#: liblinear-ranksvm's C, chosen by test AUC
C_GRID = (0.001, 0.01, 0.1, 1.0, 10.0)
#: (rows, features, test rows): the race with the peer, and the cluster-only size
RACE, BIG = (2_000_000, 50, 200_000), (10_000_000, 120, 1_000_000)
QUICK_RACE, QUICK_BIG = (200_000, 50, 20_000), (1_000_000, 120, 100_000)
#: rows of the stores whose Newton parts are measured (d = 120), full and quick
PART_ROWS, QUICK_PART_ROWS = (1_000_000, 10_000_000), (100_000, 1_000_000)
PEER = "liblinear-ranksvm-2.11"
#: a peer run longer than this is stopped and reported
PEER_TIMEOUT = 3600.0
#: worker processes the parts are measured on (one and two: what the passes gain from a second worker)
PART_WORKERS = (1, 2)
#: calls per timed part
PART_CALLS = 5
ENGINES = {"cluster": ["--engine", "dask", "--cache", "memory"], "local": ["--engine", "local"]}


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------
def generated(work: Path, rows: int, features: int, test_rows: int, fmt: str = "zarr") -> tuple[Path, Path]:
    """A training store (seed 0) and a test store (seed 1) of one generated model (model seed 0), made once under ``work/scale``."""
    import dpipe

    folder = work / "scale"
    folder.mkdir(parents=True, exist_ok=True)
    ext = "zarr" if fmt == "zarr" else "parquet"
    train, test = folder / f"gen-{rows}x{features}.{ext}", folder / f"gen-{rows}x{features}-test{test_rows}.{ext}"
    for path, n, seed in ((train, rows, 0), (test, test_rows, 1)):
        if not path.exists():
            t0 = time.perf_counter()
            dpipe.make_data(str(path), rows=n, features=features, seed=seed, model_seed=0, format=fmt)
            print(f"  made {path.name} in {time.perf_counter() - t0:.0f} s", flush=True)
    return train, test


def read_xy(store: Path) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels of a whole store."""
    import dpipe

    sh = dpipe.open_store(str(store)).read_all()
    return sh.X, sh.y


def test_auc(coef: Any, test: Path, intercept: float = 0.0, data: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """Exact ROC-AUC (ties half) of the linear scores ``X coef + intercept`` on a test store."""
    from sklearn.metrics import roc_auc_score

    X, y = data if data is not None else read_xy(test)
    return float(roc_auc_score(y, X @ np.asarray(coef, dtype=np.float32) + intercept))


def write_svmlight(store: Path, dest: Path) -> dict[str, Any]:
    """Write ``store`` as svmlight text (labels +1/-1, 1-based indices, zeros left out, 9 significant digits: float32 exactly), once.

    Returns the rows, non-zeros and bytes (kept beside the file in ``DEST.json``).
    """
    import dpipe

    info_path = dest.with_name(dest.name + ".json")
    if dest.exists() and info_path.exists():
        return json.loads(info_path.read_text())
    st = dpipe.open_store(str(store))
    d = int(st.manifest.n_features)
    fmt = " ".join(f"{j + 1}:%.9g" for j in range(d))
    zero = re.compile(r" \d+:0(?=[ \n])")
    t0, nnz = time.perf_counter(), 0
    tmp = dest.with_name(f".{dest.name}.tmp")
    with open(tmp, "w") as f:
        for sh in st.iter_shards():
            X = sh.X + np.float32(0.0)  # no negative zeros
            nnz += int(np.count_nonzero(X))
            text = "\n".join(("+1 " if yi > 0 else "-1 ") + fmt % tuple(row) for yi, row in zip(sh.y.tolist(), X.tolist())) + "\n"
            f.write(zero.sub("", text))
    os.replace(tmp, dest)
    info = {"rows": int(st.manifest.n_rows), "features": d, "nnz": nnz, "bytes": dest.stat().st_size}
    info_path.write_text(json.dumps(info))
    print(f"  wrote {dest.name} ({info['bytes'] / 1e9:.2f} GB, {nnz / info['rows']:.1f} non-zeros a row) in {time.perf_counter() - t0:.0f} s", flush=True)
    return info


def nonzeros(store: Path) -> int:
    """Non-zero feature values of a store (one pass)."""
    import dpipe

    return sum(int(sh.X.nnz) if hasattr(sh.X, "nnz") else int(np.count_nonzero(sh.X)) for sh in dpipe.open_store(str(store)).iter_shards())


# ---------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------
def run_tree(cmd: list[str], *, timeout: float | None = None, interval: float = 0.2, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd`` to its exit: seconds, exit status, output, the peak summed RSS of its process tree and the largest
    high-water mark of one of its descendants (``peak_child_rss``: a worker of an embedded cluster).

    The tree (the process and all its descendants) is sampled every ``interval`` seconds:
    the peak of the summed RSS, and each process's own high-water mark (``VmHWM``, exact
    between samples). Not ``wait4``'s ``ru_maxrss``: Linux charges a child, across its
    ``exec``, with the memory of the process it was forked from (this bench's own, about
    1 GB), so every short command looked as big as the bench.
    """
    import psutil

    hwm: dict[int, int] = {}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        top, peak, status = psutil.Process(proc.pid), 0, None
        while True:
            pid, st, _ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status = st
                break
            total = 0
            try:
                for p in [top, *top.children(recursive=True)]:
                    try:
                        total += p.memory_info().rss
                        hwm[p.pid] = max(hwm.get(p.pid, 0), _vm_hwm(p.pid))
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            peak = max(peak, total)
            if timeout is not None and time.perf_counter() - t0 > timeout:
                for p in [*top.children(recursive=True), top]:
                    try:
                        p.kill()
                    except psutil.Error:
                        pass
                _, status, _ = os.wait4(proc.pid, 0)
                break
            time.sleep(interval)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        timed_out = timeout is not None and seconds > timeout
        return {"seconds": seconds, "returncode": proc.returncode, "timed_out": timed_out, "stdout": out.read(), "stderr": err.read(),
                "peak_tree_rss": max(peak, max(hwm.values(), default=0)), "peak_top_rss": hwm.get(proc.pid, 0),
                "peak_child_rss": max((v for k, v in hwm.items() if k != proc.pid), default=0)}


def _vm_hwm(pid: int) -> int:
    """A process's peak resident memory since its ``exec`` (``VmHWM`` of ``/proc/PID/status``), in bytes; 0 if unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def wait_for_memory(need: float, patience: float = 900.0) -> float:
    """Wait (up to ``patience`` seconds) until ``need`` bytes are available, so that a big run does not meet another job's; the bytes available."""
    import psutil

    t0 = time.perf_counter()
    while (avail := psutil.virtual_memory().available) < need and time.perf_counter() - t0 < patience:
        time.sleep(10)
    if avail < need:
        print(f"  only {avail / 1e9:.1f} GB available (wanted {need / 1e9:.1f}); running anyway", flush=True)
    return float(avail)


def dpipe_command() -> list[str]:
    """The ``dpipe`` console script beside this Python (``python -m dpipe`` without it)."""
    script = Path(sys.executable).parent / "dpipe"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dpipe"]


def dpipe_train(store: Path, out: Path, objective: str, extra: list[str], test: Path, test_data: Any = None) -> dict[str, Any]:
    """The whole ``dpipe train`` process with its defaults (and ``extra``); fit figures from the model file; test AUC."""
    import dpipe

    wait_for_memory(3.0 * dpipe.open_store(str(store)).nbytes)
    r = run_tree([*dpipe_command(), "train", str(store), "--objective", objective, "--out", str(out), "--overwrite", "-q", *extra])
    if r["returncode"] != 0:
        raise RuntimeError(f"dpipe train {store} {' '.join(extra)} failed ({r['returncode']}): {r['stderr'][-2000:]}")
    m = json.loads(out.read_text())
    fit, info = m["fit"], m["fit"].get("info", {})
    return {
        "seconds": r["seconds"], "peak_tree_rss": r["peak_tree_rss"], "fit_seconds": float(fit.get("time_data", 0.0)) + float(fit.get("time_solve", 0.0)),
        "time_data": fit.get("time_data"), "time_solve": fit.get("time_solve"), "time_calibration": info.get("time_calibration"),
        "solver": info.get("solver") or m["params"].get("solver"), "nit": fit.get("nit"), "nfev": fit.get("nfev"), "cg_steps": info.get("cg_steps"),
        "message": fit.get("message"), "engine": m["training"].get("engine"), "test_auc": test_auc(m["coef"], test, 0.0, test_data),
        "warnings": [ln for ln in r["stderr"].splitlines() if "Warning" in ln][:5], "x": m["coef"],
        "standardized": info.get("standardized"), "data_passes": info.get("data_passes"), "data_passes_total": info.get("data_passes_total"),
    }


# ---------------------------------------------------------------------------
# the peer
# ---------------------------------------------------------------------------
def peer_source(data_dir: Path) -> Path:
    """``../shared/peers/liblinear-ranksvm-2.11`` beside the data folder (``$DPIPE_SHARED_PEERS`` overrides the peers folder)."""
    peers = Path(os.environ.get("DPIPE_SHARED_PEERS", data_dir.parent / "peers"))
    return peers / PEER


def build_ranksvm(data_dir: Path, work: Path) -> tuple[Path | None, str]:
    """Copy the peer's source into ``work/peers`` and ``make`` it once: (its folder, or None, and why)."""
    src = peer_source(data_dir)
    dest = work / "peers" / PEER
    if (dest / "train").exists() and (dest / "predict").exists():
        return dest, f"built in {dest}"
    if not (src / "Makefile").exists():
        return None, f"liblinear-ranksvm skipped: {src} is absent (see ../shared/peers/README.md)"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest)
    r = subprocess.run(["make", "-C", str(dest), "train", "predict"], capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"liblinear-ranksvm skipped: make failed: {r.stderr[-500:]}"
    return dest, f"built from {src}"


def _tron_counts(text: str) -> tuple[int | None, int | None]:
    """Newton iterations and CG steps from TRON's ``iter N ... CG k`` lines."""
    cg = [int(m.group(1)) for m in re.finditer(r"^iter\s+\d+ .* CG\s+(\d+)", text, re.M)]
    return (len(cg), sum(cg)) if cg else (None, None)


def ranksvm_run(peer: Path, train_svm: Path, C: float, model: Path, test_svm: Path, y_test: np.ndarray, quiet: bool = True) -> dict[str, Any]:
    """One whole ``train -s 8 -c C [-q] TRAIN MODEL`` process, then ``predict`` for the test AUC."""
    from sklearn.metrics import roc_auc_score

    cmd = [str(peer / "train"), "-s", "8", "-c", f"{C:g}", *(["-q"] if quiet else []), str(train_svm), str(model)]
    r = run_tree(cmd, timeout=PEER_TIMEOUT)
    rec: dict[str, Any] = {"C": C, "seconds": r["seconds"], "peak_tree_rss": r["peak_tree_rss"], "returncode": r["returncode"], "timed_out": r["timed_out"]}
    if r["returncode"] != 0:
        rec["error"] = (r["stderr"] or r["stdout"])[-500:]
        return rec
    rec["newton"], rec["cg_steps"] = _tron_counts(r["stdout"])
    with tempfile.NamedTemporaryFile(suffix=".out") as f:
        p = subprocess.run([str(peer / "predict"), str(test_svm), str(model), f.name], capture_output=True, text=True)
        if p.returncode != 0:
            rec["error"] = p.stderr[-500:]
            return rec
        values = np.loadtxt(f.name, dtype=np.float64)
    rec["test_auc"] = float(roc_auc_score(y_test, values))  # decision values w.x: larger ranks positive (ranksvm's convention)
    return rec


def ranksvm_bytes(rows: int, nnz: int) -> dict[str, float]:
    """Bytes liblinear-ranksvm 2.11 allocates for a binary problem of ``rows`` rows with ``nnz`` non-zeros (``-s 8``, no bias).

    From its source: ``read_problem`` (train.c) allocates ``elements + l`` feature_nodes of
    16 bytes (int index + double value, padded), ``elements`` counting every non-zero plus one
    bias slot per row, the extra ``l`` the rows' terminators, and per row ``y`` (double),
    ``x`` (pointer) and ``query`` (int): 20 bytes. ``l2r_l2_ranksvm_fun`` (ranksvm.cpp) keeps
    per row ``z``, ``gamma_plus``, ``gamma_minus``, ``ATAXw``, ``ATe`` (doubles), ``l_plus``,
    ``l_minus``, ``int_y``, ``perm`` (ints) and ``order_perm`` (id_and_value, 16 bytes): 72
    bytes; a Hessian-vector product adds ``wa`` and ``gamma_plus_minus`` (16 bytes) while it
    runs (the gradient's ``tmp_vector``, 8, never at the same time). TRON's vectors are
    O(d). The text is read line by line, so the file is never held whole.
    """
    nodes = 16.0 * (nnz + 2 * rows)
    per_row = (20 + 72 + 16) * float(rows)
    return {"feature_nodes": nodes, "per_row_arrays": per_row, "total": nodes + per_row, "bytes_per_row": (nodes + per_row) / rows}


# ---------------------------------------------------------------------------
# Newton's parts (for the cost model)
# ---------------------------------------------------------------------------
def _median_time(fn: Any, calls: int = PART_CALLS) -> tuple[float, Any]:
    fn()  # warm
    seconds, last = [], None
    for _ in range(calls):
        t0 = time.perf_counter()
        last = fn()
        seconds.append(time.perf_counter() - t0)
    return float(np.median(seconds)), last


def newton_parts(store: Path, client: Any, w: np.ndarray, lam: float = 1e-6) -> dict[str, Any]:
    """Seconds and driver bytes of one Newton iteration's passes and one CG step, and of one auc-smooth evaluation, at ``w``."""
    import dask

    import dpipe
    from dpipe.engine import RankPasses, ShardedDataset
    from dpipe.fit import smoothed_objective
    from dpipe.fit._newton import PairwiseNewtonObjective
    from dpipe.objectives import SquaredPairwiseHinge

    st = dpipe.open_store(str(store))
    rng = np.random.default_rng(0)
    rec: dict[str, Any] = {"rows": int(st.manifest.n_rows), "features": int(st.manifest.n_features), "shards": st.n_shards}
    with ShardedDataset(st, client, cache="memory") as ds:
        rec["load_seconds"] = ds.load_seconds
        obj = PairwiseNewtonObjective(RankPasses(ds), SquaredPairwiseHinge(), lam)  # raw coordinates: the passes cost the same either way
        passes = obj.passes

        def iteration() -> dict[str, float]:
            obj._trial = None  # score w afresh every call
            t0 = time.perf_counter()
            obj.value_and_grad(w)
            parts = {k: float(v) for k, v in passes.last.items()}
            parts["seconds_total"] = time.perf_counter() - t0
            parts["seconds_risk"] = float(obj.last.get("seconds_kernel", 0.0))  # the risk's value and weights on the driver
            return parts

        rec["iteration_seconds"], rec["iteration_parts"] = _median_time(iteration)
        rec["iteration_bytes"] = rec["iteration_parts"].pop("bytes_moved", None)
        d = rng.standard_normal(w.size) * 0.01
        curv = obj._curvature
        timings: dict[str, list[float]] = {"direction": [], "curvature": [], "product": []}
        obj.hess_vec(d)  # warm
        for _ in range(PART_CALLS):
            t0 = time.perf_counter()
            u = passes.direction(d)
            b_dir = passes.last["bytes_moved"]
            t1 = time.perf_counter()
            m = curv.apply(*u)
            t2 = time.perf_counter()
            passes.last = {}
            passes.product(*m)
            t3 = time.perf_counter()
            b_prod = passes.last["bytes_moved"]
            for k, v in zip(timings, (t1 - t0, t2 - t1, t3 - t2)):
                timings[k].append(v)
        rec["cg_parts"] = {k: float(np.median(v)) for k, v in timings.items()}
        rec["cg_seconds"] = sum(rec["cg_parts"].values())
        rec["cg_bytes"] = {"direction": b_dir, "product": b_prod, "total": b_dir + b_prod}
        rec["hess_vec_seconds"], _ = _median_time(lambda: obj.hess_vec(d))
        for route in ("workers", "driver"):
            with dask.config.set({"dpipe.rank-exchange": route}):
                smooth = smoothed_objective(RankPasses(ds), LBFGS_OBJECTIVE, 2e-3, 1e-4)
            sec, _ = _median_time(lambda: smooth.value_and_grad(w))
            rec[f"smooth_{route}"] = {"seconds": sec, "route": getattr(getattr(smooth, "inner", None), "exchange", route),
                                      "bytes_moved": smooth.last.get("bytes_moved"), "bytes_exchanged": smooth.last.get("bytes_exchanged", 0.0)}
    return rec


def host_work(store: Path, w: np.ndarray, shards: int = 4) -> dict[str, float]:
    """The workers' own seconds per row of each pass (dpipe's worker functions on ``shards`` shards in this process, one thread).

    ``score`` (``X w``, split by class, sorted), ``gradient`` (``X^T g`` in that order),
    ``direction`` (``X d`` in the kept order) and ``product`` (``X^T m`` keeping it): the
    parallel part of a pass, the rest of its time being the driver's and the transfers'.
    """
    import dpipe
    from dpipe.reduce._sorted import direction_pass, product_pass, score_pass

    st = dpipe.open_store(str(store))
    data = [st.read_shard(i) for i in range(min(shards, st.n_shards))]
    rows = sum(sh.n_rows for sh in data)
    d = np.random.default_rng(1).standard_normal(w.size) * 0.01
    out: dict[str, list[float]] = {"score": [], "gradient": [], "direction": [], "product": []}
    for r in range(PART_CALLS + 1):
        key = f"bench-host-work-{r}"
        t = dict.fromkeys(out, 0.0)
        for sh in data:
            t0 = time.perf_counter()
            runs = score_pass(sh, w, key)
            t1 = time.perf_counter()
            g_pos, g_neg = np.ones(runs.pos.size), -np.ones(runs.neg.size)
            product_pass(sh, w, key, g_pos, g_neg)  # a gradient pass that keeps the order: the same product
            t2 = time.perf_counter()
            direction_pass(sh, w, key, d)
            t3 = time.perf_counter()
            product_pass(sh, w, key, g_pos, g_neg)
            t4 = time.perf_counter()
            for k, v in zip(out, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                t[k] += v
        if r:  # the first round warms the kernels
            for k in out:
                out[k].append(t[k] / rows)
    per_row = {k: float(np.median(v)) for k, v in out.items()}
    return {**per_row, "iteration": per_row["score"] + per_row["gradient"], "cg": per_row["direction"] + per_row["product"], "rows": rows}


# ---------------------------------------------------------------------------
# the suite
# ---------------------------------------------------------------------------
def _race(cfg: Config, size: tuple[int, int, int], peer: Path | None) -> dict[str, Any]:
    rows, d, test_rows = size
    train, test = generated(cfg.work, rows, d, test_rows)
    test_data = read_xy(test)
    res: dict[str, Any] = {"rows": rows, "features": d, "test_rows": test_rows, "train": str(train), "test": str(test)}
    tmp = cfg.work / "scale" / "models"
    tmp.mkdir(parents=True, exist_ok=True)
    contenders: dict[str, Any] = {}
    if peer is not None:
        svm, svm_test = train.with_suffix(".svm"), test.with_suffix(".svm")
        res["svmlight"] = write_svmlight(train, svm)
        write_svmlight(test, svm_test)
        y_test = test_data[1]
        selection = []
        for C in C_GRID:
            r = ranksvm_run(peer, svm, C, tmp / "ranksvm.model", svm_test, y_test, quiet=False)
            selection.append(r)
            print(f"  ranksvm C={C:g}: {r['seconds']:.1f} s, AUC {r.get('test_auc', float('nan')):.5f}, Newton {r.get('newton')} / CG {r.get('cg_steps')}", flush=True)
        res["ranksvm_selection"] = selection
        ok = [r for r in selection if "test_auc" in r]
        if ok:
            best = max(ok, key=lambda r: r["test_auc"])
            res["ranksvm_C"] = best["C"]
            contenders["liblinear-ranksvm, 1 core"] = lambda: ranksvm_run(peer, svm, best["C"], tmp / "ranksvm.model", svm_test, y_test)
    contenders[f"dpipe {OBJECTIVE}, 2-worker cluster"] = lambda: dpipe_train(train, tmp / "auc-cluster.json", OBJECTIVE, ENGINES["cluster"], test, test_data)
    contenders[f"dpipe {OBJECTIVE}, one process"] = lambda: dpipe_train(train, tmp / "auc-local.json", OBJECTIVE, ENGINES["local"], test, test_data)
    contenders[f"dpipe {LBFGS_OBJECTIVE}, 2-worker cluster"] = lambda: dpipe_train(train, tmp / "smooth-cluster.json", LBFGS_OBJECTIVE, ENGINES["cluster"], test,
                                                                                  test_data)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in contenders}
    for i in range(cfg.repeats):
        for name, fn in contenders.items():
            r = fn()
            r["load1"] = os.getloadavg()[0]
            runs[name].append(r)
            print(f"  round {i + 1} {name}: {r['seconds']:.1f} s, AUC {r.get('test_auc', float('nan')):.5f} (load {r['load1']:.2f})", flush=True)
    res["runs"] = {k: [{kk: vv for kk, vv in r.items() if kk != "x"} for r in v] for k, v in runs.items()}
    res["summary"] = {k: _summary(v) for k, v in runs.items()}
    res["_w"] = runs[f"dpipe {OBJECTIVE}, 2-worker cluster"][-1]["x"]
    return res


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out = {"seconds": spread([r["seconds"] for r in runs]), "peak_tree_rss": spread([r["peak_tree_rss"] for r in runs]),
           "test_auc": runs[-1].get("test_auc"), "load1": spread([r["load1"] for r in runs])}
    if "fit_seconds" in runs[0]:
        out["fit_seconds"] = spread([r["fit_seconds"] for r in runs])
        out.update({k: runs[-1].get(k) for k in ("nit", "nfev", "cg_steps", "message", "engine", "solver")})
    else:
        out.update({"C": runs[-1].get("C")})
    return out


def _big(cfg: Config, size: tuple[int, int, int], race_nnz_per_row: float | None, race_bytes_per_nnz: float | None) -> dict[str, Any]:
    rows, d, test_rows = size
    train, test = generated(cfg.work, rows, d, test_rows)
    test_data = read_xy(test)
    tmp = cfg.work / "scale" / "models"
    runs = []
    for i in range(cfg.repeats):
        r = dpipe_train(train, tmp / "big-auc.json", OBJECTIVE, [], test, test_data)  # the defaults: auto picks the cluster above 1 GB
        r["load1"] = os.getloadavg()[0]
        runs.append(r)
        print(f"  {rows:,} x {d} round {i + 1}: {r['seconds']:.1f} s (fit {r['fit_seconds']:.1f} s), AUC {r['test_auc']:.5f} on {r['engine']} (load {r['load1']:.2f})",
              flush=True)
    smooth = dpipe_train(train, tmp / "big-smooth.json", LBFGS_OBJECTIVE, [], test, test_data)
    smooth["load1"] = os.getloadavg()[0]
    print(f"  {rows:,} x {d} {LBFGS_OBJECTIVE}: {smooth['seconds']:.1f} s, {smooth['nfev']} evaluations, AUC {smooth['test_auc']:.5f}", flush=True)
    nnz = nonzeros(train)
    need = ranksvm_bytes(rows, nnz)
    need["text_bytes_estimate"] = nnz * race_bytes_per_nnz if race_bytes_per_nnz else None
    return {"rows": rows, "features": d, "test_rows": test_rows, "runs": [{k: v for k, v in r.items() if k != "x"} for r in runs],
            "summary": _summary(runs), "smooth": {k: v for k, v in smooth.items() if k != "x"}, "nnz": nnz, "ranksvm_needs": need,
            "store_bytes": rows * d * 4, "_w": runs[-1]["x"]}


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    race_size, big_size = (QUICK_RACE, QUICK_BIG) if cfg.quick else (RACE, BIG)
    peer, why = build_ranksvm(cfg.data_dir, cfg.work)
    print(f"  {why}", flush=True)
    race = _race(cfg, race_size, peer)
    sv = race.get("svmlight")
    big = _big(cfg, big_size, sv["nnz"] / sv["rows"] if sv else None, sv["bytes"] / sv["nnz"] if sv else None)
    part_rows = QUICK_PART_ROWS if cfg.quick else PART_ROWS
    parts: list[dict[str, Any]] = []
    errors: list[str] = []
    w = np.asarray(big.pop("_w"), dtype=np.float64)
    race.pop("_w")
    for workers in PART_WORKERS:
        with local_cluster(workers) as client:
            for n in part_rows:
                store = generated(cfg.work, n, big_size[1], big_size[2])[0] if n == big_size[0] else _parts_store(cfg.work, n, big_size[1])
                try:
                    parts.append({"workers": workers, **newton_parts(store, client, w)})
                except Exception as e:  # keep the races' figures when a part fails
                    print(f"  parts, {workers} worker(s), {n:,} rows failed: {e!r}", flush=True)
                    errors.append(f"{workers} worker(s), {n:,} rows: {e!r}")
                    continue
                q = parts[-1]
                print(f"  parts, {workers} worker(s), {n:,} rows: iteration {1e3 * q['iteration_seconds']:.0f} ms, CG step {1e3 * q['cg_seconds']:.0f} ms "
                      f"({', '.join(f'{k} {1e3 * v:.0f}' for k, v in q['cg_parts'].items())}), auc-smooth {1e3 * q['smooth_workers']['seconds']:.0f} / "
                      f"{1e3 * q['smooth_driver']['seconds']:.0f} ms (load {os.getloadavg()[0]:.2f})", flush=True)
    host = host_work(generated(cfg.work, big_size[0], big_size[1], big_size[2])[0], w)
    print("  the workers' own work per row: " + ", ".join(f"{k} {1e9 * v:.1f} ns" for k, v in host.items() if k != "rows"), flush=True)
    payload = {"objective": OBJECTIVE, "peer": why, "race": race, "big": big, "parts": parts, "part_errors": errors, "host_work": host,
               "c_grid": list(C_GRID)}
    return payload, markdown(payload)


def _parts_store(work: Path, rows: int, features: int) -> Path:
    import dpipe

    path = work / "scale" / f"gen-{rows}x{features}.zarr"
    if not path.exists():
        dpipe.make_data(str(path), rows=rows, features=features, seed=0, model_seed=0)
    return path


def _gb(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e9:.1f}"


def markdown(p: dict[str, Any]) -> str:
    race, big = p["race"], p["big"]
    lines = [
        f"dpipe's default AUC path: `dpipe train STORE --objective {p['objective']}` (squared pairwise hinge; the solver chosen by size: trust-region Newton below 10^6 rows, L-BFGS from the class moments from 10^6) with its "
        f"defaults; liblinear-ranksvm: {p['peer']}. Seconds of the whole process, median (min-max) of {len(next(iter(race['runs'].values())))} "
        "interleaved rounds; peak memory: the summed RSS of the process tree (dpipe: the driver and its worker processes).", "",
        f"**{race['rows']:,} rows x {race['features']}** (generated, 2 % label noise; test {race['test_rows']:,} rows of the same model):", "",
        *table_head(["contender", "whole process s", "fit s", "test AUC", "Newton / CG (L-BFGS: evaluations)", "peak GB", "load (1 min)"]),
    ]
    for name, s in race["summary"].items():
        counts = (f"{s.get('nit')} / {s.get('cg_steps')}" if s.get("cg_steps") is not None else f"{s.get('nfev')} evaluations") if "fit_seconds" in s else None
        if counts is None:
            sel = next((r for r in race.get("ranksvm_selection", []) if r["C"] == s.get("C")), {})
            counts = f"{sel.get('newton')} / {sel.get('cg_steps')} (C = {s.get('C'):g})"
        lines.append(f"| {name} | {fmt_spread(s['seconds'])} | {fmt_spread(s.get('fit_seconds'))} | {s['test_auc']:.5f} | {counts} | "
                     f"{s['peak_tree_rss']['median'] / 1e9:.2f} | {fmt_spread(s['load1'])} |")
    if race.get("ranksvm_selection"):
        lines += ["", "liblinear-ranksvm's C by test AUC (one run each, not quiet):", "",
                  *table_head(["C", "seconds", "test AUC", "Newton / CG"])]
        for r in race["ranksvm_selection"]:
            auc = f"{r['test_auc']:.5f}" if "test_auc" in r else ("timed out" if r.get("timed_out") else "failed")
            lines.append(f"| {r['C']:g} | {r['seconds']:.1f} | {auc} | {r.get('newton')} / {r.get('cg_steps')} |")
        sv = race["svmlight"]
        lines += ["", f"The svmlight file: {sv['bytes'] / 1e9:.2f} GB, {sv['nnz'] / sv['rows']:.1f} non-zeros a row ({sv['bytes'] / sv['nnz']:.1f} bytes each)."]
        names = list(race["summary"])
        peer_name = next((n for n in names if n.startswith("liblinear")), None)
        if peer_name:
            ratios = {n: [a["seconds"] / b["seconds"] for a, b in zip(race["runs"][peer_name], race["runs"][n])] for n in names if n != peer_name}
            lines += ["", "liblinear-ranksvm's whole process over each dpipe run's, per round (median): "
                      + ", ".join(f"{n} {np.median(v):.2f}x" for n, v in ratios.items()) + "."]
            race["ratios_over_peer"] = {n: spread(v) for n, v in ratios.items()}
    s, sm, need = big["summary"], big["smooth"], big["ranksvm_needs"]
    lines += [
        "", f"**{big['rows']:,} rows x {big['features']}** ({big['store_bytes'] / 1e9:.1f} GB of float32 features; test {big['test_rows']:,} rows), "
        f"`dpipe train STORE --objective {p['objective']}` with its defaults (the engine chose: {s.get('engine')}):", "",
        *table_head(["run", "whole process s", "fit s", "test AUC", "Newton / CG (L-BFGS: evaluations)", "peak GB", "load (1 min)"]),
        f"| {p['objective']}, {len(big['runs'])} runs | {fmt_spread(s['seconds'])} | {fmt_spread(s['fit_seconds'])} | {s['test_auc']:.5f} | "
        f"{s.get('nit')} / {s.get('cg_steps')} | {s['peak_tree_rss']['median'] / 1e9:.2f} | {fmt_spread(s['load1'])} |",
        f"| {LBFGS_OBJECTIVE}, one run | {sm['seconds']:.1f} | {sm['fit_seconds']:.1f} | {sm['test_auc']:.5f} | {sm['nfev']} evaluations | "
        f"{sm['peak_tree_rss'] / 1e9:.2f} | {sm['load1']:.2f} |", "",
        f"liblinear-ranksvm on this store, from its source (`ranksvm_bytes`): {big['nnz'] / big['rows']:.1f} non-zeros a row, "
        f"{_gb(need['feature_nodes'])} GB of 16-byte feature_nodes (every non-zero, plus a bias slot and a terminator a row) and "
        f"{_gb(need['per_row_arrays'])} GB of per-row arrays (108 bytes a row): {_gb(need['total'])} GB resident "
        f"({need['bytes_per_row']:.0f} bytes a row against dpipe's {4 * big['features']} of float32 features), read from about "
        f"{_gb(need.get('text_bytes_estimate'))} GB of svmlight text.",
    ]
    if p["parts"]:
        lines += ["", "**Newton's parts** (LocalCluster of 1 and 2 workers, persisted shards, scores merged on the driver, at the big fit's weights; ms, medians of "
                  f"{PART_CALLS}; MB through the driver):", "",
                  *table_head(["workers", "rows", "Newton iteration (score + merge + risk + gradient)", "MB", "CG step: direction", "driver prefix sums",
                               "product", "CG step total", "MB", "auc-smooth evaluation, workers / driver route"])]
        for q in p["parts"]:
            c = q["cg_parts"]
            lines.append(f"| {q['workers']} | {q['rows']:,} | {1e3 * q['iteration_seconds']:.0f} | {(q['iteration_bytes'] or 0) / 1e6:.0f} | {1e3 * c['direction']:.0f} | "
                         f"{1e3 * c['curvature']:.0f} | {1e3 * c['product']:.0f} | {1e3 * q['cg_seconds']:.0f} | {q['cg_bytes']['total'] / 1e6:.0f} | "
                         f"{1e3 * q['smooth_workers']['seconds']:.0f} ({q['smooth_workers']['route']}) / {1e3 * q['smooth_driver']['seconds']:.0f} |")
    return "\n".join(lines)
