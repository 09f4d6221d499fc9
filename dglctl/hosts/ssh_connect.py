"""Opening an SSH connection with paramiko the way ``ssh HOST`` would: the host resolved
through the OpenSSH config (``hosts/ssh_config.py``), every known-hosts file ssh reads, the
identity files, certificates and the agent, and ProxyJump through one or more hops (each hop
over a channel of the one before, as ``ssh -J`` does)."""

from __future__ import annotations

import os
from typing import Any

from ..config import Host
from ..errors import AuthFailed, HostUnreachable, UnknownHostKey
from .ssh_config import ResolvedSSH, parse_hop, resolve_ssh


def connect_chain(host: Host, r: ResolvedSSH) -> tuple[Any, list[Any]]:
    """``(client to the host, clients of its jump hosts)``: close them all when done."""
    chain = [resolve_ssh(name, config=host.ssh.config, user=user, port=port)
             for user, name, port in map(parse_hop, r.proxy_jump)] + [r]
    sock, hops = None, []
    try:
        for hop, target, nxt in zip(r.proxy_jump, chain, chain[1:], strict=False):
            hops.append(open_client(host, target, sock, f"jump host {hop} of "))
            sock = hops[-1].get_transport().open_channel(
                "direct-tcpip", (nxt.hostname, nxt.port), ("127.0.0.1", 0))
        return open_client(host, r, sock, ""), hops
    except BaseException:
        for c in hops:
            c.close()
        raise


def open_client(host: Host, r: ResolvedSSH, sock: Any, what: str) -> Any:
    """An authenticated paramiko client to ``r`` (over ``sock``, a jump host's channel), or
    an error naming the host, how it was resolved and what to do."""
    import paramiko

    ssh = host.ssh
    client = paramiko.SSHClient()
    known = [p for p in r.known_hosts if os.path.exists(p)]
    for path in known:
        client.load_system_host_keys(path)  # every file ssh reads; none is written
    client.set_missing_host_key_policy(
        paramiko.RejectPolicy() if ssh.strict_host_keys else paramiko.AutoAddPolicy())
    where = f"{what}host {host.name} ({r.describe()})"
    try:
        client.connect(r.hostname, port=r.port, username=r.user,
                       key_filename=list(r.identity_files) or None, sock=sock,
                       timeout=ssh.connect_timeout, banner_timeout=ssh.connect_timeout,
                       auth_timeout=ssh.connect_timeout, allow_agent=True,
                       look_for_keys=not r.identity_files)
    except paramiko.BadHostKeyException as e:
        raise UnknownHostKey(
            f"{where}: its key does not match the known hosts ({', '.join(known)}): {e}",
            hint="if the host was reinstalled, remove its old line from known_hosts") from None
    except paramiko.SSHException as e:
        if "not found in known_hosts" in str(e):
            raise UnknownHostKey(
                f"{where} is not in any known-hosts file ({', '.join(r.known_hosts)})",
                hint=f"connect once with 'ssh {host.address}' to check and record its key, or "
                     "set ssh.strict_host_keys: false for a test cluster") from None
        if isinstance(e, paramiko.AuthenticationException):
            raise AuthFailed(
                f"{where}: SSH authentication failed: {e}",
                hint="check ssh.user and ssh.key, or User and IdentityFile in ~/.ssh/config "
                     "(keys, certificates or the agent; no passwords)") from None
        if "No authentication methods available" in str(e):  # no key file and no agent
            agent = ("its ssh-agent has no key" if os.environ.get("SSH_AUTH_SOCK")
                     else "SSH_AUTH_SOCK is unset")
            raise AuthFailed(
                f"{where}: SSH authentication failed: no key to offer (no IdentityFile exists "
                f"and {agent})",
                hint="set ssh.key in the cluster YAML or IdentityFile in ~/.ssh/config, or "
                     "load the key into ssh-agent ('ssh-add KEY')") from None
        raise HostUnreachable(f"{where}: SSH error: {e}") from None
    except (TimeoutError, OSError) as e:
        raise HostUnreachable(f"{where}: cannot connect: {e}",
                              hint="check the address, port and that sshd runs") from None
    transport = client.get_transport()
    if transport is not None:
        transport.set_keepalive(5)
    return client
