"""``dglctl partition --estimate``, ``--memory-limit`` and ``--regime`` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from partitioner.format import read_config
from partitioner.readers import write_npz
from tests.conftest import TIMEOUT, community_graph

pytestmark = pytest.mark.multiprocess

REPO = Path(__file__).resolve().parents[2]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "dglctl", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=6 * TIMEOUT)


def test_cli_estimate_prints_the_plan_and_writes_nothing(tmp_path):
    write_npz(community_graph(n=600), tmp_path / "g.npz")
    out = tmp_path / "parts"
    text = _cli("partition", "--input", str(tmp_path / "g.npz"), "--num-parts", "2",
                "--out", str(out), "--estimate")
    assert text.returncode == 0, text.stderr
    assert "fast" in text.stdout and "lean" in text.stdout and "memory plan:" in text.stdout
    assert not out.exists()
    js = _cli("partition", "--input", str(tmp_path / "g.npz"), "--num-parts", "2",
              "--out", str(out), "--estimate", "--json", "--memory-limit", "64G")
    assert js.returncode == 0, js.stderr
    plan = json.loads(js.stdout)
    assert plan["regime"] == "fast" and plan["memory_limit"] == 64 << 30
    assert set(plan["phases"]) == {"read", "symmetrize", "assign", "relabel", "write"}
    assert plan["edges"] > 0 and plan["disk_bytes"] > 0 and not out.exists()


def test_cli_memory_limit_too_small_or_malformed_is_a_clear_error(tmp_path):
    write_npz(community_graph(n=600), tmp_path / "g.npz")
    out = tmp_path / "parts"
    small = _cli("partition", "--input", str(tmp_path / "g.npz"), "--num-parts", "2",
                 "--out", str(out), "--memory-limit", "1M")
    assert small.returncode != 0
    assert "even in the lean regime" in small.stderr and "1.0 MiB" in small.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["g.npz"]
    bad = _cli("partition", "--input", str(tmp_path / "g.npz"), "--num-parts", "2",
               "--out", str(out), "--memory-limit", "lots")
    assert bad.returncode != 0 and "--memory-limit: 'lots' is not a size" in bad.stderr
    lean = _cli("partition", "--input", str(tmp_path / "g.npz"), "--num-parts", "2",
                "--out", str(out), "--regime", "lean")
    assert lean.returncode == 0, lean.stderr
    assert "memory plan: lean (--regime lean)" in lean.stderr
    assert read_config(out / "g.json").num_parts == 2
