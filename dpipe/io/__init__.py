"""Ingest sources into sharded stores, and read stores shard by shard."""

from ._ingest import ingest
from ._manifest import Manifest
from ._store import Shard, Store, open_store, read_shard
from ._split import split_store
from ._synthetic import make_data
from ._verify import record_checksums, verify_store
from ._writer import STORE_FORMATS, ShardWriter

__all__ = ["Manifest", "Shard", "Store", "open_store", "read_shard", "ShardWriter", "STORE_FORMATS", "make_data", "split_store", "ingest", "verify_store", "record_checksums"]
