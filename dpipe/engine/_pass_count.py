"""Data passes: how many times a fit reads every shard, the figure a fit at scale is judged by.

A pass is one round of work over every shard that reads its rows: a ``map_gather``,
``map_reduce`` or ``map_reduce_each`` of a dataset, or a call on the shard hosts whose
method reads the hosted features (:data:`HOST_DATA_METHODS`; the others work on scores
the hosts keep). Reading a store into memory (``cache="memory"``) is one pass too,
``"load"``. A fit records the passes it made (``data_passes`` in its record) by kind: the
name of the shard function or host method. :func:`watching_passes` calls a function at the start of
every pass of any dataset (a benchmark's clock: time and bytes per pass).
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable, Iterator

__all__ = ["PassCount", "HOST_DATA_METHODS", "LOAD", "pass_kind", "watching_passes"]

#: shard-host methods that read every hosted shard's features (``X w``, ``X d`` or ``X^T g``); the other methods work on the
#: scores the hosts keep from the last of these (ranges, curvature, AUC)
HOST_DATA_METHODS = frozenset({"range_scores", "range_gradient", "newton_gradient", "newton_direction", "newton_product", "dual_gradient"})
#: the kind of the pass that reads a store into memory
LOAD = "load"
#: the functions :func:`watching_passes` installed, called with a pass's kind as it starts
_WATCHERS: list[Callable[[str], None]] = []


@contextlib.contextmanager
def watching_passes(watcher: Callable[[str], None]) -> Iterator[None]:
    """Call ``watcher(kind)`` as every pass of every dataset starts (on the driver, between passes), while in the block."""
    _WATCHERS.append(watcher)
    try:
        yield
    finally:
        _WATCHERS.remove(watcher)


class PassCount:
    """Passes over one dataset, by kind (a shard function's or host method's name, or :data:`LOAD`)."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()

    def add(self, kind: str) -> None:
        """Count one pass of ``kind``."""
        self.kinds[kind] += 1
        for watcher in _WATCHERS:
            watcher(kind)

    @property
    def total(self) -> int:
        """Passes so far."""
        return sum(self.kinds.values())

    def mark(self) -> Counter[str]:
        """The counts now, for :meth:`since`."""
        return self.kinds.copy()

    def since(self, mark: Counter[str]) -> dict[str, int]:
        """Passes by kind made after ``mark`` (kinds with none left out)."""
        return {k: n for k, n in (self.kinds - mark).items() if n > 0}


def pass_kind(fn: object) -> str:
    """The name a shard function's passes are counted under (a ``functools.partial`` over a shard function: that function's)."""
    if isinstance(fn, functools.partial):
        inner = next((a for a in fn.args if callable(a)), fn.func)
        return pass_kind(inner)
    return str(getattr(fn, "__name__", type(fn).__name__))
