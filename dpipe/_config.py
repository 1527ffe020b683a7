"""dpipe settings, kept in :mod:`dask.config` under the ``dpipe`` key.

Defaults live in ``dpipe.yaml`` next to this file. They are read at call time, so
a cluster job can be configured by a dask config file or by environment variables
such as ``DASK_DPIPE__SCHEDULER``.
"""

from __future__ import annotations

import os
from typing import Any

import dask.config
import yaml

__all__ = ["get_setting"]

_fn = os.path.join(os.path.dirname(__file__), "dpipe.yaml")
with open(_fn) as _f:
    _defaults = yaml.safe_load(_f)

dask.config.update_defaults(_defaults)


def get_setting(name: str, override: Any = None) -> Any:
    """Return ``override`` if given, else the ``dpipe.<name>`` dask config value."""
    if override is not None:
        return override
    return dask.config.get(f"dpipe.{name}")
