"""A real OpenSSH server on 127.0.0.1-3 for tests: its own host key, config and client key;
and the two ways tests use a host through it (``reach``, ``refused``)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dglctl.hosts.transport import OPENSSH_MIN_BYTES, SSHTransport
from testing.ports import free_port_range
from testing.wait import WaitTimeout, wait_until

SSHD = "/usr/sbin/sshd"
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")


@dataclass
class TestSSHD:
    root: Path
    port: int
    client_key: Path
    known_hosts: Path
    proc: subprocess.Popen

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def start_sshd(root: Path, trusted_user_ca: Path | None = None, home_keys: bool = False,
               addresses: tuple[str, ...] = ADDRESSES, netns: str | None = None) -> TestSSHD:
    """Start sshd (needs root, as CI and these machines run); raises if it cannot. With
    ``trusted_user_ca`` (a CA's public key), only certificates it signed log in; with
    ``home_keys``, each user's own ~/.ssh/authorized_keys is read too (sshd reads it as that
    user, who cannot enter the test's folder). ``netns``: run it inside that network namespace,
    listening on ``addresses`` (there, port 22 is free)."""
    if not os.path.exists(SSHD) or shutil.which("ssh-keygen") is None:
        raise RuntimeError(f"{SSHD} or ssh-keygen missing: install openssh-server")
    root.mkdir(parents=True, exist_ok=True)
    host_key, client_key = root / "host_key", root / "client_key"
    _keygen(host_key)
    _keygen(client_key)
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
    port = 22 if netns else free_port_range(list(addresses), 1)
    cfg = root / "sshd_config"
    cfg.write_text("\n".join([
        f"Port {port}", *[f"ListenAddress {a}" for a in addresses],
        f"HostKey {host_key}",
        *([f"TrustedUserCAKeys {trusted_user_ca}", "AuthorizedKeysFile none"] if trusted_user_ca
          else [f"AuthorizedKeysFile {root / 'authorized_keys'}"
                + (" .ssh/authorized_keys" if home_keys else "")]),
        "UsePAM no", "StrictModes no", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PubkeyAuthentication yes",
        "PermitRootLogin yes", "Subsystem sftp internal-sftp", f"PidFile {root / 'sshd.pid'}",
        "LogLevel ERROR", "MaxStartups 100", "MaxSessions 100", ""]))
    os.makedirs("/run/sshd", exist_ok=True)
    inside = ["ip", "netns", "exec", netns] if netns else []
    proc = subprocess.Popen([*inside, SSHD, "-D", "-e", "-f", str(cfg)],
                            stderr=open(root / "sshd.log", "w"))
    pub = (root / "host_key.pub").read_text().split()
    known = root / "known_hosts"
    # ssh writes a host on port 22 without brackets and port.
    known.write_text("".join(f"{a if port == 22 else f'[{a}]:{port}'} {pub[0]} {pub[1]}\n"
                             for a in addresses))
    def listening() -> bool:
        try:
            socket.create_connection((addresses[-1], port), timeout=0.2).close()
            return True
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(root / 'sshd.log').read_text()}") from None
            return False

    try:
        wait_until(listening, f"sshd listening on port {port}")
    except WaitTimeout:
        proc.kill()
        raise
    return TestSSHD(root, port, client_key, known, proc)


def reach(c, i: int, tmp_path, during=None) -> None:
    """Host ``i`` of cluster ``c`` as the launcher uses it: an agent command (paramiko), then
    a file big enough for the system ssh, as ``big.bin`` in its workspace; ``during(t)``
    inspects the open transport. The transport is closed after, whatever happens."""
    t = SSHTransport(c.hosts[i], c)
    big = tmp_path / "big.bin"
    big.write_bytes(b"b" * OPENSSH_MIN_BYTES)
    try:
        assert t.agent("preflight", "--workspace", str(tmp_path / "ws"))["workspace_writable"]
        if during is not None:
            during(t)
        t.put(big, "big.bin")
    finally:
        t.close()


def refused(c, i: int, tmp_path, error: type, match: str) -> Any:
    """Host ``i`` of cluster ``c`` refuses the agent's command with ``error`` whose message
    matches the regular expression ``match``; the error (an AssertionError otherwise)."""
    t = SSHTransport(c.hosts[i], c)
    try:
        t.agent("preflight", "--workspace", str(tmp_path / "ws"))
    except error as e:
        if not re.search(match, str(e)):
            raise AssertionError(f"{type(e).__name__} {str(e)!r} does not match {match!r}") from e
        return e
    finally:
        t.close()
    raise AssertionError(f"host {i} was reached: expected {error.__name__} matching {match!r}")
