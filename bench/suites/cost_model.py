"""cost-model: time per evaluation against rows and workers, from measured constants.

Reads the ``scaling`` and ``workers`` suites' results (run them first; this suite measures
nothing itself) and fits a model of one auc-smooth evaluation (value and gradient) for
both routes dpipe has, each measured in the scaling suite:

*On the workers (range-partitioned, the default from 500,000 rows).* Each host scores and
sorts its shards, merges and weighs its ranges of the score axis, and computes its
shards' ``X^T g``; the driver sees O(k) summaries::

    T(n, W) = t0 + n (c_host / e_W + c_round) / W + n x (W - 1) / W^2 / bandwidth

``c_host``: the hosts' own seconds per row (the scaling suite's host parts: score,
exchange, gradient), ``e_W``: this machine's parallel efficiency (1 for one worker; for
two, the workers suite's control: two processes do twice the work in ``2 / ceiling``
times the time); ``t0 + n c_round / W``: the rest (the driver's round trips; a host
waiting for the slower one, serializing its pieces), a straight line through the
2-worker points; ``x``: the bytes a row sends to other
workers (pieces and weights, the scaling suite's count).

*Merged on the driver (before issue 16).* Every score goes to the driver::

    T_d(n, W) = t0_d + n c_driver + n c_pass / (W e_W)

``c_pass``: the hosts' score and gradient seconds per row (the same two passes),
``c_driver``: the rest of a driver-merged evaluation per row.

Each route's two constants are fitted on all its measured sizes (relative least squares;
the workers' route runs from 10^6 rows) and checked against every point; the workers
suite's time per iteration is shown next to the prediction for one evaluation (an
iteration takes one or a few evaluations: not a check). The predictions for 10^7 .. 10^9 rows on 1 .. 256
workers assume a real cluster: ``e_W = 1`` and 10 GbE between the workers.

*The Newton route* (``auc``: squared pairwise hinge, trust-region Newton-CG), from the
``scale-race`` suite's results when present. A fit costs ``nfev`` score passes (sort and
merge), one gradient pass per accepted step, and two passes per CG step (``X d`` in the
kept order, then ``X^T m``; no sort)::

    T_newton = nfev T_it(n, W) + cg T_cg(n, W)

(every evaluation counted with its gradient pass: an upper bound by the rejected steps).
Merged on the driver (the route measured), each part is ``a + n (s + p / (W e_W))``: ``s``
the driver's serial seconds per row (merge or reorder, prefix sums, scatter, loopback
transfer; on 10 GbE the 16 bytes a row would take 12.8 ns), ``p`` the workers' seconds
per row (dpipe's worker functions timed in one process by scale-race); ``a`` and ``s`` a
line through scale-race's 2-worker parts at 10^6 and 10^7 rows, checked against its
1-worker parts. On the workers' range route (projected, not measured here: the CG step's prefix
sums travel in the hosts' halos) a Newton iteration costs an auc-smooth evaluation on the
workers (the same score, exchange and gradient passes) and a CG step
``t0 + n (p_cg + c_prefix) / W``, the prefix sums' measured seconds per row ``c_prefix``
moved onto the hosts. Counts per fit come from scale-race's 10^7-row fit (Newton) and
:data:`EVALUATIONS` (L-BFGS).

*The default fit over a network* (the ``netns`` suite: hosts in network namespaces on capped
links; :func:`network_pass_seconds`). A fit is its passes by kind (its record's
``data_passes_by_kind``, the load and the calibration's pass); a pass of a kind costs::

    T(n, W, rate) = a + n s + (n / W) c + (max(B_worker, B_driver) + B_scheduler / W) / rate

``a``: its fixed seconds (round trips, the driver's O(W) work); ``s``: the driver's seconds a row,
only on passes that bring every row to the driver; ``c``: a host's seconds a row of its share
(measured: on this machine every host shares 2 cores, so the wall rate is inflated; the hosts' CPU
rate is given beside it); ``B``: the bytes on the busiest direction of a worker's link (fixed +
per row of its share), the driver's and the scheduler's (per worker + per row of the store), all
measured per pass on the links; what the scheduler's link carries it relays (dask's client of a
named scheduler), a message at a time. The constants come from the fits with the links uncapped;
the capped fits check the network term.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .._harness import Config, pyplot, save_figure, table_head

#: a worker's network bandwidth on a real cluster (10 GbE), bytes per second
BANDWIDTH = 1.25e9
#: shard rows at d = 120 and the default 64 MB shards
SHARD_ROWS = 131_579
#: bytes per host the driver sees per evaluation on the workers' route (2 x 257 sketch keys and counts, w out three times, a d-vector back)
SUMMARY_BYTES = 2 * 257 * 16 + 4 * 120 * 8
#: evaluations a fit needs (auc-smooth with the defaults: 15 on a9a, 107 on w8a, 110 on kdd99; the convergence suite)
EVALUATIONS = 110
#: the measured sizes the constants are fitted on
FIT_SIZES = (100_000, 1_000_000, 5_000_000, 10_000_000)
ROWS = (10**5, 10**6, 10**7, 10**8, 10**9)
WORKERS = (1, 2, 8, 32, 64, 256)
HOST_PARTS = ("seconds_host_score", "seconds_host_exchange", "seconds_host_gradient")


def _load(cfg: Config, suite: str) -> dict[str, Any]:
    path = cfg.out_dir / f"{suite}.json"
    if not path.exists():
        path = cfg.out_dir.parent / f"{suite}.json"  # --quick: the full results when the quick ones are missing
    if not path.exists():
        raise SystemExit(f"cost-model reads the {suite} suite's results ({cfg.out_dir / f'{suite}.json'}): run `python -m bench {suite}` first")
    return json.loads(path.read_text())


def _optional(cfg: Config, suite: str, lines: list[str], missing: str) -> dict[str, Any] | None:
    """A suite's results for a section of this one (the quick folder's, else the full ones); None, with ``missing`` added to
    ``lines``, when that suite has not run."""
    path = cfg.out_dir / f"{suite}.json"
    if not path.exists():
        path = cfg.out_dir.parent / f"{suite}.json"
    if not path.exists():
        lines += ["", missing]
        return None
    return json.loads(path.read_text())


def _line(n: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """``t ~ a + b n`` by least squares on relative errors."""
    A = np.stack([np.ones_like(n), n], axis=1) / t[:, None]
    a, b = np.linalg.lstsq(A, np.ones_like(n), rcond=None)[0]
    return float(max(a, 0.0)), float(b)


def fit(scaling: dict[str, Any], workers: dict[str, Any]) -> dict[str, float]:
    """The model's constants (seconds, seconds per row) from the two suites' results."""
    rows = {r["rows"]: r for r in scaling["rows"]}
    pts = [rows[n] for n in FIT_SIZES if n in rows and rows[n].get("auc-smooth exchange") == "workers"]
    if len(pts) < 2:
        raise SystemExit(f"cost-model fits on the scaling suite's {FIT_SIZES}-row points on the workers' route; its results have {sorted(rows)}")
    n = np.array([p["rows"] for p in pts], dtype=float)
    e2 = float(workers["ceiling"]["products"]) / 2.0  # the passes are memory-bound products
    host = np.array([sum(p["auc-smooth parts"][k] for k in HOST_PARTS) for p in pts])
    passes = np.array([p["auc-smooth parts"]["seconds_host_score"] + p["auc-smooth parts"]["seconds_host_gradient"] for p in pts])
    total = np.array([p["auc-smooth"]["median"] for p in pts])
    c_host = float(np.mean(host / n)) * 2.0 * e2  # at 2 workers a host does n / 2 rows at efficiency e2
    c_pass = float(np.mean(passes / n)) * 2.0 * e2
    t0, half_round = _line(n, np.maximum(total - host, 1e-6))
    c_round = 2.0 * half_round
    every = [rows[m] for m in FIT_SIZES if m in rows]
    n_d = np.array([p["rows"] for p in every], dtype=float)
    driver = np.array([p["auc-smooth, driver-merged"]["median"] for p in every])
    t0_d, c_driver = _line(n_d, np.maximum(driver - n_d * c_pass / (2.0 * e2), 1e-6))
    x = float(np.mean([p["auc-smooth bytes exchanged"] / p["rows"] for p in pts])) * 2.0  # bytes a row sends at W = 2: half its rows move
    return {"t0": t0, "t0_driver": t0_d, "c_round": c_round, "c_host": c_host, "c_pass": c_pass, "c_driver": max(c_driver, 0.0),
            "bytes_exchanged_per_row": x, "e2": e2}


def workers_route(c: dict[str, float], n: float, w: float, e: float = 1.0, bandwidth: float = BANDWIDTH) -> float:
    """Seconds per evaluation on the workers (``e``: parallel efficiency; ``bandwidth``: between workers)."""
    return (c["t0"] + n * (c["c_host"] / e + c["c_round"]) / w + n * c["bytes_exchanged_per_row"] * (w - 1) / w**2 / bandwidth
            + w * SUMMARY_BYTES / BANDWIDTH)


def driver_route(c: dict[str, float], n: float, w: float, e: float = 1.0) -> float:
    """Seconds per evaluation merged on the driver."""
    return c["t0_driver"] + n * c["c_driver"] + n * c["c_pass"] / (w * e)


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    scaling, workers = _load(cfg, "scaling"), _load(cfg, "workers")
    c = fit(scaling, workers)
    here = math.inf  # loopback between the workers of this machine: no network term
    checks = []
    for r in scaling["rows"]:
        n = r["rows"]
        if r.get("auc-smooth exchange") == "workers":
            checks.append({"what": "workers' route", "rows": n, "workers": 2, "measured": r["auc-smooth"]["median"],
                           "predicted": workers_route(c, n, 2, c["e2"], here), "fitted_on": n in FIT_SIZES})
        checks.append({"what": "driver-merged", "rows": n, "workers": 2, "measured": r["auc-smooth, driver-merged"]["median"],
                       "predicted": driver_route(c, n, 2, c["e2"]), "fitted_on": n in FIT_SIZES})
    n_w = float(workers["rows"])
    per_it = workers["summary"]["auc-smooth"]["per_iteration_seconds"]
    for ch in checks:
        ch["error"] = ch["predicted"] / ch["measured"] - 1.0
    iteration = {str(w): {"measured_per_iteration": float(per_it[str(w)]["median"]),
                          "predicted_per_evaluation": workers_route(c, n_w, w, 1.0 if w == 1 else c["e2"], here)} for w in (1, 2)}
    grid = {f"{n}": {f"{w}": {"driver": driver_route(c, n, w), "workers": workers_route(c, n, w)} for w in WORKERS} for n in ROWS}

    lines = [
        "From the scaling and workers suites' results (this suite measures nothing). Constants: "
        f"t0 = {1e3 * c['t0']:.1f} ms per evaluation on the workers ({1e3 * c['t0_driver']:.1f} ms merged on the driver), "
        f"the hosts' work {1e9 * c['c_host']:.1f} ns per row at full speed (of which the two passes {1e9 * c['c_pass']:.1f}), "
        f"round trips and serialization {1e9 * c['c_round']:.1f} ns per row, the driver's merge, kernel and transfer on the driver-merged route "
        f"{1e9 * c['c_driver']:.1f} ns per row, {c['bytes_exchanged_per_row']:.1f} bytes a row between the workers; "
        f"this machine's efficiency with two workers e_2 = {c['e2']:.2f} (the workers suite's control).",
        "",
        "**Check against the measured points** (auc-smooth, one evaluation; the workers suite's per iteration):",
        "",
        *table_head(["route", "rows", "workers", "measured s", "predicted s", "error", "fitted on it"]),
    ]
    for ch in checks:
        lines.append(f"| {ch['what']} | {ch['rows']:,} | {ch['workers']} | {ch['measured']:.3f} | {ch['predicted']:.3f} | {100 * ch['error']:+.0f} % | "
                     f"{'yes' if ch['fitted_on'] else 'no'} |")
    worst = max(abs(ch["error"]) for ch in checks)
    lines += ["", f"Largest error {100 * worst:.0f} % ({'within' if worst <= 0.25 else 'beyond'} the 25 % the issue asks). "
              f"The workers suite at {int(n_w):,} rows, for comparison: per iteration {iteration['1']['measured_per_iteration']:.3f} s on one worker "
              f"and {iteration['2']['measured_per_iteration']:.3f} s on two, against {iteration['1']['predicted_per_evaluation']:.3f} and "
              f"{iteration['2']['predicted_per_evaluation']:.3f} s predicted per evaluation.", "",
              "**Predicted seconds per evaluation on a real cluster** (e_W = 1, 10 GbE; driver-merged / on the workers):", "",
              *table_head(["rows", *[f"{w} worker{'s' if w > 1 else ''}" for w in WORKERS]])]
    for n in ROWS:
        lines.append(f"| {n:.0e} | " + " | ".join(f"{grid[str(n)][str(w)]['driver']:.3g} / {grid[str(n)][str(w)]['workers']:.3g}" for w in WORKERS) + " |")
    sat = c["t0"] + 1e9 * c["c_driver"]
    k9 = math.ceil(1e9 / SHARD_ROWS)
    lines += [
        "",
        f"Merged on the driver, an evaluation costs at least n x {1e9 * c['c_driver']:.0f} ns however many workers ({sat:.0f} s at 10^9 rows), "
        "and the driver holds every score and their permutation (about 32 bytes a row: 32 GB at 10^9). On the workers it keeps "
        "falling as 1 / W until the round trips and the hosts' summaries dominate.",
        "",
        f"**A 10^9-row run, on paper** (d = 120, float32): the store is 480 GB ({k9:,} shards of 64 MB). "
        "On 64 workers each holds 7.5 GB of shards plus 64 bytes a row of range state (dpipe's memory model, measured 53-61: 1 GB): "
        "about 8.5 GB, so 16 GB workers. Bytes per evaluation: driver-merged 16 GB through the driver; on the workers "
        f"{c['bytes_exchanged_per_row']:.0f} GB worker to worker ({c['bytes_exchanged_per_row'] / 64:.2f} GB per worker) and "
        f"{64 * SUMMARY_BYTES / 1e6:.1f} MB at the driver. Predicted time per evaluation on 64 workers: driver-merged "
        f"{grid['1000000000']['64']['driver']:.0f} s, on the workers {grid['1000000000']['64']['workers']:.1f} s; a fit of about {EVALUATIONS} "
        f"evaluations (the convergence suite's auc-smooth fits with the defaults): {EVALUATIONS * grid['1000000000']['64']['driver'] / 3600:.1f} h "
        f"against {EVALUATIONS * grid['1000000000']['64']['workers'] / 60:.0f} min, plus one moments pass (O(n d^2), parallel).",
    ]
    newton = _newton_section(cfg, c, lines)
    network = _network_section(cfg, lines)
    plot = _plot(c, cfg.out_dir / "cost-model.png")
    lines += ["", f"![cost model]({plot.name})"]
    return {"constants": c, "checks": checks, "workers_suite": iteration, "grid": grid, "newton": newton, "network": network, "assumptions": {
        "bandwidth": BANDWIDTH, "shard_rows": SHARD_ROWS, "summary_bytes": SUMMARY_BYTES, "evaluations": EVALUATIONS}}, "\n".join(lines)


def _plot(c: dict[str, float], dest: Any) -> Any:
    plt = pyplot()
    w = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256], dtype=float)
    fig, ax = plt.subplots(figsize=(6.2, 4.5))
    for n, color in ((1e7, "C0"), (1e8, "C1"), (1e9, "C2")):
        ax.plot(w, [driver_route(c, n, x) for x in w], "-", color=color, label=f"driver-merged, n = {n:.0e}")
        ax.plot(w, [workers_route(c, n, x) for x in w], "--", color=color, label=f"on the workers, n = {n:.0e}")
    ax.set(xscale="log", yscale="log", xlabel="workers", ylabel="seconds per evaluation", title="auc-smooth, d = 120: predicted")
    ax.legend(fontsize=7)
    return save_figure(fig, dest)


# ---------------------------------------------------------------------------
# the Newton route (scale-race's parts and counts)
# ---------------------------------------------------------------------------
#: bytes per row through the driver per CG step on the driver-merged route: X d in (8), m out (8)
CG_BYTES_PER_ROW = 16
#: a worker's share of the driver's bytes per CG step on the workers' route: d out, a d-vector back, the halo's prefix sums (a few numbers)
CG_SUMMARY_BYTES = 2 * 120 * 8 + 64


def _fit_parts(parts: list[dict[str, Any]], seconds: str, p: float, e2: float) -> dict[str, float]:
    """``a + n (s + p / (W e_W))`` with the workers' ``p`` measured apart: ``a``, ``s`` a line through the 2-worker points (relative errors)."""
    two = [q for q in parts if q["workers"] == 2]
    n = np.array([q["rows"] for q in two], dtype=float)
    rest = np.array([_get(q, seconds) for q in two], dtype=float) - n * p / (2.0 * e2)
    a, s_ = _line(n, np.maximum(rest, 1e-6))
    return {"a": a, "s": max(s_, 0.0), "p": float(p)}


def _get(q: dict[str, Any], key: str) -> float:
    v: Any = q
    for k in key.split("."):
        v = v[k]
    return float(v)


def _part_time(k: dict[str, float], n: float, w: float, e: float = 1.0) -> float:
    return k["a"] + n * (k["s"] + k["p"] / (w * e))


def newton_constants(scale: dict[str, Any], e2: float) -> dict[str, Any]:
    """Per-part constants of the Newton route (driver-merged) from scale-race's parts."""
    if "host_work" not in scale:
        raise SystemExit("bench/results/scale-race.json predates the host_work measurement the Newton route's constants need: "
                         "rerun `python -m bench scale-race` first")
    parts, host = scale["parts"], scale["host_work"]
    it, cg = _fit_parts(parts, "iteration_seconds", host["iteration"], e2), _fit_parts(parts, "cg_seconds", host["cg"], e2)
    prefix = float(np.median([q["cg_parts"]["curvature"] / q["rows"] for q in parts if q["rows"] >= 1e6]))
    return {"iteration": it, "cg": cg, "c_prefix": prefix}


def newton_driver(k: dict[str, Any], counts: dict[str, float], n: float, w: float, e: float = 1.0) -> float:
    """Seconds of a Newton fit merged on the driver."""
    return counts["nfev"] * _part_time(k["iteration"], n, w, e) + counts["cg"] * _part_time(k["cg"], n, w, e)


def newton_workers(c: dict[str, float], k: dict[str, Any], counts: dict[str, float], n: float, w: float) -> float:
    """Seconds of a Newton fit on the workers' range route (projected): iterations as auc-smooth evaluations there, CG steps at the hosts' speed."""
    cg = c["t0"] + n * (k["cg"]["p"] + k["c_prefix"]) / w + w * CG_SUMMARY_BYTES / BANDWIDTH
    return counts["nfev"] * workers_route(c, n, w) + counts["cg"] * cg


def _newton_section(cfg: Config, c: dict[str, float], lines: list[str]) -> dict[str, Any] | None:
    scale = _optional(cfg, "scale-race", lines, "**The Newton route**: run `python -m bench scale-race` first (its Newton parts and counts are "
                      "this section's constants).")
    if scale is None:
        return None
    big = scale["big"]
    s = big["summary"]
    if s.get("cg_steps") is None:  # the default chose L-BFGS at this size (10^6 rows and more): no Newton counts to model
        lines += ["", "## The Newton route (`auc`: squared pairwise hinge, trust-region Newton-CG)", "",
                  f"Not modelled from this `scale-race` run: its {big['rows']:,}-row default fit ran {s.get('solver') or 'L-BFGS'} "
                  f"({s.get('nfev')} evaluations), the route the sections above model; Newton's measured parts are in scale-race.md."]
        return None
    k = newton_constants(scale, c["e2"])
    counts = {"nit": float(s["nit"]), "nfev": float(s["nfev"]), "cg": float(s["cg_steps"])}
    # check: the model against the measured parts and the measured 10^7-row fits (2 workers, this machine: e_2)
    checks = [{"what": f"{what}, {q['workers']} worker(s)", "rows": q["rows"], "measured": _get(q, key), "fitted_on": q["workers"] == 2,
               "predicted": _part_time(k[part], q["rows"], q["workers"], c["e2"] if q["workers"] > 1 else 1.0)}
              for q in scale["parts"] for what, part, key in (("Newton iteration", "iteration", "iteration_seconds"), ("CG step", "cg", "cg_seconds"))]
    solve = [r["time_solve"] for r in big["runs"]]
    fit_check = {"rows": big["rows"], "measured_solve": float(np.median(solve)), "predicted": newton_driver(k, counts, big["rows"], 2, c["e2"]),
                 "engine": s.get("engine")}
    n9, w9 = 1e9, 64
    lbfgs = {"driver": EVALUATIONS * driver_route(c, n9, w9), "workers": EVALUATIONS * workers_route(c, n9, w9)}
    newton = {"driver": newton_driver(k, counts, n9, w9), "workers": newton_workers(c, k, counts, n9, w9)}
    grid = {f"{n}": {f"{w}": {"lbfgs_driver": EVALUATIONS * driver_route(c, n, w), "lbfgs_workers": EVALUATIONS * workers_route(c, n, w),
                               "newton_driver": newton_driver(k, counts, n, w), "newton_workers": newton_workers(c, k, counts, n, w)}
                     for w in WORKERS} for n in ROWS}
    passes_newton = counts["nfev"] + (counts["nit"] + 1) + 2 * counts["cg"]
    it, cgk = k["iteration"], k["cg"]
    smooth_counts = big.get("smooth", {})
    lines += [
        "", "## The Newton route (`auc`: squared pairwise hinge, trust-region Newton-CG)", "",
        f"From `scale-race` ({big['rows']:,} x {big['features']} fit: {counts['nit']:.0f} Newton iterations, {counts['nfev']:.0f} evaluations, "
        f"{counts['cg']:.0f} CG steps; its parts at 10^6 and 10^7 rows on one and two workers). **Passes per fit**: {counts['nfev']:.0f} score passes "
        f"(sort and merge) + at most {counts['nit'] + 1:.0f} gradient passes + {2 * counts['cg']:.0f} product passes (a CG step: `X d` in the kept "
        f"order, `X^T m`; no sort) = {passes_newton:.0f} passes over the data, against {2 * EVALUATIONS} for an L-BFGS fit of {EVALUATIONS} "
        f"evaluations (auc-smooth: score and gradient pass each; the convergence suite's count"
        + (f"; on this generated store it stopped after {smooth_counts.get('nfev')} evaluations at test AUC {smooth_counts.get('test_auc', 0):.5f} "
           f"against Newton's {s['test_auc']:.5f}, a count not to model a fit on" if smooth_counts else "") + ").",
        "",
        f"**Bytes through the driver per CG step**: merged on the driver {CG_BYTES_PER_ROW} a row (`X d` in, the prefix sums' `m` out) plus a "
        f"d-vector each way per shard: {CG_BYTES_PER_ROW * 1e9 / 1e9:.0f} GB a step at 10^9 rows (measured: "
        + ", ".join(f"{q['cg_bytes']['total'] / 1e6:.0f} MB at {q['rows']:,} rows" for q in scale["parts"] if q["workers"] == 2)
        + f"); on the workers' range route O(W): {CG_SUMMARY_BYTES} bytes a worker (d out, a d-vector back, the halo's prefix sums), "
        f"{64 * CG_SUMMARY_BYTES / 1e3:.0f} kB on 64 workers. A Newton iteration moves what an evaluation moves (16 bytes a row driver-merged).",
        "",
        f"Constants (driver-merged, a + n (s + p / (W e_W))): Newton iteration a = {1e3 * it['a']:.0f} ms, s = {1e9 * it['s']:.1f} ns, "
        f"p = {1e9 * it['p']:.1f} ns a row; CG step a = {1e3 * cgk['a']:.0f} ms, s = {1e9 * cgk['s']:.1f} ns, p = {1e9 * cgk['p']:.1f} ns a row; "
        f"the prefix sums alone {1e9 * k['c_prefix']:.1f} ns a row. p: dpipe's worker functions in one process (score {1e9 * scale['host_work']['score']:.0f}, "
        f"gradient {1e9 * scale['host_work']['gradient']:.0f}, direction {1e9 * scale['host_work']['direction']:.0f}, product "
        f"{1e9 * scale['host_work']['product']:.0f} ns a row); a and s: a line through the 2-worker parts; the 1-worker parts check it.", "",
        *table_head(["part", "rows", "measured s", "predicted s", "error", "fitted on it"]),
    ]
    for ch in checks:
        lines.append(f"| {ch['what']} | {ch['rows']:,} | {ch['measured']:.3f} | {ch['predicted']:.3f} | {100 * (ch['predicted'] / ch['measured'] - 1):+.0f} % | "
                     f"{'yes' if ch['fitted_on'] else 'no'} |")
    lines += [
        "", f"The whole {fit_check['rows']:,}-row Newton solve ({fit_check['engine']}, 2 workers, median of {len(solve)}): measured "
        f"{fit_check['measured_solve']:.1f} s, predicted {fit_check['predicted']:.1f} s ({100 * (fit_check['predicted'] / fit_check['measured_solve'] - 1):+.0f} %).",
        "", "**Predicted seconds per fit on a real cluster** (e_W = 1, 10 GbE; the counts above; L-BFGS driver / workers, Newton driver / workers):", "",
        *table_head(["rows", *[f"{w} worker{'s' if w > 1 else ''}" for w in WORKERS]]),
    ]
    for n in ROWS:
        lines.append(f"| {n:.0e} | " + " | ".join(
            f"{g['lbfgs_driver']:.3g} / {g['lbfgs_workers']:.3g}; {g['newton_driver']:.3g} / {g['newton_workers']:.3g}"
            for g in (grid[str(n)][str(w)] for w in WORKERS)) + " |")
    lines += [
        "", f"**10^9 rows on 64 workers** (d = 120): L-BFGS auc-smooth ({EVALUATIONS} evaluations) {lbfgs['driver'] / 60:.0f} min merged on the "
        f"driver, {lbfgs['workers'] / 60:.1f} min on the workers; Newton ({counts['nfev']:.0f} evaluations, {counts['cg']:.0f} CG steps) "
        f"{newton['driver'] / 60:.0f} min merged on the driver (the route that runs today: each CG step moves 16 GB through the driver, and its "
        f"serial {1e9 * cgk['s']:.0f} ns a row make a step at least {1e9 * cgk['s']:.0f} s however many workers), {newton['workers'] / 60:.1f} min "
        "on the workers' range route (projected). Plus, for both, one load of the shards and the calibration and training-metrics passes. "
        "Assumptions: the counts do not grow with n (on the bundled tasks and here they did not: 5-8 Newton iterations); e_W = 1; 10 GbE; "
        "the driver holds, merged on the driver, the scores, their order and the kept order (about 40 bytes a row: 40 GB at 10^9, so a "
        "large driver), on the workers' route O(W).",
    ]
    return {"constants": k, "counts": counts, "checks": checks, "fit_check": fit_check, "grid": grid, "at_1e9_64": {"lbfgs": lbfgs, "newton": newton},
            "passes_per_fit": {"newton": passes_newton, "lbfgs": 2 * EVALUATIONS}}


# ---------------------------------------------------------------------------
# the default fit over a network (the netns suite: hosts in network namespaces on capped links)
# ---------------------------------------------------------------------------
#: the links of a namespaced cluster that are not workers'
CLUSTER_HOSTS = ("driver", "scheduler")
#: 10 GbE, bits per second
TEN_GBE = 10e9
#: a pass whose bytes through the driver's link are at least this many a row brings every row to the driver (scores,
#: weights): only such a pass is given driver work a row; on the others the driver's CPU seconds are fixed per pass,
#: whatever their slope between two sizes (an import on the first pass, noise)
DRIVER_ROW_BYTES = 1.0


def _two_point(n: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """``v ~ a + b n`` by least squares, neither negative: a negative slope gives the mean and no slope, a negative
    intercept the line through 0 and the largest point."""
    if len(set(n.tolist())) < 2:
        return float(np.mean(v)), 0.0
    b, a = np.polyfit(n, v, 1)
    if b < 0:
        return float(np.mean(v)), 0.0
    if a < 0:
        return 0.0, float(v[-1] / n[-1])
    return float(a), float(b)


def network_constants(points: list[dict[str, Any]], workers: int) -> dict[str, dict[str, float]]:
    """Per pass kind, the constants of :func:`network_pass_seconds` from uncapped passes at two or more sizes.

    ``points``: ``{"rows", "kind", "seconds", "driver_cpu", "worker_cpu", "bytes": {host: [sent, received]}}`` per pass
    kind and size (medians over that kind's passes), measured on ``workers`` worker hosts with the links uncapped.
    """
    out: dict[str, dict[str, float]] = {}
    for kind in sorted({p["kind"] for p in points}):
        pts = sorted((p for p in points if p["kind"] == kind), key=lambda p: p["rows"])
        n = np.array([p["rows"] for p in pts], dtype=float)
        k: dict[str, float] = {}
        for role in ("worker", *CLUSTER_HOSTS):
            for way, i in (("sent", 0), ("received", 1)):
                v = np.array([max(b[i] for h, b in p["bytes"].items() if (h == role if role != "worker" else h not in CLUSTER_HOSTS))
                              for p in pts], dtype=float)
                b0, b1 = _two_point(n, v)
                # worker links: the fixed bytes per host, and bytes per row of the host's own share; the driver's and
                # scheduler's: bytes per worker (summaries) and per row of the whole store
                k[f"{role}_{way}_0"], k[f"{role}_{way}_1"] = (b0, b1 * workers) if role == "worker" else (b0 / workers, b1)
        a, slope = _two_point(n, np.array([p["seconds"] for p in pts]))
        s = 0.0
        if max(k["driver_sent_1"], k["driver_received_1"]) >= DRIVER_ROW_BYTES:
            s = _two_point(n, np.array([p["driver_cpu"] for p in pts]))[1]  # the driver's work a row, where the rows reach it
        k["a"], k["s"] = a, s
        k["c"] = max(slope - s, 0.0) * workers  # the hosts' wall seconds a row of their own (here: every host on 2 shared cores)
        k["c_cpu"] = _two_point(n, np.array([p["worker_cpu"] for p in pts]))[1]  # the hosts' CPU seconds summed: a host's a row of its share
        out[kind] = k
    return out


def network_link_bytes(k: dict[str, float], n: float, w: float) -> dict[str, float]:
    """Bytes per pass on the busiest direction of each role's link (a worker's, the driver's, the scheduler's)."""
    out = {}
    for role in ("worker", *CLUSTER_HOSTS):
        f = (lambda b0, b1: b0 + b1 * n / w) if role == "worker" else (lambda b0, b1: b0 * w + b1 * n)
        out[role] = max(f(k[f"{role}_{way}_0"], k[f"{role}_{way}_1"]) for way in ("sent", "received"))
    return out


def network_seconds(link_bytes: dict[str, float], workers: float, rate_bits: float) -> float:
    """Seconds a pass's bytes take on links of ``rate_bits``: ``(max(worker, driver) + scheduler / W) / rate``.

    ``link_bytes``: the bytes on the busiest direction of a worker's, the driver's and the scheduler's link. The links
    work in parallel, so of the workers' and the driver's the busiest counts. What the scheduler's link carries is what
    it relays between the driver and the workers (dask's client of a named scheduler gathers results and calls actors
    through it unless ``distributed.client.direct-to-workers`` is set): it sends each worker's message on once it has it
    whole, so the relay ends one message, 1 / W of its bytes, after the busiest link. (Counted as a second hop of all
    its bytes, the model over-predicted the passes at 200 Mb/s by up to 46 %.)
    """
    return (max(link_bytes["worker"], link_bytes["driver"]) + link_bytes["scheduler"] / workers) * 8.0 / rate_bits


def network_pass_seconds(k: dict[str, float], n: float, w: float, rate_bits: float | None, cpu: bool = False) -> float:
    """Seconds of one pass of a kind: ``a + n s + (n / W) c`` + :func:`network_seconds` of its bytes.

    ``a``: the fixed seconds of a pass (round trips, the driver's O(W) work); ``s``: the driver's CPU seconds a row;
    ``c``: a host's seconds a row of its share (``cpu``: its CPU seconds, what a host with its own cores would take;
    else the wall seconds measured here); the bytes: :func:`network_link_bytes` (None rate: no network term).
    """
    t = k["a"] + n * k["s"] + n / w * (k["c_cpu"] if cpu else k["c"])
    if rate_bits is not None:
        t += network_seconds(network_link_bytes(k, n, w), w, rate_bits)
    return t


def network_fit_seconds(constants: dict[str, dict[str, float]], counts: dict[str, float], n: float, w: float, rate_bits: float | None,
                        cpu: bool = False) -> float:
    """Seconds of a fit of ``counts`` passes by kind (its record's ``data_passes_by_kind`` plus the load)."""
    return sum(c * network_pass_seconds(constants[kind], n, w, rate_bits, cpu) for kind, c in counts.items() if kind in constants)


def _network_section(cfg: Config, lines: list[str]) -> dict[str, Any] | None:
    """The default fit's model over capped links, from the netns suite's results (its constants, checks and prediction)."""
    net = _optional(cfg, "netns", lines, "**The default fit over a network**: run `python -m bench netns` first (as root: it makes network namespaces).")
    if net is None:
        return None
    p = net["prediction"]
    lines += ["", "## The default fit over a network (the netns suite)", "",
              "Per pass `a + n s + (n / W) c + L / rate` (`network_pass_seconds`): the fixed seconds, the driver's CPU seconds "
              "a row, a host's seconds a row of its share and the bytes each link carries per pass, measured with the links uncapped; "
              "L: the busiest of the workers' and the driver's links plus 1 / W of what the scheduler relays. Checked on links capped "
              "at 1 Gb/s, the default fit's time per pass (predicted / measured - 1): "
              + ", ".join(f"{f['rows']:,} rows {100 * (f['predicted'] / f['measured'] - 1):+.0f} %" for f in net["fits"] if f["links"] == "1 Gb/s")
              + f"; the largest error of one kind of pass {100 * net['worst_capped_pass_error']:.0f} % (`netns.md` has every pass). "
              f"Predicted for the default fit at {p['rows']:.0e} rows x {p['features']} on {p['workers']} workers, 10 Gb/s: "
              f"{p['seconds_cpu_rates']:.0f} s with the hosts' CPU seconds a row, {p['seconds_wall_rates']:.0f} s with this machine's contended ones."]
    return {"worst_capped_pass_error": net["worst_capped_pass_error"], "prediction": p}
