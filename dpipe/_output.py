"""Output paths: checked before the work, written by one process at a time, never inside a store or a registry.

:func:`check_output_path` is called by :func:`dpipe.train` (``out=``),
:func:`dpipe.predict`, the CLI's ``evaluate --out`` and ``ingest`` / ``make-data``
before anything is read: the parent directory must exist and be writable, and the
path must not be an existing directory (unless a directory is what is written).

Nothing dpipe did not write is ever replaced: ``overwrite`` replaces only a dpipe
store (its ``manifest.json`` parses as a dpipe manifest, :func:`is_dpipe_store`, and it
holds no file that is not part of a store, :func:`check_store_replaceable`), a
dpipe model (``"format": "dpipe-linear-model"``), a dpipe metrics file
(``"format": "dpipe-metrics"``, from ``evaluate --out``), a dpipe prediction file (Parquet
schema metadata ``dpipe.format = dpipe-predictions``), a dpipe plot (a PNG with the text
chunk ``dpipe.format = dpipe-plot``) or a demo report (``"format": "dpipe-demo-report"``).
A path inside a dpipe store or inside a dpipe model registry is never an output (the
registry writes its own files through :mod:`dpipe.registry`); the one exception is a new
store in a registry's data folder, where ``dpipe retrain`` ingests source files
(:func:`check_not_inside`).

One writer per destination
--------------------------
Every writer (stores, models, predictions, metrics, plots) holds
:func:`destination_lock` on its destination for the whole write, from before anything
is touched until after the final rename: an exclusive, non-blocking ``flock`` on
``.DEST.lock`` in the destination's directory, whose content names the owner (host,
pid, start time, command). A second writer of the same destination fails at once with
:class:`~dpipe.exceptions.DestinationBusyError` naming both. The lock file is removed
after use, so its protocol is the one for such files: open with ``O_CREAT`` (never
truncating), lock, check that the path still names the locked inode (else another
writer removed it in between: open again), only then truncate and write the owner;
release by unlinking while still holding the lock. (py-filelock truncates the file on
every attempt, so it could not carry the owner.) Only the holder of DEST's lock
removes the ``.DEST.tmp-*`` / ``.DEST.old-*`` siblings a killed run left
(:func:`remove_stale_siblings`, each removal logged): no other writer of DEST is alive
then. The lock is re-entrant within a thread (the CLI's early check, a store writer
and the function that created it take it once), and ``flock`` is released by the
kernel when a killed owner's file is closed.

A lock file can be deleted under its holder (a tmp cleaner, a user): a second writer then
creates a fresh one and takes it. So the holder checks that its lock is still the file at
``.DEST.lock`` (:func:`check_lock_held`, the same inode as the descriptor it locked) before
removing stale siblings and again before its final rename: a writer whose lock was removed
or replaced fails with one line and renames nothing into place. A store writer also holds
an ``flock`` on its temporary directory for as long as it writes (:func:`hold_temporary`),
and :func:`remove_stale_siblings` leaves alone (and logs) a temporary that a live writer
holds, whatever the lock file says.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import logging
import os
import re
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator

import msgspec

from ._formats import MODEL_FORMAT, REGISTRY_FORMAT, STORE_MANIFEST_NAME, STORE_SCHEMA_VERSIONS
from ._interrupts import check_interrupted
from .exceptions import DestinationBusyError, OutputError, OutputExistsError

__all__ = [
    "check_output_path", "is_dpipe_store", "is_dpipe_file", "remove_stale_siblings", "destination_lock", "check_lock_held", "before_rename",
    "hold_temporary", "release_temporary",
    "inside_registry", "check_not_inside", "write_error", "locked_output", "PREDICTIONS_FORMAT_KEY", "PREDICTIONS_FORMAT", "METRICS_FORMAT", "METRICS_FORMAT_VERSION", "PLOT_FORMAT", "REPORT_FORMAT",
]

log = logging.getLogger("dpipe.output")

#: Parquet schema-metadata key and value that mark a prediction file written by dpipe.
PREDICTIONS_FORMAT_KEY = "dpipe.format"
PREDICTIONS_FORMAT = "dpipe-predictions"
#: ``"format"`` of a metrics file written by ``dpipe evaluate --out FILE`` (the document ``evaluate --json`` prints).
METRICS_FORMAT = "dpipe-metrics"
#: ``"format_version"`` of that document: raised only when a field changes meaning or goes away
METRICS_FORMAT_VERSION = 1
#: the PNG text chunk ``dpipe.format`` of a plot written by :mod:`dpipe.plotting`
PLOT_FORMAT = "dpipe-plot"
#: ``"format"`` of the report ``dpipe demo`` writes
REPORT_FORMAT = "dpipe-demo-report"
#: the ``"format"`` marker of each JSON file dpipe writes
_JSON_FORMATS = {"model": MODEL_FORMAT, "metrics": METRICS_FORMAT, "report": REPORT_FORMAT}
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def is_dpipe_store(path: str) -> bool:
    """Whether ``path`` is a directory whose ``manifest.json`` is a dpipe manifest: a JSON object with a
    ``schema_version`` dpipe reads and the shards' layout (``n_rows``, ``shard_bounds``). Its marker, not its
    validity: a dpipe store whose manifest was damaged is still dpipe's to replace (``dpipe verify`` judges it)."""
    manifest = os.path.join(path, STORE_MANIFEST_NAME)
    if not os.path.isdir(path) or not os.path.isfile(manifest):
        return False
    try:
        with open(manifest, "rb") as f:
            doc = json.loads(f.read())
    except (ValueError, OSError):  # not JSON, unreadable
        return False
    return isinstance(doc, dict) and doc.get("schema_version") in STORE_SCHEMA_VERSIONS and {"n_rows", "shard_bounds"} <= doc.keys()


#: the paths, relative to a store and "/"-separated, that dpipe writes in one: its manifest, a Zarr group's metadata and
#: chunks (v3 ``c/0/0``; v2 ``.zarray``, ``0.0`` for schema-1 stores), the CSR arrays under ``X``, the Parquet parts
_STORE_ARRAY = r"(?:X|y|group|weight)(?:/(?:indptr|indices|data))?"
_STORE_FILE = re.compile(rf"manifest\.json|zarr\.json|\.zgroup|\.zattrs|\.zmetadata|part-\d+\.parquet"
                         rf"|{_STORE_ARRAY}/(?:zarr\.json|\.zarray|\.zattrs|\.zgroup|c(?:/\d+)+|\d+(?:\.\d+)*)")
_STORE_DIR = re.compile(rf"{_STORE_ARRAY}(?:/c(?:/\d+)*)?")


def store_contents(path: str) -> tuple[int, int, list[str]]:
    """What replacing the dpipe store at ``path`` would remove: ``(files, bytes, foreign)``, where ``foreign`` lists
    (relative, sorted) the files, links and folders inside it that are not part of a dpipe store (a user's file)."""
    files, size, foreign = 0, 0, []
    for top, dirs, names in os.walk(path):
        rel_top = os.path.relpath(top, path).replace(os.sep, "/")
        prefix = "" if rel_top == "." else rel_top + "/"
        for d in list(dirs):
            if os.path.islink(os.path.join(top, d)) or not _STORE_DIR.fullmatch(prefix + d):
                foreign.append(prefix + d + ("" if os.path.islink(os.path.join(top, d)) else "/"))
                dirs.remove(d)  # not walked: what is in it is foreign too
        for name in names:
            fn = os.path.join(top, name)
            if os.path.islink(fn) or not _STORE_FILE.fullmatch(prefix + name):
                foreign.append(prefix + name)
                continue
            files += 1
            with contextlib.suppress(OSError):
                size += os.lstat(fn).st_size
    return files, size, sorted(foreign)


def check_store_replaceable(path: str) -> tuple[int, int]:
    """Refuse (:class:`~dpipe.exceptions.OutputExistsError`, one line naming ``path`` and the files) to replace a dpipe
    store that holds files that are not its own; return its ``(files, bytes)`` otherwise (:func:`store_contents`)."""
    files, size, foreign = store_contents(path)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputExistsError(f"{path}: the dpipe store holds {len(foreign)} file(s) that are not part of it ({shown}); refusing to replace it, "
                                "even with overwrite=True (move them out first)")
    return files, size


class _FormatMarker(msgspec.Struct):
    """The one field :func:`is_dpipe_file` reads of a JSON object (the others are skipped, not built)."""

    format: object = None


def is_dpipe_file(path: str, what: str) -> bool:
    """Whether ``path`` is a file dpipe wrote as ``what`` ("model", "metrics", "report", "predictions" or "plot"), by its format marker."""
    if not os.path.isfile(path):
        return False
    try:
        if what in _JSON_FORMATS:
            with open(path, "rb") as f:
                if f.read(64).lstrip()[:1] != b"{":  # not JSON: do not read a large foreign file
                    return False
                f.seek(0)
                text = f.read()
            # the marker alone: msgspec checks the whole document but builds nothing else (a 10^6-feature model is 21 MB)
            return msgspec.json.decode(text, type=_FormatMarker).format == _JSON_FORMATS[what]
        if what == "predictions":
            import pyarrow.parquet as pq

            meta = pq.read_schema(path).metadata or {}
            return meta.get(PREDICTIONS_FORMAT_KEY.encode()) == PREDICTIONS_FORMAT.encode()
        if what == "plot":  # matplotlib writes the text chunks before the image data
            with open(path, "rb") as f:
                head = f.read(1 << 16)
            return head.startswith(_PNG_SIGNATURE) and b"tEXtdpipe.format\x00" + PLOT_FORMAT.encode() in head
    except (ValueError, OSError, UnicodeDecodeError):  # pyarrow's ArrowInvalid and msgspec's DecodeError are ValueErrors
        return False
    return False


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


def _stale_pattern(dest: str) -> re.Pattern[str]:
    """Names of the temporary siblings of ``dest``: ``.DEST.tmp-XXXXXXXX`` and ``.DEST.old-XXXXXXXX`` (tempfile's 8 characters)."""
    return re.compile(r"\." + re.escape(os.path.basename(dest)) + r"\.(?:tmp|old)-[a-z0-9_]{8}")


def remove_stale_siblings(dest: str) -> list[str]:
    """Remove the ``.DEST.tmp-*`` / ``.DEST.old-*`` entries a killed run left next to ``dest``.

    Call only while holding :func:`destination_lock` on ``dest`` (which calls it when it
    takes the lock): no other writer of ``dest`` is alive then, so every such entry is a
    dead run's. Only names matching that exact pattern for this ``dest`` are touched
    (a symlink is removed, never what it points to); each removal is logged. Returns the
    paths removed.
    """
    dest = os.path.abspath(dest)
    parent = os.path.dirname(dest)
    pattern = _stale_pattern(dest)
    try:
        names = [n for n in os.listdir(parent) if pattern.fullmatch(n)]
    except OSError:
        return []
    if names:
        check_lock_held(dest)  # a lock removed under its holder and taken by another writer: this one touches nothing
    removed = []
    for name in sorted(names):
        p = os.path.join(parent, name)
        link = os.path.islink(p)
        if not link and _in_use(p):
            log.warning("%s: left %s in place: a live dpipe process is writing it (its lock file %s was removed or replaced under it)",
                        dest, name, _lock_path(dest))
            continue
        if os.path.isdir(p) and not link:
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)  # a symlink itself, never what it points to
        if not os.path.lexists(p):
            removed.append(p)
            log.warning("%s: removed %s%s left by an interrupted run", dest, name, " (a symbolic link; what it points to was kept)" if link else "")
        else:
            log.warning("%s: could not remove %s left by an interrupted run", dest, name)
    return removed


def _try_lock(path: str) -> tuple[int | None, bool]:
    """An exclusive, non-blocking ``flock`` on ``path``: ``(its descriptor, or None; whether a live process holds it)``.

    None and False where ``path`` cannot be opened or the file system has no locks (nothing tells).
    """
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None, False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        os.close(fd)
        return None, isinstance(error, BlockingIOError)
    return fd, False


def _in_use(path: str) -> bool:
    """Whether a live process holds ``path`` with :func:`hold_temporary` (an ``flock`` that this process cannot take)."""
    fd, held = _try_lock(path)
    if fd is not None:
        os.close(fd)
    return held


def hold_temporary(path: str) -> int | None:
    """Hold an ``flock`` on the temporary ``path`` (a directory or file this process is writing) until
    :func:`release_temporary`: :func:`remove_stale_siblings` in another process then leaves it alone. None where the
    file system has no locks."""
    return _try_lock(path)[0]


def release_temporary(fd: int | None) -> None:
    """Release what :func:`hold_temporary` returned (None: nothing)."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


# -- one writer per destination -------------------------------------------------------------------
class _Held:
    """This process's hold on one destination's lock (re-entered, at no cost, by the thread that took it)."""

    def __init__(self, fd: int, thread: int, what: str) -> None:
        self.fd, self.thread, self.pid, self.what = fd, thread, os.getpid(), what


_HELD: dict[str, _Held] = {}
_HELD_GUARD = threading.Lock()


def _lock_path(dest: str | os.PathLike) -> str:
    """The lock file of ``dest``: ``.NAME.lock`` in its (resolved) directory."""
    parent, name = os.path.split(os.path.abspath(os.fspath(dest)))
    return os.path.join(os.path.realpath(parent), f".{name}.lock")


def _command() -> str:
    argv = list(sys.argv)
    if argv and argv[0].endswith(os.path.join("dpipe", "__main__.py")):
        argv[0] = "dpipe"
    elif argv:
        argv[0] = os.path.basename(argv[0])
    return " ".join(" ".join(argv).split())[:300]  # one line


def _owner_record() -> bytes:
    return (json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "thread": threading.get_ident(),
                        "started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "command": _command()}) + "\n").encode()


def _describe_owner(fd: int) -> str:
    """The owner of a lock held by another process, as its lock file says (it may not have written it yet)."""
    raw = b""
    for _ in range(50):
        try:
            raw = os.pread(fd, 4096, 0)
        except OSError:
            break
        if raw.endswith(b"\n"):
            break
        time.sleep(0.01)
    try:
        d = json.loads(raw)
        who = f"pid {int(d['pid'])} on host {d['host']}"
    except (ValueError, KeyError, TypeError):
        return "owner unknown (it has not written its lock file yet)"
    if d.get("started"):
        who += f", started {d['started']}"
    if d.get("command"):
        who += f": {' '.join(str(d['command']).split())}"
    return who


def _open_failed(dest: str, what: str, lock: str, exc: OSError) -> OutputError:
    parent = os.path.dirname(dest)
    if not os.path.exists(parent):
        return OutputError(f"{dest}: cannot write the {what}: the directory {parent} does not exist")
    if not os.path.isdir(parent):
        return OutputError(f"{dest}: cannot write the {what}: {parent} is not a directory")
    if exc.errno in (errno.EPERM, errno.EACCES, errno.EROFS):
        return OutputError(f"{dest}: cannot write the {what}: the directory {parent} is not writable ({exc.strerror})")
    return OutputError(f"{dest}: cannot lock the {what} ({lock}): {exc.strerror or exc}")


def _acquire(dest: str, what: str, lock: str) -> int:
    import fcntl

    for _ in range(1000):  # each retry means another writer released (and removed) the file between our open and our lock
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)  # never O_TRUNC: the owner's record
        except OSError as exc:
            raise _open_failed(dest, what, lock, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _describe_owner(fd)
            os.close(fd)
            raise DestinationBusyError(f"{dest}: another dpipe process is writing it ({owner}); "
                                       f"try again when it has finished (its lock: {lock})") from None
        except OSError as exc:  # ENOLCK: a file system without locks
            os.close(fd)
            raise OutputError(f"{dest}: cannot lock the {what} ({lock}): {exc.strerror or exc}") from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock, follow_symlinks=False))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    else:  # pragma: no cover - a thousand writers in a row released it under us
        raise OutputError(f"{dest}: cannot lock the {what}: {lock} keeps being replaced")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, _owner_record(), 0)
    except OSError:  # a full disk: the lock holds all the same; a waiting writer says "owner unknown"
        pass
    return fd


def _release(fd: int, lock: str) -> None:
    try:
        if os.path.samestat(os.fstat(fd), os.stat(lock, follow_symlinks=False)):
            os.unlink(lock)  # while still holding it: a writer that opened it meanwhile sees another inode and opens again
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def destination_lock(dest: str | os.PathLike, what: str = "output") -> Iterator[str]:
    """Hold the lock of ``dest``: one writer per destination (see the module docstring); yields ``dest`` absolute.

    Taking it removes the stale ``.DEST.tmp-*`` / ``.DEST.old-*`` siblings a killed run left
    (:func:`remove_stale_siblings`). Re-entering it in the thread that holds it is free
    and does nothing more; leaving the outermost block unlinks ``.DEST.lock`` and releases it.

    Parameters
    ----------
    dest : path
        The file or directory to write (it need not exist); its directory must.
    what : str
        What is written ("store", "model", "predictions", "metrics", "plot"), for messages.

    Raises
    ------
    DestinationBusyError
        Another process (or another thread of this one) holds the lock: one line naming
        ``dest`` and the owner (pid, host, start time, command).
    OutputError
        The lock file cannot be created (a missing or read-only directory), one line naming ``dest``.
    """
    dest = os.path.abspath(os.fspath(dest))
    lock = _lock_path(dest)
    me = threading.get_ident()
    with _HELD_GUARD:
        held = _HELD.get(lock)
        if held is not None and held.pid == os.getpid():  # a forked child holds nothing of its parent's
            if held.thread != me:
                raise DestinationBusyError(f"{dest}: another thread of this process (pid {held.pid}) is writing it")
        else:
            held = None
    if held is not None:  # the outermost block releases it
        yield dest
        return
    fd = _acquire(dest, what, lock)
    with _HELD_GUARD:
        _HELD[lock] = _Held(fd, me, what)
    try:
        remove_stale_siblings(dest)
        yield dest
    finally:
        with _HELD_GUARD:
            _HELD.pop(lock, None)
        _release(fd, lock)


def check_lock_held(dest: str | os.PathLike) -> None:
    """Raise :class:`~dpipe.exceptions.DestinationBusyError` when this process holds ``dest``'s lock but the file at
    ``.DEST.lock`` is no longer the one it locked (removed, or replaced by another writer's); a no-op when it does not
    hold it."""
    lock = _lock_path(dest)
    with _HELD_GUARD:
        held = _HELD.get(lock)
    if held is None or held.pid != os.getpid():
        return
    try:
        same = os.path.samestat(os.fstat(held.fd), os.stat(lock, follow_symlinks=False))
        now = "replaced by another file"
    except FileNotFoundError:
        same, now = False, "removed"
    if not same:
        raise DestinationBusyError(f"{os.path.abspath(os.fspath(dest))}: the lock {lock} was {now} while this process was writing the "
                                   f"{held.what}, so another writer may have taken it; nothing was renamed into place (write it again)")


def before_rename(dest: str | os.PathLike) -> None:
    """The checks every writer runs just before renaming its temporary into place at ``dest``: no signal was received
    (:func:`dpipe._interrupts.check_interrupted`) and this process's lock is still the file at ``.DEST.lock``
    (:func:`check_lock_held`)."""
    check_interrupted()
    check_lock_held(dest)


def write_error(path: str, what: str, exc: OSError) -> OutputError:
    """An OS error met while writing ``path`` (a full disk, a file-size limit, an I/O error) as one line naming ``path``."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return OutputError(f"{path}: cannot write the {what}: {reason}")


def check_replaceable(path: str, what: str) -> None:
    """Refuse (one line naming ``path``) to replace an existing ``path`` that dpipe did not write as ``what``."""
    if not os.path.lexists(path):
        return
    if what == "store":
        if not is_dpipe_store(path):
            raise OutputExistsError(f"{path}: exists and is not a dpipe store (no dpipe manifest.json); refusing to replace it, even with overwrite=True")
    elif what in (*_JSON_FORMATS, "predictions", "plot"):
        if not is_dpipe_file(path, what):
            marker = (f'"format": "{_JSON_FORMATS[what]}"' if what in _JSON_FORMATS else
                      f"{PREDICTIONS_FORMAT_KEY} = {PLOT_FORMAT if what == 'plot' else PREDICTIONS_FORMAT}")
            raise OutputExistsError(f"{path}: exists and is not a dpipe {what} file (no {marker}); refusing to replace it, even with overwrite=True")


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
