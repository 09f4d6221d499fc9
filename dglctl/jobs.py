"""Job manifests: what a job started, where, and in which state it is (JSON under ~/.dglctl).

A manifest is written as soon as each process starts, so a launcher that dies still leaves a
record that ``dglctl status`` and ``dglctl stop`` can act on. It holds the job token, so it is
readable by its owner only.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import DglctlError


def dglctl_home() -> Path:
    """Where job manifests live: $DGLCTL_HOME or ~/.dglctl."""
    return Path(os.environ.get("DGLCTL_HOME", os.path.expanduser("~/.dglctl")))


def new_job_id() -> str:
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
    state: str = "starting"  # starting, running, succeeded, failed, stopping, stopped
    created: float = field(default_factory=time.time)
    ended: float | None = None
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return dglctl_home() / "jobs" / f"{self.job_id}.json"

    def save(self) -> None:
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(self), f, indent=1)
        os.replace(tmp, path)

    def procs_on(self, host: int) -> dict[str, int]:
        return {p.name: p.pgid for p in self.procs if p.host == host}

    @classmethod
    def load(cls, job_id: str) -> JobManifest:
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
