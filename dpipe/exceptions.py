"""Exceptions and warnings raised by dpipe.

Every error that comes from user input names the file, shard, row or parameter
that caused it.
"""

from __future__ import annotations

__all__ = [
    "DPipeError",
    "InputError",
    "StoreError",
    "ParameterError",
    "DPipeWarning",
    "ConvergenceWarning",
    "DataWarning",
]


class DPipeError(Exception):
    """Base class of all dpipe errors."""


class InputError(DPipeError, ValueError):
    """A source file cannot be ingested (malformed token, bad label, ...).

    The message names the file and the line (1-based) where the problem is.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f", line {line}"
            where += ": "
        super().__init__(where + message)
        self.path = path
        self.line = line


class StoreError(DPipeError, ValueError):
    """A dataset store is missing, malformed or inconsistent with its manifest."""


class ParameterError(DPipeError, ValueError):
    """A parameter has an invalid value or type."""


class DPipeWarning(UserWarning):
    """Base class of dpipe warnings."""


class ConvergenceWarning(DPipeWarning):
    """A solver stopped before reaching its tolerance."""


class DataWarning(DPipeWarning):
    """The data is usable but suspicious (a class is absent, unseen categories, ...)."""
