"""Running a benchmark's ``--smoke --json`` from a test: the one place that knows how."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from testing.timeouts import TIMEOUT

REPO = Path(__file__).resolve().parents[2]


def run_smoke(module: str, timeout: float) -> tuple[dict[str, Any], str]:
    """``python -m MODULE --smoke --json`` in the repository: its JSON and a log of its output
    (for assertion messages). Fails the test, with the output, on a timeout or a non-zero exit."""
    try:
        proc = subprocess.run([sys.executable, "-m", module, "--smoke", "--json"], cwd=REPO,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the smoke run took more than {timeout:.0f}s (DGLCTL_TEST_TIMEOUT "
                    f"{TIMEOUT:g}); its log:\n{(e.stderr or b'')[-4000:]!r}")
    log = f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, log
    return json.loads(proc.stdout), log  # --json: the JSON alone on stdout
