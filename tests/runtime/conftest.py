"""Fixtures that start real graph servers on 127.0.0.x and clean up after them."""

from __future__ import annotations

import pytest

from partitioner import partition_graph
from testing.graphs import community_graph
from testing.servers import running_cluster


@pytest.fixture(scope="module")
def two_part_graph(tmp_path_factory):
    g = community_graph(n=600)
    out = tmp_path_factory.mktemp("rt") / "parts"
    partition_graph(g, "g", 2, out, method="metis")
    return g, out / "g.json"


@pytest.fixture
def cluster(two_part_graph, tmp_path):
    _, cfg = two_part_graph
    with running_cluster(cfg, tmp_path) as c:
        yield c


@pytest.fixture
def trainer(monkeypatch, cluster):
    """This test process as the one trainer of machine 0 (runtime.dist_graph, initialized)."""
    import runtime.dist_graph as dg
    from runtime.context import exit_client, initialize

    for k, v in cluster.env("trainer", 0).items():
        monkeypatch.setenv(k, v)
    initialize()
    yield dg
    exit_client()


@pytest.fixture
def standalone(two_part_graph, tmp_path_factory):
    """The same graph partitioned into one part, for standalone mode."""
    import runtime as dg

    g, _ = two_part_graph
    out = tmp_path_factory.mktemp("one") / "parts"
    partition_graph(g, "g", 1, out)
    dg.exit_client()
    dg.initialize()  # no env contract: standalone
    yield out / "g.json"
    dg.exit_client()


@pytest.fixture
def pulls_by_thread(monkeypatch) -> list[tuple[str, str]]:
    """Every ``TensorStore.pull_parts`` (which every pull goes through) from now on, as
    ``(tensor key, thread name)`` (the pulls a loader's prefetch thread makes are named
    "dglctl-prefetch")."""
    import threading

    from runtime.tensor_store import TensorStore

    pulls: list[tuple[str, str]] = []
    real_pull = TensorStore.pull_parts

    def spy(self, key, *args, **kwargs):
        pulls.append((key, threading.current_thread().name))
        return real_pull(self, key, *args, **kwargs)

    monkeypatch.setattr(TensorStore, "pull_parts", spy)
    return pulls
