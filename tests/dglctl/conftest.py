"""Fixtures for launcher tests: a small partition, a private DGLCTL_HOME and workspace."""

from __future__ import annotations

import contextlib

import pytest

from partitioner import partition_graph
from testing.clusters import local_cluster as local_cluster_yaml
from testing.graphs import community_graph
from testing.sshd import start_sshd


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
    """configs/local.yaml with a private workspace, a random port base and one trainer per
    host instead of the shipped two: each host still runs a server, a trainer and its
    sampler, and each trainer not started saves a torch import (about 2.5 s of CPU)."""
    return local_cluster_yaml(tmp_path / "local.yaml", tmp_path / "ws", trainers_per_host=1)


@pytest.fixture
def full_local_cluster(tmp_path):
    """configs/local.yaml as shipped (two trainers per host), with a private workspace and a
    random port base: for the tests about more than one trainer on a host."""
    return local_cluster_yaml(tmp_path / "local.yaml", tmp_path / "ws")


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """A real OpenSSH server on 127.0.0.1-3 for the session (each xdist worker its own). A
    missing sshd is a failure, not a skip: CI installs openssh-server."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()
