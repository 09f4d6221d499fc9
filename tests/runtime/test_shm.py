"""Shared memory too small for a partition (Docker's default /dev/shm is 64 MB): a clear error
naming what is needed and what is free, and nothing left behind; on a real tmpfs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from runtime.errors import ShmError
from runtime.rpc.ip_config import write_ip_config
from runtime.store.shm import ShmArena
from testing.ports import free_port_range
from testing.servers import REPO, Cluster
from testing.timeouts import TIMEOUT

pytestmark = pytest.mark.multiprocess


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real 64 KB tmpfs."""
    d = tmp_path / "shm"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


def test_an_array_that_does_not_fit_is_an_error_not_a_crash(small_tmpfs):
    """A tmpfs provides pages when first written: without reserving them up front the copy
    died of SIGBUS half-way, leaving the half-written file."""
    arena = ShmArena("t", 0, root=small_tmpfs)
    arena.put("small", np.ones(100, np.float32))
    with pytest.raises(ShmError, match=r"not enough shared memory for 'big' of job t machine 0: "
                       r"400,000 bytes needed, [\d,]+ free in .*--shm-size"):
        arena.put("big", np.ones(100_000, np.float32))
    assert [p.name for p in small_tmpfs.iterdir()] == [arena.path("small").name]
    np.testing.assert_array_equal(arena.attach("small"), 1)


def test_a_shard_file_that_does_not_fit_is_an_error_and_leaves_nothing(small_tmpfs, tmp_path):
    np.save(tmp_path / "big.npy", np.ones(100_000, np.float32))
    arena = ShmArena("t", 0, root=small_tmpfs)
    with pytest.raises(ShmError, match=r"not enough shared memory for 'big' of job t machine 0: "
                       r"400,000 bytes needed"):
        arena.put("big", np.load(tmp_path / "big.npy", mmap_mode="r"))
    assert list(small_tmpfs.iterdir()) == []


def test_a_whole_shard_is_copied_as_a_file_and_anything_else_as_an_array(tmp_path):
    from runtime.store.shm import whole_npy_file

    arena = ShmArena("t", 0, root=tmp_path / "shm")
    (tmp_path / "shm").mkdir()
    rows = np.arange(600, dtype=np.float32).reshape(200, 3)
    np.save(tmp_path / "rows.npy", rows)
    mapped = np.load(tmp_path / "rows.npy", mmap_mode="r")
    assert whole_npy_file(mapped) == str(tmp_path / "rows.npy")
    for other in (mapped[10:20], mapped[:, 1], np.asarray(mapped), rows, mapped.T):
        assert whole_npy_file(other) is None
    got = arena.put("rows", mapped)
    np.testing.assert_array_equal(got, rows)
    assert (arena.path("rows").stat().st_mode & 0o777) == 0o600
    got[0, 0] = -1  # the main server's copy is writable (pushes land in it)
    np.testing.assert_array_equal(np.load(tmp_path / "rows.npy"), rows)  # the shard is not
    np.testing.assert_array_equal(arena.put("part", mapped[10:20]), rows[10:20])
    np.testing.assert_array_equal(arena.attach("part", writable=False), rows[10:20])


def test_a_server_without_room_exits_with_the_reason_and_cleans_up(two_part_graph, tmp_path,
                                                                   small_tmpfs):
    _, cfg = two_part_graph
    ips = ["127.0.0.1", "127.0.0.2"]
    ip_config = tmp_path / "ip_config.txt"
    write_ip_config(ip_config, [(ip, free_port_range(ips, 1)) for ip in ips])
    job = Cluster(cfg, ip_config, ips, 1)
    env = job.env("server", 0, server_id=0) | {"DGLCTL_SHM_DIR": str(small_tmpfs)}
    done = subprocess.run([sys.executable, "-m", "runtime.server"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=6 * TIMEOUT)
    assert done.returncode == 1, done.stderr
    assert "runtime.server: error: not enough shared memory for" in done.stderr
    assert "bytes needed" in done.stderr and "--shm-size" in done.stderr
    assert list(small_tmpfs.iterdir()) == []  # what was copied before is removed
