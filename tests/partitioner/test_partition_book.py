"""RangePartitionBook: owner lookups and homogeneous <-> per-type id mappings."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner import load_partition_book, partition_graph
from testing.graphs import hetero_graph

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def hetero_config(tmp_path_factory):
    out = tmp_path_factory.mktemp("book") / "p"
    return partition_graph(hetero_graph(), "h", 3, out, method="random", seed=1)


def test_per_type_round_trip(hetero_config):
    book = load_partition_book(hetero_config)[0]
    N = hetero_config["num_nodes"]
    homo = np.arange(N)
    tids, per_type = book.map_to_per_ntype(homo)
    for t, ntype in enumerate(book.ntypes):
        sel = tids == t
        assert np.array_equal(np.sort(per_type[sel]), np.arange(book.num_nodes(ntype)))
        assert np.array_equal(book.map_to_homo_nid(per_type[sel], ntype), homo[sel])
    E = hetero_config["num_edges"]
    etids, per_etype = book.map_to_per_etype(np.arange(E))
    for e, cet in enumerate(book.canonical_etypes):
        sel = etids == e
        assert np.array_equal(book.map_to_homo_eid(per_etype[sel], cet), np.arange(E)[sel])


def test_owner_and_local_ids(hetero_config):
    book = load_partition_book(hetero_config)[0]
    assert book.num_partitions() == 3
    total = 0
    for p in range(3):
        # numpy: partid2nids gives tensors once torch is loaded (another test may load it).
        nids = np.asarray(book.partid2nids(p))
        total += len(nids)
        assert np.all(book.nid2partid(nids) == p)
        assert np.array_equal(book.nid2localnid(nids, p), np.arange(len(nids)))
        for ntype in book.ntypes:
            ids = np.asarray(book.partid2nids(p, ntype))
            assert np.all(book.nid2partid(ids, ntype) == p)
            assert np.array_equal(book.nid2localnid(ids, p, ntype), np.arange(len(ids)))
        meta = book.metadata()[p]
        assert meta["machine_id"] == p and meta["num_nodes"] == len(nids)
    assert total == hetero_config["num_nodes"]


def test_edge_type_names(hetero_config):
    book = load_partition_book(hetero_config)[0]
    assert book.num_edges("cites") == book.num_edges(("paper", "cites", "paper"))
    with pytest.raises(ValueError, match="unknown"):
        book.num_edges("likes")
    with pytest.raises(ValueError, match="unknown type"):
        book.num_nodes("venue")


def test_torch_in_torch_out(hetero_config):
    """DGL's contract: a tensor in gives int64 tensors out; numpy and lists give numpy."""
    torch = pytest.importorskip("torch")
    book = load_partition_book(hetero_config)[0]
    ntype, cet = book.ntypes[0], book.canonical_etypes[0]
    nids = torch.arange(book.num_nodes(), dtype=torch.int32)
    eids = torch.arange(book.num_edges())
    pt_n = torch.arange(book.num_nodes(ntype))
    pt_e = torch.arange(book.num_edges(cet))
    outs = [
        book.nid2partid(nids), book.nid2partid(pt_n, ntype), book.nid2localnid(pt_n[:3], 0, ntype),
        *book.map_to_per_ntype(nids), book.map_to_homo_nid(pt_n, ntype),
        book.eid2partid(eids), book.eid2partid(pt_e, cet), book.eid2localeid(pt_e[:3], 0, cet),
        *book.map_to_per_etype(eids), book.map_to_homo_eid(pt_e, cet),
        book.partid2nids(1), book.partid2eids(1, cet),
    ]
    for out in outs:
        assert isinstance(out, torch.Tensor) and out.dtype == torch.int64
    seeds = book.partid2nids(book.partid)
    assert bool((book.nid2partid(seeds) == book.partid).all())
    assert (book.nid2partid(seeds) == book.partid).float().mean().item() == 1.0
    for out in (book.nid2partid(np.arange(4)), book.nid2partid([0, 1]),
                book.map_to_per_ntype(np.arange(4))[1], book.eid2partid([0, 1], cet)):
        assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(book.nid2partid(nids).numpy(), book.nid2partid(nids.numpy()))


def test_dgl_names(hetero_config):
    book, name, ntypes, etypes = load_partition_book(hetero_config, 2)
    assert book.partid == 2 and name == hetero_config["graph_name"]
    assert list(ntypes) == book.ntypes and list(etypes) == book.canonical_etypes
    assert book.num_partitions() == 3 and not book.is_homogeneous()
    cet = book.canonical_etypes[0]
    assert book.to_canonical_etype(cet[1]) == cet == book.to_canonical_etype(cet)
    assert book.to_canonical_etype(":".join(cet)) == cet
    with pytest.raises(ValueError, match="unknown"):
        book.to_canonical_etype(("a", "b", "c"))
    # DGL's defaults "_N" / "_E" mean homogeneous ids on a heterograph too.
    ids = np.arange(book.num_nodes())
    np.testing.assert_array_equal(book.nid2partid(ids, "_N"), book.nid2partid(ids))
    assert book.num_edges("_E") == book.num_edges() == book._num_edges()
    off = book.local_ntype_offset
    assert off[-1] == book.metadata()[2]["num_nodes"] and len(off) == len(book.ntypes) + 1
    assert book.local_etype_offset[-1] == book.metadata()[2]["num_edges"]
