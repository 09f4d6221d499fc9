"""The checks of DGL's tests/distributed/test_dist_graph_store.py, on this project's runtime.

Ported from dmlc/dgl tests/distributed/test_dist_graph_store.py at v1.1.3 (commit
6e2c0f489ba4cfae4614d6f07da41e0ecd36b226). Each ``check_*`` keeps DGL's assertions; they live
here (not in the test module) so that trainer processes of a server/client test import them.
What changed, and why:

- ``dgl.distributed.X`` -> ``runtime.X``; ``F.*`` backend calls -> torch/numpy; ``dgl.EID`` ->
  ``runtime.EID``; ``dgl.DGLError`` -> ``runtime.DGLError``.
- Graphs: the partitioner relabels edges even into one part (DGL's keeps their order there),
  so the ``features`` data (the input id of each node/edge) is compared with the input ids
  of the relabeled ids (``expect_n`` / ``expect_e``, from ``load_orig_ids``), not with the
  ids themselves.
- DGL internals replaced by public behaviour: ``g._client.data_name_list()`` (is the tensor
  still there after ``del``?) -> re-creating the name with another shape, which raises while
  the tensor exists and works once it is freed.
- ``check_dist_emb``: DGL catches every exception and exits(-1) (its child-process style);
  here an assertion fails the test (standalone) or the trainer's exit code does.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as spsp
import torch

import runtime
from partitioner.graph import Graph
from runtime.embedding import DistEmbedding
from runtime.errors import DistError
from runtime.optim import SparseAdagrad
from tests.compat.conftest import create_random_graph

DGL_COMMIT = "6e2c0f489ba4cfae4614d6f07da41e0ecd36b226"  # v1.1.3


def random_graph(n: int) -> Graph:
    """DGL's ``create_random_graph(n)`` (tests/compat/conftest.py) with the ``features`` data
    DGL's tests give it: each node's and edge's input id."""
    g = create_random_graph(n)
    (et,) = g.edges
    g.ndata[g.ntypes[0]]["features"] = np.arange(n, dtype=np.int64)[:, None]
    g.edata[et]["features"] = np.arange(len(g.edges[et][0]), dtype=np.int64)[:, None]
    return g


def emb_init(shape, dtype):
    return torch.zeros(shape, dtype=dtype)


def rand_init(shape, dtype):
    return torch.tensor(np.random.normal(size=shape), dtype=torch.float32)


def _recreate_fails(shape, name: str) -> bool:
    try:
        runtime.DistTensor(shape, torch.float32, name)
    except DistError:
        return True
    return False


def check_dist_graph_empty(g, num_clients, num_nodes, num_edges):
    """DGL's: a graph partitioned without node or edge data."""
    # Test API
    assert g.num_nodes() == num_nodes
    assert g.num_edges() == num_edges

    # Test init node data
    new_shape = (g.num_nodes(), 2)
    g.ndata["test1"] = runtime.DistTensor(new_shape, torch.int32)
    nids = torch.arange(0, int(g.num_nodes() / 2))
    feats = g.ndata["test1"][nids]
    assert np.all(feats.numpy() == 0)

    # create a tensor and destroy a tensor and create it again.
    test3 = runtime.DistTensor(new_shape, torch.float32, "test3", init_func=rand_init)
    del test3
    test3 = runtime.DistTensor((g.num_nodes(), 3), torch.float32, "test3")
    del test3

    # Test write data
    new_feats = torch.ones((len(nids), 2), dtype=torch.int32)
    g.ndata["test1"][nids] = new_feats
    feats = g.ndata["test1"][nids]
    assert np.all(feats.numpy() == 1)

    # Test metadata operations.
    assert g.node_attr_schemes()["test1"].dtype == torch.int32


def split_hierarchy(g, node_mask, edge_mask):
    """DGL's ``run_client_hierarchy`` after ``DistGraph``: this trainer's share of the
    selected nodes and edges, split by the trainer ids the partitioner wrote, and its rank."""
    node_mask = torch.tensor(node_mask)
    edge_mask = torch.tensor(edge_mask)
    nodes = runtime.node_split(node_mask, g.get_partition_book(),
                               node_trainer_ids=g.ndata["trainer_id"])
    edges = runtime.edge_split(edge_mask, g.get_partition_book(),
                               edge_trainer_ids=g.edata["trainer_id"])
    rank = g.rank()
    return rank, (nodes, edges)


def check_dist_graph(g, num_clients, num_nodes, num_edges, expect_n, expect_e):
    # Test API
    assert g.num_nodes() == num_nodes
    assert g.num_edges() == num_edges

    # Test reading node data
    nids = torch.arange(0, int(g.num_nodes() / 2))
    feats = g.ndata["features"][nids].squeeze(1)
    assert np.all(feats.numpy() == expect_n[nids.numpy()])

    # Test reading edge data
    eids = torch.arange(0, int(g.num_edges() / 2))
    feats = g.edata["features"][eids].squeeze(1)
    assert np.all(feats.numpy() == expect_e[eids.numpy()])

    # Test edge_subgraph
    sg = g.edge_subgraph(eids)
    assert sg.num_edges() == len(eids)
    assert torch.equal(sg.edata[runtime.EID], eids)

    # Test init node data
    new_shape = (g.num_nodes(), 2)
    test1 = runtime.DistTensor(new_shape, torch.int32)
    g.ndata["test1"] = test1
    feats = g.ndata["test1"][nids]
    assert np.all(feats.numpy() == 0)
    assert test1.count_nonzero() == 0

    # reference to a one that exists
    test2 = runtime.DistTensor(new_shape, torch.float32, "test2", init_func=rand_init)
    test3 = runtime.DistTensor(new_shape, torch.float32, "test2")
    assert np.all(test2[nids].numpy() == test3[nids].numpy())

    # create a tensor and destroy a tensor and create it again.
    test3 = runtime.DistTensor(new_shape, torch.float32, "test3", init_func=rand_init)
    # (DGL: test3's key is in g._client.data_name_list() and gone after ``del``.)
    assert _recreate_fails((g.num_nodes(), 3), "test3")
    del test3
    test3 = runtime.DistTensor((g.num_nodes(), 3), torch.float32, "test3")
    del test3

    # add tests for anonymous distributed tensor.
    test3 = runtime.DistTensor(new_shape, torch.float32, init_func=rand_init)
    data = test3[0:10]
    test4 = runtime.DistTensor(new_shape, torch.float32, init_func=rand_init)
    del test3
    test5 = runtime.DistTensor(new_shape, torch.float32, init_func=rand_init)
    assert np.sum((test5[0:10] != data).numpy()) > 0

    # test a persistent tesnor
    test4 = runtime.DistTensor(new_shape, torch.float32, "test4", init_func=rand_init,
                               persistent=True)
    del test4
    assert _recreate_fails((g.num_nodes(), 3), "test4")

    # Test write data
    new_feats = torch.ones((len(nids), 2), dtype=torch.int32)
    g.ndata["test1"][nids] = new_feats
    feats = g.ndata["test1"][nids]
    assert np.all(feats.numpy() == 1)

    # Test metadata operations.
    assert len(g.ndata["features"]) == g.num_nodes()
    assert g.ndata["features"].shape == (g.num_nodes(), 1)
    assert g.ndata["features"].dtype == torch.int64
    assert g.node_attr_schemes()["features"].dtype == torch.int64
    assert g.node_attr_schemes()["test1"].dtype == torch.int32
    assert g.node_attr_schemes()["features"].shape == (1,)

    selected_nodes = np.random.randint(0, 100, size=g.num_nodes()) > 30
    # Test node split
    nodes = runtime.node_split(selected_nodes, g.get_partition_book()).numpy()
    # We only have one partition, so the local nodes are basically all nodes in the graph.
    local_nids = np.arange(g.num_nodes())
    for n in nodes:
        assert n in local_nids


def check_dist_emb(g, num_clients, num_nodes, num_edges):
    # Test sparse emb
    emb = DistEmbedding(g.num_nodes(), 1, "emb1", emb_init)
    nids = torch.arange(0, int(g.num_nodes()))
    lr = 0.001
    optimizer = SparseAdagrad([emb], lr=lr)
    with torch.enable_grad():
        feats = emb(nids)
        assert np.all(feats.detach().numpy() == np.zeros((len(nids), 1)))
        loss = torch.sum(feats + 1, 0)
    loss.backward()
    optimizer.step()
    feats = emb(nids)
    if num_clients == 1:
        np.testing.assert_almost_equal(feats.detach().numpy(), np.ones((len(nids), 1)) * -lr)
    rest = np.setdiff1d(np.arange(g.num_nodes()), nids.numpy())
    feats1 = emb(rest)
    assert np.all(feats1.detach().numpy() == np.zeros((len(rest), 1)))

    policy = runtime.PartitionPolicy("node", g.get_partition_book())
    grad_sum = runtime.DistTensor((g.num_nodes(), 1), torch.float32, "emb1_sum", policy)
    if num_clients == 1:
        assert np.all(grad_sum[nids].numpy() == np.ones((len(nids), 1)) * num_clients)
    assert np.all(grad_sum[rest].numpy() == np.zeros((len(rest), 1)))

    emb = DistEmbedding(g.num_nodes(), 1, "emb2", emb_init)
    with torch.no_grad():
        feats1 = emb(nids)
    assert np.all(feats1.numpy() == 0)

    optimizer = SparseAdagrad([emb], lr=lr)
    with torch.enable_grad():
        feats1 = emb(nids)
        feats2 = emb(nids)
        feats = torch.cat([feats1, feats2], 0)
        assert np.all(feats.detach().numpy() == np.zeros((len(nids) * 2, 1)))
        loss = torch.sum(feats + 1, 0)
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        feats = emb(nids)
    if num_clients == 1:
        np.testing.assert_almost_equal(feats.numpy(), np.ones((len(nids), 1)) * 1 * -lr)
    rest = np.setdiff1d(np.arange(g.num_nodes()), nids.numpy())
    feats1 = emb(rest)
    assert np.all(feats1.detach().numpy() == np.zeros((len(rest), 1)))


def random_hetero() -> Graph:
    """DGL's ``create_random_hetero()``: three node types, three edge types, and data named
    as a type on purpose (DGL issues #4887, #4463): ``feat`` and ``n1`` on n1, ``feat`` and
    ``r1`` on r1, each the input id."""
    num_nodes = {"n1": 10000, "n2": 10010, "n3": 10020}
    etypes = [("n1", "r1", "n2"), ("n1", "r2", "n3"), ("n2", "r3", "n3")]
    edges = {}
    for etype in etypes:
        arr = spsp.random(num_nodes[etype[0]], num_nodes[etype[2]], density=0.001,
                          format="coo", random_state=100)
        edges[etype] = (arr.row.astype(np.int64), arr.col.astype(np.int64))
    n1 = np.arange(num_nodes["n1"], dtype=np.int64)[:, None]
    r1 = np.arange(len(edges[etypes[0]][0]), dtype=np.int64)[:, None]
    return Graph(num_nodes=num_nodes, edges=edges, ndata={"n1": {"feat": n1, "n1": n1}},
                 edata={etypes[0]: {"feat": r1, "r1": r1}})


def check_dist_graph_hetero(g, num_clients, num_nodes, num_edges, expect_n1, expect_r1):
    # Test API
    for ntype in num_nodes:
        assert ntype in g.ntypes
        assert num_nodes[ntype] == g.num_nodes(ntype)
    for etype in num_edges:
        assert etype in g.etypes
        assert num_edges[etype] == g.num_edges(etype)
    etypes = [("n1", "r1", "n2"), ("n1", "r2", "n3"), ("n2", "r3", "n3")]
    for i, etype in enumerate(g.canonical_etypes):
        assert etype[0] == etypes[i][0]
        assert etype[1] == etypes[i][1]
        assert etype[2] == etypes[i][2]
    assert g.num_nodes() == sum([num_nodes[ntype] for ntype in num_nodes])
    assert g.num_edges() == sum([num_edges[etype] for etype in num_edges])

    # Test reading node data
    ntype = "n1"
    nids = torch.arange(0, g.num_nodes(ntype) // 2)
    for name in ["feat", ntype]:
        data = g.nodes[ntype].data[name][nids].squeeze(1)
        assert np.all(data.numpy() == expect_n1[nids.numpy()])
    assert len(g.nodes["n2"].data) == 0
    expect_except = False
    try:
        g.nodes["xxx"].data["x"]
    except runtime.DGLError:
        expect_except = True
    assert expect_except

    # Test reading edge data
    etype = "r1"
    eids = torch.arange(0, g.num_edges(etype) // 2)
    for name in ["feat", etype]:
        # access via etype
        data = g.edges[etype].data[name][eids].squeeze(1)
        assert np.all(data.numpy() == expect_r1[eids.numpy()])
        # access via canonical etype
        c_etype = g.to_canonical_etype(etype)
        data = g.edges[c_etype].data[name][eids].squeeze(1)
        assert np.all(data.numpy() == expect_r1[eids.numpy()])
    assert len(g.edges["r2"].data) == 0
    expect_except = False
    try:
        g.edges["xxx"].data["x"]
    except runtime.DGLError:
        expect_except = True
    assert expect_except

    # Test edge_subgraph
    sg = g.edge_subgraph({"r1": eids})
    assert sg.num_edges() == len(eids)
    assert torch.equal(sg.edata[runtime.EID], eids)
    sg = g.edge_subgraph({("n1", "r1", "n2"): eids})
    assert sg.num_edges() == len(eids)
    assert torch.equal(sg.edata[runtime.EID], eids)

    # Test init node data
    new_shape = (g.num_nodes("n1"), 2)
    g.nodes["n1"].data["test1"] = runtime.DistTensor(new_shape, torch.int32)
    feats = g.nodes["n1"].data["test1"][nids]
    assert np.all(feats.numpy() == 0)

    # create a tensor and destroy a tensor and create it again.
    test3 = runtime.DistTensor(new_shape, torch.float32, "test3", init_func=rand_init)
    del test3
    test3 = runtime.DistTensor((g.num_nodes("n1"), 3), torch.float32, "test3")
    del test3

    # add tests for anonymous distributed tensor.
    test3 = runtime.DistTensor(new_shape, torch.float32, init_func=rand_init)
    data = test3[0:10]
    test4 = runtime.DistTensor(new_shape, torch.float32, init_func=rand_init)
    del test3
    test5 = runtime.DistTensor(new_shape, torch.float32, init_func=rand_init)
    assert np.sum((test5[0:10] != data).numpy()) > 0

    # test a persistent tesnor
    test4 = runtime.DistTensor(new_shape, torch.float32, "test4", init_func=rand_init,
                               persistent=True)
    del test4
    assert _recreate_fails((g.num_nodes("n1"), 3), "test4")

    # Test write data
    new_feats = torch.ones((len(nids), 2), dtype=torch.int32)
    g.nodes["n1"].data["test1"][nids] = new_feats
    feats = g.nodes["n1"].data["test1"][nids]
    assert np.all(feats.numpy() == 1)

    # Test metadata operations.
    assert len(g.nodes["n1"].data["feat"]) == g.num_nodes("n1")
    assert g.nodes["n1"].data["feat"].shape == (g.num_nodes("n1"), 1)
    assert g.nodes["n1"].data["feat"].dtype == torch.int64

    selected_nodes = np.random.randint(0, 100, size=g.num_nodes("n1")) > 30
    # Test node split
    nodes = runtime.node_split(selected_nodes, g.get_partition_book(), ntype="n1").numpy()
    # (DGL: one partition, so every share is a subset of all nodes of the type.)
    local_nids = np.arange(g.num_nodes("n1"))
    for n in nodes:
        assert n in local_nids


def check_dist_optim_store(rank, num_nodes, optimizer_states, save, path):
    """DGL's, with the checkpoint path as an argument (DGL: /tmp/dist_graph/emb.pt)."""
    total_idx = torch.arange(0, num_nodes, dtype=torch.int64)
    emb = DistEmbedding(num_nodes, 1, name="optim_emb1", init_func=emb_init)
    emb2 = DistEmbedding(num_nodes, 1, name="optim_emb2", init_func=emb_init)
    if save:
        optimizer = SparseAdagrad([emb, emb2], lr=0.1, eps=1e-08)
        if rank == 0:
            optimizer._state["optim_emb1"][total_idx] = optimizer_states[0]
            optimizer._state["optim_emb2"][total_idx] = optimizer_states[1]
        optimizer.save(path)
    else:
        optimizer = SparseAdagrad([emb, emb2], lr=0.001, eps=2e-08)
        optimizer.load(path)
        if rank == 0:
            torch.testing.assert_close(optimizer._state["optim_emb1"][total_idx],
                                       optimizer_states[0], rtol=0.0, atol=0.0)
            torch.testing.assert_close(optimizer._state["optim_emb2"][total_idx],
                                       optimizer_states[1], rtol=0.0, atol=0.0)
            assert 0.1 == optimizer._lr
            assert 1e-08 == optimizer._eps
        torch.distributed.barrier()
