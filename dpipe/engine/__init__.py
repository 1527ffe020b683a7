"""Cluster resolution, shard-aligned datasets and the data passes every fit is made of."""

from ._client import cluster_client, describe_client, explicit_scheduler
from ._dataset import CACHE_MODES, HostsLost, LocalDataset, ShardedDataset, choose_cache
from ._open import ENGINES, open_dataset, resolve_engine
from ._ranges import EXCHANGE_MODES, RangeExchange
from ._passes import ClassTotals, MergedScores, RankPasses, class_moments, class_totals, column_scales, rank_summary

__all__ = [
    "cluster_client",
    "describe_client",
    "explicit_scheduler",
    "ShardedDataset",
    "LocalDataset",
    "HostsLost",
    "EXCHANGE_MODES",
    "RangeExchange",
    "CACHE_MODES",
    "choose_cache",
    "ENGINES",
    "open_dataset",
    "resolve_engine",
    "MergedScores",
    "ClassTotals",
    "RankPasses",
    "class_moments",
    "class_totals",
    "column_scales",
    "rank_summary",
]
