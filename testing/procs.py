"""Stopping the processes a test started, and proving nothing of a job is left behind."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

from dglctl.agent.proc_groups import members
from runtime.store.shm import SHM_DIR, sampler_dirs
from testing.timeouts import TIMEOUT

_PR_SET_PDEATHSIG = 1


def end_with_this_process() -> None:
    """``preexec_fn`` for a child that must not outlive the test or benchmark that started it:
    Linux sends it SIGTERM when the starting thread ends (PR_SET_PDEATHSIG, kept across exec),
    so a runner killed with SIGKILL, which runs no finalizer, still leaves nothing running.
    The children it is for (graph servers, the partitioner) end cleanly on SIGTERM. Call it
    from the main thread's Popen: the signal follows the thread, not the process."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def terminate_groups(procs: list[subprocess.Popen], grace: float) -> None:
    """SIGTERM each process's group (each leads its own), SIGKILL what is left after
    ``grace`` seconds, and reap them all."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(TIMEOUT)


def environ_of(pid: int) -> dict[str, str]:
    """The environment process ``pid`` started with ({} once it has ended)."""
    try:
        raw = (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    return dict(v.decode(errors="replace").split("=", 1) for v in raw.split(b"\0") if b"=" in v)


def leftovers(job_id: str) -> tuple[list, list]:
    """Processes of the job (by their environment), and its files on this host: shared
    memory and the trainers' sampler socket folders."""
    shm = sorted(SHM_DIR.glob(f"dglctl.{job_id}.*")) + sampler_dirs(job_id)
    procs = [int(p.name) for p in Path("/proc").iterdir()
             if p.name.isdigit() and environ_of(int(p.name)).get("DGLCTL_JOB_ID") == job_id]
    return procs, shm


def leftover_report(job_id: str, pgids: Iterable[int] = ()) -> list[str]:
    """What of job ``job_id`` still exists, a line each: running processes of the groups
    ``pgids``, processes whose environment carries the job id (but this one), and the job's
    files (see :func:`leftovers`). Empty when nothing is left."""
    procs, files = leftovers(job_id)
    # members() skips zombies: init reaps a detached job's group leaders, which took about
    # 2 s on these VMs, and a zombie no longer runs.
    return ([f"pid {pid} (process group {g})" for g in pgids for pid in members(g)]
            + [f"pid {pid}" for pid in procs if pid != os.getpid()]
            + [str(f) for f in files])
