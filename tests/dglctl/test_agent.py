"""The host agent's process checks, on real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from dglctl.proc_groups import alive as _alive
from tests.conftest import TIMEOUT

pytestmark = pytest.mark.multiprocess


def test_a_group_of_unreaped_zombies_counts_as_ended():
    # The leader exits and nobody reaps it yet: signal 0 still reaches the group, but nothing
    # runs (a detached job's wrappers wait for init to reap them; stop must not wait too).
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    deadline = time.monotonic() + 3 * TIMEOUT
    while time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    os.killpg(proc.pid, 0)  # the group still answers signals
    assert not _alive(proc.pid)
    proc.wait()
    assert not _alive(proc.pid)


def test_a_running_group_is_alive():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                            start_new_session=True)
    try:
        assert _alive(proc.pid)
    finally:
        proc.kill()
        proc.wait()
