"""Data passes: how many times a fit reads every shard, the figure a fit at scale is judged by.

A pass is one round of work over every shard that reads its rows: a ``map_gather``,
``map_reduce`` or ``map_reduce_each`` of a dataset, or a call on the shard hosts whose
method reads the hosted features (:data:`HOST_DATA_METHODS`; the others work on scores
the hosts keep). Reading a store into memory (``cache="memory"``) is one pass too,
``"load"``. A fit records the passes it made (``data_passes`` in its record) by kind: the
name of the shard function or host method.

Beside the count, every round of work over the shards records its traffic (:class:`Traffic`): the tasks it ran
and the payload bytes it sent from the driver and gathered back to it (dask's ``sizeof`` of the arguments and
results: the arrays' bytes, not the wire's framing). Calls on the shard hosts that work on kept scores are
traffic without being passes. A fit records both (``data_passes_by_kind`` and ``pass_traffic``), so that
"bytes through the driver per pass" is read off the model, not estimated. :func:`watching_passes` calls a
function at the start of every pass of any dataset (a benchmark's clock: time and bytes per pass).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["PassCount", "PassMark", "Traffic", "traffic_record", "HOST_DATA_METHODS", "LOAD", "pass_kind", "pass_starting", "watching_passes"]

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


def pass_starting(kind: str) -> None:
    """Tell the :func:`watching_passes` watchers that a pass of ``kind`` starts (the datasets call it)."""
    for watcher in _WATCHERS:
        watcher(kind)


@dataclasses.dataclass
class Traffic:
    """What rounds of one kind cost beyond reading the rows.

    Attributes
    ----------
    rounds : int
        Rounds of work over the shards (passes, or calls on the shard hosts).
    tasks : int
        Tasks (or host calls) they ran, merges included.
    to_driver, from_driver : int
        Payload bytes gathered by the driver / sent by it (0 on the local engine: nothing leaves the process).
    seconds : float
        Wall time from the first task's submission to the last result on the driver.
    """

    rounds: int = 0
    tasks: int = 0
    to_driver: int = 0
    from_driver: int = 0
    seconds: float = 0.0

    def plus(self, other: Traffic, sign: int = 1) -> Traffic:
        """The sum (``sign=-1``: the difference) of two records."""
        return Traffic(*(a + sign * b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))


@dataclasses.dataclass(frozen=True)
class PassMark:
    """A :class:`PassCount`'s state at one time (:meth:`PassCount.mark`)."""

    passes: Counter[str]
    traffic: dict[str, Traffic]


class PassCount:
    """Passes over one dataset, by kind (a shard function's or host method's name, or :data:`LOAD`), and their traffic."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.traffic: dict[str, Traffic] = {}

    def add(self, kind: str, traffic: Traffic | None = None, *, data: bool = True) -> None:
        """Count one round of ``kind`` with its ``traffic`` (one round, no tasks or bytes where not given); ``data``: it read
        every shard's rows (a pass), else it worked on what the workers keep (traffic only)."""
        if data:
            self.kinds[kind] += 1
        self.traffic[kind] = self.traffic.get(kind, Traffic()).plus(dataclasses.replace(traffic or Traffic(), rounds=1))

    @property
    def total(self) -> int:
        """Passes so far."""
        return sum(self.kinds.values())

    def mark(self) -> PassMark:
        """The counts and traffic now, for :meth:`since` and :meth:`traffic_since`."""
        return PassMark(self.kinds.copy(), dict(self.traffic))

    def since(self, mark: PassMark) -> dict[str, int]:
        """Passes by kind made after ``mark`` (kinds with none left out)."""
        return {k: n for k, n in (self.kinds - mark.passes).items() if n > 0}

    def traffic_since(self, mark: PassMark) -> dict[str, Traffic]:
        """Traffic by kind after ``mark`` (kinds with no round left out)."""
        out = {k: t.plus(mark.traffic.get(k, Traffic()), -1) for k, t in self.traffic.items()}
        return {k: t for k, t in out.items() if t.rounds > 0}


def traffic_record(traffic: dict[str, Traffic], passes: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The fit record's ``pass_traffic``: per kind, its rounds, whether they read the rows (``data``), and per round the
    tasks, the payload bytes to and from the driver and the seconds (means, rounded)."""
    return {k: {"rounds": t.rounds, "data": k in passes, "tasks_per_round": round(t.tasks / t.rounds, 1),
                "bytes_to_driver_per_round": round(t.to_driver / t.rounds), "bytes_from_driver_per_round": round(t.from_driver / t.rounds),
                "seconds_per_round": round(t.seconds / t.rounds, 4)}
            for k, t in sorted(traffic.items())}


def pass_kind(fn: object) -> str:
    """The name a shard function's passes are counted under: its ``pass_kind`` attribute (a variant standing for another
    pass, such as :mod:`dpipe.reduce._driver_order`'s), else its name (a ``functools.partial`` over a shard function: that
    function's)."""
    if isinstance(fn, functools.partial):
        inner = next((a for a in fn.args if callable(a)), fn.func)
        return pass_kind(inner)
    return str(getattr(fn, "pass_kind", None) or getattr(fn, "__name__", type(fn).__name__))
