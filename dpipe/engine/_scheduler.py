"""Which scheduler the user named, read without importing ``distributed``.

:func:`~dpipe.engine.resolve_engine` asks it to choose between this process and a
cluster; :func:`~dpipe.engine.cluster_client` to find the cluster to connect to.
"""

from __future__ import annotations

import os

from .._config import get_setting

__all__ = ["explicit_scheduler"]


def explicit_scheduler(scheduler: str | None = None) -> str | None:
    """The scheduler named by the argument, ``DPIPE_SCHEDULER`` or ``dpipe.scheduler``, in that order (None: none)."""
    return scheduler or os.environ.get("DPIPE_SCHEDULER") or get_setting("scheduler")
