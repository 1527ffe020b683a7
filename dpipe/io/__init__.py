"""Ingest sources into sharded stores, and read stores shard by shard.

Reading (:func:`open_store`, :func:`read_shard`) is imported at once; writing
(ingest, make-data, split, verify) on first use. A dask worker only reads, and the
writers' imports (pyarrow's CSV reader, which loads pandas; scipy.special) would add
about 60 MB to every worker's footprint.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._manifest import Manifest
from ._store import Shard, Store, open_store, read_shard

_LAZY = {
    "ingest": "._ingest",
    "split_store": "._split",
    "make_data": "._synthetic",
    "verify_store": "._verify",
    "record_checksums": "._verify",
    "ShardWriter": "._writer",
    "STORE_FORMATS": "._writer",
}

__all__ = ["Manifest", "Shard", "Store", "open_store", "read_shard", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dpipe.io' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
