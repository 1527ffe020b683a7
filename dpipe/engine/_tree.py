"""The one pairwise reduction of partial results, wherever it runs (driver, cluster tasks, this process), in a fixed shape."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["pairwise"]


def pairwise(parts: Sequence[Any], combine: Callable[[Any, Any], Any]) -> Any:
    """Merge ``parts`` pairwise with ``combine``, level by level in the given order.

    The tree's shape depends only on ``len(parts)``: level one merges positions
    ``(0, 1), (2, 3), ...`` and carries an odd last one up. Callers pass one partial
    result per shard in shard order, so a float sum is associated the same way
    whichever worker computed which shard and however many there were: this, not the
    placement, fixes the rounding of every reduction (the cluster's first levels in
    :meth:`._dataset.ShardedDataset._tree` pair the same positions).

    Parameters
    ----------
    parts : sequence
        At least one partial result, in shard (or range) order.
    combine : callable
        ``combine(a, b)`` merges two of them.

    Returns
    -------
    object
        The merged result.
    """
    parts = list(parts)
    while len(parts) > 1:
        merged = [combine(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            merged.append(parts[-1])
        parts = merged
    return parts[0]
