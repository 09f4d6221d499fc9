"""DGL's tests/distributed/test_dist_graph_store.py, on this project's runtime.

Ported from dmlc/dgl tests/distributed/test_dist_graph_store.py at v1.1.3 (commit
6e2c0f489ba4cfae4614d6f07da41e0ecd36b226). The checks themselves (``check_dist_graph``,
``check_dist_graph_empty``, ``check_dist_emb``, ``check_dist_graph_hetero``,
``check_dist_optim_store``, and ``run_client_hierarchy``'s split as ``split_hierarchy``) are
in ``tests/compat/_dist_util.py``, which lists what changed in them and why.

How the server/client tests run: DGL starts ``DistGraphServer``s and clients with
``multiprocessing`` on a one-part partition and one machine; here the servers are real
``python -m runtime.server`` processes of a 2-part partition on 127.0.0.1 and 127.0.0.2
(``testing.servers.running_cluster``) and the clients are trainer processes (T
per machine, rank ``machine * T + k``), since the runtime's point is more than one machine.
``load_partition_book`` + ``DistGraph(name, gpb=gpb)`` as DGL's. Checks that assume one
partition (node_split gives local nodes only) hold because every trainer's share is checked
against all nodes. The graph is DGL's ``create_random_graph(10000)``, built once per module.

Every test function of DGL's file, and where it is:

- ``test_standalone``, ``test_standalone_node_emb``: here, as DGL's (one part, standalone
  mode). ``/tmp/dist_graph`` -> pytest's ``tmp_path``; ``DGL_DIST_MODE=standalone`` -> no
  launcher environment (the runtime's standalone mode).
- ``test_server_client`` runs five checks; each is its own test here:
  ``check_server_client_hierarchy(False, 1, 4)`` -> ``test_server_client_hierarchy`` (2
  machines x 2 trainers, partitioned with ``num_trainers_per_machine=2``: DGL's 1 x 4; the
  union of every trainer's node_split / edge_split by ``trainer_id`` is the selection);
  ``check_server_client_empty(True, 1, 1)`` -> ``test_server_client_empty``;
  ``check_server_client_hetero`` -> ``test_server_client_hetero``; ``check_server_client`` ->
  ``test_server_client``. The ``shared_mem=False`` variants are left out: the runtime always
  shares memory (there is no ``disable_shared_mem``). The ``num_groups > 1`` variants
  (commented out in DGL too) are left out: there is no client-group concept here
  (``DGL_GROUP_ID``, ``keep_alive`` servers, ``shutdown_servers``).
- ``test_dist_emb_server_client`` (``check_dist_emb_server_client(True, 1, 1)``): here, two
  trainers on two machines; ``(False, 1, 1)`` left out as above.
- ``test_dist_optim_server_client``: here: save the SparseAdagrad state with 4 trainers (2 x
  2), then load it on fresh servers with more trainers (2 x 3: DGL's 8; the three trainers
  without a file warn and load nothing, as DGL's) and with fewer (2 x 1, each reading the
  files of the ranks gone), comparing every row and the hyper-parameters each time.
- ``test_split``, ``test_split_even``: tests/compat/test_split.py.

Left out inside the checks (DGL internals only): ``run_server``'s check of the server's
``client_g`` dtypes (DGL's in-server DGLGraph, ``RESERVED_FIELD_DTYPE``);
``g._client.data_name_list()`` (see _dist_util).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import runtime
from partitioner import partition_graph
from partitioner.graph import Graph
from partitioner.loader import load_orig_ids
from runtime.store.shm import job_files
from testing.ports import free_port_range
from testing.servers import running_cluster
from testing.timeouts import IDLE_GRACE, TIMEOUT
from tests.compat._dist_util import check_dist_emb, check_dist_graph, random_graph, random_hetero

# processes.

NUM_NODES = 10000


@pytest.fixture(scope="module")
def graph_10k():
    """DGL's create_random_graph(10000) with its ``features`` (built once: ~4 s)."""
    return random_graph(NUM_NODES)


@pytest.fixture
def standalone_graph(tmp_path, graph_10k):
    g = graph_10k
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




# A trainer of a server/client test: DGL's run_client / run_client_empty / run_emb_client /
# run_optim_client / run_client_hetero / run_client_hierarchy (argv: rank, part config, which
# check, the test's folder, ip_config).
CLIENT = textwrap.dedent("""
    import os
    import sys
    from pathlib import Path
    import numpy as np
    import torch
    import runtime
    from partitioner.loader import load_orig_ids, load_partition_book
    from tests.compat import _dist_util as u

    rank, cfg, what, tmp, ip_config = int(sys.argv[1]), *sys.argv[2:6]
    tmp = Path(tmp)
    runtime.initialize(ip_config)  # DGL: "kv_ip_config.txt", written by the test
    machine = int(os.environ["DGLCTL_MACHINE_ID"])  # the part this trainer's machine holds
    gpb, graph_name, _, _ = load_partition_book(cfg, machine)
    g = runtime.DistGraph(graph_name, gpb=gpb)
    num_clients = int(os.environ["WORLD_SIZE"])
    if what == "homo":
        orig_n, orig_e = load_orig_ids(cfg)
        u.check_dist_graph(g, num_clients, g.num_nodes(), g.num_edges(), orig_n["_N"],
                           orig_e[("_N", "_E", "_N")])
    elif what == "empty":
        u.check_dist_graph_empty(g, num_clients, g.num_nodes(), g.num_edges())
    elif what == "emb":
        u.check_dist_emb(g, num_clients, g.num_nodes(), g.num_edges())
    elif what == "hierarchy":
        masks = np.load(tmp / "masks.npz")
        r, (nodes, edges) = u.split_hierarchy(g, masks["node"], masks["edge"])
        np.savez(tmp / f"split_{r}.npz", nodes=nodes.numpy(), edges=edges.numpy())
    elif what in ("optim_save", "optim_load"):
        torch.distributed.init_process_group("gloo", rank=rank, world_size=num_clients)
        states = list(torch.from_numpy(np.load(tmp / "optim_states.npy")))  # made by the test
        u.check_dist_optim_store(rank, g.num_nodes(), states, what == "optim_save",
                                 tmp / "emb.pt")
    else:
        orig_n, orig_e = load_orig_ids(cfg)
        num_nodes = {t: g.num_nodes(t) for t in g.ntypes}
        num_edges = {c[1]: g.num_edges(c) for c in g.canonical_etypes}
        u.check_dist_graph_hetero(g, num_clients, num_nodes, num_edges, orig_n["n1"],
                                  orig_e[("n1", "r1", "n2")])
    # DGL's servers wait for every client to connect; these exit once every client has gone,
    # so no trainer leaves before all have come (a fast one would end the job).
    g.barrier()
    print("ok", rank)
""")


def _partition(graph, tmp_path, **kwargs):
    partition_graph(graph, "dist_graph_test", 2, tmp_path / "dist_graph", **kwargs)
    return tmp_path / "dist_graph" / "dist_graph_test.json"


def _run_clients(cfg, tmp_path, what: str, per_machine: int = 1) -> None:
    """Servers of ``cfg`` on two machines, ``per_machine`` trainers each running check
    ``what``; every trainer must print "ok", and nothing is left behind."""
    world = 2 * per_machine
    with running_cluster(cfg, tmp_path, num_servers=1, idle_grace=IDLE_GRACE) as cluster:
        # Trainers get the whole TIMEOUT as their peer timeout: up to six of them start at
        # once on the 2-core machine, so one's hello can wait seconds for its server.
        cluster.timeout = TIMEOUT
        port = free_port_range(["127.0.0.1"], 1)
        procs = []
        try:
            for rank in range(world):
                env = cluster.env("trainer", rank // per_machine, num_trainers=per_machine)
                env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(
                    rank % per_machine), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", CLIENT, str(rank), str(cfg), what, str(tmp_path),
                     str(cluster.ip_config)], env=env, cwd=tmp_path,
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
        for p in cluster.procs:  # the servers exit once their clients have gone (and the
            p.wait(cluster.leave_within())  # idle grace is over)
        assert job_files(cluster.job_id) == []


@pytest.mark.multiprocess
def test_server_client(tmp_path, graph_10k):
    """DGL's check_server_client(True, 1, 1): two trainers on two machines."""
    _run_clients(_partition(graph_10k, tmp_path), tmp_path, "homo")


@pytest.mark.multiprocess
def test_server_client_empty(tmp_path, graph_10k):
    """DGL's check_server_client_empty(True, 1, 1): a graph without data (DGL's
    create_random_graph(10000): graph_10k's edges)."""
    (src, dst), = graph_10k.edges.values()
    empty = Graph.homogeneous(src, dst, graph_10k.total_nodes)
    _run_clients(_partition(empty, tmp_path), tmp_path, "empty")


@pytest.mark.multiprocess
def test_server_client_hierarchy(tmp_path, graph_10k):
    """DGL's check_server_client_hierarchy(False, 1, 4): partitioned for 2 trainers per
    machine, each trainer splits a selection by trainer id; together they cover it once."""
    cfg = _partition(graph_10k, tmp_path, num_trainers_per_machine=2)
    rng = np.random.default_rng(0)  # DGL's draws are unseeded
    n, m = graph_10k.total_nodes, graph_10k.total_edges
    node_mask = np.zeros((n,), np.int32)
    edge_mask = np.zeros((m,), np.int32)
    nodes = rng.choice(n, n // 10, replace=False)
    edges = rng.choice(m, m // 10, replace=False)
    node_mask[nodes] = 1
    edge_mask[edges] = 1
    nodes = np.sort(nodes)
    edges = np.sort(edges)
    np.savez(tmp_path / "masks.npz", node=node_mask, edge=edge_mask)
    _run_clients(cfg, tmp_path, "hierarchy", per_machine=2)
    got = [np.load(tmp_path / f"split_{r}.npz") for r in range(4)]
    nodes1 = np.sort(np.concatenate([s["nodes"] for s in got]))
    edges1 = np.sort(np.concatenate([s["edges"] for s in got]))
    assert np.all(nodes1 == nodes)
    assert np.all(edges1 == edges)


@pytest.mark.multiprocess
def test_server_client_hetero(tmp_path):
    """DGL's check_server_client_hetero: two trainers on two machines."""
    _run_clients(_partition(random_hetero(), tmp_path), tmp_path, "hetero")


@pytest.mark.multiprocess
def test_dist_emb_server_client(tmp_path, graph_10k):
    """DGL's check_dist_emb_server_client(True, 1, 1): two trainers on two machines."""
    _run_clients(_partition(graph_10k, tmp_path), tmp_path, "emb")


@pytest.mark.multiprocess
def test_dist_optim_server_client(tmp_path, graph_10k):
    """DGL's test_dist_optim_server_client: save the optimizer state with 4 trainers, load it
    into fresh servers with more (DGL: 8, here 6) and with fewer (2) trainers."""
    rng = np.random.default_rng(0)
    states = rng.uniform(0, 1, (2, NUM_NODES, 1)).astype(np.float32)  # DGL's F.uniform
    np.save(tmp_path / "optim_states.npy", states)
    cfg = _partition(graph_10k, tmp_path)
    _run_clients(cfg, tmp_path, "optim_save", per_machine=2)
    assert sorted(p.name for p in tmp_path.glob("emb.pt_*")) == [f"emb.pt_{r}" for r in range(4)]
    _run_clients(cfg, tmp_path, "optim_load", per_machine=3)
    _run_clients(cfg, tmp_path, "optim_load", per_machine=1)
