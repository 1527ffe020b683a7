"""Logging levels of dpipe's command line.

Default: INFO (progress lines). ``-v``: :data:`VERBOSE` as well (details a user looks
up when something is slow or odd, such as the embedded cluster's dashboard link).
``-vv``: DEBUG (bytes moved per pass). ``-q``: warnings and errors only.
"""

from __future__ import annotations

import logging

__all__ = ["VERBOSE", "level_for"]

#: between DEBUG (10) and INFO (20)
VERBOSE = 15
logging.addLevelName(VERBOSE, "VERBOSE")


def level_for(verbose: int, quiet: bool) -> int:
    """The ``dpipe`` logger's level for ``-v`` given ``verbose`` times, or ``-q``."""
    if quiet:
        return logging.WARNING
    return {0: logging.INFO, 1: VERBOSE}.get(verbose, logging.DEBUG)
