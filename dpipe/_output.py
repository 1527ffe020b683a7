"""Output paths checked before the work: a failure to write costs no data pass.

:func:`check_output_path` is called by :func:`dpipe.train` (``out=``),
:func:`dpipe.predict`, the CLI's ``evaluate --json`` and ``ingest`` / ``make-data``
before anything is read: the parent directory must exist and be writable, and the
path must not be an existing directory (unless a directory is what is written).

Nothing dpipe did not write is ever replaced: ``overwrite`` replaces only a dpipe
store (its ``manifest.json`` parses as a dpipe manifest, :func:`is_dpipe_store`), a
dpipe model (``"format": "dpipe-linear-model"``), a dpipe metrics file
(``"format": "dpipe-metrics"``, from ``evaluate --json``) or a dpipe prediction file (Parquet
schema metadata ``dpipe.format = dpipe-predictions``); a file inside a store is never
an output. The same check removes the temporary siblings (``.DEST.tmp-*``,
``.DEST.old-*``) a killed run left next to the destination (:func:`remove_stale_siblings`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil

from .exceptions import OutputError, OutputExistsError
from .model import MODEL_FORMAT

__all__ = [
    "check_output_path", "is_dpipe_store", "is_dpipe_file", "remove_stale_siblings", "PREDICTIONS_FORMAT_KEY", "PREDICTIONS_FORMAT",
    "METRICS_FORMAT",
]

log = logging.getLogger("dpipe.output")

#: Parquet schema-metadata key and value that mark a prediction file written by dpipe.
PREDICTIONS_FORMAT_KEY = "dpipe.format"
PREDICTIONS_FORMAT = "dpipe-predictions"
#: ``"format"`` of a metrics file written by ``dpipe evaluate --json``.
METRICS_FORMAT = "dpipe-metrics"
#: the ``"format"`` marker of each JSON file dpipe writes
_JSON_FORMATS = {"model": MODEL_FORMAT, "metrics": METRICS_FORMAT}


def is_dpipe_store(path: str) -> bool:
    """Whether ``path`` is a directory whose ``manifest.json`` parses as a dpipe manifest."""
    from .io._manifest import MANIFEST_NAME, decode_manifest

    manifest = os.path.join(path, MANIFEST_NAME)
    if not os.path.isdir(path) or not os.path.isfile(manifest):
        return False
    try:
        with open(manifest, "rb") as f:
            decode_manifest(f.read(), where=path)
    except (ValueError, OSError):  # StoreError is a ValueError
        return False
    return True


def is_dpipe_file(path: str, what: str) -> bool:
    """Whether ``path`` is a file dpipe wrote as ``what`` ("model", "metrics" or "predictions"), by its format marker."""
    if not os.path.isfile(path):
        return False
    try:
        if what in _JSON_FORMATS:
            with open(path, "rb") as f:
                if f.read(64).lstrip()[:1] != b"{":  # not JSON: do not read a large foreign file
                    return False
                f.seek(0)
                d = json.load(f)
            return isinstance(d, dict) and d.get("format") == _JSON_FORMATS[what]
        if what == "predictions":
            import pyarrow.parquet as pq

            meta = pq.read_schema(path).metadata or {}
            return meta.get(PREDICTIONS_FORMAT_KEY.encode()) == PREDICTIONS_FORMAT.encode()
    except (ValueError, OSError, UnicodeDecodeError):  # pyarrow's ArrowInvalid is a ValueError
        return False
    return False


def _inside_store(path: str) -> str | None:
    """The dpipe store that ``path`` lies in (its own files are never an output), or None."""
    for p in {os.path.abspath(path), os.path.realpath(path)}:
        d = os.path.dirname(p)
        while True:
            if is_dpipe_store(d):
                return d
            up = os.path.dirname(d)
            if up == d:
                break
            d = up
    return None


def _stale_pattern(dest: str) -> re.Pattern[str]:
    """Names of the temporary siblings of ``dest``: ``.DEST.tmp-XXXXXXXX`` and ``.DEST.old-XXXXXXXX`` (tempfile's 8 characters)."""
    return re.compile(r"\." + re.escape(os.path.basename(dest)) + r"\.(?:tmp|old)-[a-z0-9_]{8}")


def remove_stale_siblings(dest: str) -> list[str]:
    """Remove the ``.DEST.tmp-*`` / ``.DEST.old-*`` entries a killed run left next to ``dest``.

    Only names matching that exact pattern for this ``dest`` are touched; an entry a
    running dpipe process still holds (it keeps a lock on its temporary) is left alone.
    Each removal is logged. Returns the paths removed.
    """
    import fcntl

    dest = os.path.abspath(dest)
    parent = os.path.dirname(dest)
    pattern = _stale_pattern(dest)
    try:
        names = [n for n in os.listdir(parent) if pattern.fullmatch(n)]
    except OSError:
        return []
    removed = []
    for name in sorted(names):
        p = os.path.join(parent, name)
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            fd = None  # a symlink or unreadable entry: not locked by a writer
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    log.info("%s: %s is in use by another dpipe run; left alone", dest, name)
                    continue
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
        finally:
            if fd is not None:
                os.close(fd)
        if not os.path.lexists(p):
            removed.append(p)
            log.warning("%s: removed %s left by an interrupted run", dest, name)
    return removed


def lock_temporary(path: str) -> int:
    """Hold an advisory lock on a temporary (file or directory) while it is written, so that
    :func:`remove_stale_siblings` in another run leaves it alone; returns the fd to close."""
    import fcntl

    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def check_replaceable(path: str, what: str) -> None:
    """Refuse (one line naming ``path``) to replace an existing ``path`` that dpipe did not write as ``what``."""
    if not os.path.lexists(path):
        return
    if what == "store":
        if not is_dpipe_store(path):
            raise OutputExistsError(f"{path}: exists and is not a dpipe store (no dpipe manifest.json); refusing to replace it, even with --overwrite")
    elif what in (*_JSON_FORMATS, "predictions"):
        if not is_dpipe_file(path, what):
            marker = f'"format": "{_JSON_FORMATS[what]}"' if what in _JSON_FORMATS else f"{PREDICTIONS_FORMAT_KEY} = {PREDICTIONS_FORMAT}"
            raise OutputExistsError(f"{path}: exists and is not a dpipe {what} file (no {marker}); refusing to replace it, even with --overwrite")


def check_output_path(path: str | os.PathLike, *, overwrite: bool, what: str, directory: bool = False) -> str:
    """Check that ``path`` can be written; return it absolute.

    Parameters
    ----------
    path : path
        The file (or, with ``directory``, the directory) to write.
    overwrite : bool
        Whether an existing ``path`` may be replaced.
    what : str
        What is written ("model", "predictions", "metrics", "store"), for messages.
    directory : bool
        ``path`` is a directory to create (a store): an existing directory is then
        the writer's to judge (``overwrite``), not an error here.

    Raises
    ------
    OutputError
        One line starting with the path: the parent is missing, not a directory or
        not writable; the path is a directory or lies inside a dpipe store; it exists
        and ``overwrite`` is False; or it exists and is not a dpipe ``what`` (a store,
        a model, predictions: :func:`check_replaceable`) although ``overwrite`` is True.
    """
    p = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(p)
    if not directory:
        store = _inside_store(p)
        if store is not None:
            raise OutputError(f"{p}: is inside the dpipe store {store}; a store's files are never replaced by a {what}")
    if os.path.isdir(p) and not directory:
        raise OutputError(f"{p}: is a directory; the {what} is written to a file")
    if os.path.lexists(p) and not overwrite:
        raise OutputExistsError(f"{p}: exists; pass overwrite=True (--overwrite) to replace the {what}")
    if overwrite and not directory:  # a store destination is judged by the writer (dpipe.io._writer.prepare_destination)
        check_replaceable(p, what)
    if not os.path.exists(parent):
        raise OutputError(f"{p}: cannot write the {what}: the directory {parent} does not exist")
    if not os.path.isdir(parent):
        raise OutputError(f"{p}: cannot write the {what}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{p}: cannot write the {what}: the directory {parent} is not writable")
    remove_stale_siblings(p)
    return p
