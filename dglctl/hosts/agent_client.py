"""A typed client of the host agent (``python -m dglctl.agent``): one method per agent command,
each returning the dataclasses of the agent's protocol (``dglctl/agent/protocol.py``, which
the agent builds its replies from) instead of its JSON; and the probe and log reads of every
host at once, which ``launch``, ``status``, ``stop`` and ``logs`` share."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..agent.protocol import (
    GRACE_SECONDS,
    SSH_ARRIVAL,
    FileStat,
    LogChunk,
    LogStart,
    PreflightReport,
    ProcState,
    ProcStatus,
    Started,
    StopReport,
)
from ..config import FROM_HOST, Host
from ..errors import RemoteCommandFailed
from .agent_session import ENABLED as SESSIONS
from .agent_session import AgentSession, SessionBroken
from .group import fan_out
from .transport import Transport

__all__ = ["AgentClient", "FileStat", "LogChunk", "LogStart", "PreflightReport", "ProcState",
           "ProcStatus", "Started", "StopReport", "probe_hosts", "read_logs"]

# Bytes of one log per agent call: the answer is one JSON document (over SSH, one channel's
# output); a longer log takes more calls, each starting where the last one ended.
LOG_READ_BYTES = 1 << 20


class AgentClient:
    """The agent on one host, through its transport (connects on first use)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.session: AgentSession | None = None

    @property
    def host(self) -> Host:
        """The host this client talks to."""
        return self.transport.host

    def _call(self, *args: str, timeout: float = 60.0) -> Any:
        if self.session is not None:
            try:
                return self.session.call(args, timeout)
            except SessionBroken:
                self.session = None  # the call is made the old way, and so are the next
        return self.transport.agent(*args, timeout=timeout)

    def open_session(self) -> None:
        """Keep one agent process on the host for the calls that follow (see
        ``agent_session``); a no-op when sessions are off or one is open."""
        if self.session is None and (SESSIONS or self.transport.processes_need_session):
            self.session = AgentSession(self.transport)

    def close_session(self) -> None:
        """End the host's agent session, if any."""
        if self.session is not None:
            self.session.close()
            self.session = None

    def _job(self, job: str) -> list[str]:
        return ["--workspace", self.transport.workspace, "--job", job]

    def preflight(self, bind: str, ports: Iterable[int], gpus: bool = False,
                  mpi: bool = False, job: str | None = None) -> PreflightReport:
        """Versions, busy ``ports`` on the ``bind`` address (FROM_HOST: the address the
        host's SSH connection arrived at; ports other launches reserved count as busy,
        ``job``'s own do not), free disk, writable workspace; with ``gpus``, the host's GPUs
        too; with ``mpi``, whether mpi4py and the ParMETIS library load."""
        return PreflightReport.from_json(self._call(
            "preflight", "--workspace", self.transport.workspace,
            "--bind", bind if bind != FROM_HOST else SSH_ARRIVAL,
            "--ports", ",".join(map(str, ports)), *(["--gpus"] if gpus else []),
            *(["--mpi"] if mpi else []), *(["--job", job] if job else [])))

    def checksums(self, root: str, files: Sequence[str], *, sizes_only: bool = False,
                  timeout: float = 600.0) -> dict[str, FileStat | None]:
        """Size and checksum of each of ``files`` below ``root`` on the host (None: missing)."""
        args = ["checksums", "--root", root, "--files", json.dumps(list(files))]
        raw = self._call(*args, *(["--sizes-only"] if sizes_only else []), timeout=timeout)
        return {rel: None if v is None else FileStat.from_json(v) for rel, v in raw.items()}

    def prune(self, root: str, keep: Sequence[str], record: str) -> list[str]:
        """Remove the files below ``root`` on the host that the last launch shipped (listed in
        ``record``) and ``keep`` does not list, and record ``keep``; return those removed.
        Files no launch shipped (a job's outputs) stay."""
        return self._call("prune", "--root", root, "--keep", json.dumps(list(keep)),
                          "--record", record)["removed"]

    def start(self, job: str, name: str, cwd: str, argv: Sequence[str], *,
              lease: float | None = None, grace: float = GRACE_SECONDS) -> Started:
        """Start ``argv`` detached under the agent's wrapper (its env file must be in place).
        With ``lease`` (seconds), the wrapper ends it (TERM, KILL after ``grace``) once the
        job's lease on the host has not been renewed for that long."""
        extra = [] if lease is None else ["--lease", str(lease), "--grace", str(grace)]
        if self.transport.processes_need_session and self.session is None:
            # A command of its own would end, and the host would end what it started.
            raise RemoteCommandFailed(
                f"host {self.host.name}: its agent session has ended, and a process started "
                "outside it would end with the command that started it",
                hint="see the host's Slurm job steps ('squeue -s') and 'dglctl logs'")
        r = self._call("start", *self._job(job), "--name", name, "--cwd", cwd,
                       "--argv", json.dumps(list(argv)), *extra)
        return Started.from_json(r)

    def listening(self, address: str, ports: Sequence[int]) -> set[int]:
        """Which of ``ports`` accept a connection on ``address``, tried on the host itself."""
        raw = self._call("listening", "--address", address, "--ports", ",".join(map(str, ports)))
        return {int(p) for p in raw["listening"]}

    def reserve(self, job: str, ports: Sequence[int], lease_seconds: float) -> dict[int, str]:
        """Reserve ``ports`` on the host for ``job`` while its lease is renewed, all or none
        (``agent/ports.py``): ``{port: job}`` of the ports other jobs hold, {} when reserved."""
        raw = self._call("reserve", *self._job(job), "--ports", ",".join(map(str, ports)),
                         "--lease-seconds", str(lease_seconds))
        return {int(p): str(j) for p, j in raw["taken"].items()}

    def release(self, job: str) -> list[int]:
        """Remove ``job``'s port reservations on the host; return their ports."""
        return [int(p) for p in self._call("release", "--job", job)["released"]]

    def renew(self, job: str, timeout: float = 60.0) -> None:
        """Renew the job's lease on the host."""
        self._call("renew", *self._job(job), timeout=timeout)

    def probe(self, job: str, procs: Mapping[str, int]) -> dict[str, ProcState]:
        """The state of each of ``procs`` (name -> process group)."""
        raw = self._call("probe", *self._job(job), "--procs", json.dumps(dict(procs)))
        return {name: ProcState.from_json(s) for name, s in raw.items()}

    def stop(self, job: str, procs: Mapping[str, int], *, grace: float,
             shm_dir: str | None = None, keep_shm: bool = False,
             shm_machines: Sequence[int] | None = None) -> StopReport:
        """TERM, then KILL after ``grace`` seconds, each of ``procs`` that still runs as the
        job's (its group leader is the process the agent started); remove the job's shared
        memory (in ``shm_dir``, default the agent's /dev/shm; only of ``shm_machines`` when
        given; none with ``keep_shm``: the servers stay) and sampler folders."""
        args = ["stop", *self._job(job), "--procs", json.dumps(dict(procs)),
                "--grace", str(grace)]
        if shm_dir:
            args += ["--shm-dir", shm_dir]
        if keep_shm:
            args.append("--keep-shm")
        for machine in shm_machines or ():
            args += ["--shm-machine", str(machine)]
        return StopReport.from_json(self._call(*args, timeout=grace + 60))

    def logs(self, job: str, offsets: Mapping[str, int], *, start: LogStart | None = None,
             max_bytes: int = LOG_READ_BYTES) -> dict[str, LogChunk]:
        """New text of each named log since its byte offset (or later, from ``start``): at
        most ``max_bytes`` of each; a chunk's ``more`` says the log has more."""
        raw = self._call("logs", *self._job(job), "--offsets", json.dumps(dict(offsets)),
                         "--max", str(max_bytes), *(start.args() if start else []))
        return {name: LogChunk.from_json(c) for name, c in raw.items()}

    def tail(self, job: str, names: Sequence[str], lines: int = 20) -> dict[str, list[str]]:
        """The last ``lines`` lines of each named log."""
        return self._call("tail", *self._job(job), "--names", json.dumps(list(names)),
                          "--lines", str(lines))


def probe_hosts(clients: Sequence[AgentClient], job: str,
                procs_per_host: Sequence[Mapping[str, int]]) -> dict[str, ProcState]:
    """Probe every host at once (a host with no process is not asked); one dict by name."""
    def probe(i: int, c: AgentClient) -> dict[str, ProcState]:
        return c.probe(job, procs_per_host[i]) if procs_per_host[i] else {}

    states: dict[str, ProcState] = {}
    for r in fan_out(clients, probe):
        states.update(r)
    return states


def read_logs(clients: Sequence[AgentClient], job: str,
              offsets_per_host: Sequence[Mapping[str, int]], *,
              start: LogStart | None = None) -> dict[str, LogChunk]:
    """New text of the named logs on every host at once (from ``start`` on, when given: a
    first read); one dict by process name."""
    def fetch(i: int, c: AgentClient) -> dict[str, LogChunk]:
        if not offsets_per_host[i]:
            return {}
        return c.logs(job, offsets_per_host[i], start=start)

    chunks: dict[str, LogChunk] = {}
    for r in fan_out(clients, fetch):
        chunks.update(r)
    return chunks
