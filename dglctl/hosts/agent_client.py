"""A typed client of the host agent (``python -m dglctl.agent``): one method per agent command,
each returning dataclasses instead of the agent's JSON; and the probe and log reads of every
host at once, which ``launch``, ``status``, ``stop`` and ``logs`` share."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent_args import SSH_ARRIVAL
from ..config import FROM_HOST, Host
from .agent_session import ENABLED as SESSIONS
from .agent_session import AgentSession, SessionBroken
from .group import fan_out
from .transport import Transport

# Bytes of one log per agent call: the answer is one JSON document (over SSH, one channel's
# output); a longer log takes more calls, each starting where the last one ended.
LOG_READ_BYTES = 1 << 20


class ProcStatus(enum.StrEnum):
    """What the agent found of one process (the values are the agent's JSON strings)."""

    RUNNING = "running"
    EXITED = "exited"  # ended by itself; ``code`` says how
    KILLED = "killed"  # ended by a signal; ``signal`` says which
    MISSING = "missing"  # no exit status and no process: killed together with its wrapper


@dataclass(frozen=True)
class ProcState:
    """One process of a job as its host's agent sees it."""

    name: str
    pgid: int
    state: ProcStatus
    code: int | None = None
    signal: int | None = None
    ended: float | None = None
    pid: int | None = None
    cpu_seconds: float | None = None
    rss_bytes: int | None = None
    uptime: float | None = None
    stragglers: bool = False  # the process ended but others of its group still run
    # Seconds since the job's lease was renewed on its host (running processes of a
    # supervised job; None: no lease, a detached job), and, for a process its wrapper ended
    # because the lease went silent, how long it had been.
    lease_age: float | None = None
    lease_expired: float | None = None
    # The uncaught exception the process recorded (its TORCHELASTIC_ERROR_FILE): message
    # ("Type: text"), file and line of the innermost frame.
    error: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        """Ended badly: missing, killed, or exited non-zero (a server that exits 0 has been
        told to, or saw every client go: not a failure)."""
        return self.state is ProcStatus.MISSING or (
            self.state in (ProcStatus.EXITED, ProcStatus.KILLED) and self.code != 0)

    @property
    def succeeded(self) -> bool:
        """Exited by itself with code 0."""
        return self.state is ProcStatus.EXITED and self.code == 0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcState:
        """Parse one entry of the agent's ``probe`` answer."""
        return cls(name=data["name"], pgid=int(data["pgid"]), state=ProcStatus(data["state"]),
                   code=data.get("code"), signal=data.get("signal"), ended=data.get("ended"),
                   pid=data.get("pid"), cpu_seconds=data.get("cpu_seconds"),
                   rss_bytes=data.get("rss_bytes"), uptime=data.get("uptime"),
                   stragglers=bool(data.get("stragglers", False)),
                   lease_age=data.get("lease_age"), lease_expired=data.get("lease_expired"),
                   error=data.get("error"))


@dataclass(frozen=True)
class PreflightReport:
    """What a host's agent reports before a launch."""

    python: str
    executable: str
    dglctl: str
    ports_busy: frozenset[int]
    disk_free: int
    workspace: str  # expanded (no "~")
    workspace_writable: bool
    hostname: str
    cpus: int | None = None  # CPUs this process may run on (cgroup/affinity), for OMP defaults
    interfaces: Mapping[str, str] = field(default_factory=dict)  # IPv4 address -> interface
    bind_error: str | None = None  # why the data address cannot be listened on (None: it can)
    bind_address: str | None = None  # the address probed (the SSH arrival address, if asked)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PreflightReport:
        """Parse the agent's ``preflight`` answer."""
        return cls(python=data["python"], executable=data["executable"], dglctl=data["dglctl"],
                   ports_busy=frozenset(int(p) for p in data["ports_busy"]),
                   disk_free=int(data["disk_free"]), workspace=data["workspace"],
                   workspace_writable=bool(data["workspace_writable"]),
                   hostname=data["hostname"], cpus=data.get("cpus"),
                   interfaces=dict(data.get("interfaces") or {}),
                   bind_error=data.get("bind_error"), bind_address=data.get("bind_address"))


@dataclass(frozen=True)
class FileStat:
    """Size (and, unless asked for sizes only, xxh3-128) of a file on a host."""

    size: int
    xxh3_128: str | None = None


@dataclass(frozen=True)
class Started:
    """A process the agent started: its process group and log file on the host."""

    pgid: int
    log: str


@dataclass(frozen=True)
class LogChunk:
    """New text of one log (never a cut character), the byte offset after it, and (from
    agents that say) the log's size then, where the text began (a read that started at the
    last lines or at a time starts later than asked) and, for a read since a time, when the
    log was known to end at ``start`` (None: exactly then; 0.0: unknown)."""

    offset: int
    text: str
    size: int | None = None
    start: int | None = None
    mark: float | None = None

    @property
    def more(self) -> bool:
        """Whether the log had more bytes than this read returned."""
        return self.size is not None and self.offset < self.size

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LogChunk:
        """Parse one entry of the agent's ``logs`` answer."""
        return cls(int(data["offset"]), data["text"], data.get("size"), data.get("start"),
                   data.get("mark"))


@dataclass(frozen=True)
class LogStart:
    """Where a first read of a log begins: at its last ``tail`` lines, at the lines written
    since ``since`` (a Unix time) or ``since_ago`` seconds ago by the host's clock; the
    latest of those given (none: its beginning)."""

    tail: int | None = None
    since: float | None = None
    since_ago: float | None = None

    def args(self) -> list[str]:
        """The agent's options for this start."""
        out: list[str] = []
        for opt, value in (("--tail", self.tail), ("--since", self.since),
                           ("--since-ago", self.since_ago)):
            if value is not None:
                out += [opt, str(value)]
        return out


@dataclass(frozen=True)
class StopReport:
    """What a host's agent did to stop a job's processes there."""

    terminated: list[str]
    killed: list[str]
    shm_removed: int
    survivors: list[str]
    states: dict[str, ProcState] = field(default_factory=dict)
    # Groups the agent may not signal (another user's: EPERM), and the ones it left alone
    # with the reason: finished, not running, or their id now names another process.
    denied: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


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
        if self.session is None and SESSIONS:
            self.session = AgentSession(self.transport)

    def close_session(self) -> None:
        """End the host's agent session, if any."""
        if self.session is not None:
            self.session.close()
            self.session = None

    def _job(self, job: str) -> list[str]:
        return ["--workspace", self.transport.workspace, "--job", job]

    def preflight(self, bind: str, ports: Iterable[int]) -> PreflightReport:
        """Versions, busy ``ports`` on the ``bind`` address (FROM_HOST: the address the
        host's SSH connection arrived at), free disk, writable workspace."""
        return PreflightReport.from_json(self._call(
            "preflight", "--workspace", self.transport.workspace,
            "--bind", bind if bind != FROM_HOST else SSH_ARRIVAL,
            "--ports", ",".join(map(str, ports))))

    def checksums(self, root: str, files: Sequence[str], *, sizes_only: bool = False,
                  timeout: float = 600.0) -> dict[str, FileStat | None]:
        """Size and checksum of each of ``files`` below ``root`` on the host (None: missing)."""
        args = ["checksums", "--root", root, "--files", json.dumps(list(files))]
        raw = self._call(*args, *(["--sizes-only"] if sizes_only else []), timeout=timeout)
        return {rel: None if v is None else FileStat(int(v["size"]), v.get("xxh3_128"))
                for rel, v in raw.items()}

    def prune(self, root: str, keep: Sequence[str]) -> list[str]:
        """Remove the files below ``root`` on the host that ``keep`` does not list."""
        return self._call("prune", "--root", root, "--keep", json.dumps(list(keep)))["removed"]

    def start(self, job: str, name: str, cwd: str, argv: Sequence[str], *,
              lease: float | None = None, grace: float = 10.0) -> Started:
        """Start ``argv`` detached under the agent's wrapper (its env file must be in place).
        With ``lease`` (seconds), the wrapper ends it (TERM, KILL after ``grace``) once the
        job's lease on the host has not been renewed for that long."""
        extra = [] if lease is None else ["--lease", str(lease), "--grace", str(grace)]
        r = self._call("start", *self._job(job), "--name", name, "--cwd", cwd,
                       "--argv", json.dumps(list(argv)), *extra)
        return Started(int(r["pgid"]), r["log"])

    def listening(self, address: str, ports: Sequence[int]) -> set[int]:
        """Which of ``ports`` accept a connection on ``address``, tried on the host itself."""
        raw = self._call("listening", "--address", address, "--ports", ",".join(map(str, ports)))
        return {int(p) for p in raw["listening"]}

    def renew(self, job: str, timeout: float = 60.0) -> None:
        """Renew the job's lease on the host."""
        self._call("renew", *self._job(job), timeout=timeout)

    def probe(self, job: str, procs: Mapping[str, int]) -> dict[str, ProcState]:
        """The state of each of ``procs`` (name -> process group)."""
        raw = self._call("probe", *self._job(job), "--procs", json.dumps(dict(procs)))
        return {name: ProcState.from_json(s) for name, s in raw.items()}

    def stop(self, job: str, procs: Mapping[str, int], *, grace: float,
             shm_dir: str | None = None) -> StopReport:
        """TERM, then KILL after ``grace`` seconds, each of ``procs`` that still runs as the
        job's (its group leader is the process the agent started); remove the job's shared
        memory (in ``shm_dir``, default the agent's /dev/shm) and sampler folders."""
        args = ["stop", *self._job(job), "--procs", json.dumps(dict(procs)),
                "--grace", str(grace)]
        if shm_dir:
            args += ["--shm-dir", shm_dir]
        r = self._call(*args, timeout=grace + 60)
        return StopReport(terminated=list(r["terminated"]), killed=list(r["killed"]),
                          shm_removed=int(r["shm_removed"]), survivors=list(r["survivors"]),
                          states={n: ProcState.from_json(s)
                                  for n, s in r.get("states", {}).items()},
                          denied=list(r.get("denied", [])), skipped=dict(r.get("skipped", {})))

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
