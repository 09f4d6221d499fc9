"""Data views are real mappings: block.srcdata / dstdata / edata and g.ndata / g.edata /
g.nodes[t].data answer every MutableMapping method (srcdata used to subclass dict without
storing into it, so ``get``, ``len``, ``items`` and ``dict(...)`` were empty)."""

from __future__ import annotations

from collections.abc import MutableMapping

import numpy as np
import pytest
import torch

from runtime.errors import DistError
from runtime.sampling.block import EID, NID, to_block

pytestmark = pytest.mark.unit

ET = ("_N", "_E", "_N")


def _homo_block():
    # Seeds 5, 7; sampled edges 1->5, 2->5, 5->7 (ids are the graph's).
    return to_block({"_N": np.array([5, 7])},
                    {ET: (np.array([1, 2, 5]), np.array([5, 5, 7]), np.array([10, 11, 12]))})


def _hetero_block():
    writes = ("author", "writes", "paper")
    cites = ("paper", "cites", "paper")
    return to_block({"paper": np.array([0, 1])},
                    {writes: (np.array([3, 4]), np.array([0, 1]), np.array([0, 1])),
                     cites: (np.array([1, 2]), np.array([0, 0]), np.array([5, 6]))})


def test_block_srcdata_is_a_mutable_mapping_of_one_type():
    b = _homo_block()
    for view in (b.srcdata, b.dstdata, b.edata):
        assert isinstance(view, MutableMapping)
    src = b.srcdata
    assert list(src) == [NID] and len(src) == 1 and NID in src and "feat" not in src
    np.testing.assert_array_equal(src.get(NID).numpy(), [5, 7, 1, 2])
    assert src.get("feat") is None and src.get("feat", 3) == 3
    with pytest.raises(KeyError):
        src["feat"]
    feat = torch.arange(8.0).reshape(4, 2)
    src["feat"] = feat
    assert src.get("feat") is feat and len(src) == 2 and set(src.keys()) == {NID, "feat"}
    assert dict(src)["feat"] is feat and [k for k, _ in src.items()] == [NID, "feat"]
    assert any(v is feat for v in src.values())
    assert b.srcnodes["_N"].data["feat"] is feat  # the same storage, seen per type
    src.update(h=feat * 2)
    assert torch.equal(src.pop("h"), feat * 2) and "h" not in src
    assert src.setdefault("feat", None) is feat
    del src["feat"]
    assert "feat" not in src and len(src) == 1
    with pytest.raises(KeyError):
        del src["feat"]
    np.testing.assert_array_equal(b.dstdata[NID].numpy(), [5, 7])
    np.testing.assert_array_equal(b.edata[EID].numpy(), [10, 11, 12])
    b.edata["w"] = torch.ones(3)
    assert set(b.edata) == {EID, "w"} and len(b.edata) == 2


def test_block_views_of_several_types_are_keyed_by_type():
    b = _hetero_block()
    src = b.srcdata
    assert set(src) == {NID} and len(src) == 1
    ids = src[NID]
    assert set(ids) == {"paper", "author"}
    np.testing.assert_array_equal(ids["paper"].numpy(), [0, 1, 2])
    feats = {"paper": torch.zeros(3, 4)}
    src["x"] = feats  # a dict per type; types without the key stay without it
    assert set(src["x"]) == {"paper"} and "x" in src and len(src) == 2
    assert dict(src)["x"]["paper"] is feats["paper"]
    with pytest.raises(KeyError, match="several types"):
        src["y"] = torch.zeros(3, 4)
    with pytest.raises(KeyError, match="unknown type"):
        src["y"] = {"venue": torch.zeros(1)}
    del src["x"]
    assert "x" not in src and "x" not in b.srcnodes["paper"].data
    eids = b.edata[EID]
    assert set(eids) == {("author", "writes", "paper"), ("paper", "cites", "paper")}
    np.testing.assert_array_equal(eids[("paper", "cites", "paper")].numpy(), [5, 6])
    moved = b.to("cpu")
    assert set(moved.srcdata[NID]) == {"paper", "author"} and len(moved.edata) == 1


def test_graph_ndata_is_a_mutable_mapping(standalone):
    import runtime

    g = runtime.DistGraph("g", part_config=str(standalone))
    nd = g.ndata
    assert isinstance(nd, MutableMapping) and isinstance(g.edata, MutableMapping)
    names = set(nd)
    assert {"feat", "label", "train_mask"} <= names and len(nd) == len(names)
    assert "feat" in nd and "nope" not in nd and nd.get("nope") is None
    with pytest.raises(KeyError, match="no data named 'nope'"):
        nd["nope"]
    as_dict = dict(nd)
    assert set(as_dict) == names
    assert all(isinstance(t, runtime.DistTensor) for t in nd.values())
    np.testing.assert_array_equal(as_dict["feat"][np.arange(3)].numpy(),
                                  nd["feat"][np.arange(3)].numpy())
    assert set(g.nodes["_N"].data) == names
    assert "w" in g.edata and len(g.edata) == 1 and set(dict(g.edata)) == {"w"}

    # Any DistTensor joins the view under the key it is assigned to, whatever its name (as
    # DGL's: the view maps keys to tensors), and reads back through it.
    t = runtime.DistTensor((g.num_nodes(), 2), torch.float32, name="score_rows",
                           part_policy="node:_N")
    nd["score"] = t
    assert "score" in nd and len(nd) == len(names) + 1 and nd["score"] is t
    nd["score"][np.array([0, 1])] = torch.ones(2, 2)
    np.testing.assert_array_equal(nd["score"][np.array([0, 1, 2])].numpy(),
                                  [[1, 1], [1, 1], [0, 0]])
    assert nd["score"].shape == (g.num_nodes(), 2) and nd["score"].dtype == torch.float32
    nd["other"] = t  # DGL accepts a second key for the same tensor
    assert nd["other"] is t and len(nd) == len(names) + 2
    del nd["score"], nd["other"]
    assert "score" not in nd and len(nd) == len(names)
    with pytest.raises(KeyError):
        del nd["score"]
    anon = runtime.DistTensor((g.num_nodes(),), torch.bool)  # anonymous, bool, inferred policy
    nd["mask"] = anon
    nd["mask"][0:3] = torch.tensor([True, False, True])
    assert nd["mask"][0:3].tolist() == [True, False, True] and nd["mask"].count_nonzero() == 2
    with pytest.raises(runtime.DGLError, match="node type 'nope' does not exist"):
        g.nodes["nope"]
    with pytest.raises(DistError, match="exists with shape"):
        runtime.DistTensor((g.num_nodes(), 3), torch.float32, name="score_rows")


def test_partition_policies_and_inferred_policy(tmp_path, monkeypatch):
    """DGL's PartitionPolicy / NodePartitionPolicy / EdgePartitionPolicy, accepted by
    DistTensor; the policy inferred from shape[0] must be unique, else an error naming the fix."""
    import runtime
    from partitioner import partition_graph
    from testing.graphs import hetero_graph

    partition_graph(hetero_graph(), "h", 1, tmp_path / "p")
    runtime.exit_client()
    runtime.initialize()
    try:
        g = runtime.DistGraph("h", part_config=str(tmp_path / "p" / "h.json"))
        book = g.get_partition_book()
        writes = ("author", "writes", "paper")
        p = runtime.PartitionPolicy("node~paper", book)
        assert p.policy_str == "node~paper" and p.type_name == "paper" and p.is_node
        assert p.get_size() == 300 == p.get_part_size() and p.part_id == 0
        assert p.to_partid([0, 299]).tolist() == [0, 0] and p.to_local([5]).tolist() == [5]
        e = runtime.EdgePartitionPolicy(book, writes)
        assert e.policy_str == "edge~author:writes:paper" and e.type_name == writes
        assert e == runtime.PartitionPolicy("edge~writes", book) == "edge:author:writes:paper"
        assert runtime.NodePartitionPolicy(book, "author").get_size() == 120
        t = runtime.DistTensor((800, 2), torch.float32, "w2", part_policy=e)
        assert t.part_policy == e and t.part_policy.policy_str == "edge~author:writes:paper"
        g.edges["writes"].data["w2"] = t
        assert g.edges[writes].data["w2"] is t and len(g.edges["cites"].data) == 0
        with pytest.raises(DistError, match="several types match: edge:author:writes:paper, "
                                            "edge:paper:written-by:author"):
            runtime.DistTensor((800,), torch.float32)
        with pytest.raises(DistError, match="no node or edge type has that many rows"):
            runtime.DistTensor((7,), torch.float32)
        assert runtime.DistTensor((120, 1), torch.int64).part_policy.policy_str == "node~author"
        with pytest.raises(runtime.DGLError, match="edge type 'nope' is unknown"):
            g.edges["nope"]
        with pytest.raises(KeyError):
            g.nodes["paper"].data["nope"]
        assert g.to_canonical_etype("writes") == writes
        with pytest.raises(DistError, match="must start with 'node' or 'edge'"):
            runtime.PartitionPolicy("feat", book)
    finally:
        runtime.exit_client()


@pytest.fixture
def hetero_standalone(tmp_path):
    """testing.graphs.hetero_graph (paper, author; cites, writes, written-by) in one part,
    standalone."""
    import runtime
    from partitioner import partition_graph
    from testing.graphs import hetero_graph

    partition_graph(hetero_graph(), "h", 1, tmp_path / "p")
    runtime.exit_client()
    runtime.initialize()
    yield runtime.DistGraph("h", part_config=str(tmp_path / "p" / "h.json"))
    runtime.exit_client()


WRITES, CITES = ("author", "writes", "paper"), ("paper", "cites", "paper")


def test_hetero_graph_ndata_is_a_mapping_of_key_to_dict_per_type(hetero_standalone):
    """On a graph of several node types g.ndata is DGLGraph's nested view: ``nd[key]`` is
    ``{ntype: DistTensor}`` of the types having ``key``; assigning a dict sets per type."""
    import runtime

    g = hetero_standalone
    nd = g.ndata
    assert isinstance(nd, MutableMapping)
    assert list(nd) == ["feat", "train_mask"] and len(nd) == 2  # distinct keys, types in order
    assert set(nd.keys()) == {"feat", "train_mask"}
    feat = nd["feat"]
    assert set(feat) == {"paper", "author"}
    assert feat["paper"] is g.nodes["paper"].data["feat"]
    assert feat["author"].shape == (120, 3) and feat["paper"].shape == (300, 4)
    assert set(nd["train_mask"]) == {"paper"}
    assert "feat" in nd and "nope" not in nd and nd.get("nope") is None
    assert nd.get("nope", 5) == 5
    with pytest.raises(KeyError, match="no node type has data named 'nope'"):
        nd["nope"]
    assert {k: set(v) for k, v in dict(nd).items()} == {"feat": {"paper", "author"},
                                                         "train_mask": {"paper"}}
    assert [k for k, _ in nd.items()] == ["feat", "train_mask"]
    assert all(isinstance(v, dict) for v in nd.values())

    x = runtime.DistTensor((300, 2), torch.float32, "x_rows", part_policy="node:paper")
    nd["x"] = {"paper": x}  # a key on one type; the others stay without it
    assert nd["x"] == {"paper": x} and "x" not in g.nodes["author"].data
    assert g.nodes["paper"].data["x"] is x and len(nd) == 3
    nd["x"]["paper"][np.array([0, 1])] = torch.ones(2, 2)
    assert g.nodes["paper"].data["x"][np.array([0, 1, 2])].sum().item() == 4
    with pytest.raises(runtime.DGLError, match="several node types: set 'y' with a dict"):
        nd["y"] = x
    with pytest.raises(runtime.DGLError, match="node type 'venue' does not exist"):
        nd["y"] = {"paper": x, "venue": x}
    assert "y" not in nd and "y" not in g.nodes["paper"].data  # nothing set on an error
    a = runtime.DistTensor((120, 1), torch.int64, part_policy="node:author")
    nd.update({"z": {"author": a}})
    assert nd["z"] == {"author": a}
    assert nd.setdefault("z", {}) == {"author": a}
    assert nd.pop("z") == {"author": a} and "z" not in nd
    assert nd.pop("z", None) is None
    del nd["x"]
    assert "x" not in nd and "x" not in g.nodes["paper"].data and len(nd) == 2
    with pytest.raises(KeyError):
        del nd["x"]
    nd["both"] = {"paper": x, "author": a}
    key, per_type = nd.popitem()  # the first key: removed from every type
    assert key == "feat" and set(per_type) == {"paper", "author"}
    assert "feat" not in g.nodes["author"].data and "both" in nd
    nd.clear()
    assert len(nd) == 0 and list(nd) == [] and len(g.nodes["paper"].data) == 0
    assert "HeteroDataView('node', [])" == repr(nd)
    with pytest.raises(runtime.DGLError, match="several types"):
        g.node_attr_schemes()


def test_hetero_graph_edata_is_keyed_by_canonical_etype(hetero_standalone):
    import runtime

    g = hetero_standalone
    ed = g.edata
    assert isinstance(ed, MutableMapping) and list(ed) == ["year"] and len(ed) == 1
    year = ed["year"]
    assert list(year) == [WRITES] and year[WRITES] is g.edges["writes"].data["year"]
    np.testing.assert_array_equal(year[WRITES][np.arange(3)].numpy(),
                                  g.edges[WRITES].data["year"][np.arange(3)].numpy())
    w = runtime.DistTensor((1500,), torch.float32, "cite_w", part_policy="edge:paper:cites:paper")
    ed["w"] = {"cites": w}  # a short edge type name works, the view answers canonical triples
    assert ed["w"] == {CITES: w} and g.edges[CITES].data["w"] is w
    ed["w"] = {CITES: w}
    assert ed["w"] == {CITES: w} and len(ed) == 2
    with pytest.raises(runtime.DGLError, match="edge type 'nope'"):
        ed["v"] = {"nope": w}
    with pytest.raises(runtime.DGLError, match="several edge types"):
        ed["v"] = w
    assert ed.get("v") is None and "v" not in ed
    del ed["w"]
    assert "w" not in ed and "w" not in g.edges["cites"].data
    with pytest.raises(KeyError, match="no edge type has data named 'w'"):
        ed["w"]
    with pytest.raises(runtime.DGLError, match="several types"):
        g.edge_attr_schemes()


def test_dgl_graph_api_of_dist_graph(standalone):
    """The DistGraph methods DGL's tests and examples call beyond structure and data."""
    import runtime

    g = runtime.DistGraph("g", part_config=str(standalone))
    assert g.idtype == torch.int64 and g.device == torch.device("cpu")
    assert not g.is_pinned() and g.rank() == 0 and g.is_homogeneous
    assert g.num_nodes("_N") == g.number_of_nodes() == g.number_of_nodes("_N") == 600
    assert g.num_edges(("_N", "_E", "_N")) == g.number_of_edges("_E") == g.num_edges()
    assert g.get_ntype_id(None) == 0 and g.get_ntype_id("_N") == 0 and g.get_etype_id(None) == 0
    assert g.get_node_partition_policy("_N") == "node:_N"
    assert g.get_edge_partition_policy(("_N", "_E", "_N")).policy_str == "edge~_N:_E:_N"


def test_dgl_graph_api_of_hetero_dist_graph(hetero_standalone):
    import runtime

    h = hetero_standalone
    assert h.idtype == torch.int64 and not h.is_homogeneous and h.rank() == 0
    assert [h.get_ntype_id(t) for t in h.ntypes] == list(range(len(h.ntypes)))
    assert [h.get_etype_id(c) for c in h.canonical_etypes] == list(range(3))
    assert h.get_etype_id("writes") == h.get_etype_id(WRITES)
    with pytest.raises(runtime.DGLError, match="Node type name must be specified"):
        h.get_ntype_id(None)
    with pytest.raises(runtime.DGLError, match="several edge types"):
        h.get_etype_id(None)
    with pytest.raises(runtime.DGLError, match="node type 'venue' does not exist"):
        h.get_ntype_id("venue")
    p = h.get_node_partition_policy("author")
    assert isinstance(p, runtime.NodePartitionPolicy) and p.policy_str == "node~author"
    assert p.get_size() == 120
    e = h.get_edge_partition_policy("writes")
    assert isinstance(e, runtime.EdgePartitionPolicy) and e.type_name == WRITES
    t = runtime.DistTensor((120, 2), torch.float32, "emb_a", part_policy=p)
    assert t.part_policy == p
    with pytest.raises(runtime.DGLError):
        h.get_edge_partition_policy("nope")


def test_tensor_key_resolves_a_view_key_to_the_stored_name(standalone):
    """``g.edata["p"] = DistTensor(..., name="other")``: the view key is "p", the servers know
    the tensor as ``_N:_E:_N/other``; a view's handle names it, ``prob_tensor_name`` makes the
    translation for sampling."""
    import runtime
    from runtime.sampling.neighbor import prob_tensor_name

    def tensor_key(view, key):  # the stored name of the tensor a view key maps to
        t = view.get(key)
        return t.name if t is not None else None

    g = runtime.DistGraph("g", part_config=str(standalone))
    assert tensor_key(g.edges["_N:_E:_N"].data, "w") == "_N:_E:_N/w"
    assert tensor_key(g.nodes["_N"].data, "feat") == "_N/feat"
    assert tensor_key(g.edges["_N:_E:_N"].data, "p") is None
    assert prob_tensor_name(g, None) is None and prob_tensor_name(g, "w") == "w"
    g.edata["p"] = runtime.DistTensor((g.num_edges(),), torch.float32, name="other")
    assert tensor_key(g.edges["_N:_E:_N"].data, "p") == "_N:_E:_N/other"
    assert prob_tensor_name(g, "p") == "other"


def test_prob_names_the_view_key(standalone):
    """prob="p" samples by the tensor the view key "p" maps to, whatever its stored name."""
    import runtime

    g = runtime.DistGraph("g", part_config=str(standalone))
    src, _ = g.find_edges(np.arange(g.num_edges()))
    keep = (src.numpy() % 2) == 0  # weight 1 on edges from even nodes, 0 on the others

    def init(shape, dtype):
        return torch.from_numpy(keep.astype(np.float32))

    g.edata["p"] = runtime.DistTensor((g.num_edges(),), torch.float32, name="other",
                                      init_func=init)
    sg = runtime.sample_neighbors(g, np.arange(100), 5, prob="p")
    s, _ = sg.edges()
    assert len(s) > 0 and np.all(s.numpy() % 2 == 0)
