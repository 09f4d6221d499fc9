"""Invariants of written partitions, checked on small homogeneous and heterogeneous graphs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from partitioner import load_partition, load_partition_book, partition_graph
from partitioner.errors import OutEdgesMissing, OutputExistsError, PartitionOptionError
from partitioner.format import read_config
from partitioner.graph import etype_key
from partitioner.loader import load_orig_ids
from testing.graphs import community_graph, hetero_graph

pytestmark = pytest.mark.unit

METHODS = ["metis", "random", "kaminpar"]


def _new_edges(graph, cfg):
    """Input edges in relabeled homogeneous ids, indexed by new homogeneous edge id."""
    orig_n, orig_e = load_orig_ids(cfg)
    book = load_partition_book(cfg)[0]
    E = cfg["num_edges"]
    src_new = np.full(E, -1, np.int64)
    dst_new = np.full(E, -1, np.int64)
    for et, (s, d) in graph.edges.items():
        # new per-type id of each old per-type id, then homogeneous
        inv_s = np.argsort(orig_n[et[0]])
        inv_d = np.argsort(orig_n[et[2]])
        order = orig_e[et]  # old per-type eid of each new per-type eid
        homo_e = book.map_to_homo_eid(np.arange(len(order)), et)
        src_new[homo_e] = book.map_to_homo_nid(inv_s[s[order]], et[0])
        dst_new[homo_e] = book.map_to_homo_nid(inv_d[d[order]], et[2])
    return src_new, dst_new


def _check_invariants(graph, cfg, halo_hops):
    P = cfg["num_parts"]
    N, E = cfg["num_nodes"], cfg["num_edges"]
    book = load_partition_book(cfg)[0]
    # Ranges are contiguous, part-major then type, and cover [0, N) / [0, E).
    for key, total in (("node_map", N), ("edge_map", E)):
        types = sorted(cfg["ntypes" if key == "node_map" else "etypes"],
                       key=(cfg["ntypes"] if key == "node_map" else cfg["etypes"]).get)
        flat = [cfg[key][t][p] for p in range(P) for t in types]
        assert flat[0][0] == 0 and flat[-1][1] == total
        for a, b in zip(flat, flat[1:], strict=False):
            assert a[1] == b[0]
    src_new, dst_new = _new_edges(graph, cfg)
    cut = np.count_nonzero(book.nid2partid(src_new) != book.nid2partid(dst_new))
    assert cfg["quality"]["edge_cut"] == cut
    owned_count = np.zeros(N, int)
    edge_seen = np.zeros(E, int)
    orig_n, _ = load_orig_ids(cfg)
    for p in range(P):
        part = load_partition(cfg, p)
        lo, hi = part.owned_range
        owned_count[lo:hi] += 1
        assert np.all(book.nid2partid(np.arange(lo, hi)) == p)
        s, d, eids, _ = part.inner_edges()
        edge_seen[eids] += 1
        _check_out_edges(part, book, src_new, dst_new)
        # Stored edges are the input edges, and inner means destination owned.
        assert np.array_equal(s, src_new[eids]) and np.array_equal(d, dst_new[eids])
        assert np.all((d >= lo) & (d < hi))
        # Halo: exactly the non-owned in-neighbours within halo_hops.
        frontier = np.arange(lo, hi)
        reach = set()
        seen = set(frontier.tolist())
        for _ in range(halo_hops):
            nxt = np.unique(src_new[np.isin(dst_new, frontier)])
            nxt = np.array([v for v in nxt.tolist() if v not in seen], np.int64)
            reach.update(nxt.tolist())
            seen.update(nxt.tolist())
            frontier = nxt
        assert set(part.halo_nids.tolist()) == reach
        assert len(part.halo_nids) == len(reach)
        if halo_hops >= 1:
            ls, ld, leids, inner = part.local_graph()
            assert np.all(ls >= 0) and np.all(ld >= 0)
            assert np.array_equal(part.local_nids[ls], src_new[leids])
            assert np.array_equal(part.local_nids[ld], dst_new[leids])
            assert np.array_equal(inner, (ld < part.num_owned))
        # Features round-trip through the original ids.
        for key, arr in part.node_feats().items():
            ntype, name = key.split("/", 1)
            if name == "trainer_id":
                continue
            pt = np.asarray(book.partid2nids(p, ntype))
            np.testing.assert_array_equal(arr, graph.ndata[ntype][name][orig_n[ntype][pt]])
        _, orig_e = load_orig_ids(cfg)
        for key, arr in part.edge_feats().items():
            ek, name = key.rsplit("/", 1)
            et = tuple(ek.split(":"))
            if name == "trainer_id":
                continue
            pt = np.asarray(book.partid2eids(p, et))
            np.testing.assert_array_equal(arr, graph.edata[et][name][orig_e[et][pt]])
    assert np.all(owned_count == 1), "every node owned by exactly one part"
    assert np.all(edge_seen == 1), "every edge stored exactly once as inner"
    # Original ids are permutations.
    for t, n in graph.num_nodes.items():
        assert np.array_equal(np.sort(orig_n[t]), np.arange(n))


def _check_out_edges(part, book, src_new, dst_new):
    """The out-CSR holds exactly the edges whose source the part owns, with the CSC's edge ids,
    and within one source they are in input (destination, edge id) order."""
    cfg, p = part.config, part.part_id
    lo, hi = part.owned_range
    orig_n, orig_e = load_orig_ids(cfg)
    for key in cfg["etypes"]:
        et = tuple(key.split(":"))
        indptr, dst, eids = (np.asarray(a) for a in part.csr(key))
        owned = np.asarray(book.partid2nids(p, et[0]))
        assert len(indptr) == len(owned) + 1 and indptr[0] == 0 and indptr[-1] == len(eids)
        src = book.map_to_homo_nid(np.repeat(owned, np.diff(indptr)), et[0])
        np.testing.assert_array_equal(src_new[eids], src)
        np.testing.assert_array_equal(dst_new[eids], dst)
        np.testing.assert_array_equal(part.out_degrees(key), np.diff(indptr))
        # Exactly this type's edges with an owned source: compare with the edge map.
        e_lo, e_hi = book.edges.ranges[:, book.edges.type_index(key)].T
        of_type = np.concatenate([np.arange(a, b) for a, b in zip(e_lo, e_hi, strict=True)])
        mine = of_type[(src_new[of_type] >= lo) & (src_new[of_type] < hi)]
        np.testing.assert_array_equal(np.sort(eids), mine)
        # Canonical order inside a row: (input destination id, input edge id).
        dst_pt = book.map_to_per_ntype(dst)[1]
        row = np.repeat(np.arange(len(owned)), np.diff(indptr))
        keys = np.lexsort((orig_e[et][book.map_to_per_etype(eids)[1]],
                           orig_n[et[2]][dst_pt], row))
        np.testing.assert_array_equal(keys, np.arange(len(eids)))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("halo_hops", [0, 1, 2])
def test_homogeneous_invariants(tmp_path, method, halo_hops):
    g = community_graph()
    cfg = partition_graph(g, "g", 3, tmp_path / "out", method=method, halo_hops=halo_hops)
    _check_invariants(g, read_config(tmp_path / "out" / "g.json"), halo_hops)
    assert cfg["quality"]["edge_cut"] >= 0


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("halo_hops", [1, 2])
def test_hetero_invariants(tmp_path, method, halo_hops):
    g = hetero_graph()
    partition_graph(g, "h", 2, tmp_path / "out", method=method, halo_hops=halo_hops)
    cfg = read_config(tmp_path / "out")
    assert set(cfg["node_map"]) == {"paper", "author"}
    assert set(cfg["edge_map"]) == {etype_key(e) for e in g.edges}
    _check_invariants(g, cfg, halo_hops)


def test_metis_balance_and_cut(tmp_path):
    g = community_graph(n=800, k=4)
    cfg = partition_graph(g, "g", 4, tmp_path / "m", method="metis", balance_edges=True,
                          imbalance=1.05)
    q = cfg["quality"]
    assert cfg["balance"] == ["nodes", "train", "in-degree"]
    assert q["balance"]["nodes"] <= 1.05 + 0.02
    assert q["balance"]["train_nodes"] <= 1.05 + 0.05
    rnd = partition_graph(g, "g", 4, tmp_path / "r", method="random")
    # Planted communities: METIS cuts far fewer edges than random assignment.
    assert q["edge_cut"] < 0.5 * rnd["quality"]["edge_cut"]


def test_same_seed_same_output(tmp_path):
    g = community_graph()
    a = partition_graph(g, "g", 3, tmp_path / "a", seed=7)
    b = partition_graph(g, "g", 3, tmp_path / "b", seed=7)
    assert a["files"] == b["files"]  # same bytes, by checksum
    assert a["node_map"] == b["node_map"]


def test_without_out_edges(tmp_path):
    g = hetero_graph()
    with_out = partition_graph(g, "h", 2, tmp_path / "a")
    cfg = partition_graph(g, "h", 2, tmp_path / "b", out_edges=False)
    assert "csr" not in cfg["part-0"] and not any("_out_" in f for f in cfg["files"])
    # Everything else is the same bytes.
    assert cfg["files"] == {k: v for k, v in with_out["files"].items() if "_out_" not in k}
    part = load_partition(read_config(tmp_path / "b"), 1)
    assert not part.has_out_edges
    with pytest.raises(OutEdgesMissing, match="--no-out-edges") as err:
        part.csr("paper:cites:paper")
    assert "without --no-out-edges" in err.value.hint
    with pytest.raises(OutEdgesMissing):
        part.out_degrees("paper:cites:paper")


def test_out_degrees_match_the_input(tmp_path):
    g = hetero_graph()
    partition_graph(g, "h", 2, tmp_path / "o")
    cfg = read_config(tmp_path / "o")
    orig_n, _ = load_orig_ids(cfg)
    book = load_partition_book(cfg)[0]
    for et, (s, _) in g.edges.items():
        want = np.bincount(s, minlength=g.num_nodes[et[0]])
        got = np.concatenate([load_partition(cfg, p).out_degrees(etype_key(et)) for p in range(2)])
        assert book.num_nodes(et[0]) == len(got)
        np.testing.assert_array_equal(got, want[orig_n[et[0]]])


def test_trainers_per_machine(tmp_path):
    g = community_graph()
    cfg = partition_graph(g, "g", 2, tmp_path / "o", trainers_per_machine=2)
    book = load_partition_book(cfg)[0]
    node_tid = np.zeros(book.num_nodes(), np.int64)
    for p in range(2):
        part = load_partition(cfg, p)
        tid = part.node_feats()["_N/trainer_id"]
        assert set(np.unique(tid).tolist()) <= {2 * p, 2 * p + 1}
        node_tid[slice(*part.owned_range)] = tid
    for p in range(2):
        # As DGL: an edge's trainer is its destination's.
        part = load_partition(cfg, p)
        _, dst, eids, _ = part.inner_edges()
        etid = part.edge_feats()["_N:_E:_N/trainer_id"]
        np.testing.assert_array_equal(etid, node_tid[dst[np.argsort(eids)]])
    assert cfg["feature_schema"]["node"]["_N/trainer_id"]["shape"] == []
    assert cfg["feature_schema"]["edge"]["_N:_E:_N/trainer_id"]["shape"] == []


def test_config_keeps_dgl_schema(tmp_path):
    g = community_graph()
    partition_graph(g, "g", 2, tmp_path / "o")
    raw = json.loads((tmp_path / "o" / "g.json").read_text())
    for key in ("graph_name", "num_nodes", "num_edges", "part_method", "num_parts", "halo_hops",
                "node_map", "edge_map", "ntypes", "etypes", "part-0", "part-1"):
        assert key in raw
    assert raw["node_map"]["_N"][0][0] == 0
    assert raw["etypes"] == {"_N:_E:_N": 0}
    assert set(raw["part-0"]) >= {"node_feats", "edge_feats", "part_graph"}


def test_bad_options(tmp_path):
    g = community_graph(n=50)
    with pytest.raises(PartitionOptionError, match="at least 1"):
        partition_graph(g, "g", 0, tmp_path / "o")
    with pytest.raises(PartitionOptionError, match="exceeds the number of nodes"):
        partition_graph(g, "g", 51, tmp_path / "o")
    with pytest.raises(PartitionOptionError, match="balance-ntypes"):
        partition_graph(g, "g", 2, tmp_path / "o", balance_ntypes="nope")
    assert not (tmp_path / "o").exists()


def test_existing_output_needs_overwrite(tmp_path):
    g = community_graph(n=100)
    partition_graph(g, "g", 2, tmp_path / "o")
    with pytest.raises(OutputExistsError):
        partition_graph(g, "g", 2, tmp_path / "o")
    partition_graph(g, "g", 3, tmp_path / "o", overwrite=True)
    assert read_config(tmp_path / "o")["num_parts"] == 3
    # A folder that is not a partition is never replaced.
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("precious")
    with pytest.raises(OutputExistsError, match="refusing"):
        partition_graph(g, "g", 2, tmp_path / "notes", overwrite=True)
    assert (tmp_path / "notes" / "keep.txt").read_text() == "precious"


def test_failure_leaves_nothing(tmp_path, monkeypatch):
    import partitioner.pipeline as pl

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pl, "write_part", boom)
    with pytest.raises(RuntimeError):
        partition_graph(community_graph(n=100), "g", 2, tmp_path / "o")
    assert list(tmp_path.iterdir()) == []
