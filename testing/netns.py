"""Machines with their own network for tests: network namespaces joined by veth pairs to a
bridge in this namespace (``ip netns``, as root). A process inside one sees only its own
loopback and its address on the bridge, as a host of a real cluster does; this namespace (the
launcher's) reaches each through the bridge."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from testing.sshd import TestSSHD, start_sshd

# What 'ip netns exec NAME' mounts over /etc for the processes it starts (iproute2): a hosts
# file here is the namespace's own name resolution, which the launcher's does not share.
ETC_NETNS = Path("/etc/netns")


@dataclass
class Netns:
    """Namespaces ``names`` with ``addresses`` (one each) on a bridge with ``gateway``."""

    tag: str
    gateway: str
    names: list[str] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)

    def remove(self) -> None:
        """Kill what still runs in the namespaces, then delete them, their veth pairs and the
        bridge; what is missing of each is ignored (it may never have been made).

        The processes first: an sshd's session whose client went away after the bridge did
        never hears of it, and would keep its namespace (and the veth) alive for good."""
        for name in self.names:
            pids = _ip("netns", "pids", name, check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            _ip("netns", "del", name, check=False)
            shutil.rmtree(ETC_NETNS / name, ignore_errors=True)
        for i in range(len(self.names)):
            _ip("link", "del", f"dglv{self.tag}{i}", check=False)
        _ip("link", "del", f"dglbr{self.tag}", check=False)


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    p = subprocess.run(argv, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {p.stderr.strip()}")
    return p


def ssh_hosts(net: Netns, root: Path, internal: tuple[str, ...] = ()
              ) -> tuple[list[TestSSHD], Path]:
    """An sshd in each of ``net``'s namespaces (port 22 on its address, its own host and
    client keys), and an ssh config naming them ``node0``, ``node1``, ...; with ``internal``
    (the namespaces' own names for the hosts, see :func:`make_netns`), ``inner0``, ... too:
    each reached through node0 by that name, which only the namespaces resolve. Stop the
    servers when done (they are stopped here if one fails to start)."""
    servers: list[TestSSHD] = []
    try:
        lines = []
        for i, (ns, address) in enumerate(zip(net.names, net.addresses, strict=True)):
            s = start_sshd(root / f"sshd{i}", addresses=(address,), netns=ns)
            servers.append(s)
            keys = (f"  User root\n  IdentityFile {s.client_key}\n  IdentitiesOnly yes\n"
                    f"  UserKnownHostsFile {s.known_hosts}\n")
            lines.append(f"Host node{i}\n  HostName {address}\n{keys}")
            if internal:
                # Its key under its internal name too, for a connection through a jump host.
                pub = " ".join((s.root / "host_key.pub").read_text().split()[:2])
                with open(s.known_hosts, "a") as f:
                    f.write(f"{internal[i]} {pub}\n")
                lines.append(f"Host inner{i}\n  HostName {internal[i]}\n  ProxyJump node0\n"
                             f"{keys}")
        cfg = root / "ssh_config"
        cfg.write_text("".join(lines))
    except BaseException:
        for s in servers:
            s.stop()
        raise
    return servers, cfg


def power_off(net: Netns, i: int) -> None:
    """Host ``i`` of ``net`` goes as a machine that loses power: every process in its
    namespace is killed (its sshd, the job's agent and processes) and its link goes down, so
    that nothing answers at its address any more (a connection attempt times out)."""
    name = net.names[i]
    for pid in _ip("netns", "pids", name, check=False).stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    _ip("link", "set", "eth0", "down", ns=name)


@contextlib.contextmanager
def unreachable_from_here(address: str) -> Iterator[None]:
    """Within the block, this namespace (the launcher's) has no route to ``address`` (a
    blackhole route); the namespaces still reach it over their bridge."""
    _ip("route", "add", "blackhole", f"{address}/32")
    try:
        yield
    finally:
        _ip("route", "del", "blackhole", f"{address}/32", check=False)


def netns_unavailable() -> str | None:
    """Why this machine cannot make network namespaces (None: it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the 'ip' command (iproute2) is missing"
    probe = f"dglprobe{secrets.token_hex(3)}"
    p = _ip("netns", "add", probe, check=False)
    if p.returncode != 0:
        return f"'ip netns add' failed: {p.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def make_netns(count: int, names: tuple[str, ...] = ()) -> Netns:
    """``count`` namespaces on a fresh bridge in a random 10.x.y.0/24; remove() when done.
    ``names[i]``, if given, is namespace i's address by name, known inside the namespaces
    only (each gets an /etc/hosts of them), as a cluster's own DNS would be."""
    tag = secrets.token_hex(3)
    net = f"10.{int(tag[:2], 16) % 200 + 20}.{int(tag[2:4], 16)}"
    made = Netns(tag, f"{net}.1")
    bridge = f"dglbr{tag}"
    try:
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"{made.gateway}/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for i in range(count):
            name, outer = f"dgl{tag}n{i}", f"dglv{tag}{i}"
            _ip("netns", "add", name)
            made.names.append(name)
            _ip("link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", name)
            _ip("link", "set", outer, "master", bridge)
            _ip("link", "set", outer, "up")
            address = f"{net}.{10 + i}"
            _ip("addr", "add", f"{address}/24", "dev", "eth0", ns=name)
            _ip("link", "set", "eth0", "up", ns=name)
            _ip("link", "set", "lo", "up", ns=name)
            made.addresses.append(address)
        if names:
            hosts = "127.0.0.1 localhost\n" + "".join(
                f"{a} {n}\n" for a, n in zip(made.addresses, names, strict=True))
            for name in made.names:
                (ETC_NETNS / name).mkdir(parents=True, exist_ok=True)
                (ETC_NETNS / name / "hosts").write_text(hosts)
    except BaseException:
        made.remove()
        raise
    return made
