"""Preloaded by dpipe's embedded workers (``distributed.worker.preload``): their log shows a dpipe error once.

A task that raises logs "Compute Failed" with its traceback on the worker, and the same
error reaches the driver, which reports it as its own one-line error (with ``-v``, its
traceback). On the embedded cluster both go to the user's terminal; this drops the
worker's record of a dpipe error (:class:`dpipe.exceptions.DPipeError`), so the user sees
one line. Any other error keeps its record. It imports only the standard library and
:mod:`dpipe.exceptions`, so the workers' footprint does not grow.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

__all__ = ["DPipeErrorsOnce", "dask_setup"]


@functools.cache
def _dpipe_error_names() -> frozenset[str]:
    from .exceptions import DPipeError

    names, todo = set(), [DPipeError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return frozenset(names)


class DPipeErrorsOnce(logging.Filter):
    """Drops ``distributed.worker``'s "Compute Failed" record when the task raised a dpipe error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Compute Failed") or not isinstance(record.args, tuple) or len(record.args) < 4:
            return True
        return str(record.args[3]).partition("(")[0] not in _dpipe_error_names()  # args[3]: repr() of the exception


def dask_setup(worker: Any) -> None:
    """Called by distributed when the worker starts (and at every restart by its nanny)."""
    logging.getLogger("distributed.worker").addFilter(DPipeErrorsOnce())
