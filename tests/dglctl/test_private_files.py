"""What a job leaves on disk is its owner's only: job folders 0700, logs, exit status, the
agent's records, manifests and shared memory 0600, whatever the umask (here 000, the loosest:
a mode the code does not set explicitly shows as 0777 or 0666)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dglctl.cli import main
from dglctl.jobs.manifest import list_jobs
from partitioner import partition_graph
from runtime.store.shm import ShmArena, job_files
from testing.graphs import community_graph
from tests.dglctl import SCRIPTS

TRAINER = str(SCRIPTS / "trainer.py")


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    """This process's umask (and its children's) set to ``mask`` inside the block."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def modes(paths) -> dict[str, str]:
    return {p.name: mode(p) for p in paths}


@pytest.mark.multiprocess
def test_a_launch_leaves_private_job_folders_logs_and_manifests(parts, home, local_cluster,
                                                                capsys):
    with umask(0):
        code = main(["launch", TRAINER, "--cluster", str(local_cluster), "--part-config",
                     str(parts[2]), "--", "ok"])
    assert code == 0, capsys.readouterr().err
    job = list_jobs()[-1]
    assert mode(home / "jobs") == "0o700"
    recorded = sorted((home / "jobs").glob(f"{job.job_id}.json*"))  # the manifest, its lock
    assert recorded and set(modes(recorded).values()) == {"0o600"}, modes(recorded)
    for h in job.hosts:
        jobs = Path(h.workspace) / "jobs"
        folder = jobs / job.job_id
        assert (mode(jobs), mode(folder)) == ("0o700", "0o700")
        assert not list(folder.glob("*.env.json")), "the job token stays on disk no longer"
        mine = [f for p in job.procs if p.host == job.hosts.index(h)
                for f in folder.glob(f"{p.name}.*")]  # log, exit status, pid, identity
        assert {".log", ".rc", ".pid"} <= {f.suffix for f in mine}
        assert set(modes(mine).values()) == {"0o600"}, modes(mine)


@pytest.mark.unit
def test_shared_arrays_and_their_manifest_are_private(tmp_path):
    arena = ShmArena("t", 0, root=tmp_path)
    with umask(0):
        arena.create("_N/feat", (10, 2), np.float32)
        arena.put("labels", np.arange(10))
        arena.publish({"arrays": ["_N/feat", "labels"]})
    files = arena.files()
    assert len(files) == 3 and set(modes(files).values()) == {"0o600"}, modes(files)
    np.testing.assert_array_equal(arena.attach("labels"), np.arange(10))


@pytest.fixture(scope="module")
def two_parts(tmp_path_factory):
    out = tmp_path_factory.mktemp("shm-modes")
    partition_graph(community_graph(n=300), "g", 2, out)
    return out / "g.json"


@pytest.mark.multiprocess
def test_a_running_servers_shared_memory_is_private(two_parts, tmp_path):
    from testing.servers import running_cluster

    with umask(0), running_cluster(two_parts, tmp_path, num_servers=1) as c:
        files = job_files(c.job_id)
        assert files, "the main servers map their partitions in shared memory"
        assert set(modes(files).values()) == {"0o600"}, modes(files)
