"""out-of-core: training on a store several times larger than the workers' memory.

dpipe's own embedded cluster (:func:`dpipe.engine.cluster_client`: 2 worker processes,
TLS, no spilling or pausing, the nanny's restart at 95 % of the limit) trains
``auc-moment`` (one pass) and ``auc-smooth`` (a fixed budget of L-BFGS iterations, two
passes each) on a generated store (d = 120) whose arrays take at least three times the
two workers' limits together, streaming every shard from the store in each pass
(``cache="stream"``). Two limits per worker: 500 MB, and the smallest limit dpipe
accepts for this store (``ShardedDataset.minimum_memory_limit``: the workers' measured
footprint, the rows' remembered order and one shard in flight, see
``dpipe/engine/_memory.py``), measured first on a fresh cluster. Every fit runs on a fresh
cluster, as from the command line; after it the suite reads each worker's peak resident
set size (``VmHWM``) and checks that no worker was restarted.

For comparison, in the same run, the same fits on a 10^6-row store that fits in
memory, with the shards persisted in worker memory (``cache="memory"``) and streamed,
on a cluster with dask's default memory limit. Times are compared per million rows.
"""

from __future__ import annotations

import math
import time
from typing import Any

from .._harness import Config, fmt_spread, local_cluster, quiet_train, spread, synthetic_store, table_head, warm_up, worker_peak_rss

#: per worker, in bytes: the limit the issue was measured at; the other is the smallest dpipe accepts
MEMORY_LIMIT = 500_000_000
FEATURES = 120
#: rows per shard of the big store: 15.7 MB shards (a shard in flight costs about three times its size)
SHARD_ROWS = 32768
SMALL_ROWS = 1_000_000
STREAMED = ("auc-moment", "auc-smooth")
#: L-BFGS iterations of auc-smooth (full, quick); each costs about two evaluations of two passes
SMOOTH_ITERATIONS = (5, 1)


def _rows_for(memory_limit: int, workers: int = 2, factor: float = 3.0) -> int:
    """Rows of a d = 120 float32 store at least ``factor`` times the workers' total memory limit, rounded up to 10^6."""
    return int(math.ceil(factor * workers * memory_limit / (FEATURES * 4) / 1e6) * 1e6)


def _opts(objective: str, iterations: int) -> dict[str, Any]:
    # from w = 0 without preconditioning: two passes per evaluation and none before (the defaults add a moments and a score pass)
    return {"max_iter": iterations, "tol": 1e-12, "precondition": "none", "init": "zeros"} if objective == "auc-smooth" else {}


def _passes(objective: str, model: Any) -> int:
    return 1 if objective == "auc-moment" else 2 * int(model.fit.get("nfev") or model.fit["nit"])


def _minimum_limit(store: str) -> int:
    """The smallest worker memory limit dpipe accepts for streaming ``store`` on a fresh 2-worker embedded cluster."""
    from dpipe.engine import ShardedDataset, cluster_client

    with cluster_client(workers=2, memory_limit=4 * MEMORY_LIMIT) as client, ShardedDataset(store, client, cache="stream") as ds:
        return int(ds.minimum_memory_limit)


def _streamed_fits(dpipe: Any, store: str, limit: int, repeats: int, iterations: int) -> dict[str, Any]:
    """Each objective ``repeats`` times, each fit on a fresh embedded cluster with ``limit`` per worker."""
    from dpipe.engine import cluster_client

    out: dict[str, Any] = {"peak_rss": {}, "workers_restarted": False}
    for objective in STREAMED:
        seconds, last = [], None
        try:
            for _ in range(repeats):
                with cluster_client(workers=2, memory_limit=limit) as client:
                    pids = client.run(lambda: __import__("os").getpid())
                    t0 = time.perf_counter()
                    last, caught = quiet_train(dpipe, store, objective, client=client, cache="stream", train_metrics=False, calibrate=False,
                                               **_opts(objective, iterations))
                    seconds.append(time.perf_counter() - t0)
                    for i, rss in enumerate(worker_peak_rss(client).values()):
                        out["peak_rss"][f"worker {i}"] = max(out["peak_rss"].get(f"worker {i}", 0), rss)
                    out["workers_restarted"] |= client.run(lambda: __import__("os").getpid()) != pids
        except Exception as exc:  # a refused limit or a worker killed for memory: report it, do not hide it
            out[objective] = {"failed": f"{type(exc).__name__}: {exc}"}
            break
        out[objective] = {"seconds": spread(seconds), "nit": last.fit["nit"], "nfev": last.fit.get("nfev"), "J": last.fit["fun"], "warnings": caught,
                          "passes": _passes(objective, last)}
    return out


def _fits(dpipe: Any, client: Any, store: str, cache: str, repeats: int, iterations: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pids = client.run(lambda: __import__("os").getpid())
    for objective in STREAMED:
        seconds, last = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            last, caught = quiet_train(dpipe, store, objective, client=client, cache=cache, train_metrics=False, calibrate=False, **_opts(objective, iterations))
            seconds.append(time.perf_counter() - t0)
        out[objective] = {"seconds": spread(seconds), "nit": last.fit["nit"], "nfev": last.fit.get("nfev"), "J": last.fit["fun"], "warnings": caught,
                          "passes": _passes(objective, last)}
    out["peak_rss"] = worker_peak_rss(client)
    out["workers_restarted"] = client.run(lambda: __import__("os").getpid()) != pids
    return out


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    import dpipe

    iterations = SMOOTH_ITERATIONS[cfg.quick]
    repeats = 1 if cfg.quick else cfg.repeats
    big = synthetic_store(cfg.work, _rows_for(MEMORY_LIMIT), FEATURES, SHARD_ROWS)
    small = synthetic_store(cfg.work, SMALL_ROWS, FEATURES)
    big_store, small_store = dpipe.open_store(str(big)), dpipe.open_store(str(small))
    minimum = _minimum_limit(str(big))
    print(f"  smallest memory limit accepted for the big store: {minimum / 1e6:.0f} MB per worker", flush=True)
    limits = {"500 MB": MEMORY_LIMIT, "minimum accepted": minimum}
    res: dict[str, Any] = {"memory_limits_per_worker": limits, "workers": 2, "smooth_iterations": iterations,
                           "big": {"path": big.name, "rows": big_store.manifest.n_rows, "nbytes": big_store.nbytes, "shard_rows": SHARD_ROWS},
                           "small": {"path": small.name, "rows": small_store.manifest.n_rows, "nbytes": small_store.nbytes}}
    res["big"]["times_total_limit"] = {name: big_store.nbytes / (2 * limit) for name, limit in limits.items()}
    for name, limit in limits.items():
        part = res["big"][name] = _streamed_fits(dpipe, str(big), limit, repeats, iterations)
        print(f"  {res['big']['rows']:,} rows streamed under {limit / 1e6:.0f} MB per worker: peak RSS "
              f"{max(part['peak_rss'].values(), default=0) / 1e6:.0f} MB", flush=True)
    with local_cluster() as client:
        warm_up(dpipe, client, cfg.work, STREAMED)
        for cache in ("memory",) if cfg.quick else ("memory", "stream"):
            res["small"][cache] = _fits(dpipe, client, str(small), cache, cfg.repeats, iterations)
    lines = [
        f"2 workers x 1 thread (dpipe's embedded cluster for the big store, one fresh cluster per fit). Big store: {res['big']['rows']:,} rows x "
        f"{FEATURES} float32 in shards of {SHARD_ROWS:,} rows = {res['big']['nbytes'] / 1e6:,.0f} MB, "
        + ", ".join(f"{res['big']['times_total_limit'][n]:.1f} times the total limit at {limits[n] / 1e6:.0f} MB per worker" for n in limits)
        + f". The smallest limit dpipe accepts for it is {minimum / 1e6:.0f} MB per worker (measured before the fits). "
        f"auc-smooth runs {iterations} L-BFGS iteration(s). Seconds: median (min-max) of {repeats} fits"
        + (" (--quick: one fit of each on the big store); " if cfg.quick else "; ") +
        "*s per pass per 10^6 rows* divides by the passes over the data and the store's rows.",
        "",
        *table_head(["store", "cache", "memory limit per worker", "objective", "fit s", "passes", "s per pass per 10^6 rows",
                     "peak worker RSS (MB)", "limit (MB)", "workers restarted"]),
    ]
    rows_of = [("big", name, "stream", f"{limit / 1e6:.0f} MB" + ("" if name == f"{limit / 1e6:.0f} MB" else f" ({name})"), limit) for name, limit in limits.items()]
    rows_of += [("small", "memory", "memory", "default", None), ("small", "stream", "stream", "default", None)]
    for key, part_name, cache, limit_text, limit in rows_of:
        if part_name not in res[key]:
            continue
        part = res[key][part_name]
        rss = " / ".join(f"{v / 1e6:.0f}" for v in part["peak_rss"].values())
        for objective in STREAMED:
            f = part.get(objective, {"failed": "not run: an earlier fit failed"})
            restarted = "yes" if part["workers_restarted"] else "no"
            limit_mb = f"{limit / 1e6:.0f}" if limit else "-"
            if "failed" in f:
                lines.append(f"| {res[key]['rows']:,} rows | {cache} | {limit_text} | {objective} | FAILED: {f['failed'][:160]} | - | - | {rss} | {limit_mb} | {restarted} |")
                continue
            per = f["seconds"]["median"] / f["passes"] / (res[key]["rows"] / 1e6)
            f["seconds_per_pass_per_million_rows"] = per
            lines.append(f"| {res[key]['rows']:,} rows | {cache} | {limit_text} | {objective} | {fmt_spread(f['seconds'])} | {f['passes']} | {per:.3f} | "
                         f"{rss} | {limit_mb} | {restarted} |")
    small_m = res["small"]["memory"]
    res["completed"] = {}
    for name, limit in limits.items():
        part = res["big"][name]
        peak = max(part["peak_rss"].values(), default=0)
        completed = all("failed" not in part.get(o, {"failed": 1}) for o in STREAMED)
        res["completed"][name] = completed and not part["workers_restarted"]
        if not completed:
            lines += ["", f"Streaming the big store under {limit / 1e6:.0f} MB per worker did NOT complete (peak worker RSS {peak / 1e6:.0f} MB)."]
            continue
        lines += ["", f"Under {limit / 1e6:.0f} MB per worker" + ("" if name == f"{limit / 1e6:.0f} MB" else f" ({name})") + f": peak worker RSS {peak / 1e6:.0f} MB "
                  f"({peak / limit:.0%} of the limit; the nanny restarts a worker at 95 %), workers restarted: "
                  f"{'yes' if part['workers_restarted'] else 'no'}. Streaming costs "
                  + ", ".join(f"{o} {part[o]['seconds_per_pass_per_million_rows'] / small_m[o]['seconds_per_pass_per_million_rows']:.1f}x" for o in STREAMED)
                  + " the persisted small store's time per pass per row."]
    if "stream" in res["small"]:
        same = {o: res["small"]["stream"][o]["seconds_per_pass_per_million_rows"] / small_m[o]["seconds_per_pass_per_million_rows"]
                for o in STREAMED if "seconds_per_pass_per_million_rows" in res["small"]["stream"].get(o, {})}
        res["small"]["stream_over_memory"] = same
        lines += ["", "The same 10^6-row store streamed against persisted, on the same cluster: "
                  + ", ".join(f"{o} {r:.2f}x" for o, r in same.items()) + " per pass per row (uncompressed shards are memory-mapped by a "
                  "streamed pass: `dpipe.store-codec`, `dpipe.io.read_shard`)."]
    return res, "\n".join(lines)
