"""A detached ``dglctl`` job that several tests share: launched once, read by each, stopped
and proven gone after the last."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from testing.procs import leftovers
from testing.timeouts import TIMEOUT
from testing.wait import WaitTimeout, wait_until


def _dglctl(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dglctl", *args], capture_output=True,
                          text=True, env={**os.environ, "DGLCTL_HOME": str(home)},
                          timeout=12 * TIMEOUT)


def dglctl_output(home: Path, *args: str) -> str:
    """What ``dglctl ARGS`` prints, its records in ``home`` (a subprocess: for fixtures
    wider than a test, which have no output capture of their own); a failure raises."""
    done = _dglctl(home, *args)
    assert done.returncode == 0, f"dglctl {' '.join(args)}:\n{done.stderr[-3000:]}"
    return done.stdout


@contextlib.contextmanager
def detached_job(home: Path, launch_args: list[str]) -> Iterator[str]:
    """``dglctl launch --detach --json LAUNCH_ARGS`` with its records in ``home``; yields
    the job id once it runs. Afterwards the job is stopped (``dglctl stop``), even when a
    test failed, and nothing of it may be left: no process carrying its id, no shared memory
    or sampler folder. Tests that only read the job (status, logs) share it; one that stops
    or kills part of a job starts its own."""
    done = _dglctl(home, "launch", "--detach", "--json", *launch_args)
    assert done.returncode == 0, f"detached launch failed:\n{done.stderr[-3000:]}"
    job = json.loads(done.stdout)["job"]
    try:
        yield job
    finally:
        stopped = _dglctl(home, "stop", job)
        assert stopped.returncode == 0, f"dglctl stop {job}:\n{stopped.stderr[-3000:]}"
        try:  # the stop has signalled; its processes may take a moment to be gone
            wait_until(lambda: leftovers(job) == ([], []), f"nothing of job {job} left",
                       6 * TIMEOUT)
        except WaitTimeout:
            raise AssertionError(f"job {job} left {leftovers(job)}") from None
