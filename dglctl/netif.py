"""Which network interface carries an address, on the host that asks (the agent's preflight).

Gloo and NCCL pick the interface for their own connections from the machine's hostname unless
``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` name one, and a hostname often resolves to
127.0.1.1 (Debian's /etc/hosts) or to another network than the one the cluster uses: the
other ranks are then told an address they cannot reach, and DDP's rendezvous fails with
"connectFullMesh failed ... Connection refused". The launcher names the interface of each
host's data address instead. Linux only (the ``SIOCGIFADDR`` ioctl); elsewhere: no answer.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import struct

SIOCGIFADDR = 0x8915  # <linux/sockios.h>: an interface's (primary) IPv4 address


def interfaces() -> dict[str, str]:
    """``{IPv4 address: interface name}`` for the interfaces that have one; {} when unknown."""
    try:
        import fcntl
    except ImportError:  # not a Unix
        return {}
    found: dict[str, str] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            with contextlib.suppress(OSError):  # down or without an IPv4 address
                raw = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
                found[socket.inet_ntoa(raw[20:24])] = name
    return found


def interface_of(address: str, table: dict[str, str]) -> str | None:
    """The interface in ``table`` (from :func:`interfaces`) that carries ``address``; a
    loopback address (all of 127.0.0.0/8 is local) is the loopback interface's."""
    if address in table:
        return table[address]
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(address).is_loopback:
            return next((n for a, n in table.items() if ipaddress.ip_address(a).is_loopback),
                        None)
    return None
