"""The agent's protocol: what the launcher and each host's agent (``python -m dglctl.agent``)
say to each other, in one place both import, as ``runtime/rpc/messages.py`` is for the
servers. A request is one agent command line (argv words; over ``agent serve``, a JSON list of
them on one line); a reply is JSON, built by the agent from the dataclasses below
(``to_json``) and read back by ``hosts/agent_client.py`` into the same dataclasses
(``from_json``), so a field is defined once. Also the constants both sides rely on: the
names of the job's files on a host, the lease's timing, the marks of the log times.

Standard library only: the agent imports it on every host before anything else.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

AGENT_MODULE = "dglctl.agent"  # python -m AGENT_MODULE CMD ...
JOBS_DIR = "jobs"  # a host's job folders: WORKSPACE/jobs/JOB/
# preflight --bind: the address the host was reached at: its SSH connection's, or in a Slurm
# job step its node's NodeAddr as the node itself resolves it.
SSH_ARRIVAL = "@ssh"
# A copy in flight over SSH: its private folder beside the destination (hosts.transport),
# which prune leaves alone (on a shared workspace, another host's copy may be under way).
COPY_TEMP_PREFIX = ".dglctl-tmp"
# Commands ``agent serve`` does not answer: the wrapper is a process of its own, and a
# session does not start another.
NOT_SERVED = ("wrap", "serve")

# The job lease (agent/lease.py): a file the supervising launcher renews; each process's
# wrapper ends its process once the file has been silent for LEASE_TIMEOUTS job timeouts.
LEASE_NAME = "lease"
LEASE_TIMEOUTS = 3  # a lease lasts this many job timeouts: two renewals may be lost
RENEWALS_PER_TIMEOUT = 2

# Seconds between SIGTERM and SIGKILL when a job's processes are stopped (``dglctl stop
# --grace``, the agent's stop and its wrappers, the launcher's teardown).
GRACE_SECONDS = 10.0

# Log time marks (agent/logs.py): at most one per log per this many seconds.
MARK_EVERY = 1.0


def lease_seconds(timeout: float, lease: float = 0.0) -> float:
    """How long a job with this ``timeout`` lives without a renewal: ``lease`` seconds when
    the cluster sets one (> 0), else LEASE_TIMEOUTS job timeouts."""
    return lease if lease > 0 else LEASE_TIMEOUTS * timeout


def renew_interval(lease: float) -> float:
    """How often a supervising launcher renews a lease of ``lease`` seconds: as often, in
    proportion, as it renews a default lease (twice a job timeout), so that two renewals in a
    row may be lost."""
    return lease / (LEASE_TIMEOUTS * RENEWALS_PER_TIMEOUT)


class ProcStatus(enum.StrEnum):
    """What the agent found of one process (the values are the agent's JSON strings)."""

    RUNNING = "running"
    EXITED = "exited"  # ended by itself; ``code`` says how
    KILLED = "killed"  # ended by a signal; ``signal`` says which
    MISSING = "missing"  # no exit status and no process: killed together with its wrapper


@dataclass(frozen=True)
class ProcState:
    """One process of a job as its host's agent sees it (``probe``; ``stop``'s states)."""

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

    def to_json(self) -> dict[str, Any]:
        """The agent's JSON of this state."""
        return asdict(self)

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
    """What a host's agent reports before a launch (``preflight``)."""

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
    gpus: tuple[str, ...] | None = None  # ``nvidia-smi -L``'s GPU lines (None: not asked)
    gpu_error: str | None = None  # why the GPUs could not be listed (None: they could)
    mpi: str | None = None  # mpi4py's MPI library and the ParMETIS library (None: not asked)
    mpi_error: str | None = None  # why mpi4py does not load
    parmetis_error: str | None = None  # why the ParMETIS library does not load

    def to_json(self) -> dict[str, Any]:
        """The agent's JSON of this report."""
        return {**asdict(self), "ports_busy": sorted(self.ports_busy),
                "interfaces": dict(self.interfaces),
                "gpus": None if self.gpus is None else list(self.gpus)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PreflightReport:
        """Parse the agent's ``preflight`` answer."""
        return cls(python=data["python"], executable=data["executable"], dglctl=data["dglctl"],
                   ports_busy=frozenset(int(p) for p in data["ports_busy"]),
                   disk_free=int(data["disk_free"]), workspace=data["workspace"],
                   workspace_writable=bool(data["workspace_writable"]),
                   hostname=data["hostname"], cpus=data.get("cpus"),
                   interfaces=dict(data.get("interfaces") or {}),
                   bind_error=data.get("bind_error"), bind_address=data.get("bind_address"),
                   gpus=None if data.get("gpus") is None else tuple(data["gpus"]),
                   gpu_error=data.get("gpu_error"), mpi=data.get("mpi"),
                   mpi_error=data.get("mpi_error"),
                   parmetis_error=data.get("parmetis_error"))


@dataclass(frozen=True)
class FileStat:
    """Size (and, unless asked for sizes only, xxh3-128) of a file on a host (``checksums``:
    one per file asked, null when it is missing)."""

    size: int
    xxh3_128: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The agent's JSON of this file (no checksum key for sizes only)."""
        return {"size": self.size} if self.xxh3_128 is None else asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FileStat:
        """Parse one entry of the agent's ``checksums`` answer."""
        return cls(int(data["size"]), data.get("xxh3_128"))


@dataclass(frozen=True)
class Started:
    """A process the agent started (``start``): its process group and log file on the host,
    and who leads the group (start time, boot: what tells it from a later holder of its id)."""

    pgid: int
    log: str
    leader: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The agent's JSON of this start."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Started:
        """Parse the agent's ``start`` answer."""
        return cls(int(data["pgid"]), data["log"], data.get("leader"))


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

    def to_json(self) -> dict[str, Any]:
        """The agent's JSON of this chunk."""
        return asdict(self)

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
    """What a host's agent did to stop a job's processes there (``stop``)."""

    terminated: list[str]
    killed: list[str]
    shm_removed: int
    survivors: list[str]
    states: dict[str, ProcState] = field(default_factory=dict)
    # Groups the agent may not signal (another user's: EPERM), and the ones it left alone
    # with the reason: finished, not running, or their id now names another process.
    denied: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The agent's JSON of this report."""
        return {**asdict(self), "states": {n: s.to_json() for n, s in self.states.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StopReport:
        """Parse the agent's ``stop`` answer."""
        return cls(terminated=list(data["terminated"]), killed=list(data["killed"]),
                   shm_removed=int(data["shm_removed"]), survivors=list(data["survivors"]),
                   states={n: ProcState.from_json(s)
                           for n, s in data.get("states", {}).items()},
                   denied=list(data.get("denied", [])), skipped=dict(data.get("skipped", {})))
