"""``python -m bench.pass_clock EVENTS.json PID HOSTS.json -- DPIPE ARGS``: run the ``dpipe`` command in this process and
record, as every data pass starts, the time, this process's CPU seconds, the CPU seconds of the cluster's processes and
the byte counters of every link of a :class:`~dpipe.testing._netns.NetnsCluster`.

``PID``: a process in the cluster's switch namespace (its ``/proc/PID/net/dev`` holds the links' counters); ``HOSTS.json``:
``{"ports": {host: port}, "pids": {host: pid}}``. The ``netns`` suite runs it as the driver, in the driver's namespace.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

__all__ = ["main"]

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (-1 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return -1.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def main(argv: list[str]) -> int:
    events_path, pid, hosts_path, sep, *dpipe_args = argv
    assert sep == "--", "usage: python -m bench.pass_clock EVENTS.json PID HOSTS.json -- DPIPE ARGS"
    with open(hosts_path) as f:
        hosts = json.load(f)
    from dpipe.cli.main import main as dpipe_main
    from dpipe.engine._pass_count import watching_passes
    from dpipe.testing._netns import read_link_bytes

    events: list[dict[str, Any]] = []

    def clock(kind: str) -> None:
        events.append({"kind": kind, "t": time.perf_counter(), "driver_cpu": time.process_time(),
                       "cpu": {h: _cpu(p) for h, p in hosts["pids"].items()}, "links": read_link_bytes(int(pid), hosts["ports"])})

    clock("start")
    with watching_passes(clock):
        code = dpipe_main(dpipe_args)
    clock("end")
    with open(events_path, "w") as f:
        json.dump(events, f)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
