"""One writer per destination: the lock every writer holds, and the temporaries a killed run left.

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

from ._interrupts import check_interrupted
from .exceptions import DestinationBusyError, OutputError

__all__ = ["destination_lock", "check_lock_held", "before_rename", "remove_stale_siblings", "hold_temporary", "release_temporary"]

log = logging.getLogger("dpipe.output")


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
