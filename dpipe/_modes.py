"""File modes under the user's umask (temporaries from :mod:`tempfile` are 0600 / 0700 whatever it is)."""

from __future__ import annotations

import os

__all__ = ["current_umask", "set_default_mode"]


def current_umask() -> int:
    """The process umask, read from ``/proc/self/status`` where possible (so it is never changed, even briefly)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def set_default_mode(path: str) -> None:
    """Give ``path`` (a file, or a directory and everything in it) the mode a plain ``open()`` /
    ``os.makedirs()`` would under the current umask: ``0666 & ~umask`` for files, ``0777 & ~umask``
    for directories. Temporaries from :mod:`tempfile` are ``0600`` / ``0700`` whatever the umask.
    Symlinks are left alone."""
    mask = current_umask()
    file_mode, dir_mode = 0o666 & ~mask, 0o777 & ~mask
    if os.path.islink(path):
        return
    if not os.path.isdir(path):
        os.chmod(path, file_mode)
        return
    os.chmod(path, dir_mode)
    for root, dirs, files in os.walk(path):
        for name in dirs:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                os.chmod(p, dir_mode)
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                os.chmod(p, file_mode)
