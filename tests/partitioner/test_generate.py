"""Tests for the synthetic community graph generator."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from partitioner.errors import PartitionOptionError
from partitioner.generate import HETERO_ETYPES, generate_graph
from partitioner.graph import HOMO_ETYPE, HOMO_NTYPE

pytestmark = pytest.mark.unit


def _edges(graph):
    return graph.edges[HOMO_ETYPE]


def _nearest_centroid_accuracy(feat, label, train, test, num_classes):
    centroids = np.stack([feat[train & (label == c)].mean(0) for c in range(num_classes)])
    dist = ((feat[test][:, None, :] - centroids[None]) ** 2).sum(-1)
    return float((dist.argmin(1) == label[test]).mean())


def test_same_seed_same_graph_other_seed_other_graph():
    a = generate_graph(2000, avg_degree=10, seed=7)
    b = generate_graph(2000, avg_degree=10, seed=7)
    c = generate_graph(2000, avg_degree=10, seed=8)
    for x, y in zip(_edges(a), _edges(b), strict=True):
        np.testing.assert_array_equal(x, y)
    for name, arr in a.ndata[HOMO_NTYPE].items():
        np.testing.assert_array_equal(arr, b.ndata[HOMO_NTYPE][name])
    assert not np.array_equal(_edges(a)[0], _edges(c)[0])


def test_shapes_dtypes_and_edge_count():
    g = generate_graph(3000, avg_degree=12, num_classes=5, feat_dim=7)
    assert g.is_homogeneous
    assert g.num_nodes == {HOMO_NTYPE: 3000}
    g.validate()
    src, dst = _edges(g)
    assert src.dtype == dst.dtype == np.int64
    assert len(src) == 3000 * 12  # duplicates are topped up, so the count is exact here
    data = g.ndata[HOMO_NTYPE]
    assert data["feat"].dtype == np.float32 and data["feat"].shape == (3000, 7)
    assert data["label"].dtype == np.int64
    assert set(np.unique(data["label"])) <= set(range(5))
    for name in ("train_mask", "val_mask", "test_mask"):
        assert data[name].dtype == bool and data[name].shape == (3000,)


def test_undirected_no_self_loops_no_duplicates():
    g = generate_graph(2000, avg_degree=16)
    src, dst = _edges(g)
    n = 2000
    assert not (src == dst).any()
    forward = np.sort(src * n + dst)
    backward = np.sort(dst * n + src)
    np.testing.assert_array_equal(forward, backward)  # every edge has its reverse
    assert len(np.unique(forward)) == len(forward)


def test_masks_disjoint_cover_all_with_fractions():
    g = generate_graph(5000, avg_degree=4, train_frac=0.5, val_frac=0.25)
    data = g.ndata[HOMO_NTYPE]
    total = data["train_mask"].astype(int) + data["val_mask"] + data["test_mask"]
    assert (total == 1).all()
    assert data["train_mask"].sum() == 2500
    assert data["val_mask"].sum() == 1250
    assert data["test_mask"].sum() == 1250


def test_intra_community_fraction_close_to_p_intra():
    # With as many classes as communities the label is the community.
    g = generate_graph(4000, avg_degree=10, num_communities=4, num_classes=4, p_intra=0.8)
    src, dst = _edges(g)
    label = g.ndata[HOMO_NTYPE]["label"]
    assert abs((label[src] == label[dst]).mean() - 0.8) < 0.02


def test_p_intra_one_keeps_every_edge_inside():
    g = generate_graph(1000, avg_degree=6, num_communities=5, num_classes=5, p_intra=1.0)
    src, dst = _edges(g)
    label = g.ndata[HOMO_NTYPE]["label"]
    assert (label[src] == label[dst]).all()


def test_features_informative_but_neighbours_help():
    n, classes = 6000, 8
    g = generate_graph(n, avg_degree=10, num_classes=classes, seed=1)
    data = g.ndata[HOMO_NTYPE]
    feat, label = data["feat"].astype(np.float64), data["label"]
    train, test = data["train_mask"], data["test_mask"]
    alone = _nearest_centroid_accuracy(feat, label, train, test, classes)
    assert 2.5 / classes < alone < 0.9

    src, dst = _edges(g)
    adj = sp.csr_matrix((np.ones(len(src)), (dst, src)), shape=(n, n))
    deg = np.asarray(adj.sum(1)).ravel()
    mean_feat = (adj @ feat + feat) / (deg + 1)[:, None]
    together = _nearest_centroid_accuracy(mean_feat, label, train, test, classes)
    assert together > alone + 0.2


def test_degrees_are_skewed():
    g = generate_graph(20000, avg_degree=20)
    deg = np.bincount(_edges(g)[0], minlength=20000)
    assert deg.max() > 5 * deg.mean()
    assert np.median(deg) < deg.mean()


def test_tiny_and_empty_graphs():
    one = generate_graph(1, avg_degree=20)
    assert one.num_nodes == {HOMO_NTYPE: 1} and one.total_edges == 0
    g = generate_graph(10, avg_degree=0)
    assert g.total_edges == 0
    dense = generate_graph(6, avg_degree=20)  # more edges asked than a simple graph allows
    dense.validate()
    src, dst = _edges(dense)
    assert not (src == dst).any()
    assert len(np.unique(src * 6 + dst)) == len(src)


def test_hetero_types_ids_and_data():
    g = generate_graph(3000, avg_degree=10, hetero=True, seed=4)
    assert set(g.num_nodes) == {"paper", "author"}
    assert g.num_nodes["paper"] + g.num_nodes["author"] == 3000
    assert g.canonical_etypes == list(HETERO_ETYPES)
    g.validate()
    writes, written_by, cites = HETERO_ETYPES
    w_src, w_dst = g.edges[writes]
    r_src, r_dst = g.edges[written_by]
    np.testing.assert_array_equal(w_src, r_dst)
    np.testing.assert_array_equal(w_dst, r_src)
    assert w_src.max() < g.num_nodes["author"] and w_dst.max() < g.num_nodes["paper"]
    c_src, c_dst = g.edges[cites]
    assert not (c_src == c_dst).any()
    assert abs(g.total_edges - 3000 * 10) <= 0.01 * 3000 * 10
    paper = g.ndata["paper"]
    assert {"feat", "label", "train_mask", "val_mask", "test_mask"} <= set(paper)
    assert g.ndata["author"]["feat"].shape == (g.num_nodes["author"], 32)
    again = generate_graph(3000, avg_degree=10, hetero=True, seed=4)
    for etype in g.canonical_etypes:
        np.testing.assert_array_equal(g.edges[etype][0], again.edges[etype][0])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_nodes": 0},
        {"num_nodes": -5},
        {"num_nodes": 10, "avg_degree": -1},
        {"num_nodes": 10, "avg_degree": float("nan")},
        {"num_nodes": 10, "p_intra": 1.5},
        {"num_nodes": 10, "train_frac": -0.1},
        {"num_nodes": 10, "train_frac": 0.7, "val_frac": 0.4},
        {"num_nodes": 10, "num_communities": 0},
        {"num_nodes": 10, "num_communities": 11},
        {"num_nodes": 10, "num_classes": 0},
        {"num_nodes": 10, "feat_dim": 0},
        {"num_nodes": 1, "hetero": True},
    ],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(PartitionOptionError):
        generate_graph(**kwargs)
