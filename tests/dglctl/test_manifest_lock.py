"""A job's manifest has several writers (the launcher, ``dglctl stop`` from another shell):
each write is atomic, and each update is made on the record as it is now, under a lock, so
that no writer's update is lost."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dglctl.jobs.manifest import HostRecord, JobManifest, JobState, ProcRecord, new_job_id
from testing.timeouts import TIMEOUT

UPDATES = 150

# One writer: ready once imported and loaded; on "go" (stdin), UPDATES updates of the manifest.
WRITER = """
import sys
from dglctl.jobs.manifest import JobManifest, ProcRecord

job, who, how, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
m = JobManifest.load(job)
print("ready", flush=True)
sys.stdin.readline()
for i in range(n):
    if how == "save":  # as the launcher records each process it starts
        m.procs.append(ProcRecord(f"{who}-{i}", 0, "trainer", i, 100000 + i, "x.log"))
        m.save()
    else:
        m.update(lambda fresh: fresh.result.__setitem__(f"{who}-{i}", i))
"""


def new_manifest() -> JobManifest:
    m = JobManifest(job_id=new_job_id(), token="t" * 32, cluster={"path": "c.yaml"},
                    script="x.py", args=[], part_config="", ip_config="",
                    hosts=[HostRecord("m0", "127.0.0.1", "127.0.0.1", "/tmp/ws")])
    m.save()
    return m


@pytest.fixture
def writers(home):
    """Start two writer processes for a job (``start(job, how)``); killed after the test."""
    procs: list[subprocess.Popen] = []

    def start(job: str, how: str) -> list[subprocess.Popen]:
        for who in ("a", "b"):
            procs.append(subprocess.Popen(
                [sys.executable, "-c", WRITER, job, who, how, str(UPDATES)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True))
        for p in procs:
            assert p.stdout.readline() == "ready\n", p.communicate(timeout=TIMEOUT)[1]
        for p in procs:  # both start at once
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            _, err = p.communicate(timeout=6 * TIMEOUT)
            assert p.returncode == 0, err
        return procs

    try:
        yield start
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(TIMEOUT)


@pytest.mark.multiprocess
def test_concurrent_saves_lose_no_process_record(writers):
    m = new_manifest()
    writers(m.job_id, "save")
    names = {p.name for p in JobManifest.load(m.job_id).procs}
    assert names == {f"{w}-{i}" for w in "ab" for i in range(UPDATES)}


@pytest.mark.multiprocess
def test_concurrent_updates_lose_nothing(writers):
    m = new_manifest()
    writers(m.job_id, "update")
    result = JobManifest.load(m.job_id).result
    assert result == {f"{w}-{i}": i for w in "ab" for i in range(UPDATES)}


@pytest.mark.unit
def test_a_stop_recorded_meanwhile_survives_the_launchers_next_save(home):
    launcher = new_manifest()
    launcher.state = JobState.STARTING
    launcher.save()
    stopper = JobManifest.load(launcher.job_id)  # 'dglctl stop' in another shell
    stopper.state = JobState.STOPPING
    stopper.save()
    # The launcher records one more process, then (unaware of the stop) the job as running.
    launcher.procs.append(ProcRecord("trainer-0-0", 0, "trainer", 0, 4242, "t.log"))
    launcher.save()
    launcher.state = JobState.RUNNING
    launcher.save()
    now = JobManifest.load(launcher.job_id)
    assert now.state == JobState.STOPPING, "a stop is never undone"
    assert [p.name for p in now.procs] == ["trainer-0-0"]
    assert launcher.state == JobState.STOPPING  # the launcher's copy knows now


@pytest.mark.unit
def test_a_launchers_own_unsaved_end_wins_over_what_it_read_before(home):
    # The launcher sets FAILED in memory and its teardown (stop_job) records it.
    launcher = new_manifest()
    launcher.state = JobState.RUNNING
    launcher.save()
    launcher.state = JobState.FAILED
    launcher.result = {"root_cause": "trainer-0-1"}
    launcher.update(lambda m: None)
    now = JobManifest.load(launcher.job_id)
    assert (now.state, now.result) == (JobState.FAILED, {"root_cause": "trainer-0-1"})
