"""Running a Python program on real MPI ranks of this machine (Open MPI's mpiexec), for the
tests of the ParMETIS binding and of the distributed partitioner."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from testing.timeouts import TIMEOUT

REPO = Path(__file__).parents[2]


def run_ranks(ranks: int, argv: list[str], *, env: dict[str, str] | None = None,
              btl: str | None = None, timeout: float = 12 * TIMEOUT) -> subprocess.CompletedProcess:
    """``mpiexec -n ranks python ARGV`` (oversubscribed: more ranks than cores); ``btl``
    picks Open MPI's byte transfer layer (``vader``: shared memory, ``tcp``: loopback TCP)."""
    exe = shutil.which("mpiexec")
    assert exe, "mpiexec is missing: run tests/setup_mpi.sh (make test does)"
    cmd = [exe, "--allow-run-as-root", "--oversubscribe", "-n", str(ranks)]
    if btl:
        cmd += ["--mca", "btl", f"self,{btl}"]
    return subprocess.run([*cmd, sys.executable, *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def json_line(proc: subprocess.CompletedProcess) -> dict:
    """The one JSON line rank 0 printed on stdout (the run must have succeeded)."""
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[0])
