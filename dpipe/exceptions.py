"""Exceptions and warnings raised by dpipe.

Every error that comes from user input names the file, shard, row or parameter
that caused it.
"""

from __future__ import annotations

__all__ = [
    "DPipeError",
    "InputError",
    "StoreError",
    "ShardValueError",
    "OutputError",
    "OutputExistsError",
    "DestinationBusyError",
    "ParameterError",
    "ClusterError",
    "RegistryError",
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


class ShardValueError(StoreError):
    """A shard holds a value no pass can use (a NaN or infinite feature, a bad sample weight).

    Raised on the worker by the pass that met it, naming the shard and its row;
    the engine adds the store's path (and the row's place in the store) when it
    re-raises it on the driver (:meth:`with_store`).

    Attributes
    ----------
    shard : int
        Shard number.
    row : int
        Row within the shard (0-based).
    problem : str
        What is wrong with the row.
    store : str or None
        Path of the store, once known.
    store_row : int or None
        Row within the store (0-based), once known.
    """

    def __init__(self, problem: str, shard: int, row: int, store: str | None = None, store_row: int | None = None):
        self.problem, self.shard, self.row, self.store, self.store_row = problem, int(shard), int(row), store, store_row
        where = f"shard {self.shard}, row {self.row}"
        if store_row is not None:
            where += f" (row {store_row} of the store)"
        super().__init__(f"{store}, {where}: {problem}" if store else f"{where}: {problem}")

    def __reduce__(self):  # pickled between worker and driver: keep the fields
        return (type(self), (self.problem, self.shard, self.row, self.store, self.store_row))

    def with_store(self, store: str, store_row: int | None = None) -> ShardValueError:
        """The same error naming the store (and the row's place in it)."""
        return type(self)(self.problem, self.shard, self.row, store, store_row)


class OutputError(DPipeError, OSError):
    """An output path (``--out``, a store to create) cannot be written.

    The message starts with the path.
    """


class OutputExistsError(OutputError, FileExistsError):
    """An output path exists and replacing it was not asked for."""


class DestinationBusyError(OutputError):
    """Another dpipe process (or thread) is writing the same destination (it holds the destination's lock).

    The message names the destination and the owner: its host, pid, start time and command.
    """


class ParameterError(DPipeError, ValueError):
    """A parameter has an invalid value or type."""


class ClusterError(DPipeError, RuntimeError):
    """The dask cluster cannot finish a pass.

    Raised when no task of a pass has finished for ``dpipe.timeout`` seconds (every
    worker gone and none back, a paused worker, a lost scheduler), or when a shard's
    task killed the workers that ran it. The message names what was waited for, the
    store and the bound.
    """


class RegistryError(DPipeError):
    """A model registry is missing, malformed, locked by a stuck writer, or has no such version.

    The message names the registry directory (and the version or file).
    """


class DPipeWarning(UserWarning):
    """Base class of dpipe warnings."""


class ConvergenceWarning(DPipeWarning):
    """A solver stopped before reaching its tolerance."""


class DataWarning(DPipeWarning):
    """The data is usable but suspicious (a class is absent, unseen categories, ...)."""
