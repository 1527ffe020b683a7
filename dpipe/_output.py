"""Output paths: checked before the work, written by one process at a time, never inside a store or a registry.

:func:`check_output_path` is called by :func:`dpipe.train` (``out=``),
:func:`dpipe.predict`, the CLI's ``evaluate --out`` and ``ingest`` / ``make-data``
before anything is read: the parent directory must exist and be writable, and the
path must not be an existing directory (unless a directory is what is written).

A path inside a dpipe store or inside a dpipe model registry is never an output (the
registry writes its own files through :mod:`dpipe.registry`); the one exception is a new
store in a registry's data folder, where ``dpipe retrain`` ingests source files
(:func:`check_not_inside`). What may be replaced is :mod:`dpipe._written`'s rule; the lock
each writer holds on its destination, :mod:`dpipe._locks`'.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator

from ._formats import REGISTRY_FORMAT
from ._locks import destination_lock
from ._written import check_replaceable, is_dpipe_store
from .exceptions import OutputError, OutputExistsError

__all__ = ["check_output_path", "locked_output", "inside_registry", "check_not_inside", "write_error", "REGISTRY_DATA"]


def _ancestors(path: str) -> Iterator[str]:
    """The directories above ``path`` (absolute and resolved), nearest first, each once."""
    seen = set()
    for p in (os.path.abspath(path), os.path.realpath(path)):
        d = os.path.dirname(p)
        while d not in seen:
            seen.add(d)
            yield d
            up = os.path.dirname(d)
            if up == d:
                break
            d = up


def _inside_store(path: str) -> str | None:
    """The dpipe store that ``path`` lies in (its own files are never an output), or None."""
    return next((d for d in _ancestors(path) if is_dpipe_store(d)), None)


def _is_registry(d: str) -> bool:
    marker = os.path.join(d, "registry.json")
    if not os.path.isfile(marker):
        return False
    try:
        with open(marker, "rb") as f:
            head = json.loads(f.read(1 << 16))
    except (ValueError, OSError):
        return False
    return isinstance(head, dict) and head.get("format") == REGISTRY_FORMAT


def inside_registry(path: str | os.PathLike) -> str | None:
    """The dpipe model registry (a directory whose ``registry.json`` says ``"format": "dpipe-registry"``) that
    ``path`` lies in, or None."""
    return next((d for d in _ancestors(os.fspath(path)) if _is_registry(d)), None)


#: the folder of a model registry into which ``dpipe retrain`` ingests source files (:mod:`dpipe.registry`)
REGISTRY_DATA = "data"


def check_not_inside(path: str, what: str) -> None:
    """Refuse (one line naming ``path``) a destination inside a dpipe store or inside a dpipe model registry.

    The one place of a registry a writer may create something is its data folder
    (``REGISTRY/data/``), where ``dpipe retrain`` ingests source files with
    :func:`dpipe.io.ingest`: a new store may be created there, an existing one is never
    replaced (a retrain reuses it by name). The registry writes its own files
    (``registry.json``, ``versions/``, the decision records) through :mod:`dpipe.registry`,
    never through these checks.
    """
    store = _inside_store(path)
    if store is not None:
        raise OutputError(f"{path}: is inside the dpipe store {store}; a store's files are never replaced by a {what}")
    registry = inside_registry(path)
    if registry is None:
        return
    parts = os.path.relpath(os.path.abspath(path), registry).split(os.sep)
    if what == "store" and len(parts) >= 2 and parts[0] == REGISTRY_DATA:
        if not os.path.lexists(path):
            return
        raise OutputError(f"{path}: is a store of the dpipe model registry {registry}'s data folder; `dpipe retrain` reuses it, "
                          "so it is never replaced: write the store elsewhere")
    raise OutputError(f"{path}: is inside the dpipe model registry {registry}; a registry's files are written by "
                      f"`dpipe retrain` / `dpipe registry` only: write the {what} elsewhere")


def write_error(path: str, what: str, exc: OSError) -> OutputError:
    """An OS error met while writing ``path`` (a full disk, a file-size limit, an I/O error) as one line naming ``path``."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return OutputError(f"{path}: cannot write the {what}: {reason}")


def check_output_path(path: str | os.PathLike, *, overwrite: bool, what: str, directory: bool = False) -> str:
    """Check that ``path`` can be written; return it absolute.

    Also takes :func:`destination_lock` on ``path`` for a moment (unless this thread holds
    it already), which removes what a killed run left and fails at once when another
    process is writing ``path``. Hold the lock around the check and the write to keep
    others out in between.

    Parameters
    ----------
    path : path
        The file (or, with ``directory``, the directory) to write.
    overwrite : bool
        Whether an existing ``path`` may be replaced.
    what : str
        What is written ("model", "predictions", "metrics", "plot", "report", "store"), for messages.
    directory : bool
        ``path`` is a directory to create (a store): an existing directory is then
        the writer's to judge (``overwrite``), not an error here.

    Raises
    ------
    OutputError
        One line starting with the path: the parent is missing, not a directory or
        not writable; the path is a directory (unless ``directory``), lies inside a dpipe
        store or inside a dpipe model registry; it exists and ``overwrite`` is False; or it
        exists and is not a dpipe ``what`` (a store, a model, predictions:
        :func:`check_replaceable`) although ``overwrite`` is True.
    DestinationBusyError
        Another process is writing ``path``.
    """
    p = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(p)
    check_not_inside(p, what)
    if os.path.isdir(p) and not directory:
        raise OutputError(f"{p}: is a directory; the {what} is written to a file")
    if os.path.lexists(p) and not overwrite:
        raise OutputExistsError(f"{p}: exists; pass overwrite=True to replace the {what}")
    if overwrite and not directory:  # a store destination is judged by the writer (dpipe.io._writer.prepare_destination)
        check_replaceable(p, what)
    if not os.path.exists(parent):
        raise OutputError(f"{p}: cannot write the {what}: the directory {parent} does not exist")
    if not os.path.isdir(parent):
        raise OutputError(f"{p}: cannot write the {what}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{p}: cannot write the {what}: the directory {parent} is not writable")
    with destination_lock(p, what):  # another writer: fail now, not after the work; a killed one's temporaries: removed
        pass
    return p


@contextlib.contextmanager
def locked_output(path: str | os.PathLike, *, overwrite: bool, what: str, directory: bool = False) -> Iterator[str]:
    """Check ``path`` (:func:`check_output_path`) and hold its :func:`destination_lock` for the block; yields it absolute.

    The way every writer of a file output claims it: checked before any work, the lock
    held through the work and the final rename, the check repeated under the lock (a
    writer that finished in between is seen). Raises what :func:`check_output_path` and
    :func:`destination_lock` raise.
    """
    p = check_output_path(path, overwrite=overwrite, what=what, directory=directory)
    with destination_lock(p, what):
        check_output_path(p, overwrite=overwrite, what=what, directory=directory)
        yield p
