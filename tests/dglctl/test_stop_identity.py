"""``dglctl stop`` and ``status`` of a recorded process group whose id now belongs to someone
else: pids are recycled, so a job that ended long ago must never signal (or report as running)
whoever holds its old group id now. Real processes, started through the host agent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dglctl.agent import __main__ as agent
from dglctl.config import load_cluster_config
from dglctl.hosts.agent_client import AgentClient, ProcStatus
from dglctl.hosts.transports import make_transport
from dglctl.jobs.manifest import HostRecord, JobManifest, JobState, ProcRecord, new_job_id
from testing.cli import run_cli as run
from testing.timeouts import TIMEOUT
from testing.wait import wait_until

pytestmark = pytest.mark.multiprocess
SLEEP = f"import time; time.sleep({30 * TIMEOUT})"


def start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (start time since boot), None without such a process."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class AgentJob:
    """A recorded job whose processes the host agent started on the local cluster's m0."""

    manifest: JobManifest
    client: AgentClient
    cwd: Path
    started: list[tuple[int, int | None]] = field(default_factory=list)  # (pgid, start ticks)

    @property
    def folder(self) -> Path:
        """The job's folder on the host (logs, exit status, the agent's records)."""
        return Path(self.manifest.hosts[0].workspace) / "jobs" / self.manifest.job_id

    def start(self, name: str, code: str) -> ProcRecord:
        """Run ``python -c code`` as process ``name`` of the job, recorded in its manifest."""
        started = self.client.start(self.manifest.job_id, name, str(self.cwd),
                                    [sys.executable, "-c", code])
        self.started.append((started.pgid, start_ticks(started.pgid)))
        rec = ProcRecord(name, 0, "trainer", len(self.manifest.procs), started.pgid, started.log)
        self.manifest.procs.append(rec)
        self.manifest.state = JobState.RUNNING
        self.manifest.save()
        return rec

    def state(self, rec: ProcRecord) -> ProcStatus:
        """What the agent reports of ``rec`` now."""
        return self.client.probe(self.manifest.job_id, {rec.name: rec.pgid})[rec.name].state

    def wait(self, rec: ProcRecord, running: bool) -> None:
        """Until ``rec`` runs (``running``) or no longer runs."""
        wait_until(lambda: (self.state(rec) is ProcStatus.RUNNING) == running,
                   f"{rec.name} {'running' if running else 'no longer running'}",
                   interval=TIMEOUT / 100)

    def recycle(self, rec: ProcRecord, pid: int) -> None:
        """Point every record of ``rec``'s group at ``pid``, as if the id had been reused: the
        manifest, and the agent's own records of the process on the host (its JSON files that
        name the group)."""
        m = JobManifest.load(self.manifest.job_id)
        for p in m.procs:
            if p.name == rec.name:
                p.pgid = pid
        m.save()
        for f in self.folder.glob(f"{rec.name}.*"):
            try:
                data = json.loads(f.read_text())
            except ValueError:
                continue
            if isinstance(data, dict) and "pgid" in data:
                f.write_text(json.dumps({**data, "pgid": pid}))


@pytest.fixture
def agent_job(home, local_cluster, tmp_path):
    """An empty running job on m0 of the local cluster; its processes are killed after."""
    cluster = load_cluster_config(local_cluster)
    transport = make_transport(cluster.hosts[0], cluster)
    h = cluster.hosts[0]
    manifest = JobManifest(job_id=new_job_id(), token="t" * 32, cluster=cluster.source(),
                           script="x.py", args=[], part_config="", ip_config="",
                           hosts=[HostRecord(h.name, h.address, h.data_address,
                                             transport.workspace)])
    manifest.save()
    job = AgentJob(manifest, AgentClient(transport), tmp_path)
    try:
        yield job
    finally:
        transport.close()
        for pgid, ticks in job.started:
            if ticks is not None and start_ticks(pgid) == ticks:  # still the group we started
                os.killpg(pgid, signal.SIGKILL)


@pytest.fixture
def bystander():
    """An unrelated process leading its own group: what a recycled pid now runs."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEP], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(TIMEOUT)


def test_stop_of_a_finished_job_spares_the_new_holder_of_its_group_id(agent_job, bystander,
                                                                      capsys):
    rec = agent_job.start("trainer-0-0", "pass")
    agent_job.wait(rec, running=False)
    agent_job.recycle(rec, bystander.pid)
    code, out, err = run(["stop", agent_job.manifest.job_id], capsys)
    assert code == 0, err
    assert bystander.poll() is None, "stop signalled a process that is not the job's"
    assert "0 process group(s) signalled" in out


def test_stop_spares_a_recycled_group_id_of_a_process_killed_with_its_wrapper(agent_job,
                                                                             bystander, capsys):
    # Killed together with its wrapper: no exit status was written, so only the leader's
    # identity tells the job's group from the one that now has its id.
    rec = agent_job.start("trainer-0-0", SLEEP)
    agent_job.wait(rec, running=True)
    os.killpg(rec.pgid, signal.SIGKILL)
    agent_job.wait(rec, running=False)
    agent_job.recycle(rec, bystander.pid)
    code, out, err = run(["stop", agent_job.manifest.job_id], capsys)
    assert code == 0, err
    assert bystander.poll() is None, "stop signalled a process that is not the job's"


def test_status_does_not_take_a_recycled_group_id_for_the_job(agent_job, bystander, capsys):
    rec = agent_job.start("trainer-0-0", SLEEP)
    agent_job.wait(rec, running=True)
    os.killpg(rec.pgid, signal.SIGKILL)
    agent_job.wait(rec, running=False)
    agent_job.recycle(rec, bystander.pid)
    code, out, err = run(["status", agent_job.manifest.job_id, "--json"], capsys)
    assert code == 0, err
    assert [p["state"] for p in json.loads(out)["processes"]] == ["missing"]


def test_stop_still_ends_a_running_job(agent_job, capsys):
    rec = agent_job.start("trainer-0-0", SLEEP)
    agent_job.wait(rec, running=True)
    code, out, err = run(["stop", agent_job.manifest.job_id, "--grace", str(TIMEOUT)], capsys)
    assert code == 0, err
    assert "1 process group(s) signalled" in out
    assert agent_job.state(rec) is ProcStatus.KILLED
    assert JobManifest.load(agent_job.manifest.job_id).state == JobState.STOPPED


def test_a_group_of_another_user_is_reported_not_a_crash(agent_job, capsys):
    rec = agent_job.start("trainer-0-0", SLEEP)
    agent_job.wait(rec, running=True)
    real_killpg = os.killpg

    def not_yours(pgid: int, sig: int) -> None:
        if pgid == rec.pgid and sig != 0:
            raise PermissionError(1, "Operation not permitted")
        real_killpg(pgid, sig)

    argv = ["stop", "--workspace", agent_job.manifest.hosts[0].workspace, "--job",
            agent_job.manifest.job_id, "--procs", json.dumps({rec.name: rec.pgid}),
            "--grace", str(TIMEOUT / 10)]
    capsys.readouterr()
    # Undone before the fixture kills the process (its finalizer needs the real killpg).
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "killpg", not_yours)  # the os module the agent signals through
        assert agent.main(argv) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["denied"] == [rec.name]
    assert answer["terminated"] == [] and answer["killed"] == []
    assert agent_job.state(rec) is ProcStatus.RUNNING
