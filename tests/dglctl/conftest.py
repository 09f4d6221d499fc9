"""Fixtures for launcher tests: a small partition, a private DGLCTL_HOME and workspace."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import yaml

from partitioner import partition_graph
from runtime.store.shm import SHM_DIR
from tests.conftest import community_graph
from tests.runtime.conftest import free_port_range

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """A 2-part and a 3-part partition of a small graph named 'g'."""
    g = community_graph(n=400)
    root = tmp_path_factory.mktemp("launch")
    out = {}
    for n in (2, 3):
        partition_graph(g, "g", n, root / f"p{n}")
        out[n] = root / f"p{n}" / "g.json"
    return out


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private DGLCTL_HOME; afterwards every job recorded there that may still run is
    stopped, so a test that fails between a detached launch and its own stop (a bad
    assertion on the launch's output) leaves nothing running."""
    monkeypatch.setenv("DGLCTL_HOME", str(tmp_path / "home"))
    yield tmp_path / "home"
    from dglctl.cli import main
    from dglctl.jobs.manifest import list_jobs

    for job in list_jobs():
        # Only jobs that started processes through a real transport (not the fakes' records).
        if job.state.active and job.procs and job.cluster.get("transport") in ("local", "ssh"):
            with contextlib.suppress(Exception):  # best effort: the test's own asserts judge
                main(["stop", job.job_id])


@pytest.fixture
def local_cluster(tmp_path):
    """configs/local.yaml with a private workspace and a random port base."""
    data = yaml.safe_load((Path(__file__).parents[2] / "configs" / "local.yaml").read_text())
    data["workspace"] = str(tmp_path / "ws")
    data["port_base"] = free_port_range(["127.0.0.1", "127.0.0.2"], 4)
    data["timeout"] = 5
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def environ_of(pid: int) -> dict[str, str]:
    """The environment process ``pid`` started with ({} once it has ended)."""
    try:
        raw = (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    return dict(v.decode(errors="replace").split("=", 1) for v in raw.split(b"\0") if b"=" in v)


def leftovers(job_id: str) -> tuple[list, list]:
    """Processes of the job (by their environment), and its files on this host: shared
    memory and the trainers' sampler socket folders."""
    from runtime.store.shm import sampler_dirs

    shm = sorted(SHM_DIR.glob(f"dglctl.{job_id}.*")) + sampler_dirs(job_id)
    procs = [int(p.name) for p in Path("/proc").iterdir()
             if p.name.isdigit() and environ_of(int(p.name)).get("DGLCTL_JOB_ID") == job_id]
    return procs, shm


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """``dglctl ARGV`` in this process: its exit code, stdout and stderr."""
    from dglctl.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err
