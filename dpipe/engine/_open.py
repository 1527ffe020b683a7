"""Open a store where its passes will run: on a dask cluster, or in this process."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .._config import get_setting
from .._validation import check_choice
from ..exceptions import ParameterError
from ..io import Store, open_store
from ._cluster_spec import ENGINES, ClusterSpec
from ._local import LocalDataset
from ._ranges import exchange_may_run
from ._scheduler import explicit_scheduler

if TYPE_CHECKING:
    from ._dataset import ShardedDataset

__all__ = ["ENGINES", "open_dataset", "resolve_engine", "available_memory", "local_limit", "LOCAL_MEMORY_SHARE", "LOCAL_PEAK_PER_BYTE"]

log = logging.getLogger("dpipe.engine")

#: ``engine="auto"`` on this machine (no cluster named, ``dpipe.local-max-bytes`` unset) runs in this process while the
#: store's feature bytes times :data:`LOCAL_PEAK_PER_BYTE` fit in this share of the memory available. Measured on 2 cores
#: (issue 40, whole ``dpipe train`` processes, defaults): 2x10^6 x 50 (0.4 GB) 3.5 s in this process against 7.1 s on
#: the embedded 2-worker cluster; 10^7 x 120 (4.8 GB) 21.3 s against 33.8 s: on one machine the cluster's start, the
#: workers' first touch of their memory and the scores' exchange between processes buy nothing that threads lack. The
#: embedded cluster is for stores beyond memory (streamed under worker memory limits); a named cluster is always used
LOCAL_MEMORY_SHARE = 0.5
#: a default auc fit's peak resident memory in one process per byte of the store's features: 6.56 GB for 4.83 GB at
#: 10^7 x 120 (1.36), rounded up
LOCAL_PEAK_PER_BYTE = 1.4
#: what the workers' route (:mod:`._ranges`, from :data:`~._ranges.EXCHANGE_AUTO_ROWS` rows) keeps per row beyond the
#: driver's route, on the local engine's hosts: its peak at 10^7 x 120 rose from 5.74 to 6.22 GB (49 bytes a row)
LOCAL_RANGE_ROW_BYTES = 48


def resolve_engine(cluster: ClusterSpec, store: Store, owner: str = "train", *, scored_only: bool = False) -> str:
    """``"dask"`` or ``"local"`` for ``cluster.engine``; ``"auto"`` is local up to ``dpipe.local-max-bytes`` of features
    (unset: up to :func:`local_limit`, from the memory available).

    A named cluster (``client``, ``scheduler``, ``scheduler_file``, ``DPIPE_SCHEDULER`` or the
    ``dpipe.scheduler`` key), ``cluster="slurm"`` (or the ``dpipe.cluster`` key) or an embedded cluster's
    ``workers`` / ``memory_limit`` always mean dask; with ``engine="local"`` they are an error. The choice is logged.
    A fit's store counts :data:`LOCAL_RANGE_ROW_BYTES` a row beside its features where it may take the workers' route;
    ``scored_only`` (evaluation, prediction) counts the features alone.
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
    setting = get_setting("local-max-bytes")
    limit, why = (int(setting), "dpipe.local-max-bytes") if setting is not None else local_limit()
    rows = int(store.manifest.n_rows)
    ranges = LOCAL_RANGE_ROW_BYTES * rows / LOCAL_PEAK_PER_BYTE if not scored_only and exchange_may_run(rows) else 0.0  # as feature bytes
    chosen = "local" if store.nbytes + ranges <= limit else "dask"
    log.info("engine auto: %s (%.1f MB of features%s, local up to %.0f MB: %s)", "this process" if chosen == "local" else "dask cluster",
             store.nbytes / 1e6, f" and {LOCAL_RANGE_ROW_BYTES} bytes a row for the score ranges" if ranges else "", limit / 1e6, why)
    return chosen


def available_memory() -> int:
    """Bytes of memory this machine can give a process now without swapping (Linux's ``MemAvailable``; elsewhere half
    of the physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) // 2


def local_limit() -> tuple[int, str]:
    """The most bytes of features ``engine="auto"`` runs in this process when ``dpipe.local-max-bytes`` is unset, and why:
    :data:`LOCAL_MEMORY_SHARE` of :func:`available_memory` over :data:`LOCAL_PEAK_PER_BYTE`."""
    available = available_memory()
    limit = int(LOCAL_MEMORY_SHARE * available / LOCAL_PEAK_PER_BYTE)
    return limit, f"{LOCAL_MEMORY_SHARE:.0%} of the {available / 1e9:.1f} GB available over {LOCAL_PEAK_PER_BYTE:g} bytes a feature byte"


@contextlib.contextmanager
def open_dataset(store: str | Store, cluster: ClusterSpec | None = None, *, owner: str = "open_dataset",
                 worker_row_bytes: int | None = None) -> Iterator[ShardedDataset | LocalDataset]:
    """Open ``store`` where ``cluster`` says (default :class:`ClusterSpec()`: ``engine="auto"``): on a dask cluster,
    or in this process (``engine="local"``, or ``"auto"`` resolved so by :func:`resolve_engine`; its errors name
    ``owner``'s parameters). ``worker_row_bytes``: what the fit keeps per row on the workers between passes where the
    shards are streamed, for the memory check (default :data:`~._memory.ROW_BYTES`: the most any fit keeps; 0: the store
    is only scored, as evaluation and prediction do)."""
    cluster = cluster or ClusterSpec()
    st = store if isinstance(store, Store) else open_store(store)
    engine = resolve_engine(cluster, st, owner=owner, scored_only=worker_row_bytes == 0)
    if engine == "local":
        with LocalDataset(st, cache=cluster.cache) as ds:
            yield ds
        return
    # here, not at the top: the local engine never imports distributed, nor the cluster's dataset
    from ._client import client_for
    from ._dataset import ShardedDataset

    with client_for(cluster) as c:
        with ShardedDataset(st, c, cache=cluster.cache, **({} if worker_row_bytes is None else {"worker_row_bytes": worker_row_bytes})) as ds:
            yield ds
