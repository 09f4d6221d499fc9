"""The host agent's process checks, on real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dglctl.agent.proc_groups import alive as _alive
from testing.timeouts import TIMEOUT
from testing.wait import wait_until

pytestmark = pytest.mark.multiprocess


def test_a_group_of_unreaped_zombies_counts_as_ended():
    # The leader exits and nobody reaps it yet: signal 0 still reaches the group, but nothing
    # runs (a detached job's wrappers wait for init to reap them; stop must not wait too).
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    def zombie() -> bool:
        with open(f"/proc/{proc.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"

    wait_until(zombie, "the leader a zombie", timeout=3 * TIMEOUT, interval=0.01)
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


def test_prune_removes_only_what_was_shipped_and_never_follows_links(tmp_path):
    """What the last launch shipped and the project no longer has goes (links as links);
    what a job wrote into the copy (``ck/``) stays, and the record becomes what is kept."""
    from dglctl.agent.__main__ import main

    root, outside = tmp_path / "copy", tmp_path / "outside"
    (root / "pkg" / "old").mkdir(parents=True)
    (root / "ck").mkdir()
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    for rel in ("train.py", "pkg/util.py", "pkg/old/gone.py", "stale.py", "ck/step.pt"):
        (root / rel).write_text("x")
    (root / "link").symlink_to(outside)
    (root / "file-link").symlink_to(outside / "precious.txt")
    record = tmp_path / "copy.shipped.json"
    record.write_text(json.dumps(["train.py", "pkg/util.py", "pkg/old/gone.py", "stale.py",
                                  "link", "file-link"]))
    keep = '["train.py", "pkg/util.py"]'
    assert main(["prune", "--root", str(root), "--keep", keep, "--record", str(record)]) == 0
    left = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    assert left == ["ck", "ck/step.pt", "pkg", "pkg/util.py", "train.py"]
    assert (outside / "precious.txt").read_text() == "keep me"
    assert json.loads(record.read_text()) == ["pkg/util.py", "train.py"]


def test_prune_without_a_record_removes_nothing(tmp_path):
    """A copy no launch recorded (an older dglctl's): nothing in it is known to be ours."""
    from dglctl.agent.__main__ import main

    root = tmp_path / "copy"
    root.mkdir()
    (root / "results.csv").write_text("x")
    record = tmp_path / "copy.shipped.json"
    assert main(["prune", "--root", str(root), "--keep", '["train.py"]', "--record",
                 str(record)]) == 0
    assert (root / "results.csv").exists()
    assert json.loads(record.read_text()) == ["train.py"]


def test_prune_leaves_copies_in_flight(tmp_path):
    """On a workspace that hosts share (an NFS home), one host prunes while another's copy
    of the same project is still under way: its private temporary folders stay."""
    from dglctl.agent.__main__ import main
    from dglctl.agent.protocol import COPY_TEMP_PREFIX

    root = tmp_path / "copy"
    flight = root / "pkg" / f"{COPY_TEMP_PREFIX}123-abcd"
    flight.mkdir(parents=True)
    (flight / "util.py").write_text("half")
    (root / "stale.py").write_text("x")
    record = tmp_path / "copy.shipped.json"
    record.write_text('["pkg/util.py", "stale.py"]')
    assert main(["prune", "--root", str(root), "--keep", '["pkg/util.py"]', "--record",
                 str(record)]) == 0
    assert (flight / "util.py").read_text() == "half"
    assert not (root / "stale.py").exists()
