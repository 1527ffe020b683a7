"""Open a store where its passes will run: on a dask cluster, or in this process."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._config import get_setting
from .._validation import check_choice
from ..exceptions import ParameterError
from ..io import Store, open_store
from ._local import LocalDataset
from ._scheduler import explicit_scheduler

if TYPE_CHECKING:
    from ._dataset import ShardedDataset

__all__ = ["ENGINES", "open_dataset", "resolve_engine"]

log = logging.getLogger("dpipe.engine")

#: where the passes run: "auto" stays in this process for stores of at most
#: ``dpipe.local-max-bytes`` bytes when no cluster was named
ENGINES = ("auto", "dask", "local")


def resolve_engine(
    engine: str, store: Store, *, client: Any = None, scheduler: str | None = None, workers: int | None = None, memory_limit: Any = None,
    owner: str = "train",
) -> str:
    """``"dask"`` or ``"local"`` for ``engine``; ``"auto"`` is local below ``dpipe.local-max-bytes``.

    A named cluster (``client``, ``scheduler``, ``DPIPE_SCHEDULER`` or the
    ``dpipe.scheduler`` key), ``dpipe.cluster: slurm`` or an embedded cluster's ``workers`` /
    ``memory_limit`` always mean dask; with ``engine="local"`` they are an error. The choice is logged.
    """
    check_choice(engine, "engine", owner, ENGINES)
    cluster_options = [name for name, value in (("client", client), ("workers", workers), ("memory_limit", memory_limit)) if value is not None]
    if engine == "local":
        if cluster_options or scheduler:
            named = cluster_options + (["scheduler"] if scheduler else [])
            raise ParameterError(f"The {', '.join(map(repr, named))} parameter(s) of {owner} choose a dask cluster; engine='local' runs in this process. Drop one.")
        return engine
    if engine == "dask":
        return engine
    if cluster_options or explicit_scheduler(scheduler) or get_setting("cluster") != "local":  # dpipe.cluster slurm (--cluster slurm) names one too
        return "dask"
    limit = int(get_setting("local-max-bytes"))
    chosen = "local" if store.nbytes <= limit else "dask"
    log.info("engine auto: %s (%.1f MB of features, local up to %.0f MB: dpipe.local-max-bytes)", "this process" if chosen == "local" else "dask cluster",
             store.nbytes / 1e6, limit / 1e6)
    return chosen


@contextlib.contextmanager
def open_dataset(
    store: str | Store,
    *,
    engine: str = "auto",
    client: Any = None,
    scheduler: str | None = None,
    workers: int | None = None,
    memory_limit: str | int | None = None,
    cache: str | None = None,
) -> Iterator[ShardedDataset | LocalDataset]:
    """Open ``store`` on the resolved cluster (or in this process with ``engine="local"``).

    ``engine="auto"`` is resolved by :func:`resolve_engine`.
    """
    st = store if isinstance(store, Store) else open_store(store)
    engine = resolve_engine(engine, st, client=client, scheduler=scheduler, workers=workers, memory_limit=memory_limit, owner="open_dataset")
    if engine == "local":
        with LocalDataset(st, cache=cache) as ds:
            yield ds
        return
    # here, not at the top: the local engine never imports distributed, nor the cluster's dataset
    from ._client import cluster_client
    from ._dataset import ShardedDataset

    with cluster_client(client=client, scheduler=scheduler, workers=workers, memory_limit=memory_limit) as c:
        with ShardedDataset(st, c, cache=cache) as ds:
            yield ds
