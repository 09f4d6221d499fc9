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
    from tests.conftest import hetero_graph

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
