"""Output paths checked before the work: a failure to write costs no data pass.

:func:`check_output_path` is called by :func:`dpipe.train` (``out=``),
:func:`dpipe.predict`, the CLI's ``evaluate --json`` and ``ingest`` / ``make-data``
before anything is read: the parent directory must exist and be writable, and the
path must not be an existing directory (unless a directory is what is written).
"""

from __future__ import annotations

import os

from .exceptions import OutputError, OutputExistsError

__all__ = ["check_output_path"]


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
        not writable; the path is a directory; or it exists and ``overwrite`` is False.
    """
    p = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(p)
    if os.path.isdir(p) and not directory:
        raise OutputError(f"{p}: is a directory; the {what} is written to a file")
    if os.path.lexists(p) and not overwrite:
        raise OutputExistsError(f"{p}: exists; pass overwrite=True (--overwrite) to replace the {what}")
    if not os.path.exists(parent):
        raise OutputError(f"{p}: cannot write the {what}: the directory {parent} does not exist")
    if not os.path.isdir(parent):
        raise OutputError(f"{p}: cannot write the {what}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{p}: cannot write the {what}: the directory {parent} is not writable")
    return p
