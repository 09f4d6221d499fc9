"""Neighbour sampling: kernel invariants, blocks, and standalone == distributed for one seed."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner.loader import load_orig_ids
from runtime.sampling.block import NID
from runtime.sampling.draws import node_keys, sample_etype
from runtime.sampling.neighbor import NeighborSampler, sample_neighbor_edges

ET = ("_N", "_E", "_N")


def _csc(rng, n=50, max_deg=30):
    deg = rng.integers(0, max_deg, n)
    return np.concatenate([[0], np.cumsum(deg)]), deg


@pytest.mark.unit
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanout", [1, 5, 12])
def test_kernel_respects_fanout(replace, fanout):
    rng = np.random.default_rng(0)
    indptr, deg = _csc(rng)
    seeds = np.arange(len(deg))
    keys = node_keys(7, seeds)
    seed_idx, pos = sample_etype(indptr, seeds, keys, fanout, replace)
    counts = np.bincount(seed_idx, minlength=len(deg))
    expect = np.where(deg > 0, fanout, 0) if replace else np.minimum(deg, fanout)
    np.testing.assert_array_equal(counts, expect)
    assert np.all(pos >= indptr[seeds[seed_idx]]) and np.all(pos < indptr[seeds[seed_idx] + 1])
    if not replace:
        assert len(np.unique(pos)) == len(pos), "no edge twice without replacement"
    again = sample_etype(indptr, seeds, keys, fanout, replace)
    np.testing.assert_array_equal(again[1], pos)  # same keys, same draws


@pytest.mark.unit
def test_kernel_all_and_weights_and_exclusion():
    rng = np.random.default_rng(1)
    indptr, deg = _csc(rng)
    seeds = np.arange(len(deg))
    keys = node_keys(3, seeds)
    _, pos = sample_etype(indptr, seeds, keys, -1)
    assert len(pos) == deg.sum()
    weights = (np.arange(indptr[-1]) % 2).astype(np.float32)  # even positions never drawn
    excluded = np.arange(1, indptr[-1], 4)
    for replace in (False, True):
        _, pos = sample_etype(indptr, seeds, keys, 4, replace, weights, excluded)
        assert len(pos) and np.all(pos % 2 == 1)
        assert not np.isin(pos, excluded).any()


@pytest.mark.unit
def test_kernel_uniformity():
    # One seed of degree 10, fanout 3, many independent keys: each edge ~30% of the time.
    indptr = np.array([0, 10])
    hits = np.zeros(10)
    for s in range(2000):
        _, pos = sample_etype(indptr, np.array([0]), node_keys(s, np.array([0])), 3, False)
        hits[pos] += 1
    freq = hits / 2000
    assert np.all(np.abs(freq - 0.3) < 0.05), freq


def _orig_edges(cfg, sampled):
    orig_n, orig_e = load_orig_ids(cfg)
    src, dst, eid = sampled[ET]
    return {(int(a), int(b), int(c)) for a, b, c in zip(orig_n["_N"][src], orig_n["_N"][dst],
                                                         orig_e[ET][eid], strict=True)}


@pytest.mark.unit
def test_standalone_sampling_edges_exist(standalone, two_part_graph):
    import runtime as dg

    g_in, _ = two_part_graph
    g = dg.DistGraph("g", part_config=str(standalone))
    seeds = np.arange(0, 600, 7)
    sampled = sample_neighbor_edges(g, seeds, 4, seed=5)
    src_in, dst_in = g_in.edges[ET]
    for s, d, e in _orig_edges(g.config, sampled):
        assert src_in[e] == s and dst_in[e] == d, "sampled edge exists in the input graph"
    _, dst, _ = sampled[ET]
    assert np.bincount(dst, minlength=600).max() <= 4


@pytest.mark.unit
def test_blocks(standalone):
    import runtime as dg

    g = dg.DistGraph("g", part_config=str(standalone))
    seeds = np.array([5, 17, 42, 99])
    blocks = NeighborSampler([10, 25]).sample_blocks(seeds, g)
    assert len(blocks) == 2
    np.testing.assert_array_equal(blocks[-1].dstdata[NID].numpy(), seeds)
    # Each block's destination nodes are its first source nodes; layers chain.
    for b in blocks:
        np.testing.assert_array_equal(b.srcdata[NID][: b.num_dst_nodes()].numpy(),
                                      b.dstdata[NID].numpy())
        src, dst = b.edges()
        assert int(src.max()) < b.num_src_nodes() and int(dst.max()) < b.num_dst_nodes()
        assert np.bincount(dst.numpy()).max() <= 25
    np.testing.assert_array_equal(blocks[0].dstdata[NID].numpy(), blocks[1].srcdata[NID].numpy())
    feats = g.ndata["feat"][blocks[0].srcdata[NID]]
    assert feats.shape == (blocks[0].num_src_nodes(), 5)


@pytest.mark.unit
@pytest.mark.parametrize("edge_dir", ["in", "out"])
def test_sampler_blocks_equal_blocks_built_from_the_edges_ids(standalone, edge_dir):
    """NeighborSampler hands each edge's seed to the block as its position among the seeds
    (no lookup of ids): the blocks are those built from the same edges with the seeds' ids."""
    import runtime as dg
    from runtime.sampling.block import block_from_edges
    from runtime.sampling.neighbor import current_batch_key

    g = dg.DistGraph("g", part_config=str(standalone))
    sampler = NeighborSampler([4, 6], edge_dir=edge_dir, seed=3)
    seeds = np.array([99, 5, 42, 17, 300, 7])
    assert current_batch_key() is None
    got = sampler.sample_blocks(seeds, g)  # its first call: seed 3 * 1_000_003 + 1
    call_seed = 3 * 1_000_003 + 1
    dst = {"_N": seeds}
    num_nodes = {"_N": g.num_nodes()}
    want = []
    for layer, fanout in enumerate([6, 4]):
        sampled = sample_neighbor_edges(g, dst, fanout, edge_dir=edge_dir,
                                        seed=call_seed * 31 + layer)
        if edge_dir == "out":
            sampled = {(et[2], et[1], et[0]): (nbr, s, eid)
                       for et, (s, nbr, eid) in sampled.items()}
        block = block_from_edges(dst, sampled, num_nodes)
        want.insert(0, block)
        dst = {"_N": block.srcdata[NID].numpy()}
    for a, b in zip(got, want, strict=True):
        assert a.num_dst_nodes() == b.num_dst_nodes() and a.num_edges() > 0
        np.testing.assert_array_equal(a.srcdata[NID].numpy(), b.srcdata[NID].numpy())
        for x, y in zip(a.edges(), b.edges(), strict=True):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
        np.testing.assert_array_equal(a.edata["_ID"].numpy(), b.edata["_ID"].numpy())


@pytest.mark.multiprocess
def test_standalone_equals_distributed(standalone, cluster, monkeypatch):
    import runtime as dg

    g_one = dg.DistGraph("g", part_config=str(standalone))  # standalone context
    for k, v in cluster.env("trainer", 0).items():
        monkeypatch.setenv(k, v)
    dg.initialize()  # now a trainer of the 2-machine job
    g_two = dg.DistGraph("g")
    assert g_one._ctx.standalone and not g_two._ctx.standalone
    orig_one, _ = load_orig_ids(g_one.config)
    orig_two, _ = load_orig_ids(g_two.config)
    inv_one = np.argsort(orig_one["_N"])
    inv_two = np.argsort(orig_two["_N"])
    seeds_in = np.arange(0, 600, 3)  # input ids; both machines own some
    a = _orig_edges(g_one.config, sample_neighbor_edges(g_one, inv_one[seeds_in], 6, seed=11))
    b = _orig_edges(g_two.config, sample_neighbor_edges(g_two, inv_two[seeds_in], 6, seed=11))
    assert a == b and len(a) > 0


@pytest.mark.unit
@pytest.mark.parametrize("fanout", [0, 1, 5, 25])
def test_compiled_sampler_equals_the_numpy_reference(fanout):
    from runtime.sampling import kernels
    from runtime.sampling.draws import node_keys, sample_uniform_numpy

    rng = np.random.default_rng(fanout)
    deg = rng.integers(0, 3 * fanout + 3, 5000)  # below, at and above the fanout
    deg[:3] = [0, fanout, fanout + 1]
    start = rng.integers(0, 10**9, 5000)
    keys = node_keys(7, rng.permutation(10**6)[:5000], salt=3)
    got = kernels.sample_uniform(start, deg, keys, fanout)
    want = sample_uniform_numpy(start, deg, keys, fanout)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert len(got[0]) == np.minimum(deg, fanout).sum()


@pytest.mark.unit
def test_compiled_relabel_keeps_first_appearance_order():
    from runtime.sampling import kernels

    ids = np.random.default_rng(0).integers(0, 500, 3000)
    empty = np.iinfo(np.int64).max
    mark = np.full(500, empty, np.int64)
    uniq, local = kernels.relabel_first_seen(mark, ids, empty)
    _, first = np.unique(ids, return_index=True)
    np.testing.assert_array_equal(uniq, ids[np.sort(first)])
    np.testing.assert_array_equal(uniq[local], ids)
    assert (mark == empty).all()  # the scratch array is left clean


@pytest.mark.unit
def test_sampled_graph_and_dgl_to_block():
    import torch

    from runtime.sampling.block import EID
    from runtime.sampling.graph import SampledGraph, to_block

    et = ("_N", "_E", "_N")
    g = SampledGraph({"_N": 10}, {et: (np.array([3, 4, 5, 3]), np.array([1, 1, 2, 7]))},
                     {et: {EID: torch.tensor([30, 40, 50, 60])}})
    assert g.num_nodes() == 10 and g.num_edges() == 4 and g.ntypes == ["_N"]
    src, dst, eid = g.edges(form="all")
    assert eid.tolist() == [0, 1, 2, 3] and g.edges(etype="_E")[0].tolist() == [3, 4, 5, 3]
    assert g.in_degrees().tolist()[:3] == [0, 2, 1] and g.out_degrees(3).item() == 2
    block = to_block(g, torch.tensor([7, 1, 2]))
    assert block.dstdata[NID].tolist() == [7, 1, 2]
    assert block.srcdata[NID].tolist() == [7, 1, 2, 3, 4, 5]
    s, d = block.edges()
    assert block.srcdata[NID][s].tolist() == [3, 4, 5, 3]
    assert block.dstdata[NID][d].tolist() == [1, 1, 2, 7]
    assert block.edata[EID].tolist() == [0, 1, 2, 3]  # positions in g, as DGL's
    block.edata[EID] = g.edata[EID]
    assert block.edges[et].data[EID].tolist() == [30, 40, 50, 60]
    assert to_block(g).dstdata[NID].tolist() == [1, 2, 7]  # every node with an in-edge
    with pytest.raises(ValueError, match="not in dst_nodes"):
        to_block(g, torch.tensor([1, 2]))


@pytest.mark.unit
def test_dgl1_sample_blocks_form(standalone):
    import runtime as dg

    g = dg.DistGraph("g", part_config=str(standalone))
    sampler = dg.MultiLayerNeighborSampler([3, 2])
    input_nodes, output_nodes, blocks = sampler.sample_blocks(g, np.arange(10))
    assert len(blocks) == 2 and output_nodes.tolist() == list(range(10))
    assert input_nodes.tolist() == blocks[0].srcdata[NID].tolist()
    sampled = dg.sample_neighbors(g, np.arange(10), 3)
    assert sampled.num_nodes() == g.num_nodes() and sampled.num_edges() <= 30
