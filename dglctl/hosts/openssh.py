"""The ONE list of options the system OpenSSH client gets for a host, from the host's ``ssh -G``
resolution (``ssh_config.py``), rendered two ways: as argv for the launcher's own ssh (big
files: OpenSSH's C crypto moves them ~1.4x faster than paramiko's SFTP here) and as a client
config for the ssh that mpiexec starts its daemons with (``partition --distributed``). Both
log in exactly as the paramiko connection does: the same host, port, user, keys, jump hosts
and known-hosts files."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ..config import Host
from ..errors import RemoteCommandFailed
from .sent import HashedRead, Sent
from .ssh_config import DEFAULT_CONFIG, ResolvedSSH

SYSTEM_CONFIG = "/etc/ssh/ssh_config"  # what ssh reads after the user's, without -F
# Options with a flag of their own on ssh's command line (the others go as -o KEY=VALUE).
_FLAGS = {"Port": "-p", "User": "-l", "IdentityFile": "-i", "ProxyJump": "-J"}
_PLAIN = re.compile(r"[A-Za-z0-9_.,:/@%+=~-]+")


def _literal(path: str) -> str:
    """``path`` as ssh reads it literally: ssh expands %-tokens in these options, and the
    resolution's values are already expanded (paramiko reads them as they are)."""
    return path.replace("%", "%%")


def _quoted(value: str) -> str:
    """One value as ssh's config parser (files and ``-o`` alike) reads it back whole."""
    if _PLAIN.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ssh_options(host: Host, r: ResolvedSSH) -> list[tuple[str, tuple[str, ...]]]:
    """``(ssh_config keyword, values)`` for ``host`` as ``r`` (its ``ssh -G`` resolution, the
    YAML's values on top) says: who logs in where, with which keys, through which jump hosts,
    trusting which host keys. Known hosts: the YAML's ``known_hosts`` file, then every file
    the config names or ssh reads by default (user, then system-wide), as paramiko reads
    them. What only ssh reads (certificates, ciphers) comes from the config files
    (``config_files``)."""
    ssh = host.ssh
    options: list[tuple[str, tuple[str, ...]]] = [
        ("HostName", (_literal(r.hostname),)), ("Port", (str(r.port),))]
    if r.user:
        options.append(("User", (r.user,)))
    # The YAML's key is a literal path; the config's come as the config wrote them.
    options += [("IdentityFile", (_literal(k) if ssh.key else k,)) for k in r.identity_files]
    if ssh.key:
        options.append(("IdentitiesOnly", ("yes",)))
    if r.proxy_jump:
        options.append(("ProxyJump", (",".join(r.proxy_jump),)))
    known = tuple(map(_literal, r.known_hosts)) if ssh.strict_host_keys else ("/dev/null",)
    options += [
        ("BatchMode", ("yes",)), ("ConnectTimeout", (str(int(ssh.connect_timeout)),)),
        ("StrictHostKeyChecking", ("yes" if ssh.strict_host_keys else "no",)),
        ("UserKnownHostsFile", known), ("GlobalKnownHostsFile", ("/dev/null",)),
        # The command is dglctl's (or mpiexec's): none from the config, and no terminal.
        ("RemoteCommand", ("none",)), ("RequestTTY", ("no",))]
    return options


def config_files(host: Host) -> tuple[str, ...]:
    """The OpenSSH config files the resolution read, which ssh reads too: the YAML's
    ``ssh.config`` alone, else the user's ``~/.ssh/config`` and the system-wide one (as
    ``ssh HOST`` does); those that exist."""
    if host.ssh.config is not None:
        files = [os.path.abspath(os.path.expanduser(host.ssh.config))]
    else:
        files = [os.path.expanduser(DEFAULT_CONFIG), SYSTEM_CONFIG]
    return tuple(f for f in files if os.path.isfile(f))


def openssh_argv(host: Host, r: ResolvedSSH, exe: str = "ssh") -> list[str]:
    """``ssh`` to ``host`` with its ``ssh_options`` on the command line (which wins over the
    config files, as the config ``ssh_config_text`` writes does). Ends with the destination,
    the host's alias, as the resolution named it; a remote command may follow."""
    argv = [exe, "-q"]
    if host.ssh.config is not None:
        argv += ["-F", next(iter(config_files(host)), "/dev/null")]
    for key, values in ssh_options(host, r):
        flag = _FLAGS.get(key)
        argv += [flag, values[0]] if flag else ["-o", f"{key}={' '.join(map(_quoted, values))}"]
    # "--": a host name is never taken for an option.
    return [*argv, "--", r.alias]


def ssh_config_text(hosts: Iterable[tuple[Host, ResolvedSSH]]) -> str:
    """An OpenSSH client config with which ``ssh -F FILE ALIAS`` logs in to each of ``hosts``
    (each with its resolution) as ``openssh_argv`` does, for a program that takes one ssh
    command for every host (mpiexec): a ``Host ALIAS`` block of each host's ``ssh_options``,
    then, for every host, the config files the resolution read (ssh keeps an option's first
    value, so the blocks win over them, as the command line does)."""
    lines: list[str] = []
    files: dict[str, None] = {}
    for host, r in hosts:
        lines.append(f"Host {r.alias}")
        lines += [f"  {key} {' '.join(map(_quoted, values))}"
                  for key, values in ssh_options(host, r)]
        files.update(dict.fromkeys(config_files(host)))
    if files:
        lines += ["Host *", *(f"  Include {_quoted(f)}" for f in files)]
    return "\n".join(lines) + "\n"


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
