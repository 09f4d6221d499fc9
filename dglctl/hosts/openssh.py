"""The system OpenSSH client, logged in exactly as the paramiko connection is, for what it
does better: moving big files (OpenSSH's C crypto: ~1.4x paramiko's SFTP here)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..config import Host
from ..errors import RemoteCommandFailed
from .sent import HashedRead, Sent
from .ssh_config import DEFAULT_CONFIG, ResolvedSSH


def openssh_argv(host: Host, r: ResolvedSSH, exe: str = "ssh") -> list[str]:
    """``ssh`` to ``host`` as ``r`` (its ``ssh -G`` resolution) says: the config file for
    what only ssh reads (certificates, ciphers), and explicit options for who logs in where.
    Ends with the destination; a remote command may follow."""
    ssh = host.ssh
    known = " ".join(r.known_hosts) if ssh.strict_host_keys else "/dev/null"
    config = os.path.expanduser(ssh.config or DEFAULT_CONFIG)
    argv = [exe, "-q", "-T", "-F", config if os.path.exists(config) else "/dev/null",
            "-p", str(r.port), "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={int(ssh.connect_timeout)}",
            "-o", f"StrictHostKeyChecking={'yes' if ssh.strict_host_keys else 'no'}",
            "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null"]
    for k in r.identity_files:
        argv += ["-i", k]
    if ssh.key:
        argv += ["-o", "IdentitiesOnly=yes"]
    if r.proxy_jump:
        argv += ["-J", ",".join(r.proxy_jump)]
    if r.user:
        argv += ["-l", r.user]
    # "--": a host name is never taken for an option.
    return [*argv, "--", r.hostname]


def pipe_file(host: Host, r: ResolvedSSH, source: Path, dest: str) -> Sent | None:
    """Copy the local file ``source`` to ``dest`` on the host through the system ssh: this
    process reads it once, hashing what it pipes to ``cat`` there, so what is verified is
    what was sent. None when there is no ssh client here (the caller uses SFTP)."""
    exe = shutil.which("ssh")
    if exe is None:
        return None
    read = HashedRead(source)
    # The local file's name never reaches a command line; the remote one is quoted.
    argv = [*openssh_argv(host, r, exe), f"cat > {shlex.quote(dest)}"]
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=err)
        assert p.stdin is not None  # stdin=PIPE
        try:
            try:
                for chunk in read.chunks():
                    p.stdin.write(chunk)
                p.stdin.close()
            except BrokenPipeError:
                pass  # ssh ended early: its exit code and stderr say why
            code = p.wait()
        finally:
            if p.poll() is None:  # this process was interrupted mid-copy
                p.kill()
                p.wait()
        if code != 0:
            err.seek(0)
            detail = err.read().decode(errors="replace").strip()[-300:]
            raise RemoteCommandFailed(f"host {host.name}: copying {source.name} through ssh "
                                      f"failed (exit {code}): {detail}")
    return read.sent()
