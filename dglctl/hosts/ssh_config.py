"""How OpenSSH itself would reach a host: ``ssh -G`` resolves ``~/.ssh/config`` (Host and
Match blocks, Include, HostName, User, Port, IdentityFile, ProxyJump, known-hosts files)
exactly as ``ssh`` does, so every connection dglctl makes (commands, SFTP, the system ssh
for big copies) logs in as the user's own ``ssh HOST`` would. Without an ``ssh`` binary, paramiko's SSHConfig parser
reads the file (it knows no Include or Match exec).

What the cluster YAML says explicitly (``ssh.user``, ``port``, ``key``, ``known_hosts``) wins
over the config file, as ``ssh -o`` would.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field

from ..errors import ConfigError

DEFAULT_CONFIG = "~/.ssh/config"
SYSTEM_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")


@dataclass(frozen=True)
class ResolvedSSH:
    """One host's SSH settings after the config file: what a connection uses."""

    alias: str  # what the cluster YAML calls the host (its ``address``)
    hostname: str
    port: int
    user: str | None
    identity_files: tuple[str, ...]  # existing files only, in ssh's order
    known_hosts: tuple[str, ...]  # user files, then the system-wide ones
    proxy_jump: tuple[str, ...] = ()  # hops, outermost first, as "[user@]host[:port]"
    source: str = "ssh -G"  # or "paramiko" or "none"
    options: dict[str, str] = field(default_factory=dict)  # the raw resolution (for --dry-run)

    def describe(self) -> str:
        """One line for people: ``user@hostname:port via jump1,jump2 (key ...)``."""
        who = f"{self.user + '@' if self.user else ''}{self.hostname}:{self.port}"
        via = f" via {','.join(self.proxy_jump)}" if self.proxy_jump else ""
        keys = f" key {', '.join(self.identity_files)}" if self.identity_files else ""
        return f"{who}{via}{keys} ({self.source})"


def _expand(path: str) -> str:
    return os.path.expanduser(path)


@functools.lru_cache(maxsize=256)
def _ssh_g(alias: str, config: str | None) -> dict[str, tuple[str, ...]] | None:
    """``ssh -G`` of ``alias`` as {option: values}; None without ssh or on its failure."""
    ssh = shutil.which("ssh")
    if ssh is None:
        return None
    argv = [ssh, "-G"]
    if config is not None:
        argv += ["-F", _expand(config)]
    try:
        p = subprocess.run([*argv, "--", alias], capture_output=True, text=True, timeout=10,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    out: dict[str, list[str]] = {}
    for line in p.stdout.splitlines():
        key, _, value = line.partition(" ")
        out.setdefault(key.lower(), []).append(value)
    return {k: tuple(v) for k, v in out.items()}


def _paramiko_lookup(alias: str, config: str | None) -> dict[str, tuple[str, ...]]:
    """The same from paramiko's parser (no Include, no Match exec)."""
    import paramiko

    path = _expand(config or DEFAULT_CONFIG)
    if not os.path.exists(path):
        return {}
    cfg = paramiko.SSHConfig.from_path(path)
    found = cfg.lookup(alias)
    out: dict[str, tuple[str, ...]] = {}
    for key, value in found.items():
        out[key.lower()] = tuple(value) if isinstance(value, list) else (str(value),)
    return out


def resolve_ssh(alias: str, *, config: str | None = None, user: str | None = None,
                port: int | None = None, key: str | None = None,
                known_hosts: str | None = None, _via: tuple[str, ...] = ()) -> ResolvedSSH:
    """How to reach ``alias``: the config file's answer (``config``, default
    ``~/.ssh/config``) with the YAML's explicit values on top. The jump chain is whole: a
    first hop that has its own ProxyJump adds its hops in front (``_via``: the aliases
    already on the way, to name a loop)."""
    explicit_config = config is not None
    found = _ssh_g(alias, config if explicit_config else None)
    source = "ssh -G"
    if found is None:
        found, source = _paramiko_lookup(alias, config), "paramiko"
    first = {k: v[0] for k, v in found.items() if v}
    hostname = first.get("hostname", alias)
    if source == "paramiko" and "%" in hostname:
        hostname = hostname.replace("%h", alias)
    cfg_port = int(first["port"]) if first.get("port", "").isdigit() else 22
    identities: list[str] = []
    for value in found.get("identityfile", ()):
        identities += [p for p in shlex.split(value)]
    keys = [_expand(key)] if key else [p for p in map(_expand, identities) if os.path.isfile(p)]
    known: list[str] = []
    if known_hosts:
        known.append(_expand(known_hosts))
    for name in ("userknownhostsfile", "globalknownhostsfile"):
        for value in found.get(name, ()):
            known += [_expand(p) for p in value.split()]
    if not any(p in known for p in SYSTEM_KNOWN_HOSTS) and "globalknownhostsfile" not in found:
        known += list(SYSTEM_KNOWN_HOSTS)
    jump = first.get("proxyjump", "none")
    hops = () if jump.lower() == "none" else tuple(h.strip() for h in jump.split(",") if h)
    if hops:
        hops = _outer_hops(hops[0], config, (*_via, alias)) + hops
    return ResolvedSSH(
        alias=alias, hostname=hostname, port=port or cfg_port,
        user=user or first.get("user"), identity_files=tuple(keys),
        known_hosts=tuple(dict.fromkeys(known)), proxy_jump=hops, source=source,
        options={k: " ".join(v) for k, v in found.items()
                 if k in ("hostname", "user", "port", "identityfile", "proxyjump",
                          "userknownhostsfile", "globalknownhostsfile")})


def _outer_hops(first: str, config: str | None, via: tuple[str, ...]) -> tuple[str, ...]:
    """The jump hosts in front of ``first``, the first hop. ``ssh -J a,b`` connects to ``a``
    as ``ssh a`` would, so a's own ProxyJump applies; later hops are reached through -J,
    which overrides theirs: only the first hop's config can lengthen the chain."""
    name = parse_hop(first)[1]
    if name in via:
        raise ConfigError(f"the SSH config's ProxyJump settings form a loop: "
                          f"{' -> '.join((*via, name))}",
                          hint="one of these hosts must be reachable without ProxyJump "
                               "(ProxyJump none)")
    return resolve_ssh(name, config=config, _via=via).proxy_jump


def parse_hop(hop: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` (one ProxyJump hop, or ``ssh://user@host:port``) as parts."""
    if hop.startswith("ssh://"):
        hop = hop[len("ssh://"):]
    user, _, rest = hop.rpartition("@")
    host, port = rest, None
    if rest.startswith("["):  # [IPv6]:port
        host, _, tail = rest[1:].partition("]")
        port = int(tail[1:]) if tail.startswith(":") else None
    elif rest.count(":") == 1:
        host, p = rest.split(":")
        port = int(p)
    return user or None, host, port


def resolve_address(alias: str, config: str | None = None) -> str:
    """The HostName the config gives ``alias`` (itself when none does)."""
    return resolve_ssh(alias, config=config).hostname
