"""DGL's partition tests, ported: partition_graph, load_partition(_feats), the partition book.

Ported from dmlc/dgl tests/distributed/test_partition.py at v1.1.3
(commit 6e2c0f489ba4cfae4614d6f07da41e0ecd36b226). Every check keeps its meaning; what changed:

- Graphs: ``dgl.from_scipy`` / ``dgl.heterograph`` become ``partitioner.graph.Graph`` (the same
  scipy draws, ``tests/compat/conftest.py`` and ``_partition_util.py``); ``g.update_all(copy_u /
  copy_e, sum)`` and ``g.edge_ids`` are numpy (``_partition_util``).
- The partition is read through the public ``partitioner.loader.Partition`` instead of a
  DGLGraph: ``part_g.ndata[dgl.NID]`` -> ``part.local_nids``, ``ndata["inner_node"]`` ->
  ``part.inner_node``, ``part_g.edges()`` / ``edata[dgl.EID]`` / ``edata["inner_edge"]`` ->
  ``part.local_graph()``, ``ndata[dgl.NTYPE]`` / ``edata[dgl.ETYPE]`` -> the book's
  ``map_to_per_ntype`` / ``map_to_per_etype`` of those ids (what DGL stores is derived from
  them). ``load_partition(..., load_feats=False)`` has no counterpart (a Partition loads
  features lazily): ``load_feats=False`` reads them with ``load_partition_feats`` (tensors),
  ``True`` with ``Partition.node_feats()`` / ``edge_feats()`` (memory-mapped arrays).
- Each test writes to its own ``tmp_path`` (DGL reuses ``/tmp/partition``).
- test_partition's grid (2 methods x {1, 4} parts x {1, 4} trainers x load_feats x 4
  graph_formats = 64 runs) is cut to 5 cases that still cover each value of each parameter
  (a 2-core CI); ``graph_formats`` is passed in one case only, since it is accepted and
  ignored (parts are always CSC plus the out-CSR). The graphs are DGL's own sizes.
- test_RangePartitionBook builds the book from a part config dict (``RangePartitionBook(config,
  part_id)``) instead of DGL's ``(part_id, num_parts, node_map, edge_map, ntypes, etypes)``;
  a non-canonical edge type raises ValueError here (AssertionError in DGL).
- test_RangePartitionBook_policies is that test's NodePartitionPolicy / EdgePartitionPolicy
  half (the policies live in ``runtime``): ``EdgePartitionPolicy(gpb, "edge1")`` raises
  ``runtime.view.NonCanonicalEtypeError``, an AssertionError as DGL's (and a DistError).
- test_not_sorted_node_edge_map passes DGL's JSON as a dict: ``read_config`` refuses a file
  without ``format_version`` (a DGL-written partition, whose .dgl shards are not read).
- test_UnknownPartitionBook: DGL raises TypeError for a non-range node map; so does this book.

Not ported: ``_verify_partition_formats`` (which sparse formats a DGLGraph created: a DGL
internal; parts here are always CSC), ``_verify_partition_data_types`` (dtypes of DGL's reserved
fields; the public arrays' dtypes are checked instead), the policies' ``get_data_name`` and
``HeteroDataName`` checks of test_RangePartitionBook (DGL's key-value store names, a DGL
internal), and the ``DGL_DIST_DEBUG`` self check inside DGL's load_partition (its assertions
are made here directly).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from partitioner import load_partition, load_partition_book, load_partition_feats, partition_graph
from partitioner.partition_book import RangePartitionBook
from runtime import EdgePartitionPolicy, NodePartitionPolicy
from runtime.errors import DistError
from tests.compat._partition_util import create_random_graph, create_random_hetero, edge_ids, sum_in

pytestmark = pytest.mark.unit

CASES = [  # (part_method, num_parts, num_trainers_per_machine, load_feats, graph_formats)
    ("metis", 1, 1, True, None),
    ("metis", 4, 1, False, ["csc"]),
    ("metis", 4, 4, True, None),
    ("random", 1, 4, False, None),
    ("random", 4, 1, True, None),
]


def _feats(cfg_path, i, part, load_feats):
    if load_feats:
        return ({k: np.asarray(v) for k, v in part.node_feats().items()},
                {k: np.asarray(v) for k, v in part.edge_feats().items()})
    node, edge = load_partition_feats(cfg_path, i)
    assert all(isinstance(v, torch.Tensor) for v in [*node.values(), *edge.values()])
    return {k: v.numpy() for k, v in node.items()}, {k: v.numpy() for k, v in edge.items()}


def _check_trainer_ids(node_feats, edge_feats, g, k, i):
    for ntype in g.ntypes:
        assert np.all(node_feats[f"{ntype}/trainer_id"] // k == i)
    for etype in g.canonical_etypes:
        assert np.all(edge_feats[":".join(etype) + "/trainer_id"] // k == i)


def check_partition(tmp_path, g, part_method, num_parts, num_trainers, load_feats, formats):
    rng = np.random.default_rng(0)
    n, m = g.total_nodes, g.total_edges
    src, dst = g.edges[("_N", "_E", "_N")]
    nd = g.ndata["_N"]
    nd["labels"] = np.arange(n)
    nd["feats"] = rng.standard_normal((n, 10)).astype(np.float32)
    efeats = rng.standard_normal((m, 10)).astype(np.float32)
    g.edata[("_N", "_E", "_N")]["feats"] = efeats
    nd["h"] = sum_in(src, dst, nd["feats"][src], n)
    nd["eh"] = sum_in(src, dst, efeats, n)
    orig_nids, orig_eids = partition_graph(
        g, "test", num_parts, tmp_path, num_hops=2, part_method=part_method,
        return_mapping=True, num_trainers_per_machine=num_trainers, graph_formats=formats)
    assert orig_nids.dtype == torch.int64 and orig_eids.dtype == torch.int64
    orig_nids, orig_eids = orig_nids.numpy(), orig_eids.numpy()
    cfg_path = tmp_path / "test.json"
    part_sizes, shuffled_labels, shuffled_edata = [], [], []
    for i in range(num_parts):
        part = load_partition(cfg_path, i)
        gpb = load_partition_book(cfg_path, i)[0]
        node_feats, edge_feats = _feats(cfg_path, i, part, load_feats)
        assert part.local_nids.dtype == np.int64 and part.inner_node.dtype == bool
        if num_trainers > 1:
            _check_trainer_ids(node_feats, edge_feats, g, num_trainers, i)
        # The metadata.
        assert gpb._num_nodes() == n and gpb._num_edges() == m
        assert gpb.num_partitions() == num_parts
        meta = gpb.metadata()
        assert len(meta) == num_parts
        assert len(gpb.partid2nids(i)) == meta[i]["num_nodes"]
        assert len(gpb.partid2eids(i)) == meta[i]["num_edges"]
        part_sizes.append((meta[i]["num_nodes"], meta[i]["num_edges"]))
        nid = torch.from_numpy(part.local_nids[part.inner_node])
        local_nid = gpb.nid2localnid(nid, i)
        assert local_nid.dtype in (torch.int64, torch.int32)
        assert np.all(local_nid.numpy() == np.arange(len(local_nid)))
        lsrc, ldst, leids, inner = part.local_graph()
        eid = torch.from_numpy(leids[inner])
        local_eid = gpb.eid2localeid(eid, i)
        assert local_eid.dtype in (torch.int64, torch.int32)
        assert np.all(local_eid.numpy() == np.arange(len(local_eid)))
        # The node map and the edge map.
        local_nodes = nid.numpy()
        local_nodes1 = gpb.partid2nids(i)
        assert local_nodes1.dtype in (torch.int32, torch.int64)
        assert np.all(np.sort(local_nodes) == np.sort(local_nodes1.numpy()))
        llocal_nodes = np.flatnonzero(part.inner_node)
        assert np.all(llocal_nodes == np.arange(len(llocal_nodes)))
        local_edges = eid.numpy()
        local_edges1 = gpb.partid2eids(i)
        assert local_edges1.dtype in (torch.int32, torch.int64)
        assert np.all(np.sort(local_edges) == np.sort(local_edges1.numpy()))
        assert np.all(np.flatnonzero(inner) == np.arange(np.count_nonzero(inner)))
        # The mapping between the reshuffled ids and the original ids.
        gsrc, gdst = part.local_nids[lsrc], part.local_nids[ldst]
        orig_eids1 = orig_eids[leids]
        orig_eids2 = edge_ids(src, dst, orig_nids[gsrc], orig_nids[gdst], n)
        assert orig_eids1.shape[0] == orig_eids2.shape[0]
        assert np.all(orig_eids1 == orig_eids2)
        # Message passing on the part's graph gives the whole graph's result on inner nodes.
        local_orig_nids = orig_nids[part.local_nids]
        pfeats = nd["feats"][local_orig_nids]
        pefeats = efeats[orig_eids[leids]]
        nlocal = len(part.local_nids)
        local_nodes = orig_nids[local_nodes]
        local_edges = orig_eids[local_edges]
        np.testing.assert_allclose(nd["h"][local_nodes],
                                   sum_in(lsrc, ldst, pfeats[lsrc], nlocal)[llocal_nodes],
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(nd["eh"][local_nodes],
                                   sum_in(lsrc, ldst, pefeats, nlocal)[llocal_nodes],
                                   rtol=1e-5, atol=1e-5)
        for name in ["labels", "feats"]:
            assert "_N/" + name in node_feats
            assert node_feats["_N/" + name].shape[0] == len(local_nodes)
            assert np.all(nd[name][local_nodes] == node_feats["_N/" + name][local_nid.numpy()])
        efeat_name = "_N:_E:_N/feats"
        assert efeat_name in edge_feats
        assert edge_feats[efeat_name].shape[0] == len(local_edges)
        assert np.all(efeats[local_edges] == edge_feats[efeat_name][local_eid.numpy()])
        shuffled_labels.append(node_feats["_N/labels"])
        shuffled_edata.append(edge_feats[efeat_name])
    # Node and edge data of the original ids can be rebuilt.
    shuffled_labels = np.concatenate(shuffled_labels)
    shuffled_edata = np.concatenate(shuffled_edata)
    orig_labels = np.zeros_like(shuffled_labels)
    orig_edata = np.zeros_like(shuffled_edata)
    orig_labels[orig_nids] = shuffled_labels
    orig_edata[orig_eids] = shuffled_edata
    assert np.all(orig_labels == nd["labels"])
    assert np.all(orig_edata == efeats)
    node_map = np.concatenate([np.full(s[0], i) for i, s in enumerate(part_sizes)])
    edge_map = np.concatenate([np.full(s[1], i) for i, s in enumerate(part_sizes)])
    nid2pid = gpb.nid2partid(torch.arange(len(node_map)))
    assert nid2pid.dtype in (torch.int32, torch.int64)
    assert np.all(nid2pid.numpy() == node_map)
    eid2pid = gpb.eid2partid(torch.arange(len(edge_map)))
    assert eid2pid.dtype in (torch.int32, torch.int64)
    assert np.all(eid2pid.numpy() == edge_map)


def _inner_type_mask(ids, ntype_ids, inner, type_id):
    """DGL's ``_get_inner_node_mask`` / ``_get_inner_edge_mask``: inner and of that type."""
    return inner & (ntype_ids == type_id)


def verify_graph_feats(g, gpb, part, node_feats, edge_feats, orig_nids, orig_eids):
    ntids, _ = gpb.map_to_per_ntype(part.local_nids)
    for ntype_id, ntype in enumerate(g.ntypes):
        inner_nids = part.local_nids[_inner_type_mask(None, ntids, part.inner_node, ntype_id)]
        ntype_ids, inner_type_nids = gpb.map_to_per_ntype(torch.from_numpy(inner_nids))
        partid = gpb.nid2partid(inner_type_nids, ntype)
        assert np.all(ntype_ids.numpy() == ntype_id)
        assert np.all(partid.numpy() == gpb.partid)
        orig_id = orig_nids[ntype][inner_type_nids]
        local_nids = gpb.nid2localnid(inner_type_nids, gpb.partid, ntype)
        for name, values in g.ndata[ntype].items():
            assert np.all(node_feats[f"{ntype}/{name}"][local_nids] == values[orig_id])
    _, _, leids, inner = part.local_graph()
    etids, _ = gpb.map_to_per_etype(leids)
    for etype_id, etype in enumerate(g.canonical_etypes):
        inner_eids = leids[_inner_type_mask(None, etids, inner, etype_id)]
        etype_ids, inner_type_eids = gpb.map_to_per_etype(torch.from_numpy(inner_eids))
        partid = gpb.eid2partid(inner_type_eids, etype)
        assert np.all(etype_ids.numpy() == etype_id)
        assert np.all(partid.numpy() == gpb.partid)
        orig_id = orig_eids[etype][inner_type_eids]
        local_eids = gpb.eid2localeid(inner_type_eids, gpb.partid, etype)
        for name, values in g.edata[etype].items():
            assert np.all(edge_feats[":".join(etype) + "/" + name][local_eids] == values[orig_id])


def verify_hetero_graph(g, parts, books):
    num_nodes = dict.fromkeys(g.ntypes, 0)
    num_edges = dict.fromkeys(g.canonical_etypes, 0)
    nids = {t: [] for t in g.ntypes}
    eids = {et: [] for et in g.canonical_etypes}
    for part, gpb in zip(parts, books, strict=True):
        ntids, _ = gpb.map_to_per_ntype(part.local_nids)
        _, _, leids, inner = part.local_graph()
        etids, per_type_eids = gpb.map_to_per_etype(leids)
        assert len(g.ntypes) == len(np.unique(ntids))
        assert len(g.canonical_etypes) == len(np.unique(etids))
        for ntype_id, ntype in enumerate(g.ntypes):
            mask = _inner_type_mask(None, ntids, part.inner_node, ntype_id)
            num_nodes[ntype] += int(mask.sum())
            inner_nids = part.local_nids[mask]  # inner nodes' ids are one range
            assert np.all(inner_nids == np.arange(inner_nids[0], inner_nids[-1] + 1))
            nids[ntype].append(inner_nids)
        for etype_id, etype in enumerate(g.canonical_etypes):
            mask = _inner_type_mask(None, etids, inner, etype_id)
            num_edges[etype] += int(mask.sum())
            eids[etype].append(per_type_eids[etids == etype_id])
            inner_eids = np.sort(leids[mask])  # inner edges' ids are one range
            assert np.all(inner_eids == np.arange(inner_eids[0], inner_eids[-1] + 1))
    for ntype in g.ntypes:
        assert g.num_nodes[ntype] == num_nodes[ntype]
        assert len(np.unique(np.concatenate(nids[ntype]))) == g.num_nodes[ntype]
    for etype in g.canonical_etypes:
        assert g.num_edges(etype) == num_edges[etype]
        assert len(np.unique(np.concatenate(eids[etype]))) == g.num_edges(etype)


def check_hetero_partition(tmp_path, hg, part_method, num_parts, num_trainers, load_feats,
                           formats):
    rng = np.random.default_rng(0)
    test_ntype, test_etype = "n1", ("n1", "r1", "n2")
    hg.ndata[test_ntype]["labels"] = np.arange(hg.num_nodes[test_ntype])
    hg.ndata[test_ntype]["feats"] = rng.standard_normal(
        (hg.num_nodes[test_ntype], 10)).astype(np.float32)
    hg.edata[test_etype]["feats"] = rng.standard_normal(
        (hg.num_edges(test_etype), 10)).astype(np.float32)
    hg.edata[test_etype]["labels"] = np.arange(hg.num_edges(test_etype))
    orig_nids, orig_eids = partition_graph(
        hg, "test", num_parts, tmp_path, num_hops=1, part_method=part_method,
        return_mapping=True, num_trainers_per_machine=num_trainers, graph_formats=formats)
    assert len(orig_nids) == len(hg.ntypes)
    assert len(orig_eids) == len(hg.canonical_etypes)
    for ntype in hg.ntypes:
        assert len(orig_nids[ntype]) == hg.num_nodes[ntype]
    for etype in hg.canonical_etypes:
        assert len(orig_eids[etype]) == hg.num_edges(etype)
    orig_nids = {k: v.numpy() for k, v in orig_nids.items()}
    orig_eids = {k: v.numpy() for k, v in orig_eids.items()}
    cfg_path = tmp_path / "test.json"
    parts, books, shuffled_labels, shuffled_elabels = [], [], [], []
    for i in range(num_parts):
        part = load_partition(cfg_path, i)
        gpb, _, ntypes, etypes = load_partition_book(cfg_path, i)
        assert list(ntypes) == hg.ntypes and list(etypes) == hg.canonical_etypes
        node_feats, edge_feats = _feats(cfg_path, i, part, load_feats)
        if num_trainers > 1:
            _check_trainer_ids(node_feats, edge_feats, hg, num_trainers, i)
        # The reshuffled ids map back to the original edges.
        lsrc, ldst, leids, _ = part.local_graph()
        src_ntype_ids, part_src_ids = gpb.map_to_per_ntype(part.local_nids[lsrc])
        dst_ntype_ids, part_dst_ids = gpb.map_to_per_ntype(part.local_nids[ldst])
        etype_ids, part_eids = gpb.map_to_per_etype(leids)
        for etype_id, etype in enumerate(hg.canonical_etypes):
            sel = etype_ids == etype_id
            assert np.all(src_ntype_ids[sel] == src_ntype_ids[sel][0])
            assert np.all(dst_ntype_ids[sel] == dst_ntype_ids[sel][0])
            src_ntype = hg.ntypes[src_ntype_ids[sel][0]]
            dst_ntype = hg.ntypes[dst_ntype_ids[sel][0]]
            orig_src = orig_nids[src_ntype][part_src_ids[sel]]
            orig_dst = orig_nids[dst_ntype][part_dst_ids[sel]]
            orig_eids1 = orig_eids[etype][part_eids[sel]]
            s, d = hg.edges[etype]
            orig_eids2 = edge_ids(s, d, orig_src, orig_dst, hg.num_nodes[etype[2]])
            assert len(orig_eids1) == len(orig_eids2)
            assert np.all(orig_eids1 == orig_eids2)
        parts.append(part)
        books.append(gpb)
        verify_graph_feats(hg, gpb, part, node_feats, edge_feats, orig_nids, orig_eids)
        shuffled_labels.append(node_feats[test_ntype + "/labels"])
        shuffled_elabels.append(edge_feats[":".join(test_etype) + "/labels"])
    verify_hetero_graph(hg, parts, books)
    shuffled_labels = np.concatenate(shuffled_labels)
    shuffled_elabels = np.concatenate(shuffled_elabels)
    orig_labels = np.zeros_like(shuffled_labels)
    orig_elabels = np.zeros_like(shuffled_elabels)
    orig_labels[orig_nids[test_ntype]] = shuffled_labels
    orig_elabels[orig_eids[test_etype]] = shuffled_elabels
    assert np.all(orig_labels == hg.ndata[test_ntype]["labels"])
    assert np.all(orig_elabels == hg.edata[test_etype]["labels"])


@pytest.mark.parametrize(("part_method", "num_parts", "num_trainers_per_machine", "load_feats",
                          "graph_formats"), CASES)
def test_partition(tmp_path, part_method, num_parts, num_trainers_per_machine, load_feats,
                   graph_formats):
    if part_method == "random" and num_parts > 1:
        num_trainers_per_machine = 1  # as DGL
    check_partition(tmp_path / "homo", create_random_graph(1000), part_method, num_parts,
                    num_trainers_per_machine, load_feats, graph_formats)
    check_hetero_partition(tmp_path / "hetero", create_random_hetero(), part_method, num_parts,
                           num_trainers_per_machine, load_feats, graph_formats)


def test_one_part_keeps_node_ids(tmp_path):
    """Not in DGL's file: DGL does not relabel a 1-part partition. Here node ids are kept
    (orig_nids is the identity); edge ids follow the stored (by destination) order."""
    g = create_random_graph(1000)
    orig_nids, orig_eids = partition_graph(g, "one", 1, tmp_path, return_mapping=True)
    assert torch.equal(orig_nids, torch.arange(1000))
    assert torch.equal(torch.sort(orig_eids).values, torch.arange(g.total_edges))
    hg = create_random_hetero()
    orig_nids, _ = partition_graph(hg, "one", 1, tmp_path / "h", return_mapping=True)
    for ntype, ids in orig_nids.items():
        assert torch.equal(ids, torch.arange(hg.num_nodes[ntype]))


def _book(part_id, num_parts, node_map, edge_map, ntypes, etypes):
    """DGL's RangePartitionBook(part_id, num_parts, node_map, edge_map, ntypes, etypes), from
    the part config those maps make."""
    key = lambda k: ":".join(k) if isinstance(k, tuple) else k  # noqa: E731
    config = {"num_parts": num_parts, "ntypes": ntypes, "etypes": {key(k): v for k, v in etypes.items()},
              "node_map": {k: np.asarray(v).tolist() for k, v in node_map.items()},
              "edge_map": {key(k): np.asarray(v).tolist() for k, v in edge_map.items()}}
    return RangePartitionBook(config, part_id)


def test_RangePartitionBook():  # noqa: N802 (DGL's name)
    part_id, num_parts = 1, 2
    # homogeneous
    gpb = _book(part_id, num_parts, {"_N": [[0, 1000], [1000, 2000]]},
                {("_N", "_E", "_N"): [[0, 5000], [5000, 10000]]}, {"_N": 0},
                {("_N", "_E", "_N"): 0})
    assert gpb.etypes == ["_E"]
    assert gpb.canonical_etypes == [("_N", "_E", "_N")]
    assert gpb.to_canonical_etype("_E") == ("_N", "_E", "_N")
    # Init via etype is not supported.
    with pytest.raises(ValueError):
        _book(part_id, num_parts,
              {"node1": [[0, 1000], [1000, 2000]], "node2": [[0, 1000], [1000, 2000]]},
              {"edge1": [[0, 5000], [5000, 10000]]}, {"node1": 0, "node2": 1}, {"edge1": 0})
    # heterogeneous, init via canonical etype
    c_etype = ("node1", "edge1", "node2")
    gpb = _book(part_id, num_parts,
                {"node1": [[0, 1000], [1000, 2000]], "node2": [[0, 1000], [1000, 2000]]},
                {c_etype: [[0, 5000], [5000, 10000]]}, {"node1": 0, "node2": 1}, {c_etype: 0})
    assert gpb.etypes == ["edge1"]
    assert gpb.canonical_etypes == [c_etype]
    assert gpb.to_canonical_etype("edge1") == c_etype
    assert gpb.to_canonical_etype(c_etype) == c_etype
    with pytest.raises(ValueError):
        gpb.to_canonical_etype(("node1", "edge2", "node2"))
    with pytest.raises(ValueError):
        gpb.to_canonical_etype("edge2")
    assert gpb.partid == part_id


def test_RangePartitionBook_policies():  # noqa: N802 (DGL's name)
    """The NodePartitionPolicy / EdgePartitionPolicy half of DGL's test_RangePartitionBook, in
    DGL's own try/except form: a non-canonical edge type is an AssertionError, as DGL's."""
    part_id, num_parts = 1, 2
    gpb = _book(part_id, num_parts, {"_N": [[0, 1000], [1000, 2000]]},
                {("_N", "_E", "_N"): [[0, 5000], [5000, 10000]]}, {"_N": 0},
                {("_N", "_E", "_N"): 0})
    assert NodePartitionPolicy(gpb, "_N").type_name == "_N"
    assert EdgePartitionPolicy(gpb, ("_N", "_E", "_N")).type_name == ("_N", "_E", "_N")
    expect_except = False
    try:
        EdgePartitionPolicy(gpb, "edge1")
    except AssertionError as e:
        expect_except = True
        assert isinstance(e, DistError) and "edge1" in str(e) and "_N:_E:_N" in str(e)
    assert expect_except

    c_etype = ("node1", "edge1", "node2")
    gpb = _book(part_id, num_parts,
                {"node1": [[0, 1000], [1000, 2000]], "node2": [[0, 1000], [1000, 2000]]},
                {c_etype: [[0, 5000], [5000, 10000]]}, {"node1": 0, "node2": 1}, {c_etype: 0})
    node_policy = NodePartitionPolicy(gpb, "node1")
    assert node_policy.type_name == "node1"
    assert node_policy.policy_str == "node~node1"
    assert node_policy.part_id == part_id
    assert node_policy.is_node
    local_ids = torch.arange(0, 1000)
    global_ids = local_ids + 1000
    assert torch.equal(node_policy.to_local(global_ids), local_ids)
    assert torch.all(node_policy.to_partid(global_ids) == part_id)
    assert node_policy.get_part_size() == 1000
    assert node_policy.get_size() == 2000

    edge_policy = EdgePartitionPolicy(gpb, c_etype)
    assert edge_policy.type_name == c_etype
    assert edge_policy.policy_str == "edge~node1:edge1:node2"
    assert edge_policy.part_id == part_id
    assert not edge_policy.is_node
    local_ids = torch.arange(0, 5000)
    global_ids = local_ids + 5000
    assert torch.equal(edge_policy.to_local(global_ids), local_ids)
    assert torch.all(edge_policy.to_partid(global_ids) == part_id)
    assert edge_policy.get_part_size() == 5000
    assert edge_policy.get_size() == 10000


def test_UnknownPartitionBook(tmp_path):  # noqa: N802 (DGL's name)
    node_map = {"_N": {0: 0, 1: 1, 2: 2}}
    edge_map = {"_N:_E:_N": {0: 0, 1: 1, 2: 2}}
    config = {"num_parts": 1, "num_nodes": len(node_map), "num_edges": len(edge_map),
              "node_map": node_map, "edge_map": edge_map, "graph_name": "test_graph",
              "ntypes": {"_N": 0}, "etypes": {"_N:_E:_N": 0}}
    with pytest.raises(TypeError):
        load_partition_book(json.loads(json.dumps(config)), 0)


NOT_SORTED = {
    "edge_map": {"item:likes-rev:user": [[0, 100], [1000, 1500]],
                 "user:follows-rev:user": [[300, 600], [2100, 2800]],
                 "user:follows:user": [[100, 300], [1500, 2100]],
                 "user:likes:item": [[600, 1000], [2800, 3600]]},
    "etypes": {"item:likes-rev:user": 0, "user:follows-rev:user": 2, "user:follows:user": 1,
               "user:likes:item": 3},
    "graph_name": "test_graph", "halo_hops": 1,
    "node_map": {"user": [[100, 300], [600, 1000]], "item": [[0, 100], [300, 600]]},
    "ntypes": {"user": 1, "item": 0},
    "num_edges": 3600, "num_nodes": 1000, "num_parts": 2,
    "part-0": {"edge_feats": "part0/edge_feat.dgl", "node_feats": "part0/node_feat.dgl",
               "part_graph": "part0/graph.dgl"},
    "part-1": {"edge_feats": "part1/edge_feat.dgl", "node_feats": "part1/node_feat.dgl",
               "part_graph": "part1/graph.dgl"},
    "part_method": "metis",
}


def test_not_sorted_node_edge_map():
    gpb, _, _, _ = load_partition_book(NOT_SORTED, 0)
    assert gpb.local_ntype_offset == [0, 100, 300]
    assert gpb.local_etype_offset == [0, 100, 300, 600, 1000]
    gpb, _, _, _ = load_partition_book(NOT_SORTED, 1)
    assert gpb.local_ntype_offset == [0, 300, 700]
    assert gpb.local_etype_offset == [0, 500, 1100, 1800, 2600]


def test_unsorted_map_is_refused():
    """DGL's ``_assert_is_sorted`` (inside load_partition_book): ranges out of order fail."""
    bad = json.loads(json.dumps(NOT_SORTED))
    bad["node_map"]["user"] = [[600, 1000], [100, 300]]
    with pytest.raises(ValueError, match="not sorted"):
        load_partition_book(bad, 0)
