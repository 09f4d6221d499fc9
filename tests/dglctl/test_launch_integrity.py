"""A shard on this machine that no longer matches its part config is refused at launch, whether
the hosts need a copy or already hold good ones (real processes on the local cluster)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dglctl.jobs.manifest import list_jobs
from partitioner import partition_graph
from testing.cli import run_cli as run
from testing.graphs import community_graph
from testing.procs import leftovers
from tests.dglctl import SCRIPTS

pytestmark = pytest.mark.multiprocess
TRAINER = str(SCRIPTS / "trainer.py")
SHARD = "part0/node_feat/0_feat.npy"


@pytest.fixture
def part(tmp_path) -> Path:
    """A 2-part partition of its own: the tests corrupt it."""
    partition_graph(community_graph(n=400), "g", 2, tmp_path / "parts")
    return tmp_path / "parts" / "g.json"


def corrupt_one_byte(path: Path) -> None:
    """Flip the last byte of ``path`` and set its mtime back (size and mtime as before)."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        b = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([b[0] ^ 0xFF]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def assert_refused(code: int, out: str, err: str, part: Path) -> None:
    """The launch ended at the copy with the message that says what is known."""
    shard = part.parent / SHARD
    assert code == 3, err
    assert (f"{shard}: its bytes do not match the part config's checksum (the file is "
            "corrupted, or something is rewriting the partition)") in err, err
    assert f"'dglctl inspect {part.parent}'" in err, err
    assert "changed while the launch copied it" not in err
    assert "Traceback" not in err
    assert "up to date" not in out + err
    assert "servers ..." not in out + err  # nothing was started
    job = list_jobs()[-1]
    assert job.state == "failed" and job.result["phase"] == "copy" and not job.procs
    assert leftovers(job.job_id) == ([], [])


def test_corrupt_shard_refused_although_the_hosts_hold_good_copies(part, home, local_cluster,
                                                                   capsys):
    argv = ["launch", TRAINER, "--cluster", str(local_cluster), "--part-config", str(part),
            "--", "ok"]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    good = leftovers(list_jobs()[-1].job_id)
    assert good == ([], [])
    copy = Path(local_cluster.parent / "ws" / "m0" / "data" / "g" / SHARD)
    before = copy.read_bytes()
    corrupt_one_byte(part.parent / SHARD)
    code, out, err = run(argv, capsys)
    assert_refused(code, out, err, part)
    assert copy.read_bytes() == before  # the host's good copy is left as it was
    # Put right, the same launch runs again.
    corrupt_one_byte(part.parent / SHARD)
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert "up to date" in err


def test_corrupt_shard_refused_with_a_fresh_workspace(part, home, local_cluster, capsys):
    corrupt_one_byte(part.parent / SHARD)
    code, out, err = run(["launch", TRAINER, "--cluster", str(local_cluster), "--part-config",
                          str(part), "--", "ok"], capsys)
    assert_refused(code, out, err, part)
    # Nothing of m0's part was copied: the check comes before the copy (m1's good part may be).
    assert not list((local_cluster.parent / "ws" / "m0").glob("data/g/part0/**/*.npy"))
