"""Named crash points, for the crash-consistency tests of work that must survive a kill.

A test sets ``DPIPE_KILL_AT=<name>`` in a child process's environment; the child
SIGKILLs itself when it reaches :func:`kill_point` with that name - a real kill at
an exact place (between two renames, say), which a signal sent from outside can only
hit by chance. Unset (always, outside such tests) a kill point costs one dictionary
lookup.
"""

from __future__ import annotations

import os
import signal

__all__ = ["KILL_AT", "kill_point"]

#: the environment variable naming the point to die at
KILL_AT = "DPIPE_KILL_AT"


def kill_point(name: str) -> None:
    """SIGKILL this process if ``DPIPE_KILL_AT`` names ``name``."""
    if os.environ.get(KILL_AT) == name:
        os.kill(os.getpid(), signal.SIGKILL)
