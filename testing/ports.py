"""Free port ranges for test and benchmark servers: each pytest-xdist worker draws from its
own share, below the kernel's ephemeral range."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path


def _ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections."""
    try:
        lo, hi = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999  # Linux's default
    return lo, hi


def free_port_range(ips: list[str], count: int) -> int:
    """A base port such that base..base+count-1 are free on every ip (best effort).

    Drawn below the kernel's ephemeral range: a port from that range (what binding port 0
    gives) can become the local port of any outgoing connection between this check and the
    servers' bind, seconds later on a busy machine. Seen once under load: a server could not
    listen, and its client's connection to that port met itself and failed the handshake.
    """
    low, high = worker_port_slice(10000, _ephemeral_ports()[0])
    high -= count
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(low, high) if high > low else any_port(ips[0])
        if base + count >= 65535:
            continue
        socks = []
        try:
            for ip in ips:
                for k in range(count):
                    t = socket.socket()
                    socks.append(t)
                    t.bind((ip, base + k))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError("no free port range found")


def worker_port_slice(low: int, high: int) -> tuple[int, int]:
    """This xdist worker's share of the ports ``low..high`` (all of them without xdist): the
    workers' servers never draw the same port, even between one's check and its bind."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    step = (high - low) // max(count, 1)
    return low + index * step, low + (index + 1) * step


def any_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])
