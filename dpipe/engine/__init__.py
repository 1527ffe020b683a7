"""Cluster resolution and shard-aligned passes over a store."""

from ._client import cluster_client, describe_client
from ._dataset import CACHE_MODES, LocalDataset, ShardedDataset, choose_cache

__all__ = ["cluster_client", "describe_client", "ShardedDataset", "LocalDataset", "CACHE_MODES", "choose_cache"]
