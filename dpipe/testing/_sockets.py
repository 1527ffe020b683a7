"""Bytes a process received over TCP, read from the kernel (``ss -tinp``): what a driver really took in, not a design estimate."""

from __future__ import annotations

import re
import shutil
import subprocess

__all__ = ["SocketBytes", "received_since", "tcp_bytes_received"]

SocketBytes = dict[tuple[str, str], int]


def tcp_bytes_received(pid: int) -> SocketBytes:
    """``bytes_received`` of each open TCP socket of process ``pid``, by (local, peer) address.

    Raises
    ------
    RuntimeError
        ``ss`` (iproute2) is not installed.
    """
    if shutil.which("ss") is None:
        raise RuntimeError("ss (iproute2) is not installed")
    out = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    got: SocketBytes = {}
    key = None
    for line in out:
        if not line.startswith((" ", "\t")):  # a socket's line, then its indented TCP info line
            parts = line.split()
            key = (parts[3], parts[4]) if f"pid={pid}," in line else None
        elif key is not None:
            m = re.search(r"bytes_received:(\d+)", line)
            got[key] = int(m.group(1)) if m else 0
    return got


def received_since(before: SocketBytes, after: SocketBytes) -> int:
    """Bytes received between two :func:`tcp_bytes_received` readings (sockets opened meanwhile count whole)."""
    return sum(v - before.get(k, 0) for k, v in after.items())
