"""Job manifests: what a job started, where, and in which state it is (JSON under ~/.dglctl).

A manifest is written as soon as each process starts, so a launcher that dies still leaves a
record that ``dglctl status`` and ``dglctl stop`` can act on. It holds the job token, so it is
readable by its owner only (0600, in a 0700 folder). States are enums whose values are the
strings on disk, so manifests written before the enums load unchanged.

The launcher and ``dglctl stop`` (from another shell) write the same manifest: every write
replaces the file atomically, under a lock on a file beside it, and records what this copy
changed on top of what the others recorded meanwhile (see ``JobManifest.save``).
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from runtime.env import DEFAULT_TIMEOUT

from ..config import ClusterConfig, Host, cluster_from_record, load_cluster_source
from ..errors import ConfigError, DglctlError
from ..hosts.agent_client import ProcState, ProcStatus
from ..hosts.transport import Transport
from ..hosts.transports import make_transport

__all__ = ["HostRecord", "JobManifest", "JobState", "ProcRecord", "ProcState", "ProcStatus",
           "dglctl_home", "list_jobs", "new_job_id", "transports_for"]


class JobState(enum.StrEnum):
    """Where a job is in its life (the manifest's ``state``)."""

    STARTING = "starting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPING = "stopping"
    STOPPED = "stopped"

    @property
    def active(self) -> bool:
        """Processes may run: starting, running or stopping."""
        return self in (JobState.STARTING, JobState.RUNNING, JobState.STOPPING)

    @property
    def ended(self) -> bool:
        """Nothing of the job should run any more."""
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED)


def dglctl_home() -> Path:
    """Where job manifests live: $DGLCTL_HOME or ~/.dglctl."""
    return Path(os.environ.get("DGLCTL_HOME", os.path.expanduser("~/.dglctl")))


def new_job_id() -> str:
    """A new job id: the date (MMDD) and 6 random hex digits, e.g. ``0612-7f3a9c``."""
    return time.strftime("%m%d") + "-" + secrets.token_hex(3)


@dataclass
class ProcRecord:
    """One started process: where it runs and how to reach its process group."""

    name: str
    host: int
    role: str
    rank: int
    pgid: int
    log: str
    port: int | None = None
    attempt: int = 0  # the job's attempt that started it (trainers restart; 0: the first)
    # Its host was lost (a spare took the host's place, under the same index): it is no
    # longer reached, stopped or probed; the job's ``lost_hosts`` says where it ran.
    lost: bool = False
    device: str = "cpu"  # where it trains (a trainer's DGLCTL_DEVICE: cpu or cuda:N)


@dataclass
class HostRecord:
    """One host of a job, as the launcher found it (the workspace is expanded)."""

    name: str
    address: str
    data_address: str
    workspace: str


@dataclass
class JobManifest:
    """Everything ``status``, ``stop`` and ``logs`` need to find a job's processes."""

    job_id: str
    token: str
    cluster: dict[str, Any]
    script: str
    args: list[str]
    part_config: str
    ip_config: str
    hosts: list[HostRecord]
    procs: list[ProcRecord] = field(default_factory=list)
    state: JobState = JobState.STARTING
    created: float = field(default_factory=time.time)
    ended: float | None = None
    result: dict[str, Any] = field(default_factory=dict)
    shm_dir: str | None = None  # the hosts' shared-memory folder (None: the agent's default)
    encrypt: bool = False  # the servers want encrypted connections (status must know)
    # None: a --detach'ed job, which runs without its launcher; else how long the job's
    # processes outlive their launcher's last renewal of the lease on their host.
    lease_seconds: float | None = None
    timeout: float = DEFAULT_TIMEOUT  # the cluster's timeout: how long status waits for a server
    launcher: dict[str, Any] = field(default_factory=dict)  # pid and host of the launcher
    # The resolved cluster (ClusterConfig.record()): what reaches the hosts from any folder,
    # whatever became of the YAML since. None in manifests written before it was kept.
    cluster_record: dict[str, Any] | None = None
    # The attempt under way (0: the first; each restart of the trainers adds one) and each
    # ended attempt's record: number, start and end times, cause, root cause process, how it
    # ended, its exception and the point it failed at (what 'status' shows).
    attempt: int = 0
    attempts: list[dict[str, Any]] = field(default_factory=list)
    # Hosts that were lost and whose place (index, part, processes) a spare took: each as
    # {"index", "host" (its HostRecord), "spare" (the name of the one that took it),
    # "attempt" (the first attempt on the spare), "when", "why"}.
    lost_hosts: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # The record as this copy last read or wrote it: what tells its own changes apart.
        self._base: dict[str, Any] | None = None

    @property
    def path(self) -> Path:
        """The manifest's file."""
        return dglctl_home() / "jobs" / f"{self.job_id}.json"

    def save(self) -> None:
        """Record this copy's changes since it was loaded (or last saved) on top of the
        manifest as it is now: atomically, under the job's lock, readable by its owner only.

        A field this copy did not change keeps what another writer recorded meanwhile;
        processes are only ever added (one recorded by anyone stays); and a recorded stop is
        never undone by a stale "starting" or "running". This copy then holds the result.
        """
        self.update(lambda m: None)

    def update(self, change: Callable[[JobManifest], None]) -> None:
        """A read-modify-write that loses no one's update: under the job's lock, merge this
        copy into the manifest as recorded now (as ``save``), apply ``change``, record it."""
        with self._locked():
            self._merge(_read_record(self.path))
            change(self)
            _write_private(self.path, json.dumps(asdict(self), indent=1))
            self._base = asdict(self)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the exclusive lock of this job's manifest (``JOB.json.lock`` beside it)."""
        lock = self.path.with_name(self.path.name + ".lock")
        fd = _open_private(_private_folder(lock.parent) / lock.name, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when the descriptor closes
            yield
        finally:
            os.close(fd)

    def _merge(self, disk: dict[str, Any] | None) -> None:
        """Take from ``disk`` (the manifest as recorded now) every field this copy has not
        changed since ``_base``; keep the processes recorded there; keep a recorded stop."""
        if disk is None or self._base is None:
            return  # a new manifest: this copy is all there is
        ours, now = asdict(self), JobManifest._from_record(disk)
        for f in fields(self):
            if ours[f.name] == self._base[f.name]:
                setattr(self, f.name, getattr(now, f.name))
        names = {p.name for p in self.procs}
        self.procs = self.procs + [p for p in now.procs if p.name not in names]
        if now.state in (JobState.STOPPING, JobState.STOPPED) and self.state in (
                JobState.STARTING, JobState.RUNNING):
            self.state = now.state  # 'dglctl stop' ran meanwhile: the launcher must see it

    def live_procs(self) -> list[ProcRecord]:
        """The processes of the attempt under way: of each (role, host, rank), the one started
        last (a restarted trainer replaces its earlier attempts' process), unless its host
        was lost."""
        newest: dict[tuple[str, int, int], ProcRecord] = {}
        for p in self.procs:
            newest[(p.role, p.host, p.rank)] = p
        return [p for p in self.procs if newest[(p.role, p.host, p.rank)] is p and not p.lost]

    def procs_on(self, host: int, live: bool = False) -> dict[str, int]:
        """Name -> process group of the job's processes on host ``host`` (with ``live``, only
        those of the attempt under way); never those of a lost host (see ``lost``)."""
        procs = self.live_procs() if live else self.procs
        return {p.name: p.pgid for p in procs if p.host == host and not p.lost}

    def procs_per_host(self, live: bool = False) -> list[dict[str, int]]:
        """``procs_on`` of every host, in host order."""
        return [self.procs_on(i, live) for i in range(len(self.hosts))]

    @classmethod
    def load(cls, job_id: str) -> JobManifest:
        """Read the manifest of ``job_id``; a missing one is an error that lists known jobs."""
        path = dglctl_home() / "jobs" / f"{job_id}.json"
        data = _read_record(path)  # no lock needed: every write replaces the whole file
        if data is None:
            known = [p.stem for p in sorted((dglctl_home() / "jobs").glob("*.json"))]
            raise DglctlError(f"no job {job_id!r} (looked in {path.parent})",
                              hint=f"known jobs: {', '.join(known[-10:]) or 'none'}; "
                                   "'dglctl status' lists them")
        m = cls._from_record(data)
        m._base = asdict(m)
        return m

    @classmethod
    def _from_record(cls, data: dict[str, Any]) -> JobManifest:
        """A manifest from its JSON record."""
        data = dict(data)
        data["hosts"] = [HostRecord(**h) for h in data["hosts"]]
        data["procs"] = [ProcRecord(**p) for p in data["procs"]]
        data["state"] = JobState(data.get("state", JobState.STARTING))
        return cls(**data)


def _read_record(path: Path) -> dict[str, Any] | None:
    """The JSON record in ``path``; None when there is none."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def _private_folder(folder: Path) -> Path:
    """``folder``, created if missing, entered by its owner only (0700, whatever the umask)."""
    folder.mkdir(parents=True, exist_ok=True)
    if (folder.stat().st_mode & 0o777) != 0o700:
        os.chmod(folder, 0o700)  # also one made before, e.g. by the launcher's ip_config
    return folder


def _open_private(path: Path, flags: int) -> int:
    """Open ``path``, created 0600 if missing, and make sure it is 0600 (the umask may take
    bits away, and a file made before may have more)."""
    fd = os.open(path, flags | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically and durably: a temp file in the same folder
    (0600 before a byte is written), fsync, rename, fsync of the folder."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)  # a leftover of a dead writer that had this pid
    fd = _open_private(tmp, os.O_WRONLY | os.O_EXCL)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a crash
    finally:
        os.close(dir_fd)


def list_jobs() -> list[JobManifest]:
    """Every recorded job, oldest first."""
    folder = dglctl_home() / "jobs"
    jobs = []
    for p in sorted(folder.glob("*.json")):
        try:
            jobs.append(JobManifest.load(p.stem))
        except (DglctlError, ValueError, TypeError, KeyError):
            continue
    return sorted(jobs, key=lambda j: j.created)


def transports_for(manifest: JobManifest, cluster: ClusterConfig | None = None,
                   factory: Callable[[Host, ClusterConfig], Transport] | None = None
                   ) -> list[Transport]:
    """Transports to a recorded job's hosts (from the cluster its manifest recorded, or in
    older manifests its cluster file or ip_config, unless ``cluster`` is given), each
    pointed at the workspace the launch used. Makes no connection."""
    if cluster is None:
        cluster = (cluster_from_record(manifest.cluster_record) if manifest.cluster_record
                   else load_cluster_source(manifest.cluster))
    factory = factory or make_transport
    by_name = {h.name: h for h in (*cluster.hosts, *cluster.spares)}  # a spare took a place
    out = []
    for rec in manifest.hosts:
        host = by_name.get(rec.name)
        if host is None:
            raise ConfigError(f"host {rec.name} of job {manifest.job_id} is no longer in "
                              f"{cluster.path}")
        t = factory(host, cluster)
        t.workspace = rec.workspace
        out.append(t)
    return out
