"""DGL's distributed data loader tests, ported.

From dmlc/dgl ``tests/distributed/test_mp_dataloader.py`` at v1.1.3
(commit 6e2c0f489ba4cfae4614d6f07da41e0ecd36b226). Each check keeps its assertions; what
changed and why:

- Graphs: DGL's Cora becomes ``create_random_graph(3000)`` (no dataset download here);
  ``create_random_hetero`` is this file's DGL one (n1/n2/n3 of 10000/10010/10020 nodes,
  r1/r2/r3). ``dgl.rand_graph(1000, 10000)`` becomes a uniform random graph of that size.
- DGL's names: ``dgl.dataloading.X`` is ``runtime.loader.dataloading.X`` (the one import a
  DGL script changes); ``dgl.distributed.X`` is ``runtime.X``.
- Partitioning: ``partitioner.partition_graph``; DGL's ``return_mapping=True`` is the
  partition's ``orig_nids``/``orig_eids``.
- Servers: DGL spawns servers and a trainer process; here the job's servers run on
  127.0.0.1 and 127.0.0.2 (``running_cluster``) and this test process is machine 0's trainer.
  DGL's ``num_server=3`` is 2 machines here and its ``num_workers=4`` is 2 sampler processes
  (a 2-core machine). The parameter combinations of one graph run in one job (a job per graph
  instead of one per combination), each in DGL's order; DGL's ``DGL_NUM_SAMPLER`` (read by
  ``DistDataLoader``) is its ``num_samplers=`` argument here. ``disable_shared_mem`` has no
  counterpart.
- Graph name: DGL opens the ``test_sampling`` partition as ``DistGraph("test_mp", gpb=gpb,
  ...)``. test_standalone does the same (standalone, the config's graph opens under any
  name, as DGL, with a log line); in a launched job that is a DistError (the job serves the
  launcher's partition and reads no part_config of the script, so the name is the check that
  it serves the graph meant: test_other_graph_name_refused_in_a_job), so the job tests open
  ``test_sampling``.
- start_dist_dataloader: DGL's last-batch check takes the largest *edge destination* of the
  last block; on the random graph (unlike Cora) a seed may have no in-edge, so the check
  takes the largest destination *node* of the last block (same meaning: the last batch is
  there without drop_last, gone with it).
- ``groundtruth_g.has_edges_between`` is ``EdgeIndex``'s, on the input arrays.

- test_multiple_dist_dataloaders: its random choice of the next loader draws from a seeded
  numpy Generator (DGL's global ``np.random``), and a finished loader is closed (stops its
  sampler processes) as it is dropped.

Left out: ``num_groups > 1`` (DGL's server groups and ``shutdown_servers``: no counterpart),
``test_standalone``'s ``try/except print`` (a failure here fails the test).
"""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pytest
import torch

import runtime as dg
from partitioner import load_partition_book
from partitioner.graph import Graph
from runtime import NID
from runtime.errors import DistError
from runtime.loader import dataloading
from tests.compat._sampling_util import (
    EdgeIndex,
    create_random_graph,
    create_random_hetero,
    partition,
    trainer_of,
)

NUM_WORKERS = (0, 2)  # DGL: (0, 4)


def _mp_hetero() -> Graph:
    g = create_random_hetero(sizes={"n1": 10000, "n2": 10010, "n3": 10020},
                             names=("r1", "r2", "r3"))
    g.ndata["n1"] = {"feat": np.arange(10000, dtype=np.int64)[:, None]}
    n_r1 = len(g.edges[("n1", "r1", "n2")][0])
    g.edata[("n1", "r1", "n2")] = {"feat": np.arange(n_r1, dtype=np.int64)[:, None]}
    return g


def _check_block(block, index, orig_nid, pair_graphs=()):
    """The loops of start_node/edge/neg_dataloader: every edge of the last block is an edge
    of the input graph; the block's destination nodes are the pair graphs' nodes."""
    for src_type, etype, dst_type in block.canonical_etypes:
        o_src, o_dst = block.edges(etype=etype)
        src_ids = block.srcnodes[src_type].data[NID][o_src]
        dst_ids = block.dstnodes[dst_type].data[NID][o_dst]
        src_ids = orig_nid[src_type][src_ids.numpy()]
        dst_ids = orig_nid[dst_type][dst_ids.numpy()]
        assert np.all(index.has_edges_between(src_ids, dst_ids, etype=etype))
        for pair in pair_graphs:
            np.testing.assert_array_equal(block.dstnodes[dst_type].data[NID].numpy(),
                                          pair.nodes[dst_type].data[NID].numpy())


def start_dist_dataloader(part_config, drop_last, orig_nid, index, num_samplers=0,
                          graph_name="test_sampling", gpb=None):
    num_nodes_to_sample, batch_size = 202, 32
    train_nid = torch.arange(num_nodes_to_sample)
    dist_graph = dg.DistGraph(graph_name, gpb=gpb, part_config=str(part_config))
    sampler = dg.NeighborSampler(dist_graph, [5, 10], dg.sample_neighbors)
    for _ in range(2):  # creating the loader more than once
        dataloader = dg.DistDataLoader(dataset=train_nid.numpy(), batch_size=batch_size,
                                       collate_fn=sampler.sample_blocks, shuffle=False,
                                       drop_last=drop_last, num_samplers=num_samplers)
        max_nid = []
        for _epoch in range(2):
            for _, blocks in zip(range(0, num_nodes_to_sample, batch_size), dataloader,
                                 strict=False):
                block = blocks[-1]
                max_nid.append(int(block.dstdata[NID].max()))
                _check_block(block, index, orig_nid)
            if drop_last:
                assert max(max_nid) == num_nodes_to_sample - 1 - num_nodes_to_sample % batch_size
            else:
                assert max(max_nid) == num_nodes_to_sample - 1
        dataloader.close()
        del dataloader


def start_node_dataloader(dist_graph, num_workers, orig_nid, index, g):
    num_nodes_to_sample, batch_size = 202, 32
    assert len(dist_graph.ntypes) == len(g.num_nodes)
    assert len(dist_graph.etypes) == len(g.edges)
    if len(dist_graph.etypes) == 1:
        train_nid = torch.arange(num_nodes_to_sample)
    else:
        train_nid = {"n3": torch.arange(num_nodes_to_sample)}
    sampler = dataloading.MultiLayerNeighborSampler(
        [{etype: 5 for etype in dist_graph.etypes} if len(dist_graph.etypes) > 1 else 5, 10])
    for _ in range(2):
        dataloader = dataloading.DistNodeDataLoader(dist_graph, train_nid, sampler,
                                                    batch_size=batch_size, shuffle=True,
                                                    drop_last=False, num_workers=num_workers)
        for _epoch in range(2):
            for _, (_, _, blocks) in zip(range(0, num_nodes_to_sample, batch_size),
                                         dataloader, strict=False):
                _check_block(blocks[-1], index, orig_nid)
        dataloader.close()
        del dataloader


def _train_eid(dist_graph, n):
    if len(dist_graph.etypes) == 1:
        return torch.arange(n)
    return {dist_graph.etypes[0]: torch.arange(n)}


def start_edge_dataloader(dist_graph, num_workers, orig_nid, index, g):
    num_edges_to_sample, batch_size = 202, 32
    assert len(dist_graph.ntypes) == len(g.num_nodes)
    assert len(dist_graph.etypes) == len(g.edges)
    sampler = dataloading.MultiLayerNeighborSampler([5, 10])
    for _ in range(2):
        dataloader = dataloading.DistEdgeDataLoader(
            dist_graph, _train_eid(dist_graph, num_edges_to_sample), sampler,
            batch_size=batch_size, shuffle=True, drop_last=False, num_workers=num_workers)
        for _epoch in range(2):
            for _, (_, pos_pair_graph, blocks) in zip(range(0, num_edges_to_sample, batch_size),
                                                      dataloader, strict=False):
                _check_block(blocks[-1], index, orig_nid, [pos_pair_graph])
        dataloader.close()
        del dataloader


def start_dist_neg_dataloader(dist_graph, num_workers, orig_nid, index, g):
    num_edges_to_sample, batch_size, num_negs = 202, 32, 5
    assert len(dist_graph.ntypes) == len(g.num_nodes)
    assert len(dist_graph.etypes) == len(g.edges)
    sampler = dataloading.MultiLayerNeighborSampler([5, 10])
    negative_sampler = dataloading.negative_sampler.Uniform(num_negs)
    dataloader = dataloading.DistEdgeDataLoader(
        dist_graph, _train_eid(dist_graph, num_edges_to_sample), sampler,
        batch_size=batch_size, negative_sampler=negative_sampler, shuffle=True,
        drop_last=False, num_workers=num_workers)
    for _ in range(2):
        for _, (_, pos_graph, neg_graph, blocks) in zip(
                range(0, num_edges_to_sample, batch_size), dataloader, strict=False):
            _check_block(blocks[-1], index, orig_nid, [pos_graph, neg_graph])
            assert pos_graph.num_edges() * num_negs == neg_graph.num_edges()
    dataloader.close()
    del dataloader


@pytest.fixture(scope="module")
def homo(tmp_path_factory):
    g = create_random_graph(3000)
    return g, partition(g, "test_sampling", 2, tmp_path_factory.mktemp("two"))


@pytest.fixture
def standalone_runtime(monkeypatch):
    """This process initialized standalone (no env contract), as DGL's test_standalone."""
    monkeypatch.setenv("WORLD_SIZE", "1")
    dg.exit_client()
    dg.initialize()
    yield
    dg.exit_client()


def _opened_lines(caplog, name, cfg):
    return [r for r in caplog.records if r.name == "runtime.dist_graph"
            and r.levelno == logging.WARNING and f"DistGraph({name!r})" in r.getMessage()
            and "opened graph 'test_sampling'" in r.getMessage() and str(cfg) in r.getMessage()]


@pytest.mark.unit
def test_standalone(tmp_path, standalone_runtime):
    """DGL's call: the partition is test_sampling, the graph is opened as "test_mp" (with the
    book of load_partition, DGL's ``gpb``)."""
    g = create_random_graph(3000)
    cfg, orig_nid, _ = partition(g, "test_sampling", 1, tmp_path)
    gpb, _, _, _ = load_partition_book(cfg, 0)
    start_dist_dataloader(cfg, True, orig_nid, EdgeIndex(g), graph_name="test_mp", gpb=gpb)


@pytest.mark.unit
def test_standalone_other_graph_name(tmp_path, standalone_runtime, caplog):
    """Standalone, ``DistGraph("test_mp", part_config="test_sampling.json")`` opens the config's
    graph under the name given (as DGL), says so in the log, and its data, tensors and
    pickled handle work under that name."""
    g = create_random_graph(300)
    n, et = g.total_nodes, next(iter(g.edges))
    g.ndata["_N"] = {"feat": np.arange(n, dtype=np.int64)[:, None]}
    g.edata[et] = {"feat": np.arange(len(g.edges[et][0]), dtype=np.int64)[:, None]}
    cfg, orig_nid, orig_eid = partition(g, "test_sampling", 1, tmp_path)
    caplog.set_level(logging.WARNING, logger="runtime.dist_graph")
    dist_g = dg.DistGraph("test_mp", part_config=str(cfg))
    assert len(_opened_lines(caplog, "test_mp", cfg)) == 1
    assert dist_g.graph_name == "test_mp"
    assert dist_g.num_nodes() == n and dist_g.num_edges() == g.total_edges
    nids, eids = torch.arange(n), torch.arange(g.total_edges)
    np.testing.assert_array_equal(dist_g.ndata["feat"][nids].numpy()[:, 0], orig_nid["_N"])
    np.testing.assert_array_equal(dist_g.edata["feat"][eids].numpy()[:, 0], orig_eid[et])
    dist_g.ndata["h"] = dg.DistTensor((n, 2), torch.float32, "h")
    dist_g.ndata["h"][nids[:5]] = torch.ones(5, 2)
    assert dist_g.ndata["h"][nids].sum().item() == 10
    dist_g.barrier()
    again = pickle.loads(pickle.dumps(dist_g))  # a sampler process's copy: same name, same data
    assert again.graph_name == "test_mp" and len(_opened_lines(caplog, "test_mp", cfg)) == 2
    np.testing.assert_array_equal(again.ndata["feat"][nids].numpy()[:, 0], orig_nid["_N"])
    caplog.clear()
    dg.DistGraph("test_sampling", part_config=str(cfg))  # the config's own name: no line
    assert not [r for r in caplog.records if r.name == "runtime.dist_graph"]


@pytest.mark.multiprocess
def test_other_graph_name_refused_in_a_job(homo, tmp_path, monkeypatch):
    """In a launched job DGL's ``DistGraph("test_mp")`` on test_sampling's partition is a
    DistError that says why (the job serves the launcher's partition, the script's
    part_config is not read) and which name to use."""
    _, (cfg, _, _) = homo
    with trainer_of(cfg, tmp_path, monkeypatch):
        with pytest.raises(DistError) as err:
            dg.DistGraph("test_mp", part_config="test_sampling.json")
        assert not isinstance(err.value, AssertionError)
        msg = str(err.value)
        assert "this job was launched with graph 'test_sampling'" in msg and str(cfg) in msg
        assert "does not read the script's part_config" in msg
        assert "open it as DistGraph('test_sampling')" in msg
        assert dg.DistGraph("test_sampling").graph_name == "test_sampling"  # the job goes on


@pytest.mark.multiprocess
@pytest.mark.parametrize("graph", ["homo", "hetero"])
def test_dataloaders(graph, homo, tmp_path, tmp_path_factory, monkeypatch):
    """test_dist_dataloader (homogeneous: DGL runs it on Cora only), test_dataloader (node,
    edge) and test_neg_dataloader, every num_workers, on one job per graph."""
    if graph == "homo":
        g, (cfg, orig_nid, _) = homo
    else:
        g = _mp_hetero()
        cfg, orig_nid, _ = partition(g, "test_sampling", 2, tmp_path_factory.mktemp("het"))
    index = EdgeIndex(g)
    with trainer_of(cfg, tmp_path, monkeypatch):
        for num_workers in NUM_WORKERS:
            if graph == "homo":
                for drop_last in (True, False):
                    start_dist_dataloader(cfg, drop_last, orig_nid, index, num_workers)
            dist_graph = dg.DistGraph("test_sampling")
            start_node_dataloader(dist_graph, num_workers, orig_nid, index, g)
            start_edge_dataloader(dist_graph, num_workers, orig_nid, index, g)
            start_dist_neg_dataloader(dist_graph, num_workers, orig_nid, index, g)


def start_multiple_dataloaders(dist_g, orig_g, num_dataloaders, dataloader_type, num_workers):
    if dataloader_type == "node":
        train_ids = torch.arange(orig_g.total_nodes)
        batch_size = orig_g.total_nodes // 100
    else:
        train_ids = torch.arange(orig_g.total_edges)
        batch_size = orig_g.total_edges // 100
    sampler = dataloading.NeighborSampler([-1])
    dataloaders, dl_iters = [], []
    for _ in range(num_dataloaders):
        if dataloader_type == "node":
            dataloader = dataloading.DistNodeDataLoader(dist_g, train_ids, sampler,
                                                        batch_size=batch_size,
                                                        num_workers=num_workers)
        else:
            dataloader = dataloading.DistEdgeDataLoader(dist_g, train_ids, sampler,
                                                        batch_size=batch_size,
                                                        num_workers=num_workers)
        dataloaders.append(dataloader)
        dl_iters.append(iter(dataloader))
    # iterate on multiple dataloaders randomly
    rng = np.random.default_rng(0)
    while len(dl_iters) > 0:
        next_dl = rng.choice(len(dl_iters), 1)[0]
        try:
            _ = next(dl_iters[next_dl])
        except StopIteration:
            dl_iters.pop(next_dl)
            dataloaders.pop(next_dl).close()


@pytest.mark.multiprocess
def test_multiple_dist_dataloaders(tmp_path_factory, tmp_path, monkeypatch):
    """test_multiple_dist_dataloaders, num_dataloaders in (1, 4), num_workers in (0, 1) (DGL:
    (0, 1, 4)), node and edge loaders, on one job (2 machines; DGL: 1)."""
    rng = np.random.default_rng(0)
    orig_g = Graph.homogeneous(rng.integers(0, 1000, 10000), rng.integers(0, 1000, 10000),
                               1000)  # dgl.rand_graph(1000, 10000)
    cfg, _, _ = partition(orig_g, "test", 2, tmp_path_factory.mktemp("multi"))
    with trainer_of(cfg, tmp_path, monkeypatch):
        dist_g = dg.DistGraph("test")
        for dataloader_type in ("node", "edge"):
            for num_workers in (0, 1):
                for num_dataloaders in (1, 4):
                    start_multiple_dataloaders(dist_g, orig_g, num_dataloaders,
                                               dataloader_type, num_workers)
