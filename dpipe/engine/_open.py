"""Open a store where its passes will run: on a dask cluster, or in this process."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .._config import get_setting
from .._validation import check_choice
from ..exceptions import ParameterError
from ..io import Store, open_store
from ._cluster_spec import ENGINES, ClusterSpec
from ._local import LocalDataset
from ._scheduler import explicit_scheduler

if TYPE_CHECKING:
    from ._dataset import ShardedDataset

__all__ = ["ENGINES", "open_dataset", "resolve_engine"]

log = logging.getLogger("dpipe.engine")


def resolve_engine(cluster: ClusterSpec, store: Store, owner: str = "train") -> str:
    """``"dask"`` or ``"local"`` for ``cluster.engine``; ``"auto"`` is local below ``dpipe.local-max-bytes``.

    A named cluster (``client``, ``scheduler``, ``scheduler_file``, ``DPIPE_SCHEDULER`` or the
    ``dpipe.scheduler`` key), ``cluster="slurm"`` (or the ``dpipe.cluster`` key) or an embedded cluster's
    ``workers`` / ``memory_limit`` always mean dask; with ``engine="local"`` they are an error. The choice is logged.
    """
    engine = cluster.engine
    check_choice(engine, "engine", owner, ENGINES)
    named = cluster.named_cluster()
    if engine == "local":
        if named:
            names = f"{named[0]!r} parameter of {owner} chooses" if len(named) == 1 else \
                f"{', '.join(map(repr, named[:-1]))} and {named[-1]!r} parameters of {owner} choose"
            raise ParameterError(f"The {names} a dask cluster; engine='local' runs in this process. Drop {'it' if len(named) == 1 else 'them'} "
                                 "or the engine.")
        return engine
    if engine == "dask":
        return engine
    if named or explicit_scheduler() or get_setting("cluster", cluster.cluster) != "local":  # slurm (--cluster slurm) names one too
        return "dask"
    limit = int(get_setting("local-max-bytes"))
    chosen = "local" if store.nbytes <= limit else "dask"
    log.info("engine auto: %s (%.1f MB of features, local up to %.0f MB: dpipe.local-max-bytes)", "this process" if chosen == "local" else "dask cluster",
             store.nbytes / 1e6, limit / 1e6)
    return chosen


@contextlib.contextmanager
def open_dataset(store: str | Store, cluster: ClusterSpec | None = None, *, owner: str = "open_dataset") -> Iterator[ShardedDataset | LocalDataset]:
    """Open ``store`` where ``cluster`` says (default :class:`ClusterSpec()`: ``engine="auto"``): on a dask cluster,
    or in this process (``engine="local"``, or ``"auto"`` resolved so by :func:`resolve_engine`; its errors name
    ``owner``'s parameters)."""
    cluster = cluster or ClusterSpec()
    st = store if isinstance(store, Store) else open_store(store)
    engine = resolve_engine(cluster, st, owner=owner)
    if engine == "local":
        with LocalDataset(st, cache=cluster.cache) as ds:
            yield ds
        return
    # here, not at the top: the local engine never imports distributed, nor the cluster's dataset
    from ._client import client_for
    from ._dataset import ShardedDataset

    with client_for(cluster) as c:
        with ShardedDataset(st, c, cache=cluster.cache) as ds:
            yield ds
