"""Out-edge sampling (``edge_dir="out"``) and ``out_degrees``: kernel, standalone, distributed,
heterogeneous, blocks, and partitions written with --no-out-edges."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner import partition_graph
from partitioner.errors import OutEdgesMissing
from partitioner.loader import load_orig_ids
from runtime.errors import DistError
from runtime.sampling.block import NID
from runtime.sampling.draws import node_keys, sample_etype
from runtime.sampling.neighbor import NeighborSampler, sample_neighbor_edges
from testing.graphs import hetero_graph
from testing.servers import running_cluster

ET = ("_N", "_E", "_N")
HETERO_FANOUT = {"cites": 2, "writes": 3, "written-by": 1}


def _orig_edges(cfg, sampled):
    """Sampled edges as input-id triples ``(src, dst, eid, etype)``."""
    orig_n, orig_e = load_orig_ids(cfg)
    return {(int(a), int(b), int(c), et)
            for et, (src, dst, eid) in sampled.items()
            for a, b, c in zip(orig_n[et[0]][src], orig_n[et[2]][dst], orig_e[et][eid],
                               strict=True)}


def _inverse(orig):
    """Relabeled id of each input id (``orig[new] = old``)."""
    return {t: np.argsort(ids) for t, ids in orig.items()}


@pytest.mark.unit
def test_kernel_excludes_edge_ids():
    # Two rows of an out-CSR whose edge ids are not positions.
    indptr = np.array([0, 5, 9])
    eids = np.array([40, 12, 7, 33, 90, 5, 61, 2, 18])
    excluded = np.sort(np.array([7, 90, 2, 1000]))
    keys = node_keys(1, np.arange(2))
    for fanout, replace in ((-1, False), (3, False), (4, True)):
        seed_idx, pos = sample_etype(indptr, np.arange(2), keys, fanout, replace,
                                     excluded=excluded, edge_ids=eids)
        assert len(pos) and not np.isin(eids[pos], excluded).any()
    assert len(sample_etype(indptr, np.arange(2), keys, -1, excluded=excluded,
                            edge_ids=eids)[1]) == 6


@pytest.mark.unit
def test_out_sampling_standalone(standalone, two_part_graph):
    import runtime as dg

    g_in, _ = two_part_graph
    g = dg.DistGraph("g", part_config=str(standalone))
    src_in, dst_in = g_in.edges[ET]
    orig_n, _ = load_orig_ids(g.config)
    seeds = np.arange(0, 600, 7)
    sampled = sample_neighbor_edges(g, seeds, 4, edge_dir="out", seed=5)
    for s, d, e, _ in _orig_edges(g.config, sampled):
        assert src_in[e] == s and dst_in[e] == d, "sampled edge exists in the input graph"
    src, dst, eid = sampled[ET]
    assert np.isin(src, seeds).all(), "out-edges start at the seeds"
    counts = np.bincount(src, minlength=600)[seeds]
    out_deg = g.out_degrees(seeds).numpy()
    np.testing.assert_array_equal(counts, np.minimum(out_deg, 4))
    # A low-degree seed gets every one of its out-edges.
    low = seeds[(out_deg > 0) & (out_deg <= 4)]
    assert len(low)
    for v in low[:5]:
        mine = {(s, d, e) for s, d, e, _ in _orig_edges(g.config, sampled)
                if s == orig_n["_N"][v]}
        want = {(int(src_in[e]), int(dst_in[e]), int(e))
                for e in np.flatnonzero(src_in == orig_n["_N"][v])}
        assert mine == want
    every = sample_neighbor_edges(g, seeds, -1, edge_dir="out")[ET]
    assert len(every[0]) == out_deg.sum()
    with_replace = sample_neighbor_edges(g, seeds, 6, edge_dir="out", replace=True, seed=2)[ET]
    np.testing.assert_array_equal(np.bincount(with_replace[0], minlength=600)[seeds],
                                  np.where(out_deg > 0, 6, 0))
    # Excluded edges are never sampled, even with every out-edge asked for.
    skip = every[2][::3]
    rest = sample_neighbor_edges(g, seeds, -1, edge_dir="out", exclude_edges=skip)[ET]
    assert len(rest[2]) == len(every[2]) - len(np.unique(skip))
    assert not np.isin(rest[2], skip).any()


@pytest.mark.multiprocess
def test_out_degrees_equal_the_input_standalone_and_distributed(standalone, cluster,
                                                                 two_part_graph, monkeypatch):
    import runtime as dg

    g_in, _ = two_part_graph
    want_in = np.bincount(g_in.edges[ET][0], minlength=600)
    g_one = dg.DistGraph("g", part_config=str(standalone))
    for k, v in cluster.env("trainer", 0).items():
        monkeypatch.setenv(k, v)
    dg.initialize()
    g_two = dg.DistGraph("g")
    for g in (g_one, g_two):
        orig = load_orig_ids(g.config)[0]["_N"]
        np.testing.assert_array_equal(g.out_degrees().numpy(), want_in[orig])
        some = np.array([599, 3, 300, 3])  # both machines, unsorted, repeated
        np.testing.assert_array_equal(g.out_degrees(some).numpy(), want_in[orig[some]])


@pytest.mark.multiprocess
def test_out_standalone_equals_distributed(standalone, cluster, monkeypatch):
    import runtime as dg

    g_one = dg.DistGraph("g", part_config=str(standalone))
    for k, v in cluster.env("trainer", 0).items():
        monkeypatch.setenv(k, v)
    dg.initialize()
    g_two = dg.DistGraph("g")
    assert g_one._ctx.standalone and not g_two._ctx.standalone
    inv_one = _inverse(load_orig_ids(g_one.config)[0])["_N"]
    inv_two = _inverse(load_orig_ids(g_two.config)[0])["_N"]
    orig_e_one = load_orig_ids(g_one.config)[1][ET]
    orig_e_two = load_orig_ids(g_two.config)[1][ET]
    seeds_in = np.arange(0, 600, 3)  # input ids; both machines own some
    for kwargs in ({"fanout": 3}, {"fanout": 5, "replace": True}):
        a = _orig_edges(g_one.config, sample_neighbor_edges(g_one, inv_one[seeds_in], edge_dir="out",
                                                       seed=11, **kwargs))
        b = _orig_edges(g_two.config, sample_neighbor_edges(g_two, inv_two[seeds_in], edge_dir="out",
                                                       seed=11, **kwargs))
        assert a == b and len(a) > 0
    # Excluding the same input edges (per-type ids of each partition) excludes the same ones.
    excl_in = np.array(sorted(e for _, _, e, _ in a))[::2]
    inv_e_one, inv_e_two = np.argsort(orig_e_one), np.argsort(orig_e_two)
    a = _orig_edges(g_one.config, sample_neighbor_edges(g_one, inv_one[seeds_in], 4, edge_dir="out",
                                                   exclude_edges=inv_e_one[excl_in], seed=3))
    b = _orig_edges(g_two.config, sample_neighbor_edges(g_two, inv_two[seeds_in], 4, edge_dir="out",
                                                   exclude_edges=inv_e_two[excl_in], seed=3))
    assert a == b and not {e for _, _, e, _ in a} & set(excl_in.tolist())


@pytest.mark.unit
def test_out_blocks(standalone):
    import runtime as dg

    g = dg.DistGraph("g", part_config=str(standalone))
    seeds = np.array([5, 17, 42, 99])
    sampler = NeighborSampler([3, 5], "out")  # DGL's positional edge_dir
    assert sampler.edge_dir == "out"
    blocks = sampler.sample_blocks(seeds, g)
    np.testing.assert_array_equal(blocks[-1].dstdata[NID].numpy(), seeds)
    np.testing.assert_array_equal(blocks[0].dstdata[NID].numpy(), blocks[1].srcdata[NID].numpy())
    for b, fanout in zip(blocks, (3, 5), strict=True):
        ids = b.srcdata[NID].numpy()
        np.testing.assert_array_equal(ids[: b.num_dst_nodes()], b.dstdata[NID].numpy())
        src, dst = (t.numpy() for t in b.edges())
        assert np.bincount(dst).max() <= fanout
        # Block edge v -> seed is the graph edge seed -> v: messages come from out-neighbours.
        g_src, g_dst = g.find_edges(b.edge_ids().numpy())
        np.testing.assert_array_equal(g_src.numpy(), ids[dst])
        np.testing.assert_array_equal(g_dst.numpy(), ids[src])
        np.testing.assert_array_equal(b.in_degrees().numpy(),
                                      np.minimum(g.out_degrees(b.dstdata[NID]).numpy(), fanout))


@pytest.mark.unit
def test_written_without_out_edges(tmp_path, two_part_graph):
    import runtime as dg

    g_in, _ = two_part_graph
    partition_graph(g_in, "g", 1, tmp_path / "p", out_edges=False)
    dg.exit_client()
    dg.initialize()
    g = dg.DistGraph("g", part_config=str(tmp_path / "p" / "g.json"))
    seeds = np.arange(10)
    for call in (lambda: sample_neighbor_edges(g, seeds, 2, edge_dir="out"),
                 lambda: g.out_degrees(seeds),
                 lambda: NeighborSampler([2], edge_dir="out").sample_blocks(seeds, g)):
        with pytest.raises(OutEdgesMissing, match="--no-out-edges") as err:
            call()
        assert "without --no-out-edges" in err.value.hint
    assert len(sample_neighbor_edges(g, seeds, 2)[ET][0]) > 0  # in-edges still work
    with pytest.raises(DistError, match="prob="):
        NeighborSampler([2], edge_dir="out", prob="w")
    with pytest.raises(DistError, match="edge_dir"):
        sample_neighbor_edges(g, seeds, 2, edge_dir="both")
    dg.exit_client()


@pytest.fixture(scope="module")
def hetero_parts(tmp_path_factory):
    g = hetero_graph()
    root = tmp_path_factory.mktemp("hetero")
    partition_graph(g, "h", 2, root / "two")
    partition_graph(g, "h", 1, root / "one")
    return g, root / "one" / "h.json", root / "two" / "h.json"


def _check_hetero(g, g_in, seeds):
    orig_n, _ = load_orig_ids(g.config)
    for et, (s, _) in g_in.edges.items():
        want = np.bincount(s, minlength=g_in.num_nodes[et[0]])[orig_n[et[0]]]
        np.testing.assert_array_equal(g.out_degrees(etype=et).numpy(), want)
    out = sample_neighbor_edges(g, seeds, HETERO_FANOUT, edge_dir="out", seed=3)
    # Fanouts apply to the edge types that leave the seeds' types.
    assert set(out) == {et for et in g.canonical_etypes if et[0] in seeds}
    for et, (src, dst, eid) in out.items():
        assert np.isin(src, seeds[et[0]]).all()
        assert np.bincount(src).max() <= HETERO_FANOUT[et[1]]
        s_chk, d_chk = g.find_edges(eid, etype=et)  # per-type ids, as DGL's
        np.testing.assert_array_equal(s_chk.numpy(), src)
        np.testing.assert_array_equal(d_chk.numpy(), dst)
    for src_in, dst_in, e, et in _orig_edges(g.config, out):
        s_all, d_all = g_in.edges[et]
        assert s_all[e] == src_in and d_all[e] == dst_in
    return _orig_edges(g.config, out)


@pytest.mark.multiprocess
def test_hetero_out_standalone_equals_distributed(hetero_parts, tmp_path, monkeypatch):
    import runtime as dg

    g_in, one, two = hetero_parts
    dg.exit_client()
    dg.initialize()
    g_one = dg.DistGraph("h", part_config=str(one))
    seeds_in = {"author": np.arange(0, 120, 4)}  # authors only: only "writes" leaves them
    inv = _inverse(load_orig_ids(g_one.config)[0])
    a = _check_hetero(g_one, g_in, {t: inv[t][v] for t, v in seeds_in.items()})
    assert {et for *_, et in a} == {("author", "writes", "paper")}
    blocks = NeighborSampler([HETERO_FANOUT] * 2, edge_dir="out").sample_blocks(
        {t: inv[t][v] for t, v in seeds_in.items()}, g_one)
    # Block edge types are the graph's reversed: paper -> author carries "writes" edges.
    assert ("paper", "writes", "author") in blocks[-1].canonical_etypes
    assert blocks[-1].num_dst_nodes("paper") == 0
    np.testing.assert_array_equal(blocks[-1].dstdata[NID]["author"].numpy(),
                                  inv["author"][seeds_in["author"]])
    with running_cluster(two, tmp_path) as cluster, monkeypatch.context() as env:
        cluster.wait_ready()
        for k, v in cluster.env("trainer", 0).items():
            env.setenv(k, v)
        dg.initialize()
        g_two = dg.DistGraph("h")
        inv = _inverse(load_orig_ids(g_two.config)[0])
        seeds_all = {"paper": np.arange(0, 300, 5), "author": np.arange(0, 120, 4)}
        b = _check_hetero(g_two, g_in, {t: inv[t][v] for t, v in seeds_in.items()})
        assert a == b and len(a) > 0
        both = _check_hetero(g_two, g_in, {t: inv[t][v] for t, v in seeds_all.items()})
        dg.exit_client()
    dg.initialize()
    g_one = dg.DistGraph("h", part_config=str(one))
    inv = _inverse(load_orig_ids(g_one.config)[0])
    assert both == _check_hetero(g_one, g_in, {t: inv[t][v] for t, v in seeds_all.items()})
    dg.exit_client()
