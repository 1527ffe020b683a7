"""scaling: time of one objective evaluation against n, next to the single-pass floor.

Generated stores (``dpipe.make_data``, d = 120, seed 0) of 10^5 to 10^7 rows, on a
2-worker LocalCluster (one thread each). For every size, timed in the same run:

* the *floor*: one plain pass that reads every shard from the store and computes
  ``X @ w`` (one task per shard, results summed), and the same pass over shards
  persisted in worker memory;
* one evaluation, value and gradient, of ``auc-smooth`` and ``prbep-smooth`` over
  persisted shards, as the fits run it (``dpipe.rank-exchange=auto``: from 500,000 rows
  the workers merge and weigh the scores, :mod:`dpipe.engine._ranges`), and auc-smooth
  once more with the scores merged on the driver (``driver``) for comparison;
* one cutting-plane oracle call of ``rocarea`` (the most violated ranking and its
  plane: the same route);
* the ``auc-moment`` pass (per-class means and covariances, O(n d^2)).

Each figure is the median (min, max) of the repeated calls at fresh random weights.
The exponent ``b`` is the least-squares slope of ``log seconds`` on ``log n``; the
ratio is an evaluation over the plain pass from disk measured at the same size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._harness import Config, fmt_spread, local_cluster, pyplot, save_figure, spread, synthetic_store, table_head

SIZES = (100_000, 1_000_000, 5_000_000, 10_000_000)
QUICK = (100_000, 1_000_000)
FEATURES = 120
CALLS = ("plain pass, disk", "plain pass, memory", "auc-smooth", "auc-smooth, driver-merged", "prbep-smooth", "rocarea oracle", "auc-moment pass")


def _plain_pass(shard: Any, w: np.ndarray) -> float:
    from dpipe.reduce._block import matvec

    return float(matvec(shard.X, w).sum()) if shard.n_rows else 0.0


def _add(a: float, b: float) -> float:
    return a + b


def _timed(fn: Any, ws: list[np.ndarray]) -> dict[str, Any]:
    import time

    fn(ws[0])  # warm: page cache, numba kernels, first calls of the actors
    seconds = []
    for w in ws:
        t0 = time.perf_counter()
        fn(w)
        seconds.append(time.perf_counter() - t0)
    return spread(seconds)


def measure(path: Any, client: Any, calls: int) -> dict[str, Any]:
    """Every call of :data:`CALLS` on one store."""
    import dask

    import dpipe
    from dpipe.engine import RankPasses, ShardedDataset
    from dpipe.fit import StructuralRisk, smoothed_objective
    from dpipe.objectives import StructuralLoss
    from dpipe.reduce import class_moments_of_shard, merge_moments

    st = dpipe.open_store(str(path))
    m = st.manifest
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal(m.n_features) * 0.05 for _ in range(calls)]
    row: dict[str, Any] = {"rows": m.n_rows, "features": m.n_features, "shards": st.n_shards, "store_mb": st.nbytes / 1e6}
    with ShardedDataset(st, client, cache="stream") as streamed:
        row["plain pass, disk"] = _timed(lambda w: streamed.map_reduce(_plain_pass, _add, w), ws)
    with ShardedDataset(st, client, cache="memory") as ds:
        row["load_seconds"] = ds.load_seconds
        # what the fits evaluate: the smoothed risks at t = 2e-3 / mu = 2e-3 / n plus lam/2 ||w||^2 (lam = 1e-4), the rocarea oracle
        auc = smoothed_objective(RankPasses(ds), "auc-smooth", 2e-3, 1e-4)
        with dask.config.set({"dpipe.rank-exchange": "driver"}):
            auc_driver = smoothed_objective(RankPasses(ds), "auc-smooth", 2e-3, 1e-4)
        prbep = smoothed_objective(RankPasses(ds), "prbep-smooth", 2e-3 / m.n_rows, 1e-4)
        risk = StructuralRisk(RankPasses(ds), StructuralLoss("rocarea"), bias=0.0)
        row["plain pass, memory"] = _timed(lambda w: ds.map_reduce(_plain_pass, _add, w), ws)
        row["auc-smooth"] = _timed(auc.value_and_grad, ws)
        row["auc-smooth exchange"] = auc.inner.exchange
        row["auc-smooth parts"] = {k: float(v) for k, v in auc.last.items() if k.startswith("seconds_")}
        row["auc-smooth bytes moved"] = auc.last.get("bytes_moved")
        row["auc-smooth bytes exchanged"] = auc.last.get("bytes_exchanged", 0.0)
        row["auc-smooth, driver-merged"] = _timed(auc_driver.value_and_grad, ws)
        row["auc-smooth, driver-merged bytes moved"] = auc_driver.last.get("bytes_moved")
        row["prbep-smooth"] = _timed(prbep.value_and_grad, ws)
        row["rocarea oracle"] = _timed(risk.plane, ws)
        row["auc-moment pass"] = _timed(lambda w: ds.map_reduce(class_moments_of_shard, merge_moments), ws[: max(3, calls // 3)])
    return row


def exponent(rows: list[int], seconds: list[float]) -> float:
    """Slope of log(seconds) on log(rows)."""
    return float(np.polyfit(np.log(rows), np.log(seconds), 1)[0])


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    sizes = QUICK if cfg.quick else SIZES
    calls = max(cfg.repeats, 5)
    paths = [synthetic_store(cfg.work, n, FEATURES) for n in sizes]
    rows = []
    with local_cluster() as client:
        for path in paths:
            rows.append(measure(path, client, calls))
            print(f"  {rows[-1]['rows']:,} rows: " + ", ".join(f"{c} {1e3 * rows[-1][c]['median']:.0f} ms" for c in CALLS), flush=True)
    n = [r["rows"] for r in rows]
    summary = {c: {"exponent": exponent(n, [r[c]["median"] for r in rows]),
                   "ratio_to_disk_pass": [r[c]["median"] / r["plain pass, disk"]["median"] for r in rows],
                   "ratio_to_memory_pass": [r[c]["median"] / r["plain pass, memory"]["median"] for r in rows]} for c in CALLS}
    lines = [
        f"d = {FEATURES}; milliseconds, median (min-max) of {calls} calls at random weights; ratios are to the plain pass from disk "
        "(read + X @ w) at the same size, in the same run.",
        "",
        *table_head(["rows", "shards", *CALLS]),
    ]
    for r in rows:
        lines.append(f"| {r['rows']:,} | {r['shards']} | " + " | ".join(fmt_spread(r[c], 1e3, 0) for c in CALLS) + " |")
    lines += ["", *table_head(["call", "fitted exponent", "ratio to the disk pass, per size", "ratio to the memory pass, per size"])]
    for c in CALLS:
        s = summary[c]
        lines.append(f"| {c} | {s['exponent']:.3f} | " + ", ".join(f"{x:.2f}" for x in s["ratio_to_disk_pass"]) + " | "
                     + ", ".join(f"{x:.2f}" for x in s["ratio_to_memory_pass"]) + " |")
    lines += ["", "One auc-smooth evaluation against the two-pass floor (2 x the plain pass over persisted shards, same run), and the "
              "bytes through the driver:", "",
              *table_head(["rows", "route (auto)", "evaluation / floor", "driver MB", "MB between workers", "driver-merged / floor", "driver MB, driver-merged"])]
    for r in rows:
        floor = 2 * r["plain pass, memory"]["median"]
        lines.append(f"| {r['rows']:,} | {r['auc-smooth exchange']} | {r['auc-smooth']['median'] / floor:.2f} | {r['auc-smooth bytes moved'] / 1e6:.3f} | "
                     f"{r['auc-smooth bytes exchanged'] / 1e6:.1f} | {r['auc-smooth, driver-merged']['median'] / floor:.2f} | "
                     f"{r['auc-smooth, driver-merged bytes moved'] / 1e6:.1f} |")
    last = rows[-1]
    lines += ["", f"Its parts at {last['rows']:,} rows (ms, the last call): "
              + ", ".join(f"{k.removeprefix('seconds_')} {1e3 * v:.0f}" for k, v in last["auc-smooth parts"].items()) + "."]
    plot = _plot(rows, cfg.out_dir / "scaling.png")
    lines += ["", f"![scaling]({plot.name})"]
    return {"features": FEATURES, "calls": calls, "rows": rows, "summary": summary}, "\n".join(lines)


def _plot(rows: list[dict[str, Any]], dest: Any) -> Any:
    plt = pyplot()
    n = np.array([r["rows"] for r in rows], dtype=float)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for c in CALLS:
        med = np.array([r[c]["median"] for r in rows])
        err = np.array([[med[i] - r[c]["min"], r[c]["max"] - med[i]] for i, r in enumerate(rows)]).T
        ax.errorbar(n, med, yerr=err, fmt="o--" if c.startswith("plain") else "s-", capsize=3, label=c)
    ax.plot(n, rows[0]["plain pass, disk"]["median"] * n / n[0], ":", color="grey", label="slope 1")
    ax.set(xscale="log", yscale="log", xlabel="rows", ylabel="seconds per call", title=f"One call vs one pass (d = {FEATURES}, 2 workers)")
    ax.legend(fontsize=7)
    return save_figure(fig, dest)
