"""convergence: J(w) and the test metric against wall time, per solver.

The shape of the smoothing paper's Figures 1-4. For ROC-AUC (``auc-smooth`` /
``rocarea``) and PRBEP (``prbep-smooth`` / ``prbep``), at lam = 1e-4 (SVM-perf's
C = 100), on the whole training file with the official test file as validation store:

* L-BFGS on the smoothed risk at the paper's smoothing mu^, 100 mu^ and 1000 mu^,
  and with continuation (1000 mu^ shrunk tenfold per stage, warm-started), from w = 0;
* L-BFGS at mu^ from the auc-moment start (``init="auc-moment"``: the moment closed-form
  direction scaled to the objective's minimum along it; its two passes are counted);
* SVM-perf's 1-slack cutting planes on the exact risk (for PRBEP at lam / 4: the
  smoothed PRBEP scores with a factor 2, so ``J_smooth(w; lam) = J_perf(2 w; lam / 4)``
  and both report the same J).

J is the exact, non-smooth objective that every iteration records. The time of an
iteration is the shard loading (plus the column-scale pass on kdd99, standardized)
plus the solver's clock, which stops while the per-iteration test pass runs. A run's
*time to J* is that time at the first iteration with ``J <= (1 + 1e-3) J_best``,
J_best the lowest J any solver reached in any run; its ratio to the cutting plane's
is taken within the same round of runs.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .._harness import Config, fmt_spread, pyplot, quiet_train, save_figure, spread, table_head, warm_cluster
from ..datasets import ingest_pair

LAM = 1e-4
#: measure -> (smoothed objective, cutting-plane objective, validation key)
MEASURES = {"ROC-AUC": ("auc-smooth", "rocarea", "validation_auc"), "PRBEP": ("prbep-smooth", "prbep", "validation_prbep")}
#: L-BFGS in raw (or standardized) coordinates, no preconditioning, from w = 0 (the defaults would be
#: the moments preconditioner and the auc-moment start)
PLAIN = {"precondition": "none", "init": "zeros"}
#: solver label -> options of the smoothed objective (None: the cutting plane)
SOLVERS: dict[str, dict[str, Any] | None] = {
    "L-BFGS mu^": {"mu_scale": 1.0, **PLAIN},
    "L-BFGS 100 mu^": {"mu_scale": 100.0, **PLAIN},
    "L-BFGS 1000 mu^": {"mu_scale": 1000.0, **PLAIN},
    "L-BFGS continuation": {"continuation": True, **PLAIN},
    "L-BFGS mu^, auc-moment start": {"mu_scale": 1.0, "precondition": "none", "init": "auc-moment"},
    "cutting plane": None,
}
#: dataset -> (standardize, cutting-plane eps, L-BFGS iterations, cutting-plane iterations)
DATASETS = {"a9a": (False, 1e-4, 200, 500), "kdd99": (True, 2e-7, 100, 200)}
QUICK = {"a9a": (False, 1e-4, 20, 40)}
TOLERANCE = 1e-3


def _fit(dpipe: Any, client: Any, train: str, test: str, measure: str, solver: str, setup: tuple) -> dict[str, Any]:
    standardize, eps, lbfgs_iter, cp_iter = setup
    smooth, perf, key = MEASURES[measure]
    opts = SOLVERS[solver]
    common = dict(client=client, validation=test, standardize=standardize, calibrate=False, train_metrics=False)
    t0 = time.perf_counter()
    if opts is None:
        lam = LAM / 4 if perf == "prbep" else LAM
        model, caught = quiet_train(dpipe, train, perf, lam=lam, eps=eps, max_iter=cp_iter, **common)
    else:
        model, caught = quiet_train(dpipe, train, smooth, lam=LAM, max_iter=lbfgs_iter, **opts, **common)
    wall = time.perf_counter() - t0
    fit = model.fit
    hist = fit["history"]
    return {
        "wall_seconds": wall, "nit": fit["nit"], "nfev": fit.get("nfev"), "message": fit["message"], "warnings": caught,
        "time": [fit["time_data"] + h["seconds"] for h in hist], "J": [h["J"] for h in hist], "metric": [h.get(key) for h in hist],
    }


def first_time(r: dict[str, Any], target: float) -> float | None:
    """Time of the first iteration of run ``r`` with J <= target (None: never)."""
    return next((t for t, j in zip(r["time"], r["J"]) if j <= target), None)


def ratios_to_cutting_plane(runs: list[dict[str, Any]], cp_runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per round: the cutting plane's time to its own lowest J over this solver's time to that J; None if a run never got there."""
    ratios = []
    for r, cp in zip(runs, cp_runs):
        target = min(cp["J"])
        t = first_time(r, target)
        if t is None:
            return None
        ratios.append(first_time(cp, target) / t)
    return spread(ratios)


def _summary(runs: list[dict[str, Any]], j_best: float) -> dict[str, Any]:
    times = [first_time(r, j_best * (1 + TOLERANCE)) for r in runs]
    reached = [t for t in times if t is not None]
    return {
        "time_to_J": spread(reached) if len(reached) == len(runs) else None,
        "reached_in_runs": len(reached),
        "J_final": float(np.median([r["J"][-1] for r in runs])),
        "J_min": float(min(min(r["J"]) for r in runs)),
        "metric_final": float(np.median([r["metric"][-1] for r in runs])),
        "metric_best": float(max(max(m for m in r["metric"] if m is not None) for r in runs)),
        "iterations": float(np.median([r["nit"] for r in runs])),
        "wall_seconds": spread([r["wall_seconds"] for r in runs]),
        "per_run_time_to_J": times,
    }


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    import dpipe

    datasets = QUICK if cfg.quick else DATASETS
    results: dict[str, Any] = {"lam": LAM, "tolerance": TOLERANCE, "datasets": {}}
    lines = [
        f"lam = {LAM:g}. Time to J: seconds (median, min-max over {cfg.repeats} runs) until J <= (1 + {TOLERANCE:g}) J_best, "
        "J_best the lowest J of any solver and run. *vs cutting plane*: the time the cutting plane took to reach its own lowest J over the time "
        "the solver took to reach that J, per round, median (min-max); '-': the solver never reached it. "
        "'not reached': some run never got there within its iteration limit.",
        "",
        *table_head(["dataset", "measure", "solver", "time to J (s)", "vs cutting plane", "final J / J_best - 1", "iterations",
                     "final / best test metric", "wall s per run"]),
    ]
    with warm_cluster(cfg.work) as client:
        for name, setup in datasets.items():
            train, test = ingest_pair(name, cfg.data_dir, cfg.work)
            per_measure: dict[str, Any] = {}
            for measure in MEASURES:
                runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SOLVERS}
                for r in range(cfg.repeats):
                    for solver in SOLVERS:
                        runs[solver].append(_fit(dpipe, client, train, test, measure, solver, setup))
                        print(f"  {name} {measure} {solver} run {r + 1}: {runs[solver][-1]['nit']} its, J {runs[solver][-1]['J'][-1]:.8g}, "
                              f"{runs[solver][-1]['wall_seconds']:.1f} s", flush=True)
                j_best = min(min(x["J"]) for rs in runs.values() for x in rs)
                summary = {s: _summary(rs, j_best) for s, rs in runs.items()}
                for s, sm in summary.items():
                    sm["speedup_vs_cutting_plane"] = ratios_to_cutting_plane(runs[s], runs["cutting plane"])
                    lines.append(
                        f"| {name} | {measure} | {s} | {fmt_spread(sm['time_to_J']) if sm['time_to_J'] else 'not reached'} | "
                        f"{fmt_spread(sm['speedup_vs_cutting_plane']) + 'x' if sm['speedup_vs_cutting_plane'] else '-'} | "
                        f"{sm['J_final'] / j_best - 1:.2e} | {sm['iterations']:.0f} | {sm['metric_final']:.5f} / {sm['metric_best']:.5f} | "
                        f"{fmt_spread(sm['wall_seconds'], digits=1)} |"
                    )
                per_measure[measure] = {"J_best": j_best, "summary": summary, "runs": runs}
            results["datasets"][name] = {"standardize": setup[0], "cp_eps": setup[1], "lbfgs_max_iter": setup[2], "cp_max_iter": setup[3], **per_measure}
            plot = _plot(name, per_measure, cfg.out_dir / f"convergence_{name}.png")
            lines.append("")
            lines.append(f"![{name}]({plot.name})")
            lines.append("")
    return results, "\n".join(lines)


def _median_run(rs: list[dict[str, Any]]) -> dict[str, Any]:
    order = np.argsort([r["wall_seconds"] for r in rs])
    return rs[int(order[len(rs) // 2])]


def _plot(name: str, per_measure: dict[str, Any], dest: Any) -> Any:
    plt = pyplot()
    fig, axes = plt.subplots(2, len(per_measure), figsize=(5.2 * len(per_measure), 7.2), squeeze=False)
    for col, (measure, res) in enumerate(per_measure.items()):
        j_best = res["J_best"]
        for solver, rs in res["runs"].items():
            r = _median_run(rs)
            style = "k--" if solver == "cutting plane" else "-"
            best_so_far = np.minimum.accumulate(np.asarray(r["J"]))  # what the solver would return if stopped there
            axes[0, col].semilogy(r["time"], np.maximum(best_so_far / j_best - 1, 1e-7), style, label=solver)
            axes[1, col].plot(r["time"], r["metric"], style, label=solver)
        axes[0, col].axhline(TOLERANCE, color="grey", lw=0.8)
        axes[0, col].set(title=f"{name}: {measure} objective", xlabel="seconds", ylabel="lowest J so far / J_best - 1")
        axes[1, col].set(xlabel="seconds", ylabel=f"test {measure}")
        metrics = [m for rs in res["runs"].values() for r in rs for m in r["metric"] if m is not None]
        low, top = float(np.percentile(metrics, 10)), max(metrics)
        axes[1, col].set_ylim(low, top + 0.05 * (top - low) + 1e-6)
        axes[0, col].legend(fontsize=7)
    return save_figure(fig, dest)
