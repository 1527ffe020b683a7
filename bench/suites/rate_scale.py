"""rate-scale: a fairness fit on a 10^7-row generated store, on a 2-worker LocalCluster.

``dpipe.make_data`` (seed 0, d = 20, groups ``g0`` / ``g1``), the binding constraint
``positive_rate(group=g0) >= 0.8 * positive_rate(group=g1)``, ``objective="error-rate"``,
2 majorization-minimization steps (the default is 8; two are enough to time a step),
shards in worker memory. Reported: the fit's seconds, its evaluations, seconds per MM
step (from the fit's log) and per evaluation, against the *two-pass floor*: one task per
shard computing ``X @ w`` and ``X.T @ g`` on the persisted shards (what any first-order
method over these rows must do per evaluation), timed on the same cluster. Also the
constraint's training value and the seconds to open the store (load the shards).
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

import numpy as np

from .._harness import Config, local_cluster, spread, table_head

ROWS, QUICK_ROWS, FEATURES = 10_000_000, 1_000_000, 20
#: binding: group g0's labels are 12 % positive, g1's 31 % (an unconstrained model selects g0 at about a third of g1's rate)
CONSTRAINT = "positive_rate(group=g0) >= 0.8 * positive_rate(group=g1)"


def _two_passes(shard: Any, w: np.ndarray) -> np.ndarray:
    from dpipe.reduce._block import matvec, rmatvec

    if not shard.n_rows:
        return np.zeros(w.size)
    return rmatvec(shard.X, np.tanh(matvec(shard.X, w)))


class _StepTimes(logging.Handler):
    """Times of the fit's start (its "N rows, d features" record) and of its "MM step" records."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.times: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "MM step" in message or (not self.times and " features, " in message):
            self.times.append(record.created)


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    import dpipe
    from dpipe.engine import ShardedDataset

    rows = QUICK_ROWS if cfg.quick else ROWS
    path = cfg.work / f"synthetic-{rows}x{FEATURES}-groups.zarr"
    if not path.exists():
        t0 = time.perf_counter()
        dpipe.make_data(str(path), rows=rows, features=FEATURES, seed=0, n_groups=2)
        print(f"  made {path.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    st = dpipe.open_store(str(path))
    res: dict[str, Any] = {"rows": st.manifest.n_rows, "features": FEATURES, "shards": st.n_shards, "store_mb": st.nbytes / 1e6}
    rng = np.random.default_rng(0)
    with local_cluster() as client:
        with ShardedDataset(st, client, cache="memory") as ds:
            ds.map_reduce(_two_passes, np.add, rng.standard_normal(FEATURES))  # warm
            seconds = []
            for _ in range(max(cfg.repeats, 5)):
                w = rng.standard_normal(FEATURES) * 0.1
                t0 = time.perf_counter()
                ds.map_reduce(_two_passes, np.add, w)
                seconds.append(time.perf_counter() - t0)
            res["two_pass_floor"] = spread(seconds)
        handler = _StepTimes()
        logger = logging.getLogger("dpipe")
        logger.addHandler(handler)
        level = logger.level
        logger.setLevel(logging.INFO)
        try:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", dpipe.ConvergenceWarning)
                model = dpipe.train(str(path), "error-rate", client=client, train_metrics=False, constraints=[CONSTRAINT], mm_steps=2)
            res["seconds"] = time.perf_counter() - t0
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
    fit = model.fit
    res.update(evaluations=int(fit["nfev"]), fit_seconds=float(fit["time_solve"]), cuts=int(fit["info"]["cuts"]),
               constraint=fit["info"]["constraints"][0], satisfied=bool(fit["success"]))
    steps = np.diff(handler.times).tolist()
    res["step_seconds"] = steps
    res["seconds_per_evaluation"] = res["fit_seconds"] / max(res["evaluations"], 1)
    floor = res["two_pass_floor"]["median"]
    print(f"  {res['rows']:,} rows: fit {res['fit_seconds']:.1f} s, {res['evaluations']} evaluations, "
          f"{1e3 * res['seconds_per_evaluation']:.0f} ms each (two-pass floor {1e3 * floor:.0f} ms)", flush=True)
    lines = [
        f"`dpipe.make_data`, {res['rows']:,} rows x {FEATURES} features ({res['store_mb']:.0f} MB, {res['shards']} shards), groups g0 / g1; "
        f"`{CONSTRAINT}`, error rate, 2 MM steps, 2-worker LocalCluster (one thread each), shards in worker memory.",
        "",
        *table_head(["train seconds (with opening)", "fit seconds", "evaluations", "cuts", "ms per evaluation", "two-pass floor, ms",
                     "evaluation / floor", "seconds per MM step", "constraint value (<= 0 holds)"]),
        f"| {res['seconds']:.1f} | {res['fit_seconds']:.1f} | {res['evaluations']} | {res['cuts']} | {1e3 * res['seconds_per_evaluation']:.0f} | "
        f"{1e3 * floor:.0f} | {res['seconds_per_evaluation'] / floor:.2f} | {', '.join(f'{s:.1f}' for s in steps)} | "
        f"{res['constraint']['value']:+.4f} |",
        "",
        "The floor is one task per shard computing `X @ w` and `X.T @ g` on the persisted shards; an evaluation of the rate "
        "fit does that plus the per-row bounds (one numba loop) and the per-cell sums.",
    ]
    return res, "\n".join(lines)
