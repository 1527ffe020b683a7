"""Ingest's two passes and the store they write: pass 1 scans the source (the job's), the layout and shard size are chosen,
pass 2 encodes the rows into shards, and the manifest records the encoding (with the ``like`` store's transform and the
hashing in use) and the source (:func:`dpipe.io._ingest.record_source`'s)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .._log import VERBOSE
from .._progress import Progress, advance
from .._transform import FeatureTransform
from ..exceptions import DataWarning, InputError
from ._hashing import COLLISION_WARNING
from ._ingest_checks import IngestPlan
from ._ingest_jobs import SvmlightJob, TabularJob
from ._ingest_sources import SourceFile
from ._manifest import Manifest
from ._writer import ShardWriter, shard_rows_for

__all__ = ["SPARSE_MAX_DENSITY", "scan", "write_store"]

#: ``layout="auto"`` stores a source as CSR up to this fraction of non-zero entries. Measured here (``python -m bench
#: text``: numba kernels, one thread, ``X w`` + ``X^T g`` of 160 MB dense blocks, non-zeros placed uniformly): CSR takes
#: 0.25-0.65x the dense time at 5 %, 0.43-0.94x at 10 %, 0.53-0.87x at 12.5 % for d = 54-300 (1.09x at d = 30) and
#: 1.2-1.4x at 20 %; the crossing is near 15 % for d >= 54, near 11 % at d = 30, and lower for a store that fits in the
#: CPU's caches, where dense passes run twice as fast. Whole default fits: kdd99 (10.6 %) 0.77x, adult (11.2 %) 0.94x, a9a (11.3 %) 0.85x,
#: covtype (22 %) 1.4x.
SPARSE_MAX_DENSITY = 0.125

log = logging.getLogger("dpipe.ingest")

Job = SvmlightJob | TabularJob


def scan(plan: IngestPlan, job: Job, files: list[SourceFile], stacklevel: int) -> None:
    """Pass 1: the job reads every source file once (its warnings issued at ``stacklevel``, the caller of ingest)."""
    with Progress(f"ingest: reading {plan.where} (pass 1 of 2)", total_bytes=sum(f.stamp[0] for f in files), bytes_label="read"):
        job.scan()
    if isinstance(job, TabularJob):
        import pyarrow as pa  # loaded by the tabular job already; an svmlight ingest never imports it

        pa.default_memory_pool().release_unused()  # give back what pass 1's Arrow buffers held
    for msg in job.warnings:
        warnings.warn(msg, DataWarning, stacklevel=stacklevel + 1)


def write_store(plan: IngestPlan, job: Job, files: list[SourceFile], source: Callable[[int], dict[str, Any]], stacklevel: int) -> Manifest:
    """Pass 2 into ``plan.dest``, after :func:`scan`: the layout and shard size chosen, the rows written, the manifest
    committed with the encoding and ``source(rows_per_shard)`` (the source's record: the options record the shard size)."""
    o = plan.options
    store_layout = choose_layout(o.layout, job, plan.like)
    nnz_per_row = job.nnz / max(1, job.n_rows) if store_layout == "csr" else None
    # a source smaller than one default shard becomes one shard of exactly its rows
    rows_per_shard = o.shard_rows or shard_rows_for(job.n_rows, job.n_features, nnz_per_row=nnz_per_row)
    with ShardWriter(plan.dest, job.n_features, job.feature_names, rows_per_shard, format=o.format, with_group=job.groups is not None,
                     with_weight=job.has_weight, overwrite=o.overwrite, labelled=not o.unlabeled, layout=store_layout) as writer:
        with Progress(f"ingest: writing {plan.dest} (pass 2 of 2)", total_rows=job.n_rows, bytes_label="of features"):
            if store_layout == "csr":
                written = _write_csr_shards(job, writer, plan.transform, plan.where)
            else:
                written = _write_shards(job, writer, rows_per_shard, job.n_features, plan.transform, plan.where)
        if written != job.n_rows:
            raise InputError(f"pass 2 read {written} rows, pass 1 counted {job.n_rows} (did the file change?)", path=files[0].path)
        encoding = _encoding(plan, job, stacklevel + 1)
        return writer.commit(source=source(rows_per_shard), encoding=encoding, groups=job.groups, group_column=job.group_column)


def _encoding(plan: IngestPlan, job: Job, stacklevel: int) -> dict[str, Any]:
    """The manifest's ``encoding``: the job's, with the ``like`` store's transform and the hashing in use (a
    :class:`DataWarning` when its slots collide often)."""
    encoding = job.encoding
    if plan.transform is not None:
        assert plan.like is not None  # a transform here is the like= store's
        encoding = {**job.encoding, "transform": plan.like.encoding["transform"]}
    hashing = job.hashing_used()
    if hashing is not None:
        encoding = {**encoding, "hashing": hashing.to_dict()}
        if hashing.collision_rate >= COLLISION_WARNING:
            warnings.warn(f"{plan.where}: {100 * hashing.collision_rate:.1f} % of the {hashing.n_features} hash slots are in use, so "
                          f"about that share of the tokens (some {hashing.tokens_estimate:.0f}) shares a slot with another; "
                          f"hash_features={hashing.slots_for()} would keep it under 5 %.", DataWarning, stacklevel=stacklevel + 1)
    return encoding


def choose_layout(layout: str, job: Job, like: Manifest | None = None) -> str:
    """The store's layout (``"dense"`` or ``"csr"``) for the ingest option ``layout``; ``auto`` is logged with its reason
    (with a ``like`` store: that store's layout, so that a test store is read as its training store is)."""
    if layout != "auto":
        return "csr" if layout == "sparse" else "dense"
    if like is not None:
        log.log(VERBOSE, "layout auto: %s (the like= store's)", "sparse" if like.layout == "csr" else "dense")
        return like.layout
    if job.hashing is not None:
        log.log(VERBOSE, "layout auto: sparse (hashed features)")
        return "csr"
    density = job.nonzeros / max(1, job.n_rows * job.n_features)
    chosen = "csr" if density <= SPARSE_MAX_DENSITY else "dense"
    log.log(VERBOSE, "layout auto: %s (%.2f %% of the entries are non-zero; sparse up to %.1f %%)", "sparse" if chosen == "csr" else "dense",
            100 * density, 100 * SPARSE_MAX_DENSITY)
    return chosen


def _write_csr_shards(job: Job, writer: ShardWriter, transform: FeatureTransform | None = None, where: str = "") -> int:
    """Pass 2 into a CSR store: the source's rows go to the writer as CSR blocks (never dense; svmlight's parsed rows,
    a tabular source's one-hot or hashed columns), transformed by the like= store's ``transform`` (one that keeps zeros)."""
    total = 0
    for X, y, g, w in job.csr_pieces():
        if transform is not None:
            try:
                X = transform.apply(X, first_row=total, where=where)
            except ValueError as exc:
                raise InputError(f"{exc} (a row of the source, counted from 0; the transform is the like= store's)") from None
        writer.append(X, y, g, w)
        total += X.shape[0]
        advance(rows=X.shape[0], nbytes=8 * X.nnz)
    return total


def _write_shards(job: Job, writer: ShardWriter, shard_rows: int, d: int,
                  transform: FeatureTransform | None = None, where: str = "") -> int:
    """Encode pass 2 straight into one shard-sized buffer and write every full shard (transformed in place
    by the like= store's ``transform``)."""

    def write(rows: int) -> None:
        if transform is not None:
            try:
                view = X[:rows]
                transform.apply(view, out=view, first_row=total, where=where)
            except ValueError as exc:
                raise InputError(f"{exc} (a row of the source, counted from 0; the transform is the like= store's)") from None
        writer.write_shard(X[:rows], y[:rows], None if g is None else g[:rows], None if w is None else w[:rows])
        advance(rows=rows, nbytes=4 * rows * d)  # pass 2's progress: rows written

    X = np.zeros((shard_rows, d), dtype=np.float32)
    y = np.zeros(shard_rows, dtype=np.int8)
    g = np.zeros(shard_rows, dtype=np.int16) if writer.with_group else None
    w = np.zeros(shard_rows, dtype=np.float32) if writer.with_weight else None
    pos = total = 0
    for n, encode in job.parts():
        a = 0
        while a < n:
            take = min(n - a, shard_rows - pos)
            yy, gg, ww = encode(a, a + take, X[pos : pos + take])
            y[pos : pos + take] = yy
            if g is not None:
                g[pos : pos + take] = gg
            if w is not None:
                w[pos : pos + take] = ww
            pos += take
            a += take
            if pos == shard_rows:
                write(pos)
                total += pos
                pos = 0
    if pos:
        write(pos)
        total += pos
    return total
