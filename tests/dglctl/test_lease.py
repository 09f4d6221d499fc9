"""A supervised job ends by itself soon after its launcher dies (SIGKILL, lost connection),
and ``status`` then records how it ended; a detached one runs on under the launcher it left in
the background. Real launchers, real processes, local and over a real sshd."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from dglctl.agent.protocol import lease_seconds, renew_interval
from dglctl.cli import main
from dglctl.jobs.manifest import JobManifest, list_jobs
from testing.clusters import ssh_cluster
from testing.procs import leftovers
from testing.timeouts import TIMEOUT
from testing.wait import WaitTimeout, wait_until
from tests.dglctl import SCRIPTS

TRAINER = str(SCRIPTS / "trainer.py")
JOB_TIMEOUT = 3.0  # the cluster's timeout
# The cluster's lease (YAML ``lease``): shorter than its default (3 job timeouts, 9 s here),
# so that a test that waits for a lease to run out waits seconds less; long enough for a
# dozen renewals to be late on a busy machine.
LEASE = 4.0


def _with(cluster: Path, **changes) -> Path:
    data = yaml.safe_load(cluster.read_text())
    cluster.write_text(yaml.safe_dump({**data, **changes}))
    return cluster


def _leased(cluster: Path) -> Path:
    """The test cluster with the tests' job timeout and lease."""
    return _with(cluster, timeout=JOB_TIMEOUT, lease=LEASE)


@pytest.mark.unit
def test_the_lease_is_three_timeouts_unless_the_cluster_sets_it():
    from dglctl.config import parse_cluster_config
    from dglctl.errors import ConfigError

    default = parse_cluster_config({"transport": "local", "hosts": ["127.0.0.1"], "timeout": 5})
    assert lease_seconds(default.timeout, default.lease) == 15.0
    assert renew_interval(15.0) == 2.5  # twice a job timeout, as before the setting
    set_ = parse_cluster_config({"transport": "local", "hosts": ["127.0.0.1"], "timeout": 5,
                                 "lease": 2})
    assert lease_seconds(set_.timeout, set_.lease) == 2.0
    assert renew_interval(2.0) == pytest.approx(2 / 6)  # two renewals may be lost
    with pytest.raises(ConfigError, match="lease"):
        parse_cluster_config({"transport": "local", "hosts": ["127.0.0.1"], "lease": -1})


def _status(job: str, capsys) -> dict:
    capsys.readouterr()  # what came before
    code = main(["status", job, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def _sleeping_job(cluster: Path, part_config: Path, trainers: int, *extra: str):
    """Start ``dglctl launch`` of sleeping trainers in a process of its own; return it and the
    job's manifest once every trainer sleeps (its pulls went through)."""
    proc = subprocess.Popen([sys.executable, "-m", "dglctl", "launch", TRAINER, "--cluster",
                             str(cluster), "--part-config", str(part_config), *extra, "--",
                             "sleep"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ))
    def sleeping() -> JobManifest | None:
        jobs = list_jobs()
        if not jobs:
            return None
        m = JobManifest.load(jobs[-1].job_id)
        logs = [Path(p.log) for p in m.procs if p.role == "trainer"]
        if len(logs) == trainers and all(b"sleeping" in p.read_bytes() for p in logs):
            return m
        assert proc.poll() is None or "--detach" in extra, "the launch ended"
        return None

    try:
        return proc, wait_until(sleeping, f"{trainers} trainers sleeping",
                                timeout=6 * TIMEOUT, interval=0.3)
    except AssertionError:  # a WaitTimeout too
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the trainers did not all start:\n{out}\n{err}") from None


def _gone_within(job: str, seconds: float) -> float:
    """Seconds until nothing of the job is left on this machine (processes, shared memory),
    or an AssertionError naming what was left after ``seconds``."""
    t0 = time.monotonic()
    try:
        wait_until(lambda: leftovers(job) == ([], []), f"nothing of job {job} left",
                   timeout=seconds, interval=0.1)
    except WaitTimeout:
        raise AssertionError(f"job {job}: still there after {seconds:.0f}s: "
                             f"{leftovers(job)}") from None
    return time.monotonic() - t0


def _kill_launcher_and_time(proc: subprocess.Popen, m: JobManifest,
                            lease: float = LEASE) -> float:
    assert JobManifest.load(m.job_id).lease_seconds == lease
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    # The lease, the wrapper's grace (one timeout), and the test's slack for a busy machine.
    return _gone_within(m.job_id, lease + JOB_TIMEOUT + 2 * TIMEOUT)


@pytest.mark.multiprocess
def test_sigkilled_launcher_leaves_nothing_running(parts, home, local_cluster, capsys):
    cluster = _leased(local_cluster)
    proc, m = _sleeping_job(cluster, parts[2], 2)
    try:
        st = _status(m.job_id, capsys)
        assert st["supervision"]["mode"] == "supervised"
        assert st["supervision"]["lease_age"] < LEASE
        took = _kill_launcher_and_time(proc, m)
    finally:
        proc.kill()
        main(["stop", m.job_id])
    print(f"from the SIGKILLed launcher to nothing left: {took:.1f}s")
    # Not before the lease ran out (the last renewal was at most one interval before the
    # kill): the job was not ended by anything else.
    assert took > LEASE - renew_interval(LEASE), took
    trainer_log = Path(next(p.log for p in m.procs if p.role == "trainer")).read_text()
    assert "has not renewed the job's lease" in trainer_log
    st = _status(m.job_id, capsys)
    assert st["state"] == "stopped"
    assert {p["state"] for p in st["processes"]} <= {"lease expired"}, st["processes"]


@pytest.mark.multiprocess
def test_detached_job_runs_on_under_its_background_launcher(parts, home, local_cluster,
                                                            capsys):
    """The launch returns; the job runs on past any lease, renewed by the launcher it left in
    the background, which ends with the job when it is stopped."""
    cluster = _leased(local_cluster)
    proc, m = _sleeping_job(cluster, parts[2], 2, "--detach")
    try:
        assert proc.wait(timeout=6 * TIMEOUT) == 0  # the launch is gone
        m = JobManifest.load(m.job_id)
        assert m.lease_seconds == LEASE
        supervisor = int(m.launcher["pid"])
        assert supervisor != proc.pid and m.launcher["detached"]
        time.sleep(LEASE + JOB_TIMEOUT)  # past any lease that was not renewed
        st = _status(m.job_id, capsys)
        assert st["supervision"]["mode"] == "detached", st["supervision"]
        assert st["supervision"]["lease_age"] < LEASE
        assert [p["state"] for p in st["processes"]] == ["running"] * 4
    finally:
        main(["stop", m.job_id])
    wait_until(lambda: not Path(f"/proc/{supervisor}").exists(), "the background launcher gone",
               timeout=6 * TIMEOUT, interval=0.1)
    assert JobManifest.load(m.job_id).state == "stopped"
    assert leftovers(m.job_id) == ([], [])


@pytest.mark.multiprocess
def test_status_settles_a_job_whose_launcher_was_sigkilled(parts, home, local_cluster,
                                                           capsys):
    """Nothing recorded the end of a job whose launcher was SIGKILLed: ``status`` settles it
    from the processes' exit statuses (the lease ended them), and the list agrees."""
    cluster = _leased(local_cluster)
    proc, m = _sleeping_job(cluster, parts[2], 2)
    try:
        _kill_launcher_and_time(proc, m)
    finally:
        proc.kill()
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    (listed,) = [j for j in json.loads(capsys.readouterr().out) if j["job"] == m.job_id]
    assert listed["state"] == "failed", listed
    assert "its launcher had ended without recording it" in listed["result"]["cause"]
    assert "lease" in listed["result"]["cause"], listed["result"]
    st = _status(m.job_id, capsys)
    assert st["state"] == "failed"
    assert leftovers(m.job_id) == ([], [])


@pytest.mark.ssh
def test_sigkilled_launcher_over_ssh_leaves_nothing(sshd, parts, home, tmp_path):  # noqa: F811
    # The default lease: each renewal crosses the ssh connection, which a busy machine slows.
    cluster = ssh_cluster(tmp_path / "c.yaml", sshd, timeout=JOB_TIMEOUT)
    proc, m = _sleeping_job(cluster, parts[3], 3)
    try:
        _kill_launcher_and_time(proc, m, lease=lease_seconds(JOB_TIMEOUT))
    finally:
        proc.kill()
        main(["stop", m.job_id])


class _Client:
    """An agent client whose renewals are counted; ``silent``: each one hangs for ``hang``
    seconds (a host cut off, its call waiting out its timeout), or until ``back`` is set."""

    def __init__(self, name: str, hang: float = 0.0) -> None:
        from dglctl.config import parse_cluster_config

        self.host = parse_cluster_config({"transport": "local", "hosts": [name]}).hosts[0]
        self.hang = hang
        self.renewals = 0
        self.back = threading.Event()  # set: the host answers again, a hang ends now

    def renew(self, job: str, timeout: float) -> None:
        self.renewals += 1
        self.back.wait(self.hang)


@pytest.mark.unit
def test_a_silent_host_does_not_hold_back_the_others_renewals():
    """One host's renewal hangs for 12 intervals: the other host is renewed every interval
    all the same (renewed together, its lease would lapse behind the silent one), and the
    silent one is not asked again while its renewal is under way."""
    from dglctl.jobs.renewer import LeaseRenewer

    interval = 0.05 * TIMEOUT
    silent, fine = _Client("127.0.0.1", hang=12 * interval), _Client("127.0.0.2")
    renewer = LeaseRenewer([silent, fine], "job", interval, call_timeout=30 * interval).start()
    started = time.monotonic()
    try:
        # Until the fine host has had 4 renewals, but never past 8 intervals: well inside the
        # silent one's hang either way.
        while fine.renewals < 4 and time.monotonic() - started < 8 * interval:
            time.sleep(interval / 10)
        waited = time.monotonic() - started
        renewals = silent.renewals, fine.renewals
    finally:
        silent.back.set()  # so that stopping need not wait out the rest of its hang
        renewer.stop()
    assert renewals[0] == 1, f"asked again while its renewal hung, after {waited:.2f}s"
    assert renewals[1] >= 4, (renewals, waited)
