"""netns: the default fit over a real, capped network: time and bytes per pass on every link, and the cost model checked there.

The scheduler, the driver and three workers each run in a Linux network namespace of their own, joined by veth pairs to one
bridge (:class:`dpipe.testing._netns.NetnsCluster`); every link is capped each way with ``tc ... tbf`` (``netem`` is not in
this kernel), so every byte between two hosts crosses capped links. The driver runs the whole default command, ``dpipe
train STORE --scheduler tcp://SCHEDULER:8786`` (:mod:`bench.pass_clock`), which records, as every data pass starts, the
time, the CPU seconds of the driver and of every worker, and every link's byte counters. Each store is fitted with the
links uncapped, at 1 Gb/s and at 200 Mb/s (interleaved, ``--repeats`` rounds) and once more at 1 Gb/s with the client's
``direct-to-workers`` on and, from 500,000 rows, with the scores merged on the driver; each fit's weights are compared bit for bit with ``dpipe train STORE --engine local``.

The cost model (:func:`bench.suites.cost_model.network_pass_seconds`): each pass is checked as the same pass measured with
the links uncapped plus the network term of its bytes there (:func:`bench.suites.cost_model.network_seconds`: the busiest of
the workers' and the driver's links, plus 1 / W of what the scheduler relays, over the cap); each kind's fixed seconds, the
driver's seconds a row and the hosts' seconds a row are fitted on the uncapped fits of each solver's two sizes, and the
default fit is predicted from them at 10^9 rows on 64 workers on 10 Gb/s.
Every host shares this machine's 2 cores: the hosts' seconds a row are inflated by it, and the model takes them as
measured inputs (the 10^9 prediction is given with them and with the hosts' CPU seconds a row, a host of its own).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._harness import Config, fmt_spread, spread, synthetic_store, table_head
from .cost_model import DRIVER_ROW_BYTES, TEN_GBE, network_constants, network_fit_seconds, network_link_bytes, network_pass_seconds, network_seconds

__all__ = ["run"]

#: worker hosts
WORKERS = ("w0", "w1", "w2")
HOSTS = ("scheduler", "driver", *WORKERS)
#: the caps, bits per second each way (None: uncapped)
RATES = {"uncapped": None, "1 Gb/s": 1e9, "200 Mb/s": 2e8}
#: configurations run once more per round at 1 Gb/s: name -> the driver's environment. ``direct``: the driver's client
#: fetches results and calls the shard hosts straight from the workers (dask's default for a named scheduler relays them
#: through the scheduler); ``driver route``: the scores merged on the driver (dpipe.rank-exchange=driver), run where the
#: default merges them on the workers (from EXCHANGE_AUTO_ROWS rows)
VARIANTS = {"1 Gb/s, direct": {"DASK_DISTRIBUTED__CLIENT__DIRECT_TO_WORKERS": "True"},
            "1 Gb/s, driver route": {"DASK_DPIPE__RANK_EXCHANGE": "driver"}}
#: (rows, features): the Newton default below 10^6 rows (scores merged on the driver below 500,000), L-BFGS from the
#: class moments at and above (scores merged on the workers); two sizes of each, for the per-row constants
SIZES = ((100_000, 50), (400_000, 50), (1_000_000, 50), (2_000_000, 50))
QUICK_SIZES = ((50_000, 20), (200_000, 20), (1_000_000, 20), (1_500_000, 20))
#: passes at least this long (seconds) are checked apart: shorter ones are at the resolution of a shared machine
LONG_PASS = 0.1
#: the prediction
PREDICT_ROWS, PREDICT_WORKERS = 10**9, 64


def _phases(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pass from its start to the next one's (the driver's work after it included); the first phase (connect) and last
    (calibration's end, the model written) keep their names ``start`` / the last pass's kind is followed by ``end``."""
    out = []
    for e, f in zip(events, events[1:]):
        out.append({"kind": e["kind"], "seconds": f["t"] - e["t"], "driver_cpu": f["driver_cpu"] - e["driver_cpu"],
                    "worker_cpu": sum(f["cpu"][h] - e["cpu"][h] for h in WORKERS),
                    "bytes": {h: [f["links"][h][0] - e["links"][h][0], f["links"][h][1] - e["links"][h][1]] for h in e["links"]}})
    return out


def _totals(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """A fit's seconds over its passes (from the load to the end) and each link's bytes over the whole process."""
    return {"pass_seconds": sum(p["seconds"] for p in phases if p["kind"] != "start"),
            "link_bytes": {h: [sum(p["bytes"][h][i] for p in phases) for i in (0, 1)] for h in phases[0]["bytes"]}}


def _by_kind(phases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per kind: the count and the median seconds, CPU and bytes per pass."""
    out: dict[str, dict[str, Any]] = {}
    for kind in dict.fromkeys(p["kind"] for p in phases):
        ps = [p for p in phases if p["kind"] == kind]
        out[kind] = {"count": len(ps), "seconds": float(np.median([p["seconds"] for p in ps])), "mean_seconds": float(np.mean([p["seconds"] for p in ps])),
                     "driver_cpu": float(np.median([p["driver_cpu"] for p in ps])), "worker_cpu": float(np.median([p["worker_cpu"] for p in ps])),
                     "bytes": {h: [float(np.median([p["bytes"][h][i] for p in ps])) for i in (0, 1)] for h in ps[0]["bytes"]}}
    return out


def _fit(cluster: Any, address: str, store: Path, tmp: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One ``dpipe train STORE --scheduler ADDRESS`` in the driver's namespace, clocked; its phases and its model."""
    events, model, hosts = tmp / "events.json", tmp / "model.json", tmp / "hosts.json"
    hosts.write_text(json.dumps({"ports": cluster.ports, "pids": {h: cluster.pids[h] for h in WORKERS}}))
    argv = ["env", *[f"{k}={v}" for k, v in (env or {}).items()], sys.executable, "-m", "bench.pass_clock", str(events), str(cluster.counters_pid),
            str(hosts), "--", "train", str(store), "--scheduler", address, "--out", str(model), "--overwrite", "-q"]
    t0 = time.perf_counter()
    r = subprocess.run(cluster.command("driver", argv), capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    whole = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"netns: the namespaced fit failed: {r.stderr.strip()[-2000:]}")
    m = json.loads(model.read_text())
    fit = m["fit"]
    phases = _phases(json.loads(events.read_text()))
    for p in phases:  # a pass's constants depend on the solver's route (and the driver's first imports of it): kinds by solver
        if p["kind"] != "start":
            p["kind"] = f"{fit['info'].get('solver')} {p['kind']}"
    return {"whole": whole, **_totals(phases), "kinds": _by_kind(phases), "coef": m["coef"], "intercept": m["intercept"],
            "solver": fit["info"].get("solver"), "data_passes": fit["info"].get("data_passes"),
            "data_passes_by_kind": fit["info"].get("data_passes_by_kind"), "time_data": fit.get("time_data"), "time_solve": fit.get("time_solve")}


def _bits(rs: list[dict[str, Any]]) -> str:
    """``yes`` when every run's weights equal the local engine's bit for bit, else the largest difference."""
    if all(r["same_bits"] for r in rs):
        return "yes"
    return f"no: max abs difference {max(r['coef_error'] for r in rs):.1e} x max abs weight"


def _local(store: Path, tmp: Path) -> dict[str, Any]:
    out = tmp / "local.json"
    subprocess.run([sys.executable, "-m", "dpipe", "train", str(store), "--engine", "local", "--out", str(out), "--overwrite", "-q"], check=True,
                   capture_output=True)
    m = json.loads(out.read_text())
    return {"coef": m["coef"], "intercept": m["intercept"]}


def _link_check(cluster: Any) -> dict[str, float]:
    """Goodput of one TCP stream from w0 to w1 (64 MB), bits per second, at the current cap."""
    n = 64 * 2**20
    serve = (f"import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(({cluster.addresses['w1']!r},9999));s.listen(1);c,_=s.accept();g=0\n"
             f"while g<{n}:\n b=c.recv(1<<20)\n if not b: break\n g+=len(b)\nc.sendall(b'k')")
    send = (f"import socket,time\nc=socket.create_connection(({cluster.addresses['w1']!r},9999));b=b'x'*(1<<20);t=time.perf_counter()\n"
            f"for _ in range({n >> 20}): c.sendall(b)\nc.recv(1);print({n}*8/(time.perf_counter()-t))")
    srv = subprocess.Popen(cluster.command("w1", [sys.executable, "-c", serve]))
    time.sleep(0.5)
    r = subprocess.run(cluster.command("w0", [sys.executable, "-c", send]), capture_output=True, text=True, check=True)
    srv.wait(timeout=60)
    return {"goodput_bits": float(r.stdout.strip())}


def _netem_absent(cluster: Any) -> str:
    r = subprocess.run(cluster.command("w0", ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]), capture_output=True, text=True)
    if r.returncode == 0:
        subprocess.run(cluster.command("w0", ["tc", "qdisc", "del", "dev", "lo", "root"]), capture_output=True)
        return "netem available"
    return f"netem refused: {r.stderr.strip()}"


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    from dpipe.engine._ranges import EXCHANGE_AUTO_ROWS
    from dpipe.testing._netns import NetnsCluster, netns_unavailable

    why = netns_unavailable()
    if why:
        raise SystemExit(f"netns: {why}")
    sizes = QUICK_SIZES if cfg.quick else SIZES
    stores = {n: synthetic_store(cfg.work, n, d) for n, d in sizes}
    configs = {n: [*RATES, *(v for v in VARIANTS if v != "1 Gb/s, driver route" or n >= EXCHANGE_AUTO_ROWS)] for n, _ in sizes}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {str(n): {c: [] for c in configs[n]} for n, _ in sizes}
    with tempfile.TemporaryDirectory() as td, NetnsCluster(HOSTS, None) as cluster:
        tmp = Path(td)
        local = {str(n): _local(stores[n], tmp) for n, _ in sizes}
        netem = _netem_absent(cluster)
        links = {}
        for name, rate in RATES.items():
            cluster.set_rate(rate)
            links[name] = _link_check(cluster)
        cluster.set_rate(1e9)
        qdiscs = cluster.qdiscs()
        address = cluster.start_dask("scheduler", WORKERS, waiter="driver", memory_limit="4GiB")
        warm = synthetic_store(cfg.work, 20_000, 8)
        _fit(cluster, address, warm, tmp)  # the workers' imports and kernels
        for _ in range(cfg.repeats):
            for n, _ in sizes:
                for c in configs[n]:
                    cluster.set_rate(RATES.get(c, 1e9))
                    got = _fit(cluster, address, stores[n], tmp, VARIANTS.get(c))
                    want = np.asarray(local[str(n)]["coef"])
                    got["same_bits"] = bool(np.array_equal(got["coef"], want) and got["intercept"] == local[str(n)]["intercept"])
                    got["coef_error"] = float(np.max(np.abs(np.asarray(got["coef"]) - want)) / np.max(np.abs(want)))
                    runs[str(n)][c].append(got)
                    print(f"  {n:,} rows, {c}: {got['whole']:.2f} s whole, {got['data_passes']} passes ({got['solver']}), "
                          f"same bits as local: {got['same_bits']}", flush=True)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return _report(sizes, runs, links, netem, qdiscs, uptime)


def _role_bytes(b: dict[str, list[float]]) -> dict[str, float]:
    """The busiest direction of a worker's (the busiest worker's), the driver's and the scheduler's link."""
    return {"worker": max(max(b[h]) for h in WORKERS), "driver": max(b["driver"]), "scheduler": max(b["scheduler"])}


def _predicted(uncapped: dict[str, Any], rate: float | None, field: str = "seconds") -> float:
    """A pass at ``rate``: its seconds measured uncapped (``field``: the median or the mean of the kind's passes; the
    model's measured input: compute, round trips, the driver's work) plus :func:`~bench.suites.cost_model.network_seconds`
    of its bytes."""
    return uncapped[field] + (0.0 if rate is None else network_seconds(_role_bytes(uncapped["bytes"]), len(WORKERS), rate))


def _median_kinds(rs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per kind, the median over runs of each run's per-pass medians."""
    kinds = rs[0]["kinds"]
    return {k: {"count": kinds[k]["count"], **{f: float(np.median([r["kinds"][k][f] for r in rs])) for f in ("seconds", "mean_seconds", "driver_cpu", "worker_cpu")},
                "bytes": {h: [float(np.median([r["kinds"][k]["bytes"][h][i] for r in rs])) for i in (0, 1)] for h in kinds[k]["bytes"]}}
            for k in kinds}


def _report(sizes: Any, runs: dict[str, Any], links: dict[str, Any], netem: str, qdiscs: str, uptime: str) -> tuple[dict[str, Any], str]:
    med = {n: {c: _median_kinds(rs) for c, rs in by.items()} for n, by in runs.items()}
    # the constants from each kind's mean pass (its passes' sum over their count, as a fit adds them up)
    points = [{"rows": int(n), "kind": k, **v, "seconds": v["mean_seconds"]} for n in med for k, v in med[n]["uncapped"].items() if k != "start"]
    consts = network_constants(points, len(WORKERS))
    lines = [
        f"Hosts: scheduler, driver and {len(WORKERS)} workers, each in its own network namespace on one bridge; every link capped each way "
        f"with `tc ... tbf` ({netem}). Load when the suite ended: `{uptime}`. One TCP stream w0 -> w1 (64 MB): "
        + ", ".join(f"{name} {v['goodput_bits'] / 1e9:.3f} Gb/s" for name, v in links.items()) + ".", "",
        "**Whole fits** (`dpipe train STORE --scheduler tcp://10.77.0.1:8786`, defaults; medians (min-max); same bits: the weights and "
        "intercept equal to `dpipe train STORE --engine local`'s in every run; MB over the whole process, load and calibration included):", "",
        *table_head(["store", "links", "whole s", "load s", "solve s", "solver", "data passes", "MB driver link (in / out)",
                     "MB scheduler link (in / out)", "MB a worker's link, max (in / out)", "same bits"]),
    ]
    for n, d in sizes:
        for c, rs in runs[str(n)].items():
            tot = [r["link_bytes"] for r in rs]
            mb = {h: [float(np.median([t[h][i] for t in tot])) / 1e6 for i in (0, 1)] for h in HOSTS}
            wmax = [max(mb[h][i] for h in WORKERS) for i in (0, 1)]
            lines.append(f"| {n:,} x {d} | {c} | {fmt_spread(spread([r['whole'] for r in rs]))} | {fmt_spread(spread([r['time_data'] for r in rs]))} | "
                         f"{fmt_spread(spread([r['time_solve'] for r in rs]))} | {rs[0]['solver']} | {rs[0]['data_passes']} | "
                         f"{mb['driver'][1]:.1f} / {mb['driver'][0]:.1f} | {mb['scheduler'][1]:.1f} / {mb['scheduler'][0]:.1f} | "
                         f"{wmax[1]:.1f} / {wmax[0]:.1f} | {_bits(rs)} |")
    lines += ["", "**Per pass** (medians of each run's per-pass medians; a pass runs from its start to the next one's, the driver's work "
              "after it included; `start`: connecting and measuring the workers; MB each way on the driver's, scheduler's and busiest "
              "worker's link; predicted: the same pass measured with the links uncapped plus the network term of its bytes there, "
              "`cost_model.network_seconds`):", "",
              *table_head(["store", "links", "pass", "count", "measured s", "predicted s", "error", "driver CPU s", "workers' CPU s",
                           "MB driver (in / out)", "MB scheduler (in / out)", "MB worker max (in / out)"])]
    checks = []
    for n, d in sizes:
        for c in runs[str(n)]:
            for kind, v in med[str(n)][c].items():
                pred = None
                if kind in consts and c in RATES:
                    pred = _predicted(med[str(n)]["uncapped"][kind], RATES[c])
                    checks.append({"rows": n, "links": c, "kind": kind, "count": v["count"], "measured": v["seconds"], "predicted": pred})
                b = v["bytes"]
                wmax = [max(b[h][i] for h in WORKERS) / 1e6 for i in (0, 1)]
                shown = ("-", "-") if pred is None else (f"{pred:.3f}", f"{100 * (pred / v['seconds'] - 1):+.0f} %")
                lines.append(f"| {n:,} | {c} | {kind} | {v['count']} | {v['seconds']:.3f} | {shown[0]} | {shown[1]} | {v['driver_cpu']:.3f} | "
                             f"{v['worker_cpu']:.3f} | {b['driver'][1] / 1e6:.2f} / {b['driver'][0] / 1e6:.2f} | "
                             f"{b['scheduler'][1] / 1e6:.2f} / {b['scheduler'][0] / 1e6:.2f} | {wmax[1]:.2f} / {wmax[0]:.2f} |")
    capped = [ch for ch in checks if ch["links"] != "uncapped"]
    for ch in checks:
        ch["error"] = ch["predicted"] / ch["measured"] - 1.0
    fits = []
    for n, _ in sizes:
        counts = {k: v["count"] for k, v in med[str(n)]["uncapped"].items() if k in consts}
        for c, rate in RATES.items():
            measured = float(np.median([r["pass_seconds"] for r in runs[str(n)][c]]))
            # per round, the capped fit against the uncapped fit of the same round plus the network term: drift in the load cancels
            rounds = [sum(v["count"] * _predicted(v, rate, "mean_seconds") for kind, v in u["kinds"].items() if kind != "start") / r["pass_seconds"] - 1.0
                      for u, r in zip(runs[str(n)]["uncapped"], runs[str(n)][c])]
            fits.append({"rows": n, "links": c, "passes": sum(counts.values()), "measured": measured,
                         "predicted": sum(k * _predicted(med[str(n)]["uncapped"][kind], rate, "mean_seconds") for kind, k in counts.items()),
                         "round_errors": rounds, "extrapolated": network_fit_seconds(consts, counts, n, len(WORKERS), rate)})
    worst_pass = max(abs(ch["error"]) for ch in capped) if capped else float("nan")
    long = [ch for ch in capped if ch["measured"] >= LONG_PASS]
    worst_long = max(abs(ch["error"]) for ch in long) if long else float("nan")
    lines += ["", "**The default fit's passes** (every pass from the load to the last, the driver's work between them included; "
              "measured (the median over the runs of their passes' seconds) against the model's sum of count x predicted seconds (each "
              "kind's mean pass uncapped, the median over the runs, plus its network term); per pass: the sum over the passes' count; per round: "
              "each round's capped fit against that round's uncapped fit plus the network term (the load's drift cancels); from the constants: "
              "the same sum from the constants below, the line through each solver's two sizes that the 10^9 prediction uses):", "",
              *table_head(["rows", "links", "passes", "measured s", "predicted s", "measured s per pass", "predicted s per pass", "error",
                           "error per round: median (min-max)", "from the constants s", "its error"])]
    for f in fits:
        e = spread(f["round_errors"])
        lines.append(f"| {f['rows']:,} | {f['links']} | {f['passes']} | {f['measured']:.2f} | {f['predicted']:.2f} | {f['measured'] / f['passes']:.3f} | "
                     f"{f['predicted'] / f['passes']:.3f} | {100 * (f['predicted'] / f['measured'] - 1):+.0f} % | "
                     f"{100 * e['median']:+.0f} % ({100 * e['min']:+.0f} to {100 * e['max']:+.0f} %) | {f['extrapolated']:.2f} | "
                     f"{100 * (f['extrapolated'] / f['measured'] - 1):+.0f} % |")
    lines += ["", f"Largest error of one kind of pass on the capped links: {100 * worst_pass:.0f} % over all; {100 * worst_long:.0f} % "
              f"among the passes of at least {LONG_PASS:g} s (a kind's median pass; its own uncapped median, the model's input, is as noisy "
              "on this shared machine, and passes of 10-30 ms are at its resolution).",
              "", *_constants_lines(consts)]
    big_n, big_d = sizes[-1]
    counts = {k: v["count"] for k, v in med[str(big_n)]["uncapped"].items() if k in consts}
    pred = {cpu: network_fit_seconds(consts, counts, PREDICT_ROWS, PREDICT_WORKERS, TEN_GBE, cpu) for cpu in (False, True)}
    parts = {k: {"seconds": network_pass_seconds(consts[k], PREDICT_ROWS, PREDICT_WORKERS, TEN_GBE, True),
                 "bytes": network_link_bytes(consts[k], PREDICT_ROWS, PREDICT_WORKERS)} for k in counts}
    lines += ["", f"**Predicted: {PREDICT_ROWS:.0e} rows x {big_d} features on {PREDICT_WORKERS} workers, 10 Gb/s links**, the default fit "
              f"(the {big_n:,}-row fit's passes: " + ", ".join(f"{c} {k}" for k, c in counts.items()) + "; the counts are assumed not to "
              f"grow with the rows): {pred[True]:.0f} s with each host's measured CPU seconds a row (a host of its own), {pred[False]:.0f} s "
              "with this machine's contended wall seconds a row. Per pass (CPU rates; bytes on the busiest direction of the driver's / "
              "scheduler's / a worker's link):", "", *table_head(["pass", "count", "s per pass", "MB driver", "MB scheduler", "MB a worker"])]
    for k, v in parts.items():
        b = v["bytes"]
        lines.append(f"| {k} | {counts[k]} | {v['seconds']:.2f} | {b['driver'] / 1e6:.1f} | {b['scheduler'] / 1e6:.1f} | {b['worker'] / 1e6:.1f} |")
    rows_to_driver = [k for k in counts if max(consts[k]["driver_sent_1"], consts[k]["driver_received_1"]) >= DRIVER_ROW_BYTES]
    if rows_to_driver:
        share = sum(counts[k] * parts[k]["seconds"] for k in rows_to_driver)
        lines += ["", f"Of these {pred[True]:.0f} s, {share:.0f} s are the passes that bring every row's score to the driver ("
                  + ", ".join(rows_to_driver) + f": {max(parts[k]['bytes']['driver'] for k in rows_to_driver) / 1e9:.1f} GB through its link and "
                  "its merge of them, O(n) on one host): the rank summary behind the threshold calibration and the training metrics the "
                  "model keeps by default (with `--no-train-metrics` the calibration finds the threshold from counts on the workers' ranges "
                  f"instead, `dpipe.fit._train.finish_fit`). The rest of the fit, {pred[True] - share:.0f} s, falls as 1 / W."]
    lines += ["", "Links (`tc qdisc show` at 1 Gb/s):", "", "```", qdiscs, "```"]
    slim = {n: {c: [{k: v for k, v in r.items() if k != "coef"} for r in rs] for c, rs in by.items()} for n, by in runs.items()}
    return {"runs": slim, "per_pass": med, "constants": consts, "checks": checks, "fits": fits, "links": links, "netem": netem, "uptime": uptime,
            "worst_capped_pass_error": worst_pass, "worst_capped_long_pass_error": worst_long, "qdiscs": qdiscs,
            "prediction": {"rows": PREDICT_ROWS, "workers": PREDICT_WORKERS, "features": big_d, "rate_bits": TEN_GBE, "counts": counts,
                           "seconds_cpu_rates": pred[True], "seconds_wall_rates": pred[False], "passes": parts}}, "\n".join(lines)


def _constants_lines(consts: dict[str, dict[str, float]]) -> list[str]:
    out = ["**The model's constants** (fitted on the uncapped fits of the two sizes; a: fixed seconds per pass, s: the driver's CPU "
           "ns a row, c: a host's wall ns a row of its share here (c CPU: its CPU ns a row); bytes per pass: a worker's link fixed + per row "
           "of its share, the driver's per worker + per row of the store, busiest direction):", "",
           *table_head(["pass", "a ms", "s ns", "c ns", "c CPU ns", "worker B + B/row", "driver B/worker + B/row", "scheduler B/worker + B/row"])]
    for k, c in consts.items():
        def pair(role: str) -> str:
            way = max(("sent", "received"), key=lambda w: c[f"{role}_{w}_1"] * 1e6 + c[f"{role}_{w}_0"])
            return f"{c[f'{role}_{way}_0']:.0f} + {c[f'{role}_{way}_1']:.2f}"
        out.append(f"| {k} | {1e3 * c['a']:.1f} | {1e9 * c['s']:.1f} | {1e9 * c['c']:.1f} | {1e9 * c['c_cpu']:.1f} | {pair('worker')} | "
                   f"{pair('driver')} | {pair('scheduler')} |")
    return out

