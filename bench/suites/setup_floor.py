"""setup-floor: a large fit's setup against its floors, measured in the same run on the same cores (issue 40).

Two figures, each with the floor it is judged by:

*Loading.* ``ShardedDataset(cache="memory")`` on a LocalCluster of two worker processes
(dpipe's embedded cluster's shape): every shard read, verified (re-hashed against its
checksums, the default) and kept in a worker's memory, the shard hosts started. The floor:
the store format's own reader decoding the same shard files into arrays, in two processes
(a ``multiprocessing`` pool, one shard a task), nothing kept: ``pyarrow.parquet.read_table``
plus the list column's values as a (rows, d) array for Parquet, ``zarr`` array reads for Zarr.
The verification's hashing is reported apart (xxh3-128 of every shard's arrays, in the same
pool), so the share it takes of the load is visible.

*Class moments.* One ``class_moments`` pass over the loaded shards (per class count, mean and
centred second moment, float64). The floor: BLAS ``syrk`` (``X^T X``) over the same rows, on
the workers that hold them, one BLAS thread each as in a pass: in float64 (the precision the
moments are kept in; the rows converted first) and in float32 (the rows as stored), the sum of
the per-shard seconds divided by the workers (both floors are per-shard timings inside the
workers, so the task overhead of a pass is not in them).

Data: the generated stores of ``scale-race`` (10^7 x 120, 76 shards of 131,579 rows; quick
10^6 x 120), as Parquet and as Zarr. Medians of ``--repeats`` runs, the contenders interleaved.
"""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._harness import Config, fmt_spread, local_cluster, spread, table_head
from .scale_race import generated

#: (rows, features, test rows) of the stores: full and quick (the test stores are made with them and not used here)
SIZE, QUICK_SIZE = (10_000_000, 120, 1_000_000), (1_000_000, 120, 100_000)
WORKERS = 2
FORMATS = ("parquet", "zarr")


#: a pool process's decoded shards, kept until the pool ends (:func:`_decode_keep`)
_KEPT: list[Any] = []


def _decode_keep(args: tuple[str, int]) -> float:
    """:func:`_decode`, the arrays kept in the process until its pool ends: a load keeps every shard, so its memory is new
    on every shard (first touch of fresh pages), where a decode that drops its arrays reuses the same pages."""
    return _decode(args, keep=True)


def _decode(args: tuple[str, int], keep: bool = False) -> float:
    """Seconds to decode one shard's feature values with the format's own reader (a pool task)."""
    path, index = args
    import dpipe

    store = dpipe.open_store(path)
    t0 = time.perf_counter()
    if store.format == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(str(Path(path) / f"part-{index:05d}.parquet"), columns=["X", "y"])
        column = table.column("X").combine_chunks()
        X = column.values.to_numpy(zero_copy_only=False).reshape(len(column), -1)
        table.column("y").to_numpy()
    else:
        import zarr

        group = zarr.open_group(path, mode="r")
        start, stop = store.manifest.shard_bounds[index]
        X = group["X"][start:stop]
        group["y"][start:stop]
    assert X.shape[0] > 0
    if keep:
        _KEPT.append(X)
    return time.perf_counter() - t0


def _hash(args: tuple[str, int]) -> float:
    """Seconds to hash one shard's arrays as verification does (xxh3-128), after reading them (not timed)."""
    path, index = args
    import dpipe
    from dpipe.io._checksum import shard_digests

    store = dpipe.open_store(path)
    shard = store.read_shard(index)
    start, stop = store.manifest.shard_bounds[index]
    t0 = time.perf_counter()
    shard_digests(index, start, stop, shard.X, shard.y, shard.group, shard.weight)
    return time.perf_counter() - t0


def _pool_wall(fn: Any, path: str, shards: int) -> tuple[float, float]:
    """``fn`` over every shard in a pool of :data:`WORKERS` processes (spawned, as dask's are): the wall seconds, and the
    seconds ``fn`` reported summed and divided by the processes (the part of the work it timed itself)."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WORKERS) as pool:
        pool.map(fn, [(path, 0)] * WORKERS)  # imports and first-touch costs out of the timing
        t0 = time.perf_counter()
        timed = pool.map(fn, [(path, i) for i in range(shards)], chunksize=1)
        return time.perf_counter() - t0, sum(timed) / WORKERS


def _syrk_seconds(shard: Any, precision: str) -> float:
    """Seconds of ``X^T X`` over one shard's rows (float64: converted first, not timed), one BLAS thread."""
    from dpipe.engine._blas import ONE_BLAS_THREAD

    X = np.asarray(shard.X.toarray() if hasattr(shard.X, "toarray") else shard.X)
    X = X.astype(np.float64) if precision == "float64" else np.ascontiguousarray(X, dtype=np.float32)
    with ONE_BLAS_THREAD:
        t0 = time.perf_counter()
        X.T @ X
        return time.perf_counter() - t0


def _one_store(path: Path, repeats: int) -> dict[str, Any]:
    import dpipe
    from dpipe.engine import LocalDataset, ShardedDataset, class_moments

    store = dpipe.open_store(str(path))
    shards = store.n_shards
    out: dict[str, list[float]] = {k: [] for k in ("decode", "decode_keep", "hash", "load", "local_load", "moments", "syrk64", "syrk32")}
    with local_cluster(WORKERS) as client:
        for _ in range(repeats):
            out["decode"].append(_pool_wall(_decode, str(path), shards)[0])
            out["decode_keep"].append(_pool_wall(_decode_keep, str(path), shards)[0])
            with LocalDataset(str(path)) as local:  # the local engine: WORKERS threads of this process
                out["local_load"].append(local.load_seconds)
            out["hash"].append(_pool_wall(_hash, str(path), shards)[1])
            with ShardedDataset(str(path), client, cache="memory") as ds:
                out["load"].append(ds.load_seconds)
                class_moments(ds)  # the kernels loaded on every worker
                t0 = time.perf_counter()
                class_moments(ds)
                out["moments"].append(time.perf_counter() - t0)
                out["syrk64"].append(sum(ds.map_gather(_syrk_seconds, "float64")) / WORKERS)
                out["syrk32"].append(sum(ds.map_gather(_syrk_seconds, "float32")) / WORKERS)
    row = {k: spread(v) for k, v in out.items()}
    row.update(store=path.name, shards=shards, rows=int(store.manifest.n_rows), features=int(store.manifest.n_features),
               bytes=int(store.nbytes), load_over_decode=row["load"]["median"] / row["decode"]["median"],
               load_over_decode_keep=row["load"]["median"] / row["decode_keep"]["median"],
               local_load_over_decode_keep=row["local_load"]["median"] / row["decode_keep"]["median"],
               moments_over_syrk64=row["moments"]["median"] / row["syrk64"]["median"],
               moments_over_syrk32=row["moments"]["median"] / row["syrk32"]["median"])
    return row


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    rows, features, test_rows = QUICK_SIZE if cfg.quick else SIZE
    results = []
    for fmt in FORMATS:
        train, _ = generated(cfg.work, rows, features, test_rows, fmt=fmt)
        print(f"  {train.name}", flush=True)
        results.append(_one_store(train, cfg.repeats))
        r = results[-1]
        print(f"    load {r['load']['median']:.2f} s against decode {r['decode']['median']:.2f} s ({r['load_over_decode']:.2f}x), "
              f"decode and keep {r['decode_keep']['median']:.2f} s ({r['load_over_decode_keep']:.2f}x); local engine's load "
              f"{r['local_load']['median']:.2f} s ({r['local_load_over_decode_keep']:.2f}x); "
              f"moments {r['moments']['median']:.2f} s against syrk {r['syrk64']['median']:.2f} s float64 ({r['moments_over_syrk64']:.2f}x), "
              f"{r['syrk32']['median']:.2f} s float32 ({r['moments_over_syrk32']:.2f}x)", flush=True)
    md = [f"{rows:,} rows x {features} (generated, `scale-race`'s generator), {WORKERS} worker processes, seconds: median (min-max) of {cfg.repeats}.", ""]
    md += table_head(["store", "shards", "MB", "decode floor", "decode and keep floor", "hashing (verify)", "load into workers", "load / decode",
                      "load / decode and keep", "local engine's load", "local load / decode and keep", "class moments",
                      "syrk float64 floor", "moments / syrk64", "syrk float32", "moments / syrk32"])
    for r in results:
        md.append(f"| {r['store']} | {r['shards']} | {r['bytes'] / 1e6:.0f} | {fmt_spread(r['decode'])} | {fmt_spread(r['decode_keep'])} | {fmt_spread(r['hash'])} | "
                  f"{fmt_spread(r['load'])} | {r['load_over_decode']:.2f}x | {r['load_over_decode_keep']:.2f}x | {fmt_spread(r['local_load'])} | "
                  f"{r['local_load_over_decode_keep']:.2f}x | {fmt_spread(r['moments'])} | {fmt_spread(r['syrk64'])} | "
                  f"{r['moments_over_syrk64']:.2f}x | {fmt_spread(r['syrk32'])} | {r['moments_over_syrk32']:.2f}x |")
    md += ["", "The decode floor reads the shard files with the format's own reader in a pool of as many processes as workers; "
           "the decode-and-keep floor does the same keeping every array until the pool ends, as a load must (each shard's memory is then new: "
           "the first touch of fresh pages, which this virtual machine makes costly, is in it, where the plain decode reuses its pages); "
           "the local engine's load reads the store into this process on as many threads; "
           "the load adds verification (its hashing alone in the column beside), the shards kept on the workers and the shard hosts. "
           "The syrk floors are per-shard timings inside the workers (no task overhead), summed and divided by the workers.", ""]
    return {"results": results, "rows": rows, "features": features, "workers": WORKERS}, "\n".join(md)
