"""A detached job's supervisor: ``dglctl launch --detach`` starts the same launch in the
background (its own session, its output in the job's log), shows its steps until the job
runs, and returns. The background launcher then is the job's supervisor, exactly as a
foreground launcher is: it holds the job's lease, restarts failed attempts, stops the servers
once the last trainer has ended and records how the job ended and why.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from ..errors import DglctlError, Interrupted
from .manifest import JobManifest, JobState, dglctl_home, new_job_id

# Set in the background launcher's environment: the job it supervises (its id, made by the
# launch that started it, so that launch can follow the job's record from the start).
SUPERVISE_ENV = "DGLCTL_SUPERVISE_JOB"
POLL_SECONDS = 0.1


def supervised_job() -> str | None:
    """The job id this process supervises as a detached job's background launcher, else None
    (taken out of the environment: the job's own processes do not inherit it)."""
    return os.environ.pop(SUPERVISE_ENV, None)


def supervisor_log(job_id: str) -> Path:
    """Where a detached job's supervisor writes its output (beside the job's record)."""
    return dglctl_home() / "jobs" / f"{job_id}.launcher.log"


def _record(job_id: str) -> JobManifest | None:
    try:
        return JobManifest.load(job_id)
    except DglctlError:  # not written yet
        return None


def start_detached(argv: Sequence[str], echo: Callable[[str], None], *,
                   timeout: float) -> tuple[int, JobManifest | None]:
    """Start ``dglctl ARGV`` (a launch with ``--detach``) as the job's supervisor in the
    background, give each line it writes to ``echo`` until the job runs, and return 0 and the
    job's record then; if the launch fails first, its exit code (its error was echoed) and the
    record, if any. Ctrl-C (or TERM, HUP) before the job runs stops the launch, which ends
    everything it started. ``timeout`` bounds the wait for the supervisor to end once it has
    been told to stop."""
    job_id = new_job_id()
    log = supervisor_log(job_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, SUPERVISE_ENV: job_id, "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dglctl", *argv], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env=env)
    stop: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
        stop.append(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM,
                                                       signal.SIGHUP)}
    try:
        with open(log, "rb") as f:
            pending = b""

            def pump() -> None:
                nonlocal pending
                pending += f.read()
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    echo(line.decode(errors="replace"))

            while True:
                pump()
                if stop:
                    proc.send_signal(signal.SIGTERM)  # its teardown ends what it started
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout)
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                    pump()
                    name = signal.Signals(stop[0]).name
                    raise Interrupted(f"stopped on {name} before job {job_id} ran",
                                      signum=stop[0])
                code = proc.poll()
                m = _record(job_id)
                if code is not None:
                    pump()
                    if pending:
                        echo(pending.decode(errors="replace"))
                    # It left before the job ran: the launch failed (or the job was over).
                    return (0 if code == 0 and m is not None
                            and m.state is JobState.SUCCEEDED else code or 1), m
                if m is not None and m.state in (JobState.RUNNING, JobState.SUCCEEDED):
                    # Reap it when it ends, should this process outlive it (a caller that
                    # goes on, as a test does); a CLI that exits leaves it to init.
                    threading.Thread(target=proc.wait, daemon=True).start()
                    return 0, m
                time.sleep(POLL_SECONDS)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
