"""Which network interface of a host carries its data address (from the table of its
interfaces that the agent's preflight reports: ``agent/preflight.py``).

Gloo and NCCL pick the interface for their own connections from the machine's hostname unless
``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` name one, and a hostname often resolves to
127.0.1.1 (Debian's /etc/hosts) or to another network than the one the cluster uses: the
other ranks are then told an address they cannot reach, and DDP's rendezvous fails with
"connectFullMesh failed ... Connection refused". The launcher names the interface of each
host's data address instead. The agent reads the table on Linux only (the ``SIOCGIFADDR``
ioctl); elsewhere it is empty and no interface is named.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Mapping


def interface_of(address: str, table: Mapping[str, str]) -> str | None:
    """The interface in ``table`` (the agent's ``interfaces()``) that carries ``address``; a
    loopback address (all of 127.0.0.0/8 is local) is the loopback interface's."""
    if address in table:
        return table[address]
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(address).is_loopback:
            return next((n for a, n in table.items() if ipaddress.ip_address(a).is_loopback),
                        None)
    return None
