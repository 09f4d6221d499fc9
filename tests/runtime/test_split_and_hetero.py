"""node_split / edge_split coverage, heterogeneous sampling, and server shutdown on SIGTERM."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from partitioner import load_partition_book, partition_graph
from runtime.rpc.client import ServerPool
from runtime.rpc.ip_config import read_ip_config
from runtime.split import edge_split, node_split
from runtime.store.shm import job_files
from testing.graphs import hetero_graph
from testing.timeouts import TIMEOUT


@pytest.mark.unit
@pytest.mark.parametrize("force_even", [True, False])
def test_node_split_covers_every_training_node_once(two_part_graph, force_even):
    g, cfg = two_part_graph
    book = load_partition_book(cfg)[0]
    from partitioner.loader import load_orig_ids

    orig = load_orig_ids(cfg)[0]["_N"]
    mask = g.ndata["_N"]["train_mask"][orig]  # in relabeled order
    world = 4  # 2 machines x 2 trainers
    shares = [node_split(mask, book, rank=r, force_even=force_even).numpy()
              for r in range(world)]
    # node_split reads RANK/WORLD_SIZE when torch.distributed is not initialised.
    allids = np.concatenate(shares)
    if force_even:
        sizes = [len(s) for s in shares]
        assert max(sizes) - min(sizes) <= 1
    np.testing.assert_array_equal(np.sort(allids), np.flatnonzero(mask))
    if not force_even:
        for r, s in enumerate(shares):
            assert np.all(book.nid2partid(s) == r // 2), "each trainer gets its machine's ids"


@pytest.fixture(autouse=True)
def _world(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")


@pytest.mark.unit
def test_edge_split(two_part_graph):
    _, cfg = two_part_graph
    book = load_partition_book(cfg)[0]
    mask = np.zeros(book.num_edges(), bool)
    mask[::3] = True
    shares = [edge_split(mask, book, rank=r).numpy() for r in range(4)]
    np.testing.assert_array_equal(np.sort(np.concatenate(shares)), np.flatnonzero(mask))


@pytest.mark.unit
def test_hetero_sampling_per_etype_fanout(tmp_path, monkeypatch):
    import runtime as dg
    from runtime.sampling.neighbor import NeighborSampler, sample_neighbor_edges

    monkeypatch.setenv("WORLD_SIZE", "1")
    gin = hetero_graph()
    partition_graph(gin, "h", 1, tmp_path / "p")
    dg.exit_client()
    dg.initialize()
    g = dg.DistGraph("h", part_config=str(tmp_path / "p" / "h.json"))
    assert set(g.ntypes) == {"paper", "author"} and len(g.canonical_etypes) == 3
    fanout = {"cites": 2, "writes": 3, "written-by": 1}
    seeds = {"paper": np.arange(0, 300, 10), "author": np.arange(0, 120, 10)}
    out = sample_neighbor_edges(g, seeds, fanout, seed=3)
    for et, (src, dst, eid) in out.items():
        counts = np.bincount(dst, minlength=g.num_nodes(et[2]))
        assert counts.max() <= fanout[et[1]]
        s_chk, d_chk = g.find_edges(eid, etype=et)
        np.testing.assert_array_equal(s_chk.numpy(), src)  # per-type ids, as DGL's
        np.testing.assert_array_equal(d_chk.numpy(), dst)
    blocks = NeighborSampler([fanout, fanout]).sample_blocks(seeds, g)
    assert set(blocks[-1].ntypes) == {"paper", "author"}
    np.testing.assert_array_equal(blocks[-1].dstdata["_ID"]["paper"].numpy(), seeds["paper"])
    feats = g.nodes["paper"].data["feat"][blocks[0].srcdata["_ID"]["paper"]]
    assert feats.shape[1] == 4
    dg.exit_client()


@pytest.mark.multiprocess
def test_sigterm_removes_shared_memory(cluster):
    pool = ServerPool(read_ip_config(cluster.ip_config), 2, cluster.token, cluster.timeout)
    pool.connect()  # keeps the servers from exiting on their own
    assert job_files(cluster.job_id)
    for p in cluster.procs:
        os.killpg(p.pid, signal.SIGTERM)
    for p in cluster.procs:
        assert p.wait(TIMEOUT) == 0
    assert job_files(cluster.job_id) == []
    pool.close()


@pytest.mark.unit
def test_hetero_find_edges_returns_per_type_ids(tmp_path, monkeypatch):
    """find_edges(eids, etype) on a heterograph answers in the edge type's per-type node ids
    (it answered homogeneous ids, which index past the end of per-type arrays)."""
    import torch

    import runtime as dg
    from partitioner.loader import load_orig_ids

    g_in = hetero_graph()
    partition_graph(g_in, "h", 1, tmp_path / "p")
    for k in [k for k in os.environ if k.startswith("DGLCTL_")]:
        monkeypatch.delenv(k)
    dg.exit_client()
    dg.initialize()
    try:
        g = dg.DistGraph("h", part_config=str(tmp_path / "p" / "h.json"))
        orig_n, orig_e = load_orig_ids(tmp_path / "p" / "h.json")
        for et in g_in.edges:
            eids = np.arange(g.num_edges(et))
            src, dst = g.find_edges(eids, etype=et)
            assert src.dtype == dst.dtype == torch.int64
            assert int(src.max()) < g.num_nodes(et[0]) and int(dst.max()) < g.num_nodes(et[2])
            s_in, d_in = g_in.edges[et]
            # New per-type ids -> input ids: the same end points as the input graph's edges.
            np.testing.assert_array_equal(orig_n[et[0]][src.numpy()], s_in[orig_e[et]])
            np.testing.assert_array_equal(orig_n[et[2]][dst.numpy()], d_in[orig_e[et]])
        src, dst = g.find_edges(np.array([0, 1]), etype="writes")  # the short name works too
        assert len(src) == len(dst) == 2
    finally:
        dg.exit_client()


@pytest.mark.multiprocess
def test_hetero_features_read_per_type_are_pulled_ahead(tmp_path, monkeypatch, pulls_by_thread):
    """On a heterograph the step reads one tensor per node type with that type's ids of the
    batch (``blocks[0].srcdata[NID][t]``): each is learnt and pulled on the prefetch thread,
    with the rows a direct read gives."""
    import runtime as dg
    from runtime.loader.dataloader import DistDataLoader
    from runtime.sampling.neighbor import NeighborSampler

    monkeypatch.setenv("WORLD_SIZE", "1")
    partition_graph(hetero_graph(), "h", 1, tmp_path / "p")
    dg.exit_client()
    dg.initialize()
    try:
        g = dg.DistGraph("h", part_config=str(tmp_path / "p" / "h.json"))
        pulls = pulls_by_thread
        sampler = NeighborSampler([{"cites": 2, "writes": 2, "written-by": 2}] * 2)
        loader = DistDataLoader(np.arange(0, 300, 3), 10, collate_fn=lambda ids: \
                                sampler.sample_blocks({"paper": ids}, g), prefetch=True,
                                queue_size=1)
        n = 0
        for blocks in loader:
            ids = blocks[0].srcdata["_ID"]
            for t, v in ids.items():
                x = g.nodes[t].data["feat"][v]
                np.testing.assert_array_equal(x.numpy(), g.nodes[t].data["feat"].read_rows(v))
            n += 1
        ahead = [k for k, name in pulls if name == "dglctl-prefetch"]
        for t in ("paper", "author"):
            key = g.nodes[t].data["feat"].kvstore_key
            assert ahead.count(key) >= n - 3, (t, ahead)
    finally:
        dg.exit_client()
