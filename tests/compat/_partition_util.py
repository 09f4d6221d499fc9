"""Graph builders and DGL-equivalent helpers for the ported partition and split tests.

From dmlc/dgl tests/distributed/test_partition.py and test_dist_graph_store.py at v1.1.3
(commit 6e2c0f489ba4cfae4614d6f07da41e0ecd36b226): DGL's ``create_random_hetero`` (both
files' versions) as ``partitioner.graph.Graph``s, and numpy stand-ins for the DGLGraph methods
the tests call (``edge_ids``, ``update_all(copy_u/copy_e, sum)``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as spsp

from partitioner.graph import Graph

PARTITION_HETERO = ({"n1": 1000, "n2": 1010, "n3": 1020},
                    [("n1", "r1", "n2"), ("n2", "r1", "n1"), ("n1", "r2", "n3"), ("n2", "r3", "n3")])
STORE_HETERO = ({"n1": 10000, "n2": 10010, "n3": 10020},
                [("n1", "r1", "n2"), ("n1", "r2", "n3"), ("n2", "r3", "n3")])


def create_random_hetero(spec: tuple = PARTITION_HETERO) -> Graph:
    """DGL's ``create_random_hetero()``: per edge type the nonzeros of ``spsp.random(...,
    density=0.001, random_state=100)``; ``spec`` picks test_partition's (default) or
    test_dist_graph_store's sizes and types."""
    num_nodes, etypes = spec
    edges = {}
    for etype in etypes:
        arr = spsp.random(num_nodes[etype[0]], num_nodes[etype[2]], density=0.001,
                          format="coo", random_state=100)
        edges[etype] = (arr.row.astype(np.int64), arr.col.astype(np.int64))
    return Graph(dict(num_nodes), edges,
                 {t: {} for t in num_nodes}, {et: {} for et in etypes})


def edge_ids(src: np.ndarray, dst: np.ndarray, u: np.ndarray, v: np.ndarray,
             num_dst: int) -> np.ndarray:
    """DGLGraph.edge_ids(u, v) for a graph without multi-edges given as ``(src, dst)``:
    the id of the edge ``u[i] -> v[i]`` (every pair must be an edge)."""
    key = src.astype(np.int64) * num_dst + dst
    order = np.argsort(key, kind="stable")
    want = np.asarray(u, np.int64) * num_dst + np.asarray(v, np.int64)
    pos = np.searchsorted(key[order], want)
    pos = np.minimum(pos, len(order) - 1)
    assert np.all(key[order][pos] == want), "a pair is not an edge"
    return order[pos]


def sum_in(src: np.ndarray, dst: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """``update_all(copy_*, sum)``: per destination the sum of ``values`` (one row per edge)."""
    out = np.zeros((n, *values.shape[1:]), values.dtype)
    np.add.at(out, dst, values)
    return out


def create_random_graph(n: int) -> Graph:
    """DGL's ``create_random_graph(n)`` (``dgl.from_scipy`` of ``spsp.random(n, n,
    density=0.001, random_state=100) != 0``). Here because ``tests/compat/conftest.py``'s reads
    ``.row`` of the comparison's result, which scipy returns as CSR (no ``.row``)."""
    arr = (spsp.random(n, n, density=0.001, format="coo", random_state=100) != 0).tocoo()
    return Graph.homogeneous(arr.row.astype(np.int64), arr.col.astype(np.int64), n)
