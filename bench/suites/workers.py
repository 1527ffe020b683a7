"""workers: one against two worker processes on the same store (this machine has 2 cores).

A generated store (d = 120) is trained by every objective family on a LocalCluster of
one worker process and on one of two (one thread each, dask's default memory
limit, shards persisted in worker memory). Each fit does a fixed amount of work:
the moment objectives one pass, the smoothed objectives 20 L-BFGS iterations (5 with
``--quick``), the cutting plane as many (eps small enough not to stop it). Reported: the fit's wall time (shard loading included), the solver's seconds
per iteration, and the speed-up of two workers over one, per round, median (min-max).

A control measures what two processes can gain on this machine at all: on the two-worker
cluster, the same fixed NumPy work (float32 matrix-vector products over 120 MB and sorts
of small arrays, no dask in the loop) runs on one worker alone, then on both at the same
moment, round after round. Two workers doing twice the work in the time one does it
would be a ceiling of 2.0; the measured ceiling (the median over the rounds) is what the
speed-ups compare with.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .._harness import Config, fmt_spread, quiet_train, spread, synthetic_store, table_head, warm_cluster

ROWS, QUICK_ROWS = 5_000_000, 1_000_000
FEATURES = 120
#: iterations of the smoothed and cutting-plane fits (full, quick)
ITERATIONS = (20, 5)
OBJECTIVES = ("auc-moment", "error-moment", "auc", "auc-smooth", "prbep-smooth", "rocarea")
#: Newton iterations of the auc fit (full, quick): each holds several CG steps, the unit its row reports
NEWTON_ITERATIONS = (4, 2)


def _options(objective: str, iterations: int) -> dict[str, Any]:
    """Train options that fix the work: no early stop by tolerance."""
    if objective.endswith("-moment"):
        return {}
    if objective == "rocarea":
        return {"max_iter": iterations, "eps": 1e-12}
    if objective == "auc":  # trust-region Newton, raw features (no column pass): its CG steps are the work
        return {"max_iter": NEWTON_ITERATIONS[iterations == ITERATIONS[1]], "eps": 1e-12, "standardize": False}
    # from w = 0 without preconditioning: the iterations are the whole work (the defaults add a moments and a score pass)
    return {"max_iter": iterations, "tol": 1e-12, "precondition": "none", "init": "zeros"}


def _one(dpipe: Any, client: Any, store: str, objective: str, iterations: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    model, _ = quiet_train(dpipe, store, objective, client=client, cache="memory", train_metrics=False, calibrate=False, **_options(objective, iterations))
    wall = time.perf_counter() - t0
    hist = model.fit["history"]
    # the moment objectives have no iterations over the data: their fit is one pass
    per_iteration = hist[-1]["seconds"] / len(hist) if hist and objective not in ("auc-moment", "error-moment") else None
    steps = len(hist)
    if objective == "auc":  # per step: a CG step (two passes in the kept order) or an evaluation (a score pass, a gradient pass)
        steps = int(model.fit["info"]["cg_steps"]) + int(model.fit["nfev"])
        per_iteration = hist[-1]["seconds"] / steps
    return {"wall": wall, "nit": model.fit["nit"], "steps": steps, "per_iteration": per_iteration}


def _control_work() -> dict[str, float]:
    """Fixed work in one worker process: memory-bound products and in-cache sorts (seconds each)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((250_000, 120)).astype(np.float32)
    w = rng.standard_normal(120).astype(np.float32)
    x = rng.standard_normal(20_000)
    X @ w
    t0 = time.perf_counter()
    for _ in range(40):
        X @ w
    t1 = time.perf_counter()
    for _ in range(400):
        np.sort(x)
    return {"products": t1 - t0, "sorts": time.perf_counter() - t1}


def control(client: Any, rounds: int) -> dict[str, float]:
    """Two processes' ceiling on this machine: per round, :func:`_control_work` on one worker alone, then on two at once;
    ``2 x alone / together`` (the slower of the two), the median over the rounds."""
    workers = sorted(client.scheduler_info()["workers"])[:2]
    ratios: dict[str, list[float]] = {"products": [], "sorts": []}
    client.run(_control_work, workers=workers)  # warm
    for _ in range(rounds):
        alone = client.run(_control_work, workers=workers[:1])[workers[0]]
        both = client.run(_control_work, workers=workers)
        for k in ratios:
            ratios[k].append(2.0 * alone[k] / max(r[k] for r in both.values()))
    return {k: float(np.median(v)) for k, v in ratios.items()}


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    import dpipe

    store = str(synthetic_store(cfg.work, QUICK_ROWS if cfg.quick else ROWS, FEATURES))
    iterations = ITERATIONS[cfg.quick]
    objectives = [o for o in OBJECTIVES if o in cfg.tasks] if cfg.tasks else list(OBJECTIVES)  # --tasks: a subset of the objectives
    runs: dict[int, dict[str, list[dict[str, Any]]]] = {}
    ceiling: dict[str, float] = {}
    for n_workers in (1, 2):
        with warm_cluster(cfg.work, n_workers) as client:
            if n_workers == 2:
                ceiling = control(client, max(5, cfg.repeats))
            runs[n_workers] = {o: [_one(dpipe, client, store, o, iterations) for _ in range(cfg.repeats)] for o in objectives}
        print(f"  {n_workers} worker(s): " + ", ".join(f"{o} {np.median([r['wall'] for r in rs]):.2f} s" for o, rs in runs[n_workers].items()), flush=True)
    rows = dpipe.open_store(store).manifest.n_rows
    lines = [
        f"{rows:,} rows x {FEATURES}; 1 thread per worker; {cfg.repeats} fits per cell, median (min-max). "
        f"Smoothed and cutting-plane fits run {iterations} iterations; auc runs {NEWTON_ITERATIONS[cfg.quick]} Newton iterations and its "
        "row is per step (a CG step or an evaluation; the iterations column counts those steps). "
        "Speed-up: the one-worker time over the two-worker time, per round.",
        "",
        *table_head(["objective", "iterations", "fit s, 1 worker", "fit s, 2 workers", "speed-up (fit)", "s per iteration, 1 worker",
                     "s per iteration, 2 workers", "speed-up (per iteration)"]),
    ]
    summary = {}
    for o in objectives:
        one, two = runs[1][o], runs[2][o]
        fit = spread([a["wall"] for a in one]), spread([b["wall"] for b in two])
        per_it = one[0]["per_iteration"] is not None
        it = (spread([a["per_iteration"] for a in one]), spread([b["per_iteration"] for b in two])) if per_it else (None, None)
        summary[o] = {
            "fit_seconds": {"1": fit[0], "2": fit[1]}, "per_iteration_seconds": {"1": it[0], "2": it[1]},
            "speedup_fit": spread([a["wall"] / b["wall"] for a, b in zip(one, two)]),
            "speedup_per_iteration": spread([a["per_iteration"] / b["per_iteration"] for a, b in zip(one, two)]) if per_it else None,
            "nit": [one[0]["nit"], two[0]["nit"]],
        }
        s = summary[o]
        count = (lambda r: r.get("steps", r["nit"])) if o == "auc" else (lambda r: r["nit"])
        lines.append(f"| {o} | {count(one[0])} / {count(two[0])} | {fmt_spread(fit[0])} | {fmt_spread(fit[1])} | {fmt_spread(s['speedup_fit'])}x | "
                     f""
                     + (f"{fmt_spread(it[0], 1e3, 0)} ms | {fmt_spread(it[1], 1e3, 0)} ms | {fmt_spread(s['speedup_per_iteration'])}x |" if per_it else "- | - | - |"))
    lines += ["", "Control (the same fixed NumPy work on one worker alone, then on both at once, no dask in the loop; median of "
              f"{max(5, cfg.repeats)} rounds): two workers do twice the work of one in {2 / ceiling['products']:.2f}x the time for "
              f"memory-bound products and {2 / ceiling['sorts']:.2f}x for in-cache sorts: the most two processes can gain on this "
              f"machine is {ceiling['products']:.2f}x and {ceiling['sorts']:.2f}x (2.0 on two idle physical cores)."]
    return {"rows": rows, "features": FEATURES, "iterations": iterations, "summary": summary,
            "ceiling": ceiling, "runs": {str(k): v for k, v in runs.items()}}, "\n".join(lines)
