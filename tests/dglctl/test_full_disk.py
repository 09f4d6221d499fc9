"""Disk space on the hosts: preflight counts only the bytes still to copy, and a copy that
runs out of space is a clear error that leaves no temporary file. Real tmpfs workspaces,
real launches (local, and over the test sshd)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from dglctl.cli import main
from dglctl.display import human_bytes
from dglctl.jobs.manifest import list_jobs
from dglctl.jobs.plan import host_files
from partitioner import partition_graph
from partitioner.format import read_config
from testing.clusters import ssh_cluster
from testing.graphs import community_graph
from testing.procs import leftovers
from tests.dglctl import SCRIPTS

TRAINER = str(SCRIPTS / "trainer.py")
PAGE = 4096


@pytest.fixture(scope="module")
def big_parts(tmp_path_factory):
    """2- and 3-part partitions of a graph whose shards are megabytes per host."""
    g = community_graph(n=20000)
    root = tmp_path_factory.mktemp("bigparts")
    for n in (2, 3):
        partition_graph(g, "g", n, root / f"p{n}")
    return {n: root / f"p{n}" / "g.json" for n in (2, 3)}


def _host_pages(part_config: Path) -> list[int]:
    """Bytes each host's shards take on a tmpfs (whole pages per file)."""
    cfg = read_config(part_config)
    return [sum(-(-cfg["files"][r]["size"] // PAGE) * PAGE for r in host_files(cfg, i))
            for i in range(cfg["num_parts"])]


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a real tmpfs of a given size (bytes, whole pages) at a new folder."""
    mounted = []

    def mount(size: int) -> Path:
        d = tmp_path / f"tmpfs{len(mounted)}"
        d.mkdir()
        size = -(-size // PAGE) * PAGE
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()}")
        mounted.append(d)
        return d

    yield mount
    for d in mounted:
        subprocess.run(["umount", "-l", str(d)], check=True)


def _local_cluster(local_cluster: Path, workspace: Path) -> Path:
    data = yaml.safe_load(local_cluster.read_text())
    local_cluster.write_text(yaml.safe_dump({**data, "workspace": str(workspace)}))
    return local_cluster


def _launch(cluster: Path, part_config: Path, capsys) -> tuple[int, str]:
    code = main(["launch", TRAINER, "--cluster", str(cluster), "--part-config",
                 str(part_config), "--", "ok"])
    out = capsys.readouterr()
    return code, out.out + out.err


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if ".tmp" in p.name or p.name.startswith(".dglctl-tmp")]


@pytest.mark.multiprocess
def test_preflight_counts_only_what_is_still_to_copy(big_parts, home, local_cluster, tmpfs,
                                                     capsys):
    pages = _host_pages(big_parts[2])
    # Room for the shards once, and 1 MiB for the jobs' own files: a second launch finds
    # less free space than one host's shards, all of which are there already.
    ws = tmpfs(sum(pages) + (1 << 20))
    cluster = _local_cluster(local_cluster, ws)
    code, out = _launch(cluster, big_parts[2], capsys)
    assert code == 0, out
    code, out = _launch(cluster, big_parts[2], capsys)
    assert code == 0, out
    assert out.count("up to date") == 2
    assert list_jobs()[-1].state == "succeeded"


@pytest.mark.multiprocess
def test_copy_onto_a_full_disk_is_named_and_leaves_no_temp_file(big_parts, home,
                                                                local_cluster, tmpfs, capsys):
    pages = _host_pages(big_parts[2])
    # Both hosts' workspaces share one file system (as on a shared home): each sees room
    # for its own shards at preflight, and together they do not fit.
    ws = tmpfs((max(pages) + sum(pages)) // 2)
    code, out = _launch(_local_cluster(local_cluster, ws), big_parts[2], capsys)
    assert code != 0
    assert "No space left on device" in out and "check free space" in out, out
    assert "internal error" not in out
    assert _temp_files(ws) == []
    job = list_jobs()[-1]
    assert job.procs == [] and leftovers(job.job_id) == ([], [])


@pytest.mark.ssh
def test_copy_over_ssh_onto_a_full_disk(sshd, big_parts, home, tmpfs, capsys):  # noqa: F811
    pages = _host_pages(big_parts[3])
    ws = tmpfs((max(pages) + sum(pages)) // 2)
    code, out = _launch(ssh_cluster(ws / "c.yaml", sshd), big_parts[3], capsys)
    assert code != 0
    assert "failed" in out and "check free space" in out, out
    assert "internal error" not in out
    assert _temp_files(ws) == []


@pytest.mark.multiprocess
def test_preflight_refuses_what_cannot_fit_and_says_how_much(big_parts, home, local_cluster,
                                                             tmpfs, capsys):
    ws = tmpfs(1 << 20)  # 1 MiB, for shards of about 2.5 MB per host
    code, out = _launch(_local_cluster(local_cluster, ws), big_parts[2], capsys)
    assert code != 0
    cfg = read_config(big_parts[2])
    for host, part in (("m0", 0), ("m1", 1)):
        need = human_bytes(sum(cfg.files[r]["size"] for r in host_files(cfg, part)))
        assert f"host {host}: " in out and f"the shards still to copy need {need}" in out, out
    assert "nothing was started" in out
    assert not any(ws.rglob("*.npy"))


@pytest.mark.multiprocess
def test_an_agent_record_on_a_full_disk_leaves_the_old_one_and_no_temp_file(tmpfs):
    """The hosts of one job can share a disk: while one host's copy fills it, another's agent
    rewrites its record of what it shipped. That write fails with ENOSPC, and leaves the old
    record whole and no temp file beside it (it used to leave 'record.tmp')."""
    import errno

    from dglctl.agent.workspace import write_private

    disk = tmpfs(4 * PAGE)
    record = disk / "shipped.json"
    write_private(record, "[]")
    (disk / "filler").write_bytes(b"x" * (3 * PAGE))  # the rest of the disk, but for a page
    with pytest.raises(OSError) as e:
        write_private(record, "x" * (2 * PAGE))
    assert e.value.errno == errno.ENOSPC
    assert record.read_text() == "[]"
    assert _temp_files(disk) == []
