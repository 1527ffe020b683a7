"""``dpipe verify``: re-hash every shard of a store, or record checksums for an old store."""

from __future__ import annotations

import os
from collections.abc import Callable

import msgspec

from ..exceptions import StoreError
from ._checksum import CHECKSUM_ALGORITHM, shard_digests
from ._manifest import SCHEMA_VERSION, Manifest, ShardRecord, decode_manifest, write_manifest
from ._store import Store, read_shard
from ._store_format import ShardCheck, store_format

__all__ = ["verify_store", "record_checksums"]

Progress = Callable[[int, int, int], None]  # (shards done, shards in all, rows done)


def verify_store(path: str | os.PathLike, progress: Progress | None = None) -> Manifest:
    """Read every shard of the store in this process with the checks of verify mode.

    Returns the manifest; raises :class:`~dpipe.exceptions.StoreError` at the first
    damage found (or when the store has no checksums).
    """
    st = Store(os.fspath(path), verify=True)
    rows = 0
    for i in range(st.n_shards):
        rows += st.read_shard(i, verify=True).n_rows
        if progress is not None:
            progress(i + 1, st.n_shards, rows)
    return st.manifest


def record_checksums(path: str | os.PathLike, progress: Progress | None = None) -> Manifest:
    """Compute and record per-shard checksums for a store written without them (schema 1).

    Every shard is read with the cheap checks (chunk files present, row and class
    counts as in the manifest); the new manifest (schema 2) is written through a
    temporary file and a rename, into the format's own copy first (a Zarr group's attributes),
    then ``manifest.json``.
    The checksums vouch for the data as they are now: run it on a store you trust.
    """
    st = Store(os.fspath(path), verify=False, _recording=True)
    m = st.manifest
    if m.has_checksums:
        raise StoreError(f"{st.path}: already has checksums (schema {m.schema_version}); `dpipe verify {st.path}` checks them")
    records = []
    rows = 0
    for i in range(st.n_shards):
        start, stop = m.shard_bounds[i]
        check = ShardCheck(tuple(m.class_counts[i]), None, m.group_counts is not None, bool(m.has_weight), chunk_files=True, labelled=m.labelled)
        try:
            sh = read_shard(st.path, m.format, i, start, stop, m.n_features, check, False)
        except StoreError as exc:
            raise StoreError(f"{exc}; checksums not recorded") from None
        records.append(ShardRecord(rows=stop - start, class_counts=list(m.class_counts[i]),
                                   digests=shard_digests(i, start, stop, sh.X, sh.y, sh.group, sh.weight)))
        rows += sh.n_rows
        if progress is not None:
            progress(i + 1, st.n_shards, rows)
    new = msgspec.structs.replace(m, schema_version=SCHEMA_VERSION, shards=records, checksum_algorithm=CHECKSUM_ALGORITHM)
    decode_manifest(new.to_dict(), st.path, directory=st.path)  # the record must read back
    store_format(m.format, st.path).record_manifest(st.path, new)
    write_manifest(st.path, new)
    return new
