"""SIGTERM / SIGINT: recorded when they arrive, raised as an exception that unwinds, and raised again at safe points.

The ``dpipe`` command installs :func:`install_handlers`. The first SIGTERM or SIGINT is
*recorded* (:func:`received_signal`) and raised as :class:`Interrupted` in the main thread,
so every ``with`` and ``finally`` on the way out runs (temporaries are removed, Slurm jobs
cancelled, clusters closed); a second one during that clean-up is ignored and a third exits
at once.

Raising from a signal handler is not always delivered: the handler runs at whatever bytecode
the main thread is at, and inside a garbage-collector callback (distributed's
``GCDiagnosis`` runs one in every client process) CPython prints "Exception ignored" and
drops the exception; inside a numba dispatcher's call it comes out as ``SystemError``. So
the signal stays recorded, and the run calls :func:`check_interrupted` at safe points
- between passes and in the engine's waits, in every solver iteration, before every final
rename of a store, model or output file - which raises :class:`Interrupted` again: a
dropped signal stops the run at the next of them, and nothing is renamed into place after
a signal. The CLI's top-level handler maps *any* exception after a signal to exit status
128 + signum.

An exception raised at an arbitrary bytecode can split "acquire a resource" from "register
its release": a :class:`distributed.Client` interrupted inside its constructor is never
closed by its owner, and its ``__del__`` then waits a minute for an event loop the closed
cluster has already stopped. Such a section runs under :func:`deferred_interrupts`: a signal
arriving inside it is raised as soon as the section ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["HANDLED_SIGNALS", "Interrupted", "check_interrupted", "deferred_interrupts", "install_handlers", "received_signal", "restore_handlers"]

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM or SIGINT: unwinding removes the temporary being written."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _State:
    """The handlers' state: signals seen, open deferred sections, the signal they hold back."""

    installed = False
    received = 0
    signum: int | None = None  # the first signal, kept until the handlers are restored
    depth = 0
    pending: int | None = None


def _handler(signum: int, frame: Any) -> None:
    _State.received += 1
    if _State.received == 1:
        _State.signum = signum  # recorded first: if the raise below is dropped, the safe points raise it again
        if _State.depth:
            _State.pending = signum
            return
        raise Interrupted(signum)
    if _State.received >= 3:
        os._exit(128 + signum)


def received_signal() -> int | None:
    """The signal the handlers received (the first one), or None: none received, or no handlers installed."""
    return _State.signum if _State.installed else None


def check_interrupted() -> None:
    """A safe point: raise :class:`Interrupted` if the handlers received a signal (whether or not its first raise was delivered).

    Call it where stopping is clean - between passes, in a wait, at a solver's iteration, before
    renaming an output into place. A no-op without :func:`install_handlers`, outside the main
    thread, and inside :func:`deferred_interrupts` (which raises at its end).
    """
    if _State.signum is not None and _State.installed and not _State.depth and threading.current_thread() is threading.main_thread():
        raise Interrupted(_State.signum)


def install_handlers() -> dict[int, Any]:
    """Make SIGTERM / SIGINT raise :class:`Interrupted` once (see the module docstring).

    Returns
    -------
    dict
        The previous handler of each signal, to restore with :func:`signal.signal`; empty
        (nothing installed) outside the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return {}
    _State.installed, _State.received, _State.signum, _State.depth, _State.pending = True, 0, None, 0, None
    return {s: signal.signal(s, _handler) for s in HANDLED_SIGNALS}


def restore_handlers(previous: dict[int, Any]) -> None:
    """Put back the handlers :func:`install_handlers` returned."""
    for s, h in previous.items():
        signal.signal(s, h)
    if previous:
        _State.installed, _State.signum = False, None


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold back an :class:`Interrupted` until the block ends; a no-op without :func:`install_handlers`.

    Keep the block short - acquire a resource and register its release - as a signal waits
    for it to end.
    """
    if not _State.installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    _State.depth += 1
    try:
        yield
    finally:
        _State.depth -= 1
        if not _State.depth and _State.pending is not None:
            signum, _State.pending = _State.pending, None
            raise Interrupted(signum)
