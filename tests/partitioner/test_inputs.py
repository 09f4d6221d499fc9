"""partition_graph on in-memory inputs (scipy, (src, dst) arrays, PyG objects) and DGL's
argument names."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from partitioner import PartitionOptionError, load_partition, partition_graph
from partitioner.graph import HOMO_ETYPE, Graph
from partitioner.inputs import as_graph
from partitioner.loader import load_orig_ids

pytestmark = pytest.mark.unit

torch = pytest.importorskip("torch")


def _edges(cfg):
    """Every stored edge as (input src, input dst) pairs, sorted, via orig ids."""
    orig_n, orig_e = load_orig_ids(cfg)
    out = []
    for p in range(cfg["num_parts"]):
        s, d, _, _ = load_partition(cfg, p).inner_edges()
        out.append(np.stack([orig_n["_N"][s], orig_n["_N"][d]], 1))
    pairs = np.concatenate(out)
    return pairs[np.lexsort(pairs.T[::-1])]


def _sorted(src, dst):
    pairs = np.stack([src, dst], 1)
    return pairs[np.lexsort(pairs.T[::-1])]


def test_scipy_matrix(tmp_path):
    m = sp.random(60, 60, density=0.05, random_state=3, format="csr")
    cfg = partition_graph(m, "s", 2, tmp_path / "o", method="random")
    coo = m.tocoo()
    assert cfg["num_nodes"] == 60 and cfg["num_edges"] == m.nnz
    np.testing.assert_array_equal(_edges(cfg), _sorted(coo.row, coo.col))
    with pytest.raises(Exception, match="not square"):
        as_graph(sp.random(3, 4, density=0.5, format="coo"))


def test_src_dst_tensors_with_features_and_dgl_names(tmp_path):
    rng = np.random.default_rng(0)
    src, dst = torch.from_numpy(rng.integers(0, 40, 200)), torch.from_numpy(rng.integers(0, 40, 200))
    feat = torch.randn(40, 3)
    w = torch.arange(200)
    nids, eids = partition_graph(
        (src, dst), "t", 2, out_path=tmp_path / "o", part_method="metis", num_hops=2,
        num_trainers_per_machine=2, return_mapping=True, graph_formats=["csc"],
        balance_ntypes=torch.arange(40) % 3, balance_edges=True,
        ndata={"feat": feat}, edata={"w": w})
    assert nids.dtype == torch.int64 and len(nids) == 40 and len(eids) == 200
    from partitioner import load_partition_feats

    node, edge = load_partition_feats(tmp_path / "o" / "t.json", 0)
    lo, hi = load_partition(tmp_path / "o" / "t.json", 0).owned_range
    torch.testing.assert_close(node["_N/feat"], feat[nids[lo:hi]])
    assert "_N/trainer_id" in node and "_N:_E:_N/trainer_id" in edge
    cfg = load_partition(tmp_path / "o" / "t.json", 0).config
    assert cfg["halo_hops"] == 2 and cfg["num_trainers_per_machine"] == 2
    assert {"balance_ntypes=0", "balance_ntypes=2", "in-degree"} <= set(cfg["balance"])
    none_n, only_e = load_partition_feats(tmp_path / "o" / "t.json", 1, load_nodes=False)
    assert none_n is None and set(only_e) == {"_N:_E:_N/w", "_N:_E:_N/trainer_id"}


def test_dgl_names_conflict_and_unknown(tmp_path):
    g = Graph.homogeneous(np.array([0, 1]), np.array([1, 2]), 3)
    with pytest.raises(PartitionOptionError, match="disagree"):
        partition_graph(g, "g", 1, tmp_path / "a", method="random", part_method="metis")
    with pytest.raises(PartitionOptionError, match="unknown argument 'num_hop'"):
        partition_graph(g, "g", 1, tmp_path / "a", num_hop=1)
    with pytest.raises(PartitionOptionError, match="output folder"):
        partition_graph(g, "g", 1)
    cfg = partition_graph((np.array([0]), np.array([1])), "n", 1, tmp_path / "b", num_nodes=5)
    assert cfg["num_nodes"] == 5
    with pytest.raises(PartitionOptionError, match="3 nodes"):
        partition_graph(g, "g", 1, tmp_path / "a", balance_ntypes=np.zeros(5))


class _Store(dict):
    """A PyG storage stand-in: attribute access over a dict, as ``NodeStorage`` has."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def test_pyg_data_stand_in(tmp_path):
    """torch_geometric is not installed here: a stand-in with Data's attributes
    (``edge_index``, ``num_nodes``, node- and edge-level tensors, ``is_edge_attr``)."""
    edge_index = torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 0]])
    data = _Store(edge_index=edge_index, num_nodes=5, x=torch.randn(5, 2), y=torch.arange(5),
                  train_mask=torch.tensor([1, 0, 1, 0, 1], dtype=torch.bool),
                  edge_attr=torch.randn(5, 4))
    data.is_edge_attr = lambda key: key == "edge_attr"
    g = as_graph(data)
    assert g.num_nodes == {"_N": 5}
    assert set(g.ndata["_N"]) == {"x", "y", "train_mask"}
    assert set(g.edata[HOMO_ETYPE]) == {"edge_attr"}
    cfg = partition_graph(data, "pyg", 2, tmp_path / "o")
    assert "train" in cfg["balance"]
    # Without is_edge_attr: the edge_ prefix (or an edge-only length) decides.
    plain = SimpleNamespace(edge_index=edge_index, num_nodes=5, x=torch.randn(5, 2),
                            edge_weight=torch.ones(5))
    assert set(as_graph(plain).edata[HOMO_ETYPE]) == {"edge_weight"}


def test_pyg_hetero_stand_in():
    class Hetero:
        node_types = ["paper", "author"]
        edge_types = [("author", "writes", "paper")]

        def __init__(self):
            self.stores = {
                "paper": _Store(num_nodes=3, x=torch.randn(3, 2)),
                "author": _Store(num_nodes=2),
                ("author", "writes", "paper"): _Store(
                    edge_index=torch.tensor([[0, 1, 1], [0, 1, 2]]), w=torch.ones(3)),
            }

        def __getitem__(self, key):
            return self.stores[key]

    g = as_graph(Hetero())
    assert g.num_nodes == {"paper": 3, "author": 2}
    assert list(g.edges) == [("author", "writes", "paper")]
    assert set(g.ndata["paper"]) == {"x"} and set(g.edata[("author", "writes", "paper")]) == {"w"}
