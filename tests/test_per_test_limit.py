"""The per-test limit follows DGLCTL_TEST_TIMEOUT, as every wait inside the tests does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from testing.timeouts import RUN_TIMEOUT, TEST_LIMIT, TIMEOUT

pytestmark = pytest.mark.multiprocess

REPO = Path(__file__).resolve().parents[1]


def _limit(**env: str) -> float:
    """The limit pytest-timeout reports in a fresh run's header (collection only)."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("PYTEST_TIMEOUT", "PYTEST_ADDOPTS", "DGLCTL_TEST_TIMEOUT")}
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co",
                        "-p", "no:xdist", "tests/test_per_test_limit.py"], cwd=REPO,
                       env={**base, **env}, capture_output=True, text=True, timeout=6 * TIMEOUT)
    assert r.returncode == 0, r.stdout + r.stderr
    found = re.search(r"^timeout: ([\d.]+)s", r.stdout, re.M)
    assert found, r.stdout
    return float(found[1])


def test_the_limit_is_above_the_longest_wait():
    assert TEST_LIMIT > RUN_TIMEOUT


def test_the_limit_scales_with_the_test_timeout_and_yields_to_an_explicit_one():
    assert _limit() == TEST_LIMIT * 10 / TIMEOUT  # the default DGLCTL_TEST_TIMEOUT, 10 s
    assert _limit(DGLCTL_TEST_TIMEOUT="20") == TEST_LIMIT * 20 / TIMEOUT
    assert _limit(DGLCTL_TEST_TIMEOUT="20", PYTEST_TIMEOUT="77") == 77
