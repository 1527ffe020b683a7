"""out-of-core: training on a store three times larger than the workers' memory.

A 2-worker LocalCluster whose workers are each limited to ``MEMORY_LIMIT`` (dask's
``memory_limit``: the nanny restarts a worker at 95 % of it; spilling and the pause at
80 % are off, see ``run``) trains
``auc-moment`` (one pass) and ``auc-smooth`` (a fixed budget of L-BFGS iterations,
two passes each) on a generated store (d = 120) whose arrays take at least three times
the two limits together. The dataset is opened with ``cache="stream"``: every pass
reads each shard from the store and drops it. After each fit the suite reads every
worker's peak resident set size (``VmHWM``) and checks that no worker was restarted.

For comparison, in the same run, the same fits on a 10^6-row store that fits in
memory, with the shards persisted in worker memory (``cache="memory"``) and streamed,
on a cluster with dask's default memory limit. Times are compared per million rows.
"""

from __future__ import annotations

import math
import time
from typing import Any


from .._harness import Config, fmt_spread, local_cluster, quiet_train, spread, synthetic_store, table_head, warm_up, worker_peak_rss

#: per worker. A worker that has imported dpipe and loaded its numba kernels sits at about 275 MiB here;
#: 600 MiB leaves room for one shard in flight and the 16 bytes per row (sorted order and scores)
#: an auc-smooth evaluation keeps between its two passes
MEMORY_LIMIT = 600 * 2**20
FEATURES = 120
#: rows per shard of the big store: 15 MiB shards (a shard in flight costs about three times its size)
SHARD_ROWS = 32768
SMALL_ROWS = 1_000_000
#: the objectives trained here; only their code is loaded on the workers (the full warm-up would
#: raise the workers' resting RSS)
STREAMED = ("auc-moment", "auc-smooth")
#: L-BFGS iterations of auc-smooth (full, quick); each costs about two evaluations of two passes
SMOOTH_ITERATIONS = (5, 1)


def _rows_for(memory_limit: int, workers: int = 2, factor: float = 3.0) -> int:
    """Rows of a d = 120 float32 store at least ``factor`` times the workers' total memory limit, rounded up to 10^6."""
    return int(math.ceil(factor * workers * memory_limit / (FEATURES * 4) / 1e6) * 1e6)


def _fits(dpipe: Any, client: Any, store: str, cache: str, repeats: int, iterations: int, smooth_repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pids = client.run(lambda: __import__("os").getpid())
    for objective in STREAMED:
        # from w = 0 without preconditioning: two passes per evaluation and none before (the defaults add a moments and a score pass)
        opts = {"max_iter": iterations, "tol": 1e-12, "precondition": "none", "init": "zeros"} if objective == "auc-smooth" else {}
        seconds, last = [], None
        try:
            for _ in range(repeats if objective == "auc-moment" else smooth_repeats):
                t0 = time.perf_counter()
                last, caught = quiet_train(dpipe, store, objective, client=client, cache=cache, train_metrics=False, calibrate=False, **opts)
                seconds.append(time.perf_counter() - t0)
        except Exception as exc:  # a worker killed for memory: report it, do not hide it
            out[objective] = {"failed": f"{type(exc).__name__}: {exc}"}
            break
        out[objective] = {"seconds": spread(seconds), "nit": last.fit["nit"], "nfev": last.fit.get("nfev"), "J": last.fit["fun"], "warnings": caught,
                          "passes": 1 if objective == "auc-moment" else 2 * int(last.fit.get("nfev") or last.fit["nit"])}
    out["peak_rss"] = worker_peak_rss(client)
    out["workers_restarted"] = client.run(lambda: __import__("os").getpid()) != pids
    return out


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    import dask
    import distributed  # noqa: F401  (its config defaults must be loaded before dask.config.set overrides them)

    import dpipe

    iterations = SMOOTH_ITERATIONS[cfg.quick]
    big = synthetic_store(cfg.work, _rows_for(MEMORY_LIMIT), FEATURES, SHARD_ROWS)
    small = synthetic_store(cfg.work, SMALL_ROWS, FEATURES)
    big_store, small_store = dpipe.open_store(str(big)), dpipe.open_store(str(small))
    res: dict[str, Any] = {"memory_limit_per_worker": MEMORY_LIMIT, "workers": 2, "smooth_iterations": iterations,
                           "big": {"path": big.name, "rows": big_store.manifest.n_rows, "nbytes": big_store.nbytes},
                           "small": {"path": small.name, "rows": small_store.manifest.n_rows, "nbytes": small_store.nbytes}}
    res["big"]["times_total_limit"] = big_store.nbytes / (2 * MEMORY_LIMIT)
    # Nothing a streaming fit holds is dask-managed data, so spilling frees nothing, and a worker
    # paused at 80 % never resumes: at 600 MiB the auc-smooth fit deadlocked that way at about
    # 495 MiB. Spilling and pausing are off; dask's restart at 95 % of the limit stays on.
    with dask.config.set({"distributed.worker.memory.spill": False, "distributed.worker.memory.target": False,
                          "distributed.worker.memory.pause": False}), \
            local_cluster(memory_limit=MEMORY_LIMIT) as client:
        warm_up(dpipe, client, cfg.work, STREAMED)
        res["big"]["stream"] = _fits(dpipe, client, str(big), "stream", 1 if cfg.quick else cfg.repeats, iterations, 1 if cfg.quick else cfg.repeats)
        print(f"  {res['big']['rows']:,} rows streamed under {MEMORY_LIMIT / 2**20:.0f} MiB per worker: "
              f"peak RSS {max(res['big']['stream']['peak_rss'].values()) / 2**20:.0f} MiB", flush=True)
    with local_cluster() as client:
        warm_up(dpipe, client, cfg.work, STREAMED)
        for cache in ("memory",) if cfg.quick else ("memory", "stream"):
            res["small"][cache] = _fits(dpipe, client, str(small), cache, cfg.repeats, iterations, cfg.repeats)
    lines = [
        f"2 workers x 1 thread. Big store: {res['big']['rows']:,} rows x {FEATURES} float32 = {res['big']['nbytes'] / 2**20:.0f} MiB, "
        f"{res['big']['times_total_limit']:.2f} times the workers' total memory limit of 2 x {MEMORY_LIMIT / 2**20:.0f} MiB. "
        f"auc-smooth runs {iterations} L-BFGS iteration(s). Seconds: median (min-max) of {cfg.repeats} fits"
        + (" (--quick: one fit of each on the big store); " if cfg.quick else "; ") +
        "*s per pass per 10^6 rows* divides by the passes over the data and the store's rows.",
        "",
        *table_head(["store", "cache", "memory limit per worker", "objective", "fit s", "passes", "s per pass per 10^6 rows",
                     "peak worker RSS (MiB)", "workers restarted"]),
    ]
    for key, cache, limit in (("big", "stream", f"{MEMORY_LIMIT / 2**20:.0f} MiB"), ("small", "memory", "default"), ("small", "stream", "default")):
        if cache not in res[key]:
            continue
        part = res[key][cache]
        rss = " / ".join(f"{v / 2**20:.0f}" for v in part["peak_rss"].values())
        for objective in STREAMED:
            f = part.get(objective, {"failed": "not run: an earlier fit failed"})
            if "failed" in f:
                lines.append(f"| {res[key]['rows']:,} rows | {cache} | {limit} | {objective} | FAILED: {f['failed'][:120]} | - | - | {rss} | "
                             f"{'yes' if part['workers_restarted'] else 'no'} |")
                continue
            per = f["seconds"]["median"] / f["passes"] / (res[key]["rows"] / 1e6)
            f["seconds_per_pass_per_million_rows"] = per
            lines.append(f"| {res[key]['rows']:,} rows | {cache} | {limit} | {objective} | {fmt_spread(f['seconds'])} | {f['passes']} | {per:.3f} | {rss} | "
                         f"{'yes' if part['workers_restarted'] else 'no'} |")
    big_s, small_m = res["big"]["stream"], res["small"]["memory"]
    peak = max(big_s["peak_rss"].values())
    completed = all("failed" not in big_s.get(o, {"failed": 1}) for o in STREAMED)
    res["completed"] = completed
    res["peak_rss_under_limit"] = bool(peak < MEMORY_LIMIT and not big_s["workers_restarted"])
    if not completed:
        lines += ["", f"Streaming the big store did NOT complete (peak worker RSS {peak / 2**20:.0f} MiB of {MEMORY_LIMIT / 2**20:.0f} MiB)."]
        return res, "\n".join(lines)
    lines += ["", f"Peak worker RSS while streaming the big store: {peak / 2**20:.0f} MiB of the {MEMORY_LIMIT / 2**20:.0f} MiB limit "
              f"({'under' if res['peak_rss_under_limit'] else 'NOT under'} it). Streaming the big store costs "
              + ", ".join(f"{o} {big_s[o]['seconds_per_pass_per_million_rows'] / small_m[o]['seconds_per_pass_per_million_rows']:.1f}x"
                          for o in STREAMED)
              + " the persisted small store's time per pass per row."]
    return res, "\n".join(lines)
