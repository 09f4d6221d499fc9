"""The harness's graph servers (testing.servers) end even when their runner is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from testing.procs import leftover_report
from testing.servers import REPO
from testing.timeouts import TIMEOUT
from testing.wait import wait_until

pytestmark = pytest.mark.multiprocess

_RUNNER = """
import sys, time
from pathlib import Path
from testing.servers import start_servers
c = start_servers(Path(sys.argv[1]), Path(sys.argv[2]))
c.wait_ready()
print(c.job_id, *[p.pid for p in c.procs], flush=True)
time.sleep(3600)
"""


def test_servers_end_with_a_runner_killed_without_finalizers(two_part_graph, tmp_path):
    """A runner SIGKILLed (no ``finally``, no fixture teardown) must not leave its servers up:
    they idle-wait for a first client that never comes, and would run until someone kills
    them (it happened: two stayed up for an hour and a half)."""
    _, cfg = two_part_graph
    runner = subprocess.Popen([sys.executable, "-c", _RUNNER, str(cfg), str(tmp_path)],
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    pids: list[str] = []
    try:
        job_id, *pids = runner.stdout.readline().split()
        assert job_id and len(pids) == 2, "the runner did not report its servers"
        assert leftover_report(job_id), "the servers should be running before the kill"
        os.killpg(runner.pid, signal.SIGKILL)  # the servers lead their own groups
        runner.wait(TIMEOUT)
        wait_until(lambda: not leftover_report(job_id), "the servers and their shared memory "
                   "gone after their runner was killed", timeout=3 * TIMEOUT, interval=0.2)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(TIMEOUT)
        for pid in pids:
            try:
                os.killpg(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
