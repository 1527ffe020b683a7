"""Progress of long steps (``ingest``'s two passes, ``make-data``): rows and bytes done; and the pace of a solver's
per-iteration log lines (:class:`Throttle`).

A step opens a :class:`Progress` and advances it as it goes; nested code that does
the work (a source file's reader) advances the current one with :func:`advance`.
Where it shows:

- on a terminal, a bar on one line of stderr, redrawn at most five times a second:
  the command line installs it (:func:`terminal_bar`) when its stderr is a tty;
- otherwise (a batch job's log, a pipe, the Python API) a log line of the ``dpipe.io``
  logger every ``dpipe.progress-interval`` (a dask time, default ``10s``; 0: at
  every step), and one when the step ends.

This is dpipe's own small helper rather than a dependency such as ``tqdm``: it needs
both renderings (a bar for people, periodic log lines for batch logs, where a bar's
carriage returns are noise), it must share stderr with dpipe's log lines (a log line
clears the bar first) and it reads its interval from dpipe's settings like every other
knob.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import shutil
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

from ._config import seconds_setting

__all__ = ["Progress", "advance", "terminal_bar", "BarAwareHandler", "Throttle"]

log = logging.getLogger("dpipe.io")

_current: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("dpipe_progress", default=None)


def _interval() -> float:
    """``dpipe.progress-interval`` in seconds (0: a log line at every step)."""
    return seconds_setting("progress-interval", "10 or '30s' (0: every step)", zero=True)


class Throttle:
    """Whether a solver's per-iteration INFO line is due: the first one, then one every ``dpipe.progress-interval``.

    At default verbosity a fit then logs a handful of lines however many iterations it takes
    (rocarea on a9a: 495 iterations), and a batch log stays readable; the solver's closing
    line is not throttled, and at ``-v`` (VERBOSE) every iteration is logged as before. An
    interval of 0 lets every line through.
    """

    def __init__(self) -> None:
        self.interval = _interval()
        self._last = -float("inf")

    def due(self) -> bool:
        """True when a line may be logged now (and the clock restarts)."""
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            return True
        return False


def _count(n: float) -> str:
    return f"{int(n):,}"


def _megabytes(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


class _TerminalBar:
    """One line of a terminal, redrawn in place (``\\r`` and clear-to-end-of-line)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.shown = False
        self.last = 0.0

    def draw(self, text: str, fraction: float | None, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < 0.2:
            return
        self.last = now
        width = shutil.get_terminal_size((100, 24)).columns - 1
        if fraction is not None:
            cells = 20
            full = int(round(cells * min(max(fraction, 0.0), 1.0)))
            text = f"[{'#' * full}{'.' * (cells - full)}] {text}"
        self.stream.write("\r" + text[:width] + "\x1b[K")
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False

    def finish(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False


_bar: contextvars.ContextVar[_TerminalBar | None] = contextvars.ContextVar("dpipe_progress_bar", default=None)


class BarAwareHandler(logging.StreamHandler):
    """A stream handler that first clears the progress bar its stream shows, so a log line never lands in the middle of one."""

    def emit(self, record: logging.LogRecord) -> None:
        bar = _bar.get()
        if bar is not None and bar.stream is self.stream:
            bar.clear()
        super().emit(record)


@contextlib.contextmanager
def terminal_bar(stream: IO[str] | None = None) -> Iterator[None]:
    """Show the progress of the steps run inside as a bar on ``stream`` (default stderr) instead of periodic log lines."""
    token = _bar.set(_TerminalBar(stream or sys.stderr))
    try:
        yield
    finally:
        bar = _bar.get()
        _bar.reset(token)
        if bar is not None:
            bar.finish()


class Progress:
    """Rows and bytes done of one step, shown as a bar or as periodic log lines (see the module docstring).

    Parameters
    ----------
    what : str
        Names the step in every line (``"make-data data.zarr"``).
    total_rows, total_bytes : int, optional
        What the step will have done at its end, when known: the line then shows the
        share done. With both, the share is that of the bytes.
    bytes_label : str
        What the bytes are (``"features"``, ``"read"``).
    """

    def __init__(self, what: str, total_rows: int | None = None, total_bytes: int | None = None, bytes_label: str = "") -> None:
        self.what = what
        self.total_rows, self.total_bytes = total_rows, total_bytes
        self.bytes_label = bytes_label
        self.rows = 0
        self.nbytes = 0
        self.start = time.monotonic()
        self.interval = _interval()
        self.last_line = self.start
        self._token: contextvars.Token | None = None

    def __enter__(self) -> Progress:
        self._token = _current.set(self)
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if self._token is not None:
            _current.reset(self._token)
        if exc_type is None:
            self._show(final=True)
        else:
            bar = _bar.get()
            if bar is not None:
                bar.clear()

    def fraction(self) -> float | None:
        """The share done (bytes when their total is known, else rows), None when no total is known."""
        if self.total_bytes:
            return min(1.0, self.nbytes / self.total_bytes)
        if self.total_rows:
            return min(1.0, self.rows / self.total_rows)
        return None

    def text(self) -> str:
        """``what: rows done[/total] rows, MB done[/total] label, share, seconds``."""
        parts = []
        if self.rows or self.total_rows:
            parts.append(f"{_count(self.rows)}{'/' + _count(self.total_rows) if self.total_rows else ''} rows")
        if self.nbytes or self.total_bytes:
            done = _megabytes(self.nbytes) if not self.total_bytes else f"{self.nbytes / 1e6:,.1f}/{_megabytes(self.total_bytes)}"
            parts.append(f"{done}{' ' + self.bytes_label if self.bytes_label else ''}")
        share = self.fraction()
        if share is not None:
            parts.append(f"{100 * share:.0f} %")
        parts.append(f"{time.monotonic() - self.start:.0f} s")
        return f"{self.what}: {', '.join(parts)}"

    def advance(self, rows: int = 0, nbytes: int = 0) -> None:
        """Count ``rows`` and ``nbytes`` more as done, and show it when it is time."""
        if rows or nbytes:
            self.rows += int(rows)
            self.nbytes += int(nbytes)
            self._show()

    def _show(self, final: bool = False) -> None:
        bar = _bar.get()
        if bar is not None:
            bar.draw(self.text(), self.fraction(), force=final)
            if final:
                bar.finish()
            return
        now = time.monotonic()
        if final or (now - self.last_line >= self.interval and self.fraction() != 1.0):  # a complete step gets its final line only
            self.last_line = now
            log.info("%s%s", self.text(), " (done)" if final else "")


def advance(rows: int = 0, nbytes: int = 0) -> None:
    """Advance the current step's :class:`Progress` (a no-op outside one)."""
    p = _current.get()
    if p is not None:
        p.advance(rows, nbytes)
