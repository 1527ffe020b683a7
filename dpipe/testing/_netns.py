"""Hosts on a real, capped network: Linux network namespaces joined by veth pairs to one bridge, each link limited by ``tc``.

Every host (the scheduler, the driver, each worker) is a network namespace of its own with
one interface, ``eth0``, at ``10.77.0.N/24``; its other end is a port of a bridge in a switch
namespace. Both directions of every link are capped with a token bucket (``tc qdisc ... tbf``:
the host's ``eth0`` for what it sends, the switch's port for what it receives), so every byte
between two hosts crosses two capped links, as on a switched network. Only these namespaces'
own addresses are used; the machine's own network is not touched.

The byte counters of every link are read from the switch namespace's ``/proc/PID/net/dev``
(``PID``: a process kept in that namespace), a file read, cheap enough between two passes.

Needs root and iproute2 (``ip``, ``tc``); :func:`netns_unavailable` says why not where they are
missing. Test and benchmark helper only (never imported by production code).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

__all__ = ["NetnsCluster", "netns_unavailable", "read_link_bytes", "tbf_args", "LinkBytes", "SUBNET"]

#: the hosts' addresses: ``SUBNET.1`` is the first host; each cluster has its own switch, so clusters may share it
SUBNET = "10.77.0"
#: the interface of every host namespace
HOST_IF = "eth0"

#: the scheduler's and workers' environment: workers may start processes of their own; one BLAS thread each (no nanny sets it)
DASK_ENV = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
                MALLOC_MMAP_THRESHOLD_=str(4 * 2**20), MALLOC_TRIM_THRESHOLD_=str(64 * 2**20))
#: host -> (bytes it sent, bytes it received) over its link
LinkBytes = dict[str, tuple[int, int]]


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


def _tc(ns: str, *args: str) -> None:
    r = subprocess.run(["ip", "netns", "exec", ns, "tc", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tc {' '.join(args)} in {ns}: {r.stderr.strip()}")


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be made here (None: they can): not root, no iproute2, or ``ip netns add`` refused."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} (iproute2) is not installed"
    name = f"dpnprobe{uuid.uuid4().hex[:8]}"
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def tbf_args(rate_bits: float) -> list[str]:
    """``tc`` arguments of a token bucket at ``rate_bits`` bits per second: a bucket of 2 ms of traffic (at least 64 kB,
    a segment of the veth's offloads), 20 ms of queue."""
    burst = max(int(rate_bits / 8 * 0.002), 65536)
    return ["tbf", "rate", f"{int(rate_bits)}bit", "burst", str(burst), "latency", "20ms"]


class NetnsCluster:
    """Hosts in network namespaces on one bridge, every link capped at ``rate_bits`` in each direction.

    Parameters
    ----------
    hosts : sequence of str
        Host names (``"scheduler"``, ``"driver"``, ``"w0"``, ...); host ``i`` gets address
        ``SUBNET.(i + 1)``.
    rate_bits : float or None
        Each link's cap, bits per second, each way (None: uncapped).

    Everything made is removed by :meth:`close` (also when the set-up fails half way); use
    it as a context manager.
    """

    def __init__(self, hosts: Sequence[str], rate_bits: float | None = 1e9) -> None:
        tag = uuid.uuid4().hex[:6]
        self.switch = f"dpn{tag}-sw"
        self.namespaces = {h: f"dpn{tag}-{h}" for h in hosts}
        self.addresses = {h: f"{SUBNET}.{i + 1}" for i, h in enumerate(hosts)}
        self.ports = {h: f"p{i}" for i, h in enumerate(hosts)}  # the switch's end of each host's link
        self.rate_bits = rate_bits
        self.processes: list[subprocess.Popen] = []
        #: host -> the pid of the last process started there (``ip netns exec`` execs it: its pid is the program's)
        self.pids: dict[str, int] = {}
        self._made: list[str] = []
        self._holder: subprocess.Popen | None = None
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def _make(self) -> None:
        for ns in (self.switch, *self.namespaces.values()):
            _ip("netns", "add", ns)
            self._made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for h, ns in self.namespaces.items():
            port = self.ports[h]
            _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", HOST_IF, "netns", ns)
            _ip("-n", self.switch, "link", "set", port, "master", "br0")
            _ip("-n", self.switch, "link", "set", port, "up")
            _ip("-n", ns, "addr", "add", f"{self.addresses[h]}/24", "dev", HOST_IF)
            _ip("-n", ns, "link", "set", HOST_IF, "up")
        self.set_rate(self.rate_bits)
        # a process that stays in the switch namespace: its /proc/PID/net/dev holds every port's counters
        self._holder = subprocess.Popen(["ip", "netns", "exec", self.switch, "sleep", "infinity"], stdin=subprocess.DEVNULL)
        inside = os.stat(f"/var/run/netns/{self.switch}").st_ino
        deadline = time.monotonic() + 10
        while os.stat(f"/proc/{self._holder.pid}/ns/net").st_ino != inside:  # ip netns exec has not entered it yet
            if time.monotonic() > deadline or self._holder.poll() is not None:
                raise RuntimeError(f"ip netns exec {self.switch} sleep: did not enter the namespace")
            time.sleep(0.01)

    def set_rate(self, rate_bits: float | None) -> None:
        """Cap every link at ``rate_bits`` bits per second each way (None: remove the caps)."""
        for h, ns in self.namespaces.items():
            for where, dev in ((ns, HOST_IF), (self.switch, self.ports[h])):
                subprocess.run(["ip", "netns", "exec", where, "tc", "qdisc", "del", "dev", dev, "root"], capture_output=True)
                if rate_bits is not None:
                    _tc(where, "qdisc", "add", "dev", dev, "root", *tbf_args(rate_bits))
        self.rate_bits = rate_bits

    def qdiscs(self) -> str:
        """``tc qdisc show`` of every link (both ends), for the record."""
        out = []
        for h, ns in self.namespaces.items():
            for where, dev in ((ns, HOST_IF), (self.switch, self.ports[h])):
                r = subprocess.run(["ip", "netns", "exec", where, "tc", "qdisc", "show", "dev", dev], capture_output=True, text=True)
                out.append(f"{h} {dev}: {r.stdout.strip()}")
        return "\n".join(out)

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run in ``host``'s namespace."""
        return ["ip", "netns", "exec", self.namespaces[host], *argv]

    def start(self, host: str, argv: Sequence[str], **popen: Any) -> subprocess.Popen:
        """Start ``argv`` in ``host``'s namespace; :meth:`close` ends it."""
        p = subprocess.Popen(self.command(host, argv), **popen)
        self.processes.append(p)
        self.pids[host] = p.pid
        return p

    def start_dask(self, scheduler: str, workers: Sequence[str], *, waiter: str, memory_limit: str = "2GiB", port: int = 8786) -> str:
        """A ``dask scheduler`` on host ``scheduler`` and one ``dask worker --no-nanny`` (one thread, one BLAS thread) on each of
        ``workers``; returns the scheduler's address once every worker has joined (waited for from host ``waiter``)."""
        address = f"tcp://{self.addresses[scheduler]}:{port}"
        quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": DASK_ENV}
        self.start(scheduler, [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", self.addresses[scheduler], "--port", str(port),
                               "--no-dashboard"], **quiet)
        for i, h in enumerate(workers):
            self.start(h, [sys.executable, "-m", "distributed.cli.dask_worker", address, "--host", self.addresses[h], "--nthreads", "1",
                           "--no-nanny", "--no-dashboard", "--memory-limit", memory_limit, "--name", h], **quiet)
        wait = (f"from distributed import Client\nwith Client({address!r}, timeout=60, set_as_default=False) as c:\n"
                f"    c.wait_for_workers({len(workers)}, timeout=120)")
        r = subprocess.run(self.command(waiter, [sys.executable, "-c", wait]), capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"the namespaced dask cluster did not start: {r.stderr.strip().splitlines()[-1:]}")
        return address

    def counters(self) -> LinkBytes:
        """Bytes each host has sent and received over its link so far (the switch port's receive and send counters)."""
        assert self._holder is not None
        return read_link_bytes(self._holder.pid, self.ports)

    @property
    def counters_pid(self) -> int:
        """A process in the switch namespace: :func:`read_link_bytes` of it reads the links' counters from anywhere."""
        assert self._holder is not None
        return self._holder.pid

    def close(self) -> None:
        """End the processes started here and remove the namespaces (their links go with them)."""
        for p in [*self.processes, *([self._holder] if self._holder else [])]:
            if p.poll() is None:
                p.terminate()
        for p in [*self.processes, *([self._holder] if self._holder else [])]:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.processes, self._holder = [], None
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self._made = []

    def __enter__(self) -> NetnsCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_link_bytes(pid: int, ports: dict[str, str]) -> LinkBytes:
    """Bytes each host sent and received: ``/proc/PID/net/dev`` of a process in the switch namespace, ``ports`` host -> port."""
    with open(f"/proc/{pid}/net/dev") as f:
        rows = {}
        for line in f.readlines()[2:]:
            name, data = line.split(":", 1)
            fields = data.split()
            rows[name.strip()] = (int(fields[0]), int(fields[8]))  # received, sent (by the switch's port)
    # what the port received the host sent, and the other way round
    return {h: (rows[p][0], rows[p][1]) for h, p in ports.items()}
