"""The shard hosts: one dask actor per worker holding that worker's persisted shards (:class:`ShardHost`), and what a
lost host looks like to the driver (:class:`HostsLost`, :func:`host_lost_errors`). Their lifecycle (start, drop when a
worker leaves, start again once every shard is back) is :class:`._dataset.ShardedDataset`'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..io import Shard
from ._blas import ONE_BLAS_THREAD
from ._newton_host import NewtonHost

__all__ = ["ShardHost", "HostsLost", "HOST_CHECK_SECONDS", "host_lost_errors"]


class HostsLost(RuntimeError):
    """A shard host was lost during a call to every host (the hosts are dropped; passes go on with tasks)."""


class ShardHost(NewtonHost):
    """Actor that holds one worker's persisted shards and runs passes over them.

    Besides the plain passes (:meth:`map`, :meth:`map_each`), the hosts run the
    range-partitioned evaluations among themselves (:class:`._range_host.RangeHost`) and Newton-CG's
    Hessian-vector products on the same ranges (:class:`._newton_host.NewtonHost`).

    Parameters
    ----------
    *shards : Shard
        The shards persisted on this worker (resolved from their futures).
    """

    def __init__(self, *shards: Shard) -> None:
        self.shards = list(shards)

    def map(self, fn: Callable, args: tuple) -> list:
        """``[fn(shard, *args) for shard]`` in the order given at construction (one result per shard, never combined here)."""
        with ONE_BLAS_THREAD:
            return [fn(s, *args) for s in self.shards]

    def map_each(self, fn: Callable, per_shard: Sequence[tuple], args: tuple) -> list:
        """``[fn(shard, *args, *per_shard[i]) for shard]`` over this host's shards (one result per shard, never combined here)."""
        with ONE_BLAS_THREAD:
            return [fn(s, *args, *a) for s, a in zip(self.shards, per_shard)]


#: seconds to wait before deciding that an error from a host call was not its worker leaving
HOST_CHECK_SECONDS = 0.5

def host_lost_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean a host's worker (or the connection to it) is gone."""
    from distributed.comm.core import CommClosedError

    return (CommClosedError, OSError)
