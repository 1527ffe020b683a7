"""The one pairwise reduction of partial results, wherever it runs (driver, shard host, this process)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["pairwise"]


def pairwise(parts: Sequence[Any], combine: Callable[[Any, Any], Any]) -> Any:
    """Merge ``parts`` pairwise with ``combine``, level by level in the given order (the cluster's tree order).

    Parameters
    ----------
    parts : sequence
        At least one partial result.
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
