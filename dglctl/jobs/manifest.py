"""Job manifests: what a job started, where, and in which state it is (JSON under ~/.dglctl).

A manifest is written as soon as each process starts, so a launcher that dies still leaves a
record that ``dglctl status`` and ``dglctl stop`` can act on. It holds the job token, so it is
readable by its owner only. States are enums whose values are the strings on disk, so
manifests written before the enums load unchanged.
"""

from __future__ import annotations

import enum
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..config import ClusterConfig, Host, load_cluster_source
from ..errors import ConfigError, DglctlError
from ..hosts.agent_client import ProcState, ProcStatus
from ..hosts.transport import Transport, make_transport

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

    @property
    def path(self) -> Path:
        """The manifest's file."""
        return dglctl_home() / "jobs" / f"{self.job_id}.json"

    def save(self) -> None:
        """Write the manifest atomically, readable by its owner only (it holds the token)."""
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(self), f, indent=1)
        os.replace(tmp, path)

    def procs_on(self, host: int) -> dict[str, int]:
        """Name -> process group of the job's processes on host ``host``."""
        return {p.name: p.pgid for p in self.procs if p.host == host}

    def procs_per_host(self) -> list[dict[str, int]]:
        """``procs_on`` of every host, in host order."""
        return [self.procs_on(i) for i in range(len(self.hosts))]

    @classmethod
    def load(cls, job_id: str) -> JobManifest:
        """Read the manifest of ``job_id``; a missing one is an error that lists known jobs."""
        path = dglctl_home() / "jobs" / f"{job_id}.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            known = [p.stem for p in sorted((dglctl_home() / "jobs").glob("*.json"))]
            raise DglctlError(f"no job {job_id!r} (looked in {path.parent})",
                              hint=f"known jobs: {', '.join(known[-10:]) or 'none'}; "
                                   "'dglctl status' lists them") from None
        data["hosts"] = [HostRecord(**h) for h in data["hosts"]]
        data["procs"] = [ProcRecord(**p) for p in data["procs"]]
        data["state"] = JobState(data.get("state", JobState.STARTING))
        return cls(**data)


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
    """Transports to a recorded job's hosts (from its cluster file or ip_config, unless
    ``cluster`` is given), each pointed at the workspace the launch used. Makes no
    connection."""
    cluster = cluster or load_cluster_source(manifest.cluster)
    factory = factory or make_transport
    by_name = {h.name: h for h in cluster.hosts}
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
