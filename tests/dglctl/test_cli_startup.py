"""The CLI and the agent as separate processes: ``dglctl --help`` stays light, and
``python -m dglctl.agent`` (what every host runs) answers JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.multiprocess


def test_help_is_fast_and_lazy():
    # `dglctl --help` must not import numpy/torch (heavy imports live inside commands).
    code = ("import sys; from dglctl.cli import cli; "
            "print('numpy' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("argv", [["--help"], ["launch", "--help"]])
def test_python_m_dglctl_help(argv):
    out = subprocess.run([sys.executable, "-m", "dglctl", *argv], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "Usage:" in out.stdout, out.stderr


def test_python_m_dglctl_agent(tmp_path):
    out = subprocess.run([sys.executable, "-m", "dglctl.agent", "probe", "--workspace",
                          str(tmp_path), "--job", "0101-abcdef", "--procs", "{}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {}
