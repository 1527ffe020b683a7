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
from dask.utils import parse_timedelta

__all__ = ["get_setting", "seconds_setting"]

_fn = os.path.join(os.path.dirname(__file__), "dpipe.yaml")
with open(_fn) as _f:
    _defaults = yaml.safe_load(_f)

dask.config.update_defaults(_defaults)


def get_setting(name: str, override: Any = None) -> Any:
    """Return ``override`` if given, else the ``dpipe.<name>`` dask config value."""
    if override is not None:
        return override
    return dask.config.get(f"dpipe.{name}")


def seconds_setting(name: str, example: str, *, zero: bool = False) -> float:
    """The ``dpipe.<name>`` setting in seconds (a number of seconds or a dask time string such as ``"5 minutes"``).

    Raises
    ------
    ParameterError
        One line naming the setting and giving ``example``, for a value that is no time, or
        is negative (or zero, unless ``zero``).
    """
    from .exceptions import ParameterError

    value = get_setting(name)
    try:
        seconds = parse_timedelta(value, default="seconds")
    except (TypeError, ValueError, KeyError):
        seconds = None
    if seconds is None or seconds < 0 or (seconds == 0 and not zero):
        kind = "time" if zero else "positive time"
        raise ParameterError(f"The dpipe.{name} setting must be a {kind} such as {example}. Got {value!r} instead.")
    return float(seconds)
