"""Host transports: run the host agent and copy files, locally or over SSH (paramiko).

Both transports share everything but two primitives: running one command and writing one
file. Connections are lazy (made on first use) and closed with ``close()``. Every remote
command is built with ``shlex.join``: paths, script arguments and values are never spliced
into a shell line unquoted.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import select
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agent.protocol import AGENT_MODULE, COPY_TEMP_PREFIX
from ..config import ClusterConfig, Host
from ..display import human_bytes
from ..errors import CopyFailed, RemoteCommandFailed
from .openssh import pipe_file
from .sent import HashedRead, Sent
from .ssh_config import ResolvedSSH, resolve_ssh
from .ssh_connect import connect_chain

if TYPE_CHECKING:
    import paramiko

AGENT = ["-m", AGENT_MODULE]
OPENSSH_MIN_BYTES = 8 << 20  # below this, SFTP on the open connection beats starting ssh


def remote_line(argv: list[str]) -> str:
    """``argv`` as one shell line, every word quoted, except that a program given as ``~`` or
    ``~/...`` (``python: ~/venvs/x/bin/python`` in the cluster YAML) keeps its ``~`` unquoted
    for the remote shell to expand (``~/'rest'``: the tilde prefix ends at the first slash)."""
    line = shlex.join(argv)
    if argv and (argv[0] == "~" or argv[0].startswith("~/")):
        rest = argv[0][2:]
        head = "~/" + shlex.quote(rest) if rest else "~" if argv[0] == "~" else "~/"
        line = " ".join([head, *(shlex.quote(a) for a in argv[1:])])
    return line


def join_path(workspace: str, rel: str) -> str:
    """``rel`` inside a host's workspace, as the host spells it (``/`` separators)."""
    return f"{workspace.rstrip('/')}/{rel}"


class Stream:
    """A long-lived command's stdin and stdout: ``send`` bytes, ``recv`` what arrived within
    a timeout (b"" at its end, None when nothing came in time), ``close``."""

    def __init__(self, send: Any, recv: Any, close: Any) -> None:
        self.send, self.recv, self.close = send, recv, close


def run_here(argv: list[str], timeout: float, host: str,
             new_session: bool = False) -> tuple[int, str, str]:
    """Run ``argv`` on this machine (for ``host``); ``(exit code, stdout, stderr)``.
    ``new_session``: out of this terminal's process group (Ctrl-C is the launcher's)."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, start_new_session=new_session)
    except subprocess.TimeoutExpired:
        raise RemoteCommandFailed(f"host {host}: {shlex.join(argv[:4])} ... took "
                                  f"longer than {timeout:.0f}s") from None
    return p.returncode, p.stdout, p.stderr


def popen_stream(argv: list[str], new_session: bool = False) -> Stream:
    """Start ``argv`` here with its stdin and stdout connected to this process (stderr
    dropped); closing waits 5 s for it to end after its stdin closes, then kills it.
    ``new_session``: out of this terminal's process group, as in ``run_here``."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, start_new_session=new_session)
    stdin, stdout = p.stdin, p.stdout
    assert stdin is not None and stdout is not None  # both are PIPEs
    out = stdout.fileno()

    def recv(timeout: float) -> bytes | None:
        ready, _, _ = select.select([out], [], [], max(0.0, timeout))
        return os.read(out, 1 << 16) if ready else None

    def send(data: bytes) -> None:
        stdin.write(data)
        stdin.flush()

    def close() -> None:
        with contextlib.suppress(OSError):
            stdin.close()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        stdout.close()

    return Stream(send, recv, close)


def write_local(path: str, data: bytes | None, source: Path | None, mode: int) -> Sent:
    """Write ``data`` (or the file ``source``) to ``path`` on this machine atomically, the
    file created with ``mode`` before its first byte; what was written."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp{os.getpid()}")
    # Whatever is at the temporary name (a stale copy, or a link another user planted to
    # read what comes) is removed, never written through: the file is created anew
    # (O_EXCL, O_NOFOLLOW) with ``mode``, made exact (the umask may narrow it) before its
    # first byte.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode & 0o777)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            if source is not None:
                read = HashedRead(source)
                for chunk in read.chunks():
                    f.write(chunk)
                sent = read.sent()
            else:
                f.write(data or b"")
                sent = Sent.of(data or b"")
        os.replace(tmp, dest)
        return sent
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Transport:
    """What the launcher needs of one host: run a command, write a file (the two primitives
    each transport supplies), and what is built on them (agent calls, atomic copies).

    Constructing one does no I/O; ``close()`` (or leaving a ``with`` block) releases it.
    """

    # Whether the host ends what a command started once that command ends (a Slurm job
    # step): the job's processes must then be started from the agent session, which lives
    # as long as the launch.
    processes_need_session = False

    def __init__(self, host: Host, cluster: ClusterConfig) -> None:
        self.host = host
        self.cluster = cluster
        self.workspace = self._workspace()

    def _workspace(self) -> str:
        return self.host.workspace

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # primitives -------------------------------------------------------------------------------
    def run(self, argv: list[str], timeout: float) -> tuple[int, str, str]:
        """Run ``argv`` on the host; ``(exit code, stdout, stderr)``."""
        raise NotImplementedError

    def write_file(self, path: str, data: bytes | None, source: Path | None, mode: int) -> Sent:
        """Write ``data`` (or the local file ``source``, read once) to ``path`` on the host,
        atomically; what was sent (a file that grows meanwhile is sent as it was read)."""
        raise NotImplementedError

    def python(self) -> str:
        """The interpreter that runs dglctl's agent and the job's processes on the host."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the connection, if any (a later call opens a new one)."""

    def resolved(self) -> ResolvedSSH | None:
        """How the host is reached over SSH, as ``ssh -G`` resolves it (None: not SSH)."""
        return None

    def open_stream(self, argv: list[str]) -> Stream:
        """Start ``argv`` on the host with its stdin and stdout connected to this process."""
        raise NotImplementedError

    def shares_workspace(self) -> bool:
        """Whether the host's workspace is this machine's file system (what is written here
        is the host's; a Slurm cluster's shared home). Each local host has its own folder."""
        return False

    # shared -----------------------------------------------------------------------------------
    def agent(self, *args: str, timeout: float = 60.0) -> Any:
        """Run one agent command on the host and return its JSON result."""
        argv = [self.python(), *AGENT, *args]
        code, out, err = self.run(argv, timeout)
        if code != 0:
            lines = "\n".join(err.strip().splitlines()[-8:])
            hint = None
            if "No module named" in err or code == 127:
                hint = (f"install the same dglctl version on {self.host.name} and point "
                        f"'python' in the cluster config at that interpreter")
            elif "No space left on device" in err or "Disk quota exceeded" in err:
                hint = (f"check free space and quota in {self.workspace} on {self.host.name} "
                        f"('df -h')")
            raise RemoteCommandFailed(
                f"host {self.host.name}: '{shlex.join(argv[:4])} ...' exited with {code}:\n"
                f"{lines}", hint=hint)
        try:
            return json.loads(out)
        except ValueError:
            raise RemoteCommandFailed(
                f"host {self.host.name}: the agent printed no JSON: {out[-500:]!r}") from None

    def path(self, rel: str) -> str:
        """The host's path of ``rel`` inside its workspace."""
        return join_path(self.workspace, rel)

    def put(self, source: Path, rel: str, mode: int = 0o644) -> Sent:
        """Copy a local file into the workspace atomically (temp name, then rename); the
        size and checksum of the bytes sent, which the host's copy must match."""
        return self._write(self.path(rel), None, source, mode)

    def put_bytes(self, data: bytes, rel: str, mode: int = 0o644) -> Sent:
        """Write ``data`` to ``rel`` in the workspace atomically."""
        return self._write(self.path(rel), data, None, mode)

    def _write(self, path: str, data: bytes | None, source: Path | None, mode: int) -> Sent:
        """``write_file``, with a failure on the host (a full disk, a quota) as CopyFailed
        naming the host, the file and the size; the transports leave no temp file behind."""
        try:
            return self.write_file(path, data, source, mode)
        except (OSError, RemoteCommandFailed) as e:
            if isinstance(e, FileNotFoundError) and source is not None and not source.exists():
                raise  # the local file is missing: not the host's fault
            size = source.stat().st_size if source is not None else len(data or b"")
            detail = e.message if isinstance(e, RemoteCommandFailed) else (
                e.strerror or str(e) or type(e).__name__)
            raise CopyFailed(
                f"host {self.host.name}: writing {path} ({human_bytes(size)}) failed: {detail}",
                hint=f"check free space and quota in {self.workspace} on {self.host.name} "
                     "('df -h'); nothing partial was left there") from None


class LocalTransport(Transport):
    """Runs the agent with this interpreter on this machine; workspace per host name."""

    def _workspace(self) -> str:
        return str(Path(os.path.expanduser(self.host.workspace)) / self.host.name)

    def python(self) -> str:
        return sys.executable

    def run(self, argv: list[str], timeout: float) -> tuple[int, str, str]:
        return run_here(argv, timeout, self.host.name)

    def open_stream(self, argv: list[str]) -> Stream:
        return popen_stream(argv)

    def write_file(self, path: str, data: bytes | None, source: Path | None, mode: int) -> Sent:
        return write_local(path, data, source, mode)


class SSHTransport(Transport):
    """Runs commands and copies files over one SSH connection (paramiko), opened lazily."""

    def __init__(self, host: Host, cluster: ClusterConfig) -> None:
        super().__init__(host, cluster)
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._hops: list[Any] = []  # jump-host clients under self._client
        self._resolved: ResolvedSSH | None = None
        self._lock = threading.Lock()

    def python(self) -> str:
        return self.host.python

    def resolved(self) -> ResolvedSSH:
        """How this host is reached: ~/.ssh/config (``ssh -G``) under the YAML's values."""
        if self._resolved is None:
            ssh = self.host.ssh
            self._resolved = resolve_ssh(self.host.address, config=ssh.config, user=ssh.user,
                                         port=ssh.port, key=ssh.key,
                                         known_hosts=ssh.known_hosts)
        return self._resolved

    def _connect(self):
        with self._lock:  # the lease renewer's thread may ask at the same time
            if self._client is None:
                self._client, self._hops = connect_chain(self.host, self.resolved())
            return self._client

    def run(self, argv: list[str], timeout: float) -> tuple[int, str, str]:
        client = self._connect()
        line = remote_line(argv)
        # Bounded: on a connection whose host went silent (cut off, powered off), paramiko
        # would wait an hour for the channel.
        chan = client.get_transport().open_session(timeout=timeout)
        chan.settimeout(timeout)
        chan.exec_command(line)
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        try:
            while True:
                if chan.recv_ready():
                    out += chan.recv(1 << 16)
                elif chan.recv_stderr_ready():
                    err += chan.recv_stderr(1 << 16)
                elif chan.exit_status_ready():
                    while chan.recv_ready():
                        out += chan.recv(1 << 16)
                    while chan.recv_stderr_ready():
                        err += chan.recv_stderr(1 << 16)
                    break
                elif time.monotonic() > deadline:
                    raise RemoteCommandFailed(f"host {self.host.name}: '{line[:80]}' took longer "
                                              f"than {timeout:.0f}s")
                else:
                    time.sleep(0.005)
            code = chan.recv_exit_status()
        finally:
            chan.close()
        return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def open_stream(self, argv: list[str]) -> Stream:
        chan = self._connect().get_transport().open_session()
        chan.exec_command(remote_line(argv))

        def recv(timeout: float) -> bytes | None:
            chan.settimeout(max(0.001, timeout))
            try:
                return chan.recv(1 << 16)
            except TimeoutError:
                return None

        return Stream(chan.sendall, recv, chan.close)

    def write_file(self, path: str, data: bytes | None, source: Path | None, mode: int) -> Sent:
        if self._sftp is None:
            self._sftp = self._connect().open_sftp()
        sftp = self._sftp
        # SFTP takes "~" for a file name; a relative path starts in the login's home, as the
        # remote shell's "~/" does (the launcher uses the agent's absolute path, but an
        # untouched "~/dglctl-workspace" default must land in the same place).
        path = path[2:] if path.startswith("~/") else path
        parent, name = path.rsplit("/", 1)
        self._mkdirs(parent)
        # The temporary file lives in a new folder that only its owner can enter, so nobody
        # opens it under the server's default mode (0644) and reads what follows: the file
        # gets ``mode`` before its first byte (SFTP) or before it leaves the folder (ssh).
        private = self._private_dir(parent)
        tmp = f"{private}/{name}"
        try:
            sent = None
            if source is not None and source.stat().st_size >= OPENSSH_MIN_BYTES:
                sent = pipe_file(self.host, self.resolved(), source, tmp)
            if sent is not None:
                sftp.chmod(tmp, mode)
            else:
                with sftp.open(tmp, "wb") as f:
                    f.chmod(mode)
                    f.set_pipelined(True)
                    sent = self._send(f, data, source)
            # Pipelined SFTP writes do not report a full disk: the file just ends short
            # (seen on OpenSSH 9 with a full tmpfs). The size tells, before the rename.
            arrived = sftp.stat(tmp).st_size
            if arrived != sent.size:
                raise OSError(errno.ENOSPC, f"only {arrived} of {sent.size} bytes arrived (is "
                                            "the disk full?)", path)
            sftp.posix_rename(tmp, path)
            return sent
        except BaseException:
            with contextlib.suppress(OSError):
                sftp.remove(tmp)
            raise
        finally:
            with contextlib.suppress(OSError):  # left empty: harmless, never worth a failure
                sftp.rmdir(private)

    def _private_dir(self, parent: str) -> str:
        """A new folder in ``parent`` with mode 0700 (mkdir fails on an existing name, so it
        is ours and empty); chmod too, for servers that ignore mkdir's mode."""
        folder = f"{parent}/{COPY_TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        assert self._sftp is not None  # write_file opened it
        self._sftp.mkdir(folder, 0o700)
        self._sftp.chmod(folder, 0o700)
        return folder

    @staticmethod
    def _send(f: Any, data: bytes | None, source: Path | None) -> Sent:
        """Write ``data`` or the local file ``source`` (read once) to the open SFTP file."""
        if source is None:
            f.write(data or b"")
            return Sent.of(data or b"")
        read = HashedRead(source)
        for chunk in read.chunks():
            f.write(chunk)
        return read.sent()

    def _mkdirs(self, folder: str) -> None:
        sftp = self._sftp
        assert sftp is not None  # write_file opened it
        prefix = "/" if folder.startswith("/") else ""
        cur = ""
        for part in folder.strip("/").split("/"):
            cur = f"{cur}/{part}" if cur else f"{prefix}{part}"
            try:
                sftp.stat(cur)
            except OSError:
                try:
                    sftp.mkdir(cur)
                except OSError:
                    sftp.stat(cur)  # raced with another mkdir: fine if it exists now

    def close(self) -> None:
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None
        if self._client is not None:
            self._client.close()
            self._client = None
        for c in self._hops:
            c.close()
        self._hops = []
