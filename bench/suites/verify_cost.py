"""verify-cost: what re-hashing every shard read (on by default, ``--no-verify`` to skip) costs a pass.

A 10^7-row store from ``dpipe make-data DEST --rows 10000000`` (40 features, float32: 1.6 GB
of features in 25 shards of 400,000 rows, uncompressed chunks; ``--quick``: 10^6 rows), opened
with ``verify=True`` and ``verify=False``. Two passes: the moments pass
(:func:`dpipe.engine.class_moments`, what auc-moment needs) and a score pass
(:meth:`dpipe.engine.RankPasses.scores`, one per evaluation of the smoothed and structural
objectives; the time of the pass itself, without the driver's merge, is reported too).
Two caches: ``memory`` reads (and re-hashes) each shard once, when the shards are loaded,
so a pass costs the same either way and the price is paid in the load; ``stream`` reads
(and re-hashes) every shard on every pass. Two engines: dask (a LocalCluster of 2 worker
processes x 1 thread, as ``dpipe train`` starts for a store this size) and local (this
process, ``dpipe.local-threads`` threads). The store sits in the page cache (it is read once
before timing), so a streamed pass reads memory, not disk: the ratio is the largest verification
can make it; a read from disk adds the same seconds to both sides. Passes alternate on / off,
after one untimed pass on each engine (imports, numba, the page cache).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .._harness import (
    Config,
    fmt_spread,
    local_cluster,
    spread,
    synthetic_store,
    table_head,
)

#: rows of the store (full, quick); features as ``dpipe make-data``'s default
ROWS = (10_000_000, 1_000_000)
FEATURES = 40
CACHES = ("memory", "stream")
PASSES = ("moments", "score")


def _moments(ds: Any, w: np.ndarray) -> float:
    from dpipe.engine import class_moments

    t0 = time.perf_counter()
    class_moments(ds)
    return time.perf_counter() - t0


def _score(ds: Any, w: np.ndarray) -> tuple[float, float]:
    from dpipe.engine import RankPasses

    rp = RankPasses(ds)
    t0 = time.perf_counter()
    rp.scores(w, remember=False)
    return time.perf_counter() - t0, rp.last["seconds_score"]


def _open(engine: str, store: Any, cache: str, client: Any) -> Any:
    from dpipe.engine import LocalDataset, ShardedDataset

    return ShardedDataset(store, client, cache=cache) if engine == "dask" else LocalDataset(store, cache=cache)


def _measure(engine: str, path: str, cache: str, client: Any, repeats: int, w: np.ndarray) -> dict[str, Any]:
    """Seconds of each pass with verify on and off (and of the load, for the memory cache)."""
    import dpipe

    runs: dict[bool, dict[str, list[float]]] = {v: {"load": [], "moments": [], "score": [], "score_pass": []} for v in (True, False)}
    stores = {v: dpipe.open_store(path, verify=v) for v in (True, False)}
    assert stores[True].verify and not stores[False].verify
    if cache == "stream":  # both open at once, passes alternating
        with _open(engine, stores[True], cache, client) as on, _open(engine, stores[False], cache, client) as off:
            for r in range(repeats):
                for v in ((True, False) if r % 2 == 0 else (False, True)):
                    ds = on if v else off
                    runs[v]["moments"].append(_moments(ds, w))
                    total, pass_only = _score(ds, w)
                    runs[v]["score"].append(total)
                    runs[v]["score_pass"].append(pass_only)
    else:  # one copy of the store in memory at a time; each open re-reads (and, on, re-hashes) every shard
        for r in range(repeats):
            for v in ((True, False) if r % 2 == 0 else (False, True)):
                t0 = time.perf_counter()
                with _open(engine, stores[v], cache, client) as ds:
                    runs[v]["load"].append(time.perf_counter() - t0)
                    runs[v]["moments"].append(_moments(ds, w))
                    total, pass_only = _score(ds, w)
                    runs[v]["score"].append(total)
                    runs[v]["score_pass"].append(pass_only)
    out: dict[str, Any] = {}
    for key in ("load", "moments", "score", "score_pass"):
        if not runs[True][key]:
            continue
        on, off = spread(runs[True][key]), spread(runs[False][key])
        out[key] = {"verify_on": on, "verify_off": off, "ratio": on["median"] / off["median"], "ratio_of_min": on["min"] / off["min"],
                    "extra_seconds": on["median"] - off["median"]}
    return out


def _reads(path: str, repeats: int) -> dict[str, Any]:
    """Every shard read once in this process, one thread, as a streamed pass reads it (memory-mapped), verify on and off.

    Off, a mapped raw chunk costs a few system calls; on, the re-hash touches every page: the
    difference is an upper bound of what verification adds to a streamed pass, whose own
    compute would have touched the pages anyway.
    """
    import dpipe

    out: dict[str, Any] = {}
    for v in (True, False):
        st = dpipe.open_store(path, verify=v)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for i in range(st.n_shards):
                st.read_shard(i, mmap=True)
            times.append(time.perf_counter() - t0)
        out["verify_on" if v else "verify_off"] = spread(times)
    out["extra_seconds"] = out["verify_on"]["min"] - out["verify_off"]["min"]
    return out


def _hash_rate(path: str) -> dict[str, float]:
    """xxh3_128 over one shard's decoded arrays in this process (one thread): bytes per second."""
    import dpipe
    from dpipe.io._checksum import shard_digests

    st = dpipe.open_store(path, verify=False)
    sh = st.read_shard(0)
    start, stop = st.manifest.shard_bounds[0]
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        shard_digests(0, start, stop, sh.X, sh.y, sh.group, sh.weight)
        times.append(time.perf_counter() - t0)
    return {"shard_bytes": sh.nbytes, "seconds": min(times), "bytes_per_second": sh.nbytes / min(times)}


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    import dpipe

    rows = ROWS[cfg.quick]
    path = str(synthetic_store(cfg.work, rows, FEATURES))
    st = dpipe.open_store(path)
    m = st.manifest
    w = np.random.default_rng(0).normal(size=m.n_features)
    res: dict[str, Any] = {"store": {"rows": m.n_rows, "features": m.n_features, "shards": m.n_shards, "nbytes": st.nbytes,
                                     "made_by": f"dpipe make-data DEST --rows {rows}"},
                           "hash_rate": _hash_rate(path), "reads": _reads(path, max(3, cfg.repeats)), "engines": {}}
    print(f"  xxh3_128 in one thread: {res['hash_rate']['bytes_per_second'] / 1e9:.2f} GB/s", flush=True)
    with local_cluster() as client:
        for engine in ("dask", "local"):
            with _open(engine, dpipe.open_store(path, verify=False), "stream", client) as ds:  # imports, numba, the page cache: not timed
                _moments(ds, w), _score(ds, w)
            for cache in CACHES:
                t0 = time.perf_counter()
                part = res["engines"].setdefault(engine, {})[cache] = _measure(engine, path, cache, client if engine == "dask" else None, cfg.repeats, w)
                print(f"  {engine} {cache}: " + ", ".join(f"{k} {v['verify_on']['median']:.3f} / {v['verify_off']['median']:.3f} s ({v['ratio']:.2f}x)"
                                                        for k, v in part.items()) + f" [{time.perf_counter() - t0:.0f} s]", flush=True)
    lines = [
        (f"Store: {m.n_rows:,} rows x {m.n_features} float32 features ({st.nbytes / 1e9:.2f} GB in memory), {m.n_shards} shards, "
         f"from `dpipe make-data DEST --rows {rows}`; in the page cache. dask: LocalCluster of 2 worker processes x 1 thread; local: this "
         f"process. Seconds: median (min-max) of {cfg.repeats} runs, verify on and off alternating. *score* is `RankPasses.scores` "
         "(the pass and the driver's merge of the sorted scores), *score (pass only)* without the merge. With the memory cache the "
         "shards are re-hashed once, in the *load*; with the stream cache on every pass."),
        "",
        *table_head(["engine", "cache", "what", "verify on (s)", "--no-verify (s)", "on / off (medians)", "on / off (minima)", "extra s per 10^7 rows (medians)"]),
    ]
    names = {"load": "load (once)", "moments": "moments pass", "score": "score pass", "score_pass": "score (pass only)"}
    for engine, caches in res["engines"].items():
        for cache, part in caches.items():
            for key, v in part.items():
                extra = v["extra_seconds"] * 1e7 / m.n_rows
                lines.append(f"| {engine} | {cache} | {names[key]} | {fmt_spread(v['verify_on'], digits=3)} | {fmt_spread(v['verify_off'], digits=3)} | "
                             f"{v['ratio']:.2f}x | {v['ratio_of_min']:.2f}x | {extra:+.3f} |")
    hr = res["hash_rate"]
    lines += ["", (f"xxh3_128 alone, one thread of this process: {hr['bytes_per_second'] / 1e9:.2f} GB/s "
              f"({hr['seconds'] * 1e3:.1f} ms for one {hr['shard_bytes'] / 1e6:.0f} MB shard), "
              f"i.e. {st.nbytes / hr['bytes_per_second']:.2f} s of one core for the whole store. Reading every shard memory-mapped in one "
              f"thread, as a streamed pass does, then dropping it: {fmt_spread(res['reads']['verify_on'], digits=3)} s verified, "
              f"{fmt_spread(res['reads']['verify_off'], digits=3)} s not (minima differ by {res['reads']['extra_seconds']:.3f} s: the most "
              "verification can add to one streamed pass over this store, in core-seconds).")]
    return res, "\n".join(lines)
