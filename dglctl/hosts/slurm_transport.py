"""The Slurm transport: a node of the allocation reached through job steps, no SSH.

Every command is a one-node step of the job (``srun --jobid J --overlap --whole -w NODE``):
``--overlap`` so it runs beside the job's other steps, ``--whole`` so the processes it starts
get every CPU, GPU and byte of memory the job has on the node (a one-task step would get one
CPU, and its trainers with it). Slurm ends whatever a step started when the step ends
(proctrack), so the job's processes are started from the agent session, one long step per
node for the launch's life (``processes_need_session``): when the launcher goes, or the
allocation does (scancel, time limit), so do they.

Files: where the workspace is one file system that this machine and the node both see (the
shared home or scratch of most clusters), they are written here, once, and the node reads
them (detected with a marker file, per node); else they go through a step's stdin.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
from pathlib import Path

from ..config import ClusterConfig, Host
from ..errors import AllocationEnded, RemoteCommandFailed
from .sent import HashedRead, Sent
from .slurm_alloc import job_end
from .transport import Stream, Transport, popen_stream, run_here, write_local

# srun's words (lower case) for a job that is no longer there to run steps in.
ENDED = ("invalid job id", "has expired", "already completed", "job/step already",
         "has been cancelled", "due to time limit", "cancelled", "has been revoked")

# Writes a file atomically from stdin on the node: a temporary name beside it, made with
# the mode before the first byte, then renamed; "~/..." paths start in $HOME.
_RECEIVE = ('set -e; case "$1" in "~/"*) cd "$HOME"; set -- "${1#\\~/}" "$2";; esac; '
            'd=$(dirname "$1"); mkdir -p "$d"; t="$d/.$(basename "$1").tmp$$"; '
            'trap \'rm -f "$t"\' EXIT; rm -f "$t"; (umask 077; cat > "$t"); chmod "$2" "$t"; '
            'mv -f "$t" "$1"; trap - EXIT')


class SlurmTransport(Transport):
    """One node of the cluster's Slurm job (``ClusterConfig.slurm_job``), by job steps."""

    processes_need_session = True

    def __init__(self, host: Host, cluster: ClusterConfig) -> None:
        super().__init__(host, cluster)
        if not cluster.slurm_job:
            raise RemoteCommandFailed(f"host {host.name}: the cluster names no Slurm job")
        self.job = cluster.slurm_job
        self._shared: bool | None = None

    def srun(self) -> list[str]:
        """The start of every command line: one task on this node, in the job."""
        return ["srun", f"--jobid={self.job}", "--overlap", "--whole", "--nodes=1",
                "--ntasks=1", f"--nodelist={self.host.address}", "--cpu-bind=none",
                "--quiet", "--unbuffered", "--job-name=dglctl"]

    def python(self) -> str:
        return self.host.python

    def run(self, argv: list[str], timeout: float) -> tuple[int, str, str]:
        code, out, err = run_here([*self.srun(), *argv], timeout, self.host.name,
                                  new_session=True)
        if code != 0 and any(w in err.lower() for w in ENDED):
            raise AllocationEnded(
                f"Slurm job {self.job} {job_end(self.job)}: Slurm ended its processes on "
                "every node",
                hint=f"'scontrol show job {self.job}' (or sacct -j {self.job}) says more; "
                     "get a new allocation to run again")
        return code, out, err

    def open_stream(self, argv: list[str]) -> Stream:
        # Its own session: a Ctrl-C in the launcher's terminal is the launcher's to handle
        # (it stops the job through this stream); srun would end the step on a second one.
        return popen_stream([*self.srun(), *argv], new_session=True)

    def shares_workspace(self) -> bool:
        """Whether this machine and the node see one file system at the workspace: a marker
        written here is read back by the node's agent (asked once, then remembered)."""
        if self._shared is None:
            local = Path(os.path.expanduser(self.workspace))
            token = secrets.token_hex(16).encode()
            name = f".dglctl-shared-{os.getpid()}-{secrets.token_hex(4)}"
            try:
                write_local(str(local / name), token, None, 0o600)
            except OSError:
                self._shared = False  # not writable here: not ours to write from here
                return False
            try:
                got = self.agent("checksums", "--root", self.workspace, "--files",
                                 json.dumps([name]), timeout=60)
                found = got.get(name)
                self._shared = bool(found) and found.get("xxh3_128") == Sent.of(token).xxh3_128
            finally:
                with contextlib.suppress(OSError):
                    (local / name).unlink()
        return self._shared

    def write_file(self, path: str, data: bytes | None, source: Path | None, mode: int) -> Sent:
        if self.shares_workspace():
            return write_local(os.path.expanduser(path), data, source, mode)
        argv = [*self.srun(), "sh", "-c", _RECEIVE, "sh", path, format(mode & 0o7777, "o")]
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
        assert p.stdin is not None and p.stderr is not None  # both are PIPEs
        try:
            if source is not None:
                read = HashedRead(source)
                for chunk in read.chunks():
                    p.stdin.write(chunk)
                sent = read.sent()
            else:
                p.stdin.write(data or b"")
                sent = Sent.of(data or b"")
            p.stdin.close()
            err = p.stderr.read().decode("utf-8", "replace")
            code = p.wait()
        except BaseException:
            p.kill()
            p.wait()
            raise
        if code != 0:
            raise RemoteCommandFailed(f"host {self.host.name}: writing {path} through srun "
                                      f"exited with {code}: {err.strip()[-300:]}")
        return sent
