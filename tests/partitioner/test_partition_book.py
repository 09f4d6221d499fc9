"""RangePartitionBook: owner lookups and homogeneous <-> per-type id mappings."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner import load_partition_book, partition_graph
from tests.conftest import hetero_graph

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def hetero_config(tmp_path_factory):
    out = tmp_path_factory.mktemp("book") / "p"
    return partition_graph(hetero_graph(), "h", 3, out, method="random", seed=1)


def test_per_type_round_trip(hetero_config):
    book = load_partition_book(hetero_config)
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
    book = load_partition_book(hetero_config)
    assert book.num_partitions() == 3
    total = 0
    for p in range(3):
        nids = book.partid2nids(p)
        total += len(nids)
        assert np.all(book.nid2partid(nids) == p)
        assert np.array_equal(book.nid2localnid(nids, p), np.arange(len(nids)))
        for ntype in book.ntypes:
            ids = book.partid2nids(p, ntype)
            assert np.all(book.nid2partid(ids, ntype) == p)
            assert np.array_equal(book.nid2localnid(ids, p, ntype), np.arange(len(ids)))
        meta = book.metadata()[p]
        assert meta["machine_id"] == p and meta["num_nodes"] == len(nids)
    assert total == hetero_config["num_nodes"]


def test_edge_type_names(hetero_config):
    book = load_partition_book(hetero_config)
    assert book.num_edges("cites") == book.num_edges(("paper", "cites", "paper"))
    with pytest.raises(ValueError, match="unknown"):
        book.num_edges("likes")
    with pytest.raises(ValueError, match="unknown type"):
        book.num_nodes("venue")
