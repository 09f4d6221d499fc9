"""Stopping a recorded job on every host: TERM each process group, KILL after a grace period,
remove the job's shared memory; only processes recorded in the manifest are touched, and of
those only the ones their host's agent finds still running as the job's (pids are recycled:
a group id recorded long ago may be someone else's now)."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..agent.protocol import GRACE_SECONDS
from ..display import Display
from ..hosts.agent_client import AgentClient, StopReport
from ..hosts.group import fan_out
from .manifest import JobManifest, JobState


@dataclass(frozen=True)
class StopOutcome:
    """What every host's agent did, and what survived even SIGKILL."""

    hosts: list[StopReport]
    survivors: list[str]

    @property
    def signalled(self) -> int:
        """How many process groups got SIGTERM or SIGKILL."""
        return sum(len(h.terminated) + len(h.killed) for h in self.hosts)

    @property
    def denied(self) -> list[str]:
        """The processes whose group the agent was not allowed to signal (another user's)."""
        return [n for h in self.hosts for n in h.denied]


def stop_job(manifest: JobManifest, clients: Sequence[AgentClient],
             display: Display | None = None, grace: float = GRACE_SECONDS,
             skip: Collection[int] = ()) -> StopOutcome:
    """Ask each host's agent to stop the job's process groups; record the outcome. The
    hosts of ``skip`` (lost: their agents do not answer) are not asked.

    The manifest is updated under its lock (a launcher supervising the job may write it at
    the same time): the stop is recorded on top of what the launcher recorded, not over it.
    """
    # Before any signal: a launcher supervising the job reads this when its processes end,
    # and reports a stop rather than a failure.
    manifest.update(_stopping)
    procs = manifest.procs_per_host()

    def stop(i: int, c: AgentClient) -> StopReport:
        if i in skip:
            return StopReport([], [], 0, [])
        return c.stop(manifest.job_id, procs[i], grace=grace, shm_dir=manifest.shm_dir)

    # A launch that failed before starting anything (preflight, copy) left nothing to stop:
    # its hosts are not asked (one may be the unreachable host it failed on).
    reports = (fan_out(clients, stop) if manifest.procs
               else [StopReport([], [], 0, []) for _ in clients])
    outcome = StopOutcome(reports, [n for r in reports for n in r.survivors])
    manifest.update(_stopped)
    if display is not None and outcome.denied:
        display.error(f"job {manifest.job_id}: not allowed to signal {outcome.denied}: their "
                      "process groups belong to another user")
    if display is not None and outcome.survivors:
        display.error(f"job {manifest.job_id}: processes survived SIGKILL: {outcome.survivors}")
    return outcome


def _stopping(m: JobManifest) -> None:
    if m.state in (JobState.STARTING, JobState.RUNNING):
        m.state = JobState.STOPPING


def _stopped(m: JobManifest) -> None:
    if m.state == JobState.STOPPING:
        m.state = JobState.STOPPED
    m.ended = m.ended or time.time()
