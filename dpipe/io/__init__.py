"""Ingest sources into sharded stores, and read stores shard by shard.

Every name is imported from its module on first use: a dask worker only reads
(:func:`open_store`, :func:`read_shard`), and the writers' imports (pyarrow's CSV reader,
which loads pandas; scipy.special) would add about 60 MB to every worker's footprint; the
``dpipe`` command's parser reads the ingest options' declaration (:class:`IngestOptions`)
without loading the stores' readers (zarr, pyarrow).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Manifest": "._manifest",
    "Shard": "._store",
    "Store": "._store",
    "open_store": "._store",
    "read_shard": "._store",
    "IngestOptions": "._ingest_options",
    "ingest": "._ingest",
    "split_store": "._split",
    "make_data": "._synthetic",
    "verify_store": "._verify",
    "record_checksums": "._verify",
    "ShardWriter": "._writer",
    "STORE_FORMATS": "._ingest_options",
}

__all__ = [*_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dpipe.io' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
