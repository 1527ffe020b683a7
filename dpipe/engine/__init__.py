"""Cluster resolution, shard-aligned datasets and the data passes every fit is made of.

The names are imported from their modules on first use: the local engine
(:class:`LocalDataset`, ``engine="local"``) never imports ``distributed``; only
:func:`cluster_client`, :class:`ShardedDataset` and what runs on a cluster do.
"""

from .._lazy import attach

#: exported name -> the private module that defines it
_LAZY = {
    "ClusterSpec": "._cluster_spec",
    "cluster_client": "._client",
    "client_for": "._client",
    "describe_client": "._client",
    "explicit_scheduler": "._scheduler",
    "ShardedDataset": "._dataset",
    "LocalDataset": "._local",
    "HostsLost": "._hosts",
    "EXCHANGE_MODES": "._ranges",
    "RangeExchange": "._ranges",
    "RangeNewton": "._range_newton",
    "CACHE_MODES": "._cluster_spec",
    "choose_cache": "._dataset",
    "ENGINES": "._cluster_spec",
    "open_dataset": "._open",
    "resolve_engine": "._open",
    "MergedScores": "._passes",
    "ClassTotals": "._passes",
    "RankPasses": "._passes",
    "class_moments": "._passes",
    "class_totals": "._passes",
    "column_scales": "._passes",
    "column_moments": "._passes",
    "rank_summary": "._passes",
}

__all__ = [*_LAZY]
__getattr__, __dir__ = attach(__name__, _LAZY)
