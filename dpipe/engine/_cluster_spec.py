"""Where the passes run, declared once: :class:`ClusterSpec`.

Every cluster option is one field here: its Python keyword, default, choices, help, CLI flag
and the commands that take it (:func:`dpipe._options.option`). ``dpipe.train``,
``dpipe.evaluate`` and ``dpipe.predict`` take the keyword options (a test checks their
signatures against :func:`cluster_keywords`); :func:`~dpipe.engine.resolve_engine`,
:func:`~dpipe.engine.open_dataset` and :func:`~dpipe.engine.cluster_client` take a
``ClusterSpec``; the ``dpipe`` commands' cluster flags and the retrain configuration's
``cluster`` section are generated from it.

Adding a cluster option is one field here plus its use in :mod:`dpipe.engine._client`
(or :mod:`dpipe.engine._open`).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from typing import Any

from .._options import add_arguments, keyword_defaults, option, options_of

__all__ = ["ClusterSpec", "CLUSTER_COMMANDS", "ENGINES", "CACHE_MODES", "CLUSTERS", "cluster_keywords", "add_cluster_arguments"]

#: the ``dpipe`` commands that take the cluster flags
CLUSTER_COMMANDS = ("train", "evaluate", "predict", "demo")
#: where the passes run: "auto" stays in this process for stores of at most ``dpipe.local-max-bytes`` bytes when no
#: cluster was named
ENGINES = ("auto", "dask", "local")
#: how shards are held: persisted in worker memory, streamed on every pass, or persisted when they fit
CACHE_MODES = ("auto", "memory", "stream")
#: where the cluster dpipe starts runs
CLUSTERS = ("local", "slurm")
#: the commands (and functions) that make one pass over a store: they stream its shards
_ONE_PASS = {"evaluate": "stream", "predict": "stream"}


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    """Where the passes run: this process, a cluster dpipe starts, or a named one.

    A field left None takes the dask config (``dpipe.scheduler``, ``dpipe.workers``,
    ``dpipe.memory-limit``, ``dpipe.cluster``; see :mod:`dpipe.engine._client`).
    """

    engine: str = option("auto", "'local' runs every pass in this process (no cluster); 'dask' on a cluster; 'auto' stays in this process for "
                         "stores whose features fit half the memory available (1.4 bytes a feature byte; dpipe.local-max-bytes sets a fixed bound) "
                         "unless a cluster is named (client, scheduler, workers, "
                         "memory_limit, cluster slurm), and logs its choice", choices=ENGINES, commands=CLUSTER_COMMANDS)
    client: Any = option(None, "a connected distributed.Client to run on (not closed afterwards)", config=False)
    scheduler: str | None = option(None, "scheduler address (tcp://host:port) or scheduler file; default: $DPIPE_SCHEDULER, dask config "
                                   "dpipe.scheduler, else a cluster dpipe starts", commands=CLUSTER_COMMANDS)
    scheduler_file: str | None = option(None, "scheduler file written by 'dask scheduler --scheduler-file' (instead of scheduler)",
                                        commands=CLUSTER_COMMANDS, keyword=False)
    workers: int | None = option(None, "worker processes of the embedded local cluster (default: dask config dpipe.workers, else 2); with "
                                 "cluster slurm: Slurm jobs (default 1)", commands=CLUSTER_COMMANDS, parse=int)
    memory_limit: str | int | None = option(None, "memory limit per embedded worker, e.g. 4GiB (default auto); with cluster slurm: memory "
                                            "per job", commands=CLUSTER_COMMANDS)
    cluster: str | None = option(None, "where the cluster dpipe starts runs: 'local' worker processes on this machine, 'slurm' Slurm batch "
                                 "jobs (needs dpipe[slurm]; jobs configured by the dask config jobqueue.slurm; deploy/README.md) (default: "
                                 "dask config dpipe.cluster, local)", choices=CLUSTERS, commands=CLUSTER_COMMANDS, keyword=False)
    cache: str | None = option(None, "keep shards in worker memory or stream them on every pass ('auto', or not given: persist them when "
                               "they fit)", choices=CACHE_MODES, commands=CLUSTER_COMMANDS, defaults=_ONE_PASS)

    @property
    def target(self) -> str | None:
        """The scheduler named by this spec (its scheduler file, else its address), or None."""
        return self.scheduler_file or self.scheduler

    def named_cluster(self) -> list[str]:
        """The options given that choose a dask cluster (each means engine 'dask')."""
        given = [name for name in ("client", "workers", "memory_limit") if getattr(self, name) is not None]
        return given + [name for name in ("scheduler", "scheduler_file") if getattr(self, name)]

    def keywords(self) -> dict[str, Any]:
        """The keyword arguments of :func:`dpipe.train`, :func:`dpipe.evaluate` and :func:`dpipe.predict` this spec sets (those
        left at their default are left out: each function's own default applies); ``scheduler_file`` as ``scheduler``."""
        values = {**{name: getattr(self, name) for name in options_of(ClusterSpec)}, "scheduler": self.target}
        return {name: values[name] for name, (f, opt) in options_of(ClusterSpec).items() if opt.keyword and values[name] != f.default}

    def replace(self, **changes: Any) -> ClusterSpec:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_keywords(cls, values: Mapping[str, Any]) -> ClusterSpec:
        """The spec of a public function's cluster keywords: ``values`` holds its arguments (``locals()`` at its start), one
        for every keyword option (a KeyError names one its signature lacks)."""
        return cls(**{name: values[name] for name, (_, opt) in options_of(cls).items() if opt.keyword})

    @classmethod
    def from_arguments(cls, a: argparse.Namespace) -> ClusterSpec:
        """The spec of a ``dpipe`` command's parsed flags (:func:`add_cluster_arguments`)."""
        return cls(**{name: getattr(a, name) for name in options_of(cls) if hasattr(a, name)})


def cluster_keywords(owner: str) -> dict[str, Any]:
    """``name -> default`` of the cluster keywords of the library function ``owner`` (``train``, ``evaluate``, ``predict``)."""
    return keyword_defaults(ClusterSpec, owner)


def add_cluster_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The ``cluster`` argument group of ``command``."""
    add_arguments(parser.add_argument_group("cluster"), ClusterSpec, command)
