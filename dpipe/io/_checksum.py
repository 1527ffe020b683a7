"""Content hashes of a shard's arrays, recorded at write time and checked in verify mode.

What is hashed is the **decoded values**, not the stored bytes: for every array of a
shard, xxh3_128 over its C-contiguous little-endian bytes in the store's canonical
dtype (``X`` float32, ``y`` int8, ``group`` int16, ``weight`` float32), after a header
naming the array, its shape, and the shard's index and row range (a CSR feature block:
its row offsets, column indices and values, :func:`csr_digest`). Decoded values,
because

* they are what training reads: a hash of the values catches any change that would
  change the fit, whatever layer caused it (codec, chunk files, Parquet pages);
* they do not depend on the codec, the compression level, the chunking or the
  Parquet writer, so a store re-chunked or re-compressed without changing its data
  keeps its checksums, and Zarr and Parquet stores of the same rows hash alike;
* a stored-bytes hash would need a per-format walk over chunk files and Parquet
  pages, and would still say nothing about whether they decode to the right rows.

The header binds every hash to its position: a chunk or Parquet part holding the
right values for *another* shard (swapped, duplicated, moved) does not match.
xxh3_128 is a fast non-cryptographic hash (well above the speed of reading and
decoding the shard); it guards against accidents, not against an adversary.
"""

from __future__ import annotations

import numpy as np
import xxhash

from ..reduce._block import is_csr

__all__ = ["CHECKSUM_ALGORITHM", "ARRAY_DTYPES", "array_digest", "csr_digest", "shard_digests"]

CHECKSUM_ALGORITHM = "xxh3_128"

#: canonical dtype of every array a store may hold, in the order they are hashed
ARRAY_DTYPES = {"X": "<f4", "y": "|i1", "group": "<i2", "weight": "<f4"}


def array_digest(name: str, values: np.ndarray, index: int, start: int, stop: int) -> str:
    """xxh3_128 hex digest of the decoded ``values`` of array ``name`` of shard ``index`` (rows ``start:stop``)."""
    a = np.ascontiguousarray(values, dtype=ARRAY_DTYPES[name])
    h = xxhash.xxh3_128()
    h.update(f"dpipe-shard:{name}:{a.dtype.str}:{list(a.shape)}:{index}:{start}:{stop};".encode())
    if a.size:
        h.update(a.reshape(-1).view(np.uint8).data)  # .data: the array's memoryview (a Buffer in the 3.11 stubs too), no copy
    return h.hexdigest()


def csr_digest(X, index: int, start: int, stop: int) -> str:
    """xxh3_128 hex digest of a CSR feature block: its shape, then the row offsets from 0 (int64), the column
    indices (int32, int64 only where ``d`` needs it: hashed as read, no widened copy of 4 bytes a value) and the
    values (float32), after the same position header as :func:`array_digest`."""
    h = xxhash.xxh3_128()
    h.update(f"dpipe-shard:X:csr:{list(X.shape)}:{index}:{start}:{stop};".encode())
    indptr = np.asarray(X.indptr, dtype="<i8")
    index_dtype = "<i4" if X.shape[1] < 2**31 else "<i8"
    for a in (indptr - indptr[0], np.asarray(X.indices, dtype=index_dtype), np.asarray(X.data, dtype="<f4")):
        if a.size:
            h.update(np.ascontiguousarray(a).view(np.uint8).data)
    return h.hexdigest()


def shard_digests(index: int, start: int, stop: int, X, y: np.ndarray,
                  group: np.ndarray | None = None, weight: np.ndarray | None = None) -> dict[str, str]:
    """Digests of every array present in a shard, keyed by array name (``X`` dense, or CSR: :func:`csr_digest`)."""
    x_digest = csr_digest(X, index, start, stop) if is_csr(X) else array_digest("X", X, index, start, stop)
    out = {"X": x_digest, "y": array_digest("y", y, index, start, stop)}
    if group is not None:
        out["group"] = array_digest("group", group, index, start, stop)
    if weight is not None:
        out["weight"] = array_digest("weight", weight, index, start, stop)
    return out
