"""Stopping a recorded job on every host: TERM each process group, KILL after a grace period,
remove the job's shared memory; only processes recorded in the manifest are touched."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..display import Display
from ..hosts.agent_client import AgentClient, StopReport
from ..hosts.group import fan_out
from .manifest import JobManifest, JobState

GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class StopOutcome:
    """What every host's agent did, and what survived even SIGKILL."""

    hosts: list[StopReport]
    survivors: list[str]

    @property
    def signalled(self) -> int:
        """How many process groups got SIGTERM or SIGKILL."""
        return sum(len(h.terminated) + len(h.killed) for h in self.hosts)


def stop_job(manifest: JobManifest, clients: Sequence[AgentClient],
             display: Display | None = None, grace: float = GRACE_SECONDS) -> StopOutcome:
    """Ask each host's agent to stop the job's process groups; record the outcome."""
    if manifest.state in (JobState.STARTING, JobState.RUNNING):
        # Before any signal: a launcher supervising the job reads this when its processes
        # end, and reports a stop rather than a failure.
        manifest.state = JobState.STOPPING
        manifest.save()
    procs = manifest.procs_per_host()

    def stop(i: int, c: AgentClient) -> StopReport:
        return c.stop(manifest.job_id, procs[i], grace=grace, shm_dir=manifest.shm_dir)

    reports = fan_out(clients, stop)
    survivors = [n for r in reports for n in r.survivors]
    if manifest.state == JobState.STOPPING:
        manifest.state = JobState.STOPPED
    manifest.ended = manifest.ended or time.time()
    manifest.save()
    if survivors and display is not None:
        display.error(f"job {manifest.job_id}: processes survived SIGKILL: {survivors}")
    return StopOutcome(reports, survivors)
