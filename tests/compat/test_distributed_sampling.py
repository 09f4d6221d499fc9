"""DGL's distributed sampling tests, ported.

From dmlc/dgl ``tests/distributed/test_distributed_sampling.py`` at v1.1.3
(commit 6e2c0f489ba4cfae4614d6f07da41e0ecd36b226). Each check keeps its assertions; what
changed and why:

- Graphs: DGL's Cora becomes ``create_random_graph(3000)`` (DGL's own random test graph, with
  more nodes than the largest seed id 2008; no dataset download here); ``create_random_hetero``
  is DGL's (tests/compat/_sampling_util.py). The hetero checks share one graph,
  ``create_random_hetero(dense=True, empty=True)``, so that one job serves them all (the dense
  graph is what DGL's etype checks use; ``empty=True`` leaves nodes without in-edges for the
  empty checks; the other checks' seeds [0, 10, 99, 66, 124, 208] are taken as input ids,
  each with more than 3 in-edges per type, since some shuffled ids now have none).
- Partitioning: ``partitioner.partition_graph``; DGL's ``return_mapping=True`` is the
  partition's ``orig_nids``/``orig_eids`` (``load_orig_ids``), used as DGL uses the mapping.
- Servers: DGL spawns ``DistGraphServer``s and a client process; here the job's servers run
  on 127.0.0.1 and 127.0.0.2 (``running_cluster``: 2 machines, 1 server each) and this test
  process is machine 0's trainer. DGL's ``num_server`` in (1, 2) is 2 here only (1 machine
  with servers is the standalone checks' case). ``disable_shared_mem``/``gpb=`` have no
  counterpart (a trainer always maps its machine's shared memory).
- ``g.has_edges_between``/``g.edge_ids``/``g.find_edges`` on the original graph are
  ``EdgeIndex``'s, on the input arrays.
- check_standalone_etype_sampling_heterograph: DGL's seeds are Cora nodes, each with in-edges
  of both types; on the random graph the seeds are the first 10 such nodes (same meaning:
  fanout 1 gives exactly one edge per seed and type).

Left out: ``test_rpc_sampling`` (skipped in DGL itself: "Only support partition with
shuffle"), the check that a local partition's in-edges are sorted by edge type in
``start_hetero_etype_sample_client`` (reads DGL's ``local_partition`` internals and
``dgl.ETYPE``), ``num_groups > 1`` (DGL's server groups, no counterpart), ``graph_formats``
(DGL's storage formats; the partition here always holds CSC and out-CSR).
``create_random_bipartite``'s ``dgl.rand_bipartite`` is 1000 distinct random (user, game)
pairs from numpy.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

import runtime as dg
from runtime import EID, NID
from tests.compat._sampling_util import (
    EdgeIndex,
    create_random_graph,
    create_random_hetero,
    partition,
    trainer_of,
)

SEEDS = [0, 10, 99, 66, 1024, 2008]


def _homo_graph():
    g = create_random_graph(3000)
    rng = np.random.default_rng(0)
    n = len(g.edges[("_N", "_E", "_N")][0])
    prob = np.maximum(rng.standard_normal(n), 0).astype(np.float32)
    g.edata[("_N", "_E", "_N")] = {"prob": prob, "mask": (prob > 0).astype(np.float32)}
    return g


@pytest.fixture(scope="module")
def homo(tmp_path_factory):
    g = _homo_graph()
    one = partition(g, "test_sampling", 1, tmp_path_factory.mktemp("one"))
    two = partition(g, "test_sampling", 2, tmp_path_factory.mktemp("two"))
    return g, one, two


@pytest.fixture
def standalone_client(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    dg.exit_client()
    dg.initialize()
    yield
    dg.exit_client()


def _check_sampled(sampled, g, orig_n, orig_e):
    """start_sample_client_shuffle's checks: the sampled edges exist, with their edge ids."""
    src, dst = sampled.edges()
    src, dst = orig_n["_N"][src.numpy()], orig_n["_N"][dst.numpy()]
    assert sampled.num_nodes() == g.num_nodes["_N"]
    index = EdgeIndex(g)
    assert np.all(index.has_edges_between(src, dst))
    eids = index.edge_ids(src, dst)
    np.testing.assert_array_equal(orig_e[("_N", "_E", "_N")][sampled.edata[EID].numpy()], eids)


# --- standalone ----------------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize("sample", ["sample_neighbors", "sample_etype_neighbors"])
def test_standalone_sampling(homo, standalone_client, sample):
    """check_standalone_sampling and check_standalone_etype_sampling (the same checks)."""
    g, (cfg, orig_n, orig_e), _ = homo
    fn = getattr(dg, sample)
    dist_graph = dg.DistGraph("test_sampling", part_config=str(cfg))
    seeds = SEEDS[:5] if sample == "sample_etype_neighbors" else SEEDS
    _check_sampled(fn(dist_graph, seeds, 3), g, orig_n, orig_e)
    edata = g.edata[("_N", "_E", "_N")]
    eid = orig_e[("_N", "_E", "_N")][fn(dist_graph, seeds, 3, prob="mask").edata[EID].numpy()]
    assert (edata["mask"][eid] > 0).all()
    eid = orig_e[("_N", "_E", "_N")][fn(dist_graph, seeds, 3, prob="prob").edata[EID].numpy()]
    assert (edata["prob"][eid] > 0).all()


@pytest.mark.unit
def test_standalone_etype_sampling_heterograph(tmp_path, standalone_client):
    base = create_random_graph(3000)
    src, dst = base.edges[("_N", "_E", "_N")]
    from partitioner.graph import Graph

    new_hg = Graph(num_nodes={"paper": 3000},
                   edges={("paper", "cite", "paper"): (src, dst),
                          ("paper", "cite-by", "paper"): (dst.copy(), src.copy())})
    cfg, orig_n, _ = partition(new_hg, "test_hetero_sampling", 1, tmp_path)
    dist_graph = dg.DistGraph("test_hetero_sampling", part_config=str(cfg))
    both = np.intersect1d(dst, src)[:10]  # input ids with in-edges of both types
    inv = np.argsort(orig_n["paper"])
    # (Not in DGL's check: its DistGraph.sample_neighbors method, which on a graph of
    # several edge types is sample_etype_neighbors.)
    for sampled in (dg.sample_etype_neighbors(dist_graph, inv[both], 1),
                    dist_graph.sample_neighbors(inv[both], 1)):
        s, _ = sampled.edges(etype=("paper", "cite", "paper"))
        assert len(s) == 10
        s, _ = sampled.edges(etype=("paper", "cite-by", "paper"))
        assert len(s) == 10
        assert sampled.num_nodes() == 3000


@pytest.mark.unit
def test_standalone_to_block_and_in_subgraph(homo, standalone_client):
    """Not a DGL check: DGL's to_block(sampled, seeds) and in_subgraph on the same graph."""
    g, (cfg, orig_n, orig_e), _ = homo
    dist_graph = dg.DistGraph("test_sampling", part_config=str(cfg))
    sampled = dg.sample_neighbors(dist_graph, SEEDS, 3)
    block = dg.to_block(sampled, torch.tensor(SEEDS))
    np.testing.assert_array_equal(block.dstdata[NID].numpy(), SEEDS)
    assert block.num_edges() == sampled.num_edges()
    s, d = block.edges()
    np.testing.assert_array_equal(block.srcdata[NID][s].numpy(), sampled.edges()[0].numpy())
    np.testing.assert_array_equal(block.dstdata[NID][d].numpy(), sampled.edges()[1].numpy())
    sub = dg.in_subgraph(dist_graph, SEEDS)
    want = dist_graph.in_degrees(torch.tensor(SEEDS)).sum().item()
    assert sub.num_edges() == want and sub.num_nodes() == dist_graph.num_nodes()


@pytest.mark.unit
def test_standalone_graph_method_and_pickle(homo, standalone_client):
    """Not a DGL check: DGL's ``DistGraph.sample_neighbors`` method, and a DistGraph pickled
    as a handle (DGL's ``__getstate__`` keeps the name and partition) that opens the graph
    again when loaded."""
    g, (cfg, orig_n, orig_e), _ = homo
    dist_graph = dg.DistGraph("test_sampling", part_config=str(cfg))
    _check_sampled(dist_graph.sample_neighbors(SEEDS, 3), g, orig_n, orig_e)
    blob = pickle.dumps(dist_graph)
    assert len(blob) < 1000  # a handle, not the graph
    again = pickle.loads(blob)
    assert again is not dist_graph and again.num_edges() == dist_graph.num_edges()
    eids = torch.arange(0, dist_graph.num_edges(), 13)
    assert torch.equal(again.edata["prob"][eids], dist_graph.edata["prob"][eids])


# --- servers and a client ------------------------------------------------------------------
@pytest.mark.multiprocess
def test_rpc_sampling_shuffle(homo, tmp_path, monkeypatch):
    """check_rpc_sampling_shuffle, check_rpc_find_edges_shuffle, check_rpc_get_degree_shuffle
    and check_rpc_in_subgraph_shuffle on one job (num_server=2)."""
    g, _, (cfg, orig_n, orig_e) = homo
    index = EdgeIndex(g)
    with trainer_of(cfg, tmp_path, monkeypatch):
        dist_graph = dg.DistGraph("test_sampling")
        _check_sampled(dg.sample_neighbors(dist_graph, SEEDS, 3), g, orig_n, orig_e)
        # find_edges: the input graph's ends of the edges, through the mapping.
        eids = torch.arange(0, dist_graph.num_edges(), 7)
        u, v = dist_graph.find_edges(eids)
        su, sv = index.find_edges(orig_e[("_N", "_E", "_N")][eids.numpy()])
        np.testing.assert_array_equal(orig_n["_N"][u.numpy()], su)
        np.testing.assert_array_equal(orig_n["_N"][v.numpy()], sv)
        # degrees of the shuffled ids equal the input graph's.
        nids = torch.arange(0, dist_graph.num_nodes(), 11)
        src, dst = g.edges[("_N", "_E", "_N")]
        want_in = np.bincount(dst, minlength=g.num_nodes["_N"])[orig_n["_N"][nids.numpy()]]
        want_out = np.bincount(src, minlength=g.num_nodes["_N"])[orig_n["_N"][nids.numpy()]]
        np.testing.assert_array_equal(dist_graph.in_degrees(nids).numpy(), want_in)
        np.testing.assert_array_equal(dist_graph.out_degrees(nids).numpy(), want_out)
        assert len(dist_graph.in_degrees()) == dist_graph.num_nodes()
        # in_subgraph: every in-edge of the nodes, each an edge of the input graph.
        nodes = torch.arange(0, 200)
        sub = dg.in_subgraph(dist_graph, nodes)
        s, d = sub.edges()
        s, d = orig_n["_N"][s.numpy()], orig_n["_N"][d.numpy()]
        assert np.all(index.has_edges_between(s, d))
        np.testing.assert_array_equal(orig_e[("_N", "_E", "_N")][sub.edata[EID].numpy()],
                                      index.edge_ids(s, d))
        assert sub.num_edges() == int(dist_graph.in_degrees(nodes).sum())


@pytest.fixture(scope="module")
def hetero(tmp_path_factory):
    g = create_random_hetero(dense=True, empty=True)
    return g, partition(g, "test_sampling", 2, tmp_path_factory.mktemp("hetero"))


def _check_block_ids(block, g, orig_n, orig_e):
    """check_rpc_hetero_sampling_shuffle's loop: every block edge is an edge of the input
    graph, with its edge id."""
    index = EdgeIndex(g)
    for src_type, etype, dst_type in block.canonical_etypes:
        src, dst = block.edges(etype=etype)
        shuffled_src = block.srcnodes[src_type].data[NID][src]
        shuffled_dst = block.dstnodes[dst_type].data[NID][dst]
        shuffled_eid = block.edges[etype].data[EID]
        c_etype = index.etype(etype)
        orig_src = orig_n[src_type][shuffled_src.numpy()]
        orig_dst = orig_n[dst_type][shuffled_dst.numpy()]
        orig_eid = orig_e[c_etype][shuffled_eid.numpy()]
        src1, dst1 = index.find_edges(orig_eid, etype=etype)
        assert np.all(src1 == orig_src)
        assert np.all(dst1 == orig_dst)


@pytest.mark.multiprocess
def test_rpc_hetero_sampling_shuffle(hetero, tmp_path, monkeypatch):
    """check_rpc_hetero_sampling_shuffle, check_rpc_hetero_sampling_empty_shuffle,
    check_rpc_hetero_etype_sampling_shuffle, check_rpc_hetero_etype_sampling_empty_shuffle
    and check_rpc_hetero_find_edges_shuffle on one job (num_server=2)."""
    g, (cfg, orig_n, orig_e) = hetero
    with trainer_of(cfg, tmp_path, monkeypatch):
        dist_graph = dg.DistGraph("test_sampling")
        assert "feat" in dist_graph.nodes["n1"].data
        assert "feat" not in dist_graph.nodes["n2"].data
        assert "feat" not in dist_graph.nodes["n3"].data
        # DGL's seeds, as input ids (with empty=True some shuffled ids have no in-edges).
        nodes = {"n3": np.argsort(orig_n["n3"])[[0, 10, 99, 66, 124, 208]].tolist()}
        for sample in (dg.sample_neighbors, dg.sample_etype_neighbors):
            fanout = 3 if sample is dg.sample_neighbors else {
                et: 3 for et in dist_graph.canonical_etypes}
            sampled = sample(dist_graph, nodes, fanout)
            block = dg.to_block(sampled, nodes)
            block.edata[EID] = sampled.edata[EID]
            _check_block_ids(block, g, orig_n, orig_e)
            if sample is dg.sample_etype_neighbors:
                assert len(block.edges(etype=("n1", "r13", "n3"))[0]) == 18
                assert len(block.edges(etype=("n2", "r23", "n3"))[0]) == 18
        # The empty checks: seeds without in-edges give a block of every type, no edges.
        index = EdgeIndex(g)
        deg = np.zeros(g.num_nodes["n3"], np.int64)
        for et in g.edges:
            if et[2] == "n3":
                deg += np.bincount(g.edges[et][1], minlength=g.num_nodes["n3"])
        inv = np.argsort(orig_n["n3"])
        empty_nids = {"n3": torch.from_numpy(inv[np.flatnonzero(deg == 0)])}
        assert len(empty_nids["n3"]) > 0
        for sample in (dg.sample_neighbors, dg.sample_etype_neighbors):
            block = dg.to_block(sample(dist_graph, empty_nids, 3), empty_nids)
            assert block.num_edges() == 0
            assert len(block.etypes) == len(g.edges)
        # find_edges per edge type (check_rpc_hetero_find_edges_shuffle).
        for et in g.edges:
            eids = torch.arange(0, dist_graph.num_edges(et), 3)
            u, v = dist_graph.find_edges(eids, etype=et)
            su, sv = index.find_edges(orig_e[et][eids.numpy()], etype=et)
            np.testing.assert_array_equal(orig_n[et[0]][u.numpy()], su)
            np.testing.assert_array_equal(orig_n[et[2]][v.numpy()], sv)


def create_random_bipartite():
    """DGL's ``create_random_bipartite``: ``dgl.rand_bipartite("user", "buys", "game", 500,
    1000, 1000)`` (1000 distinct random edges) with ``feat`` on both node types."""
    from partitioner.graph import Graph

    pick = np.random.default_rng(0).choice(500 * 1000, 1000, replace=False)
    return Graph(num_nodes={"user": 500, "game": 1000},
                 edges={("user", "buys", "game"): (pick // 1000, pick % 1000)},
                 ndata={"user": {"feat": np.ones((500, 10), np.float32)},
                        "game": {"feat": np.ones((1000, 10), np.float32)}})


@pytest.mark.multiprocess
def test_rpc_bipartite_sampling(tmp_path_factory, tmp_path, monkeypatch):
    """check_rpc_bipartite_sampling_empty/_shuffle and check_rpc_bipartite_etype_sampling_
    empty/_shuffle on one job (num_server=2)."""
    g = create_random_bipartite()
    cfg, orig_n, orig_e = partition(g, "test_sampling", 2, tmp_path_factory.mktemp("bip"))
    # get_degrees(g, orig_nids["game"], "game"): in-degree of each shuffled game id.
    deg = np.bincount(g.edges[("user", "buys", "game")][1], minlength=1000)[orig_n["game"]]
    with trainer_of(cfg, tmp_path, monkeypatch):
        dist_graph = dg.DistGraph("test_sampling")
        assert "feat" in dist_graph.nodes["user"].data
        assert "feat" in dist_graph.nodes["game"].data
        for sample in (dg.sample_neighbors, dg.sample_etype_neighbors):
            nodes = {"game": torch.from_numpy(np.flatnonzero(deg == 0)), "user": [1]}
            block = dg.to_block(sample(dist_graph, nodes, 3), nodes)
            assert block.num_edges() == 0
            assert len(block.etypes) == len(g.edges)
            nodes = {"game": torch.from_numpy(np.flatnonzero(deg > 0)), "user": [0]}
            sampled = sample(dist_graph, nodes, 3)
            block = dg.to_block(sampled, nodes)
            if sampled.num_edges() > 0:
                block.edata[EID] = sampled.edata[EID]
            assert block.num_edges() > 0
            _check_block_ids(block, g, orig_n, orig_e)
