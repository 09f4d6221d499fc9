"""DGL's tests/distributed/test_dist_graph_store.py, on this project's runtime.

Ported from dmlc/dgl tests/distributed/test_dist_graph_store.py at v1.1.3 (commit
6e2c0f489ba4cfae4614d6f07da41e0ecd36b226). The checks themselves (``check_dist_graph``,
``check_dist_emb``) are in ``tests/compat/_dist_util.py``, which lists what changed in them
and why. Here:

- ``test_standalone`` / ``test_standalone_node_emb``: as DGL's (one part, standalone mode).
  ``/tmp/dist_graph`` -> pytest's ``tmp_path``; ``DGL_DIST_MODE=standalone`` -> no launcher
  environment (the runtime's standalone mode).
- ``test_server_client`` / ``test_dist_emb_server_client``: DGL starts ``DistGraphServer``s
  and clients with ``multiprocessing`` on one partition and one machine; here the servers
  are real ``python -m runtime.server`` processes of a 2-part partition on 127.0.0.1 and
  127.0.0.2 (tests/runtime/conftest.py's ``running_cluster``) and the clients are trainer
  processes (one per machine), since the runtime's point is more than one machine. The
  graph is DGL's ``create_random_graph(10000)``; ``load_partition_book`` + ``DistGraph(name,
  gpb=gpb)`` as DGL's. Checks that assume one partition (node_split gives local nodes
  only) hold because every trainer's share is checked against its own machine's nodes.

Left out (DGL internals only): ``run_server``'s check of the server's ``client_g`` dtypes
(DGL's in-server DGLGraph), ``check_server_client_empty``'s ``disable_shared_mem`` variants
(the runtime always shares memory), client groups (``DGL_GROUP_ID``, disabled in DGL too).
``test_split`` / ``test_split_even`` and ``check_server_client_hierarchy`` belong to the
split port (another module).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

import runtime
from partitioner import partition_graph
from partitioner.loader import load_orig_ids
from runtime.store.shm import job_files
from tests.compat._dist_util import check_dist_emb, check_dist_graph, random_graph, random_hetero
from tests.conftest import TIMEOUT
from tests.runtime.conftest import running_cluster

# Each test carries its kind: standalone ones are unit tests, server/client ones start
# processes.


@pytest.fixture
def standalone_graph(tmp_path):
    g = random_graph(10000)
    partition_graph(g, "dist_graph_test_3", 1, tmp_path / "dist_graph")
    cfg = tmp_path / "dist_graph" / "dist_graph_test_3.json"
    runtime.exit_client()
    runtime.initialize("kv_ip_config.txt")  # standalone: no launcher environment
    yield g, cfg
    runtime.exit_client()


@pytest.mark.unit
def test_standalone(standalone_graph):
    g, cfg = standalone_graph
    orig_n, orig_e = load_orig_ids(cfg)
    dist_g = runtime.DistGraph("dist_graph_test_3", part_config=str(cfg))
    check_dist_graph(dist_g, 1, g.total_nodes, g.total_edges, orig_n["_N"],
                     orig_e[("_N", "_E", "_N")])


@pytest.mark.unit
def test_standalone_node_emb(standalone_graph):
    g, cfg = standalone_graph
    dist_g = runtime.DistGraph("dist_graph_test_3", part_config=str(cfg))
    check_dist_emb(dist_g, 1, g.total_nodes, g.total_edges)


# A trainer of a server/client test: DGL's run_client / run_emb_client / run_optim_client /
# run_client_hetero (argv: rank, part config, which checks, checkpoint path, ip_config).
CLIENT = textwrap.dedent("""
    import sys
    import torch
    import runtime
    from partitioner.graph import etype_key
    from partitioner.loader import load_orig_ids, load_partition_book
    from tests.compat import _dist_util as u

    rank, cfg, what, path, ip_config = int(sys.argv[1]), *sys.argv[2:6]
    runtime.initialize(ip_config)  # DGL: "kv_ip_config.txt", written by the test
    gpb = load_partition_book(cfg, rank)
    gpb = gpb[0] if isinstance(gpb, tuple) else gpb  # DGL's returns (gpb, name, ntypes, etypes)
    orig_n, orig_e = load_orig_ids(cfg)
    if what == "homo":
        g = runtime.DistGraph("dist_graph_test", gpb=gpb)
        n, m = g.num_nodes(), g.num_edges()
        u.check_dist_graph(g, 2, n, m, orig_n["_N"], orig_e[("_N", "_E", "_N")])
        u.check_dist_emb(g, 2, n, m)
        torch.distributed.init_process_group("gloo", rank=rank, world_size=2)
        torch.manual_seed(0)  # the same states on both trainers (DGL: made by the parent)
        states = [torch.rand(n, 1), torch.rand(n, 1)]
        u.check_dist_optim_store(rank, n, states, True, path)
        # DGL restarts the servers between save and load; here every handle of the state
        # went with the first optimizer, so the second starts from zeros and the files alone.
        u.check_dist_optim_store(rank, n, states, False, path)
    else:
        g = runtime.DistGraph("dist_graph_test", gpb=gpb)
        num_nodes = {t: g.num_nodes(t) for t in g.ntypes}
        num_edges = {c[1]: g.num_edges(c) for c in g.canonical_etypes}
        u.check_dist_graph_hetero(g, 2, num_nodes, num_edges, orig_n["n1"],
                                  orig_e[("n1", "r1", "n2")])
    print("ok", rank)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_clients(graph, tmp_path, what: str) -> None:
    partition_graph(graph, "dist_graph_test", 2, tmp_path / "dist_graph")
    cfg = tmp_path / "dist_graph" / "dist_graph_test.json"
    with running_cluster(cfg, tmp_path, num_servers=1) as cluster:
        port = _free_port()
        procs = []
        try:
            for rank in range(2):
                env = cluster.env("trainer", rank, num_trainers=1)
                env.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                           MASTER_PORT=str(port))
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", CLIENT, str(rank), str(cfg), what,
                     str(tmp_path / "emb.pt"), str(cluster.ip_config)], env=env, cwd=tmp_path,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            for p in procs:
                out, err = p.communicate(timeout=12 * TIMEOUT)
                assert p.returncode == 0, err[-3000:]
                assert out.startswith("ok")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(TIMEOUT)
        for p in cluster.procs:  # the servers exit once their clients have gone
            p.wait(1.5 * TIMEOUT)
        assert job_files(cluster.job_id) == []


@pytest.mark.multiprocess
def test_server_client(tmp_path):
    """DGL's check_server_client + check_dist_emb_server_client + check_dist_optim_store:
    two trainers on two machines."""
    _run_clients(random_graph(10000), tmp_path, "homo")


@pytest.mark.multiprocess
def test_server_client_hetero(tmp_path):
    """DGL's check_server_client_hetero: two trainers on two machines."""
    _run_clients(random_hetero(), tmp_path, "hetero")
