"""ip_config.txt in DGL's format: one machine per line, ``IP`` or ``IP PORT``; line = machine id."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import IpConfigError

DEFAULT_PORT = 30050


@dataclass(frozen=True)
class Machine:
    """One machine of the cluster: its id (line index), address and base port."""

    machine_id: int
    ip: str
    port: int

    def server_port(self, server_id: int) -> int:
        """Port of the machine's ``server_id``-th server (0 is the main server)."""
        return self.port + server_id

    def server_addr(self, server_id: int) -> str:
        return f"tcp://{self.ip}:{self.server_port(server_id)}"


def read_ip_config(path: str | os.PathLike[str]) -> list[Machine]:
    """Parse ip_config.txt; blank lines and ``#`` comments are skipped."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise IpConfigError(f"{p}: no such ip_config file") from None
    except OSError as e:
        raise IpConfigError(f"{p}: cannot read ({e.strerror})") from None
    machines: list[Machine] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) > 2:
            raise IpConfigError(f"{p}:{lineno}: expected 'IP' or 'IP PORT', got {raw.strip()!r}")
        try:
            ipaddress.ip_address(fields[0])
        except ValueError:
            raise IpConfigError(f"{p}:{lineno}: {fields[0]!r} is not an IP address") from None
        port = DEFAULT_PORT
        if len(fields) == 2:
            if not fields[1].isdigit() or not 0 < int(fields[1]) < 65536:
                raise IpConfigError(f"{p}:{lineno}: port {fields[1]!r} is not in 1..65535")
            port = int(fields[1])
        machines.append(Machine(len(machines), fields[0], port))
    if not machines:
        raise IpConfigError(f"{p}: no machines listed")
    return machines


def write_ip_config(path: str | os.PathLike[str], machines: list[tuple[str, int]]) -> None:
    """Write ``(ip, port)`` pairs in DGL's format (temp file + rename)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text("".join(f"{ip} {port}\n" for ip, port in machines))
    os.replace(tmp, p)
