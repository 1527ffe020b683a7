"""How one smoothed-objective evaluation scales with the number of rows.

Usage::

    python bench/smooth_scaling.py [--rows 100000,1000000,5000000] [--features 120] [--evals 15] [--work bench/work]

For every size a synthetic store (``dpipe.make_data``, d features, seed 0) is made
once under ``--work``. On a 2-worker LocalCluster (one thread each) the script times:

* one *plain pass*: read every shard from the store and compute ``X @ w`` (one task
  per shard, the result summed) — the least any pass over the data can cost;
  also the same pass over the shards persisted in worker memory;
* one evaluation (value and gradient) of ``auc-smooth`` and ``prbep-smooth`` over the
  persisted shards, at random weight vectors, split into score pass, merge, kernel and
  gradient pass, with the bytes it moves: as the objective counts them (8 per row each
  way plus d-vectors) and as measured on the loopback interface (psutil; all traffic of
  the local cluster, so it includes message framing and heartbeats).

It prints and writes ``bench/results/smooth_scaling.{json,md,png}``: medians, the ratio
of an evaluation to one plain pass, and the exponent ``b`` of a least-squares fit
``seconds = a n^b`` over the sizes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from bench.suites.scaling import _add, _plain_pass  # noqa: E402
from bench.suites.scaling import exponent as fitted_exponent  # noqa: E402

PARTS = ("seconds_score", "seconds_merge", "seconds_kernel", "seconds_gradient")


def _loopback_bytes() -> float:
    """Bytes sent over the loopback interface so far (all local cluster traffic goes there)."""
    import psutil

    counters = psutil.net_io_counters(pernic=True)
    lo = counters.get("lo") or counters.get("lo0")
    return float(lo.bytes_sent) if lo is not None else float("nan")


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure(path: Path, client, evals: int, seed: int = 0) -> dict:
    """Plain-pass and evaluation times for one store."""
    import dpipe
    from dpipe.engine import RankPasses, ShardedDataset
    from dpipe.fit import smoothed_objective

    st = dpipe.open_store(str(path))
    m = st.manifest
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(m.n_features) * 0.05
    row: dict = {"rows": m.n_rows, "features": m.n_features, "shards": st.n_shards, "store_mb": st.nbytes / 1e6}
    with ShardedDataset(st, client, cache="stream") as streamed:
        streamed.map_reduce(_plain_pass, _add, w)  # warm the page cache and the numba kernels
        row["plain_pass_disk_s"] = _median_seconds(lambda: streamed.map_reduce(_plain_pass, _add, w), 5)
    with ShardedDataset(st, client, cache="memory") as ds:
        row["load_s"] = ds.load_seconds
        row["plain_pass_memory_s"] = _median_seconds(lambda: ds.map_reduce(_plain_pass, _add, w), 5)
        for name, obj in (
            ("auc-smooth", smoothed_objective(RankPasses(ds), "auc-smooth", 2e-3, 1e-4)),
            ("prbep-smooth", smoothed_objective(RankPasses(ds), "prbep-smooth", 2e-3 / m.n_rows, 1e-4)),
        ):
            obj.value_and_grad(w)  # warm-up (numba compilation, first actor calls)
            totals, parts = [], []
            sent = _loopback_bytes()
            for _ in range(evals):
                v = w + rng.standard_normal(w.size) * 0.01
                t0 = time.perf_counter()
                obj.value_and_grad(v)
                totals.append(time.perf_counter() - t0)
                parts.append([obj.last[p] for p in PARTS])
            sent = (_loopback_bytes() - sent) / evals
            row[name] = {"eval_s": float(np.median(totals)), **{p: float(x) for p, x in zip(PARTS, np.median(parts, axis=0))},
                         "bytes_moved": obj.last["bytes_moved"], "loopback_bytes_per_eval": sent}
    return row


def main() -> None:
    from distributed import Client, LocalCluster

    import dpipe

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="100000,1000000,5000000")
    ap.add_argument("--features", type=int, default=120)
    ap.add_argument("--evals", type=int, default=15)
    ap.add_argument("--work", type=Path, default=HERE / "work")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "smooth_scaling")
    a = ap.parse_args()
    sizes = [int(float(r)) for r in a.rows.split(",")]
    a.work.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in sizes:
        path = a.work / f"synthetic-{n}x{a.features}.zarr"
        if not path.exists():
            t0 = time.perf_counter()
            dpipe.make_data(str(path), rows=n, features=a.features, seed=0)
            print(f"made {path.name} in {time.perf_counter() - t0:.1f} s", flush=True)
        paths.append(path)
    rows = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, Client(cluster, direct_to_workers=True) as client:
        for path in paths:
            row = measure(path, client, a.evals)
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {}
    for name in ("auc-smooth", "prbep-smooth"):
        summary[name] = {
            "exponent": fitted_exponent([r["rows"] for r in rows], [r[name]["eval_s"] for r in rows]) if len(rows) > 1 else None,
            "ratio_to_plain_pass_disk": [r[name]["eval_s"] / r["plain_pass_disk_s"] for r in rows],
            "ratio_to_plain_pass_memory": [r[name]["eval_s"] / r["plain_pass_memory_s"] for r in rows],
        }
    if len(rows) > 1:
        summary["plain_pass_disk_exponent"] = fitted_exponent([r["rows"] for r in rows], [r["plain_pass_disk_s"] for r in rows])
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with open(a.out.with_suffix(".json"), "w") as f:
        json.dump({"rows": rows, "summary": summary}, f, indent=1)
    lines = [
        "| rows | shards | plain pass: disk / memory (ms) | objective | evaluation (ms) | score / merge / kernel / gradient (ms) | ratio to plain pass disk / memory | MB moved: counted / measured on loopback |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for name in ("auc-smooth", "prbep-smooth"):
            e = r[name]
            lines.append(
                f"| {r['rows']:,} | {r['shards']} | {1e3 * r['plain_pass_disk_s']:.0f} / {1e3 * r['plain_pass_memory_s']:.0f} | {name} | {1e3 * e['eval_s']:.0f} | "
                + " / ".join(f"{1e3 * e[p]:.0f}" for p in PARTS)
                + f" | {e['eval_s'] / r['plain_pass_disk_s']:.2f} / {e['eval_s'] / r['plain_pass_memory_s']:.2f} | {e['bytes_moved'] / 1e6:.1f} / {e['loopback_bytes_per_eval'] / 1e6:.1f} |"
            )
    for name in ("auc-smooth", "prbep-smooth"):
        if summary[name]["exponent"] is not None:
            lines.append(f"\nFitted exponent of the evaluation time, {name}: {summary[name]['exponent']:.3f}")
    if "plain_pass_disk_exponent" in summary:
        lines.append(f"\nFitted exponent of the plain pass from disk: {summary['plain_pass_disk_exponent']:.3f}")
    with open(a.out.with_suffix(".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    _plot(rows, a.out.with_suffix(".png"))


def _plot(rows: list[dict], dest: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [r["rows"] for r in rows]
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.loglog(n, [r["plain_pass_disk_s"] for r in rows], "o-", label="plain pass (read + X w)")
    for name in ("auc-smooth", "prbep-smooth"):
        ax.loglog(n, [r[name]["eval_s"] for r in rows], "s-", label=f"{name} evaluation")
    ax.set_xlabel("rows")
    ax.set_ylabel("seconds")
    ax.set_title("One evaluation vs one pass (2 workers)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(dest, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
