"""What DGL's tests/distributed/utils.py gives its tests, built on this project's partitioner.

Ported from dmlc/dgl tests/distributed/utils.py at v1.1.3
(commit 6e2c0f489ba4cfae4614d6f07da41e0ecd36b226). ``create_random_graph`` makes the same
graph as DGL's (scipy's ``random`` with the same density and random_state) as a
``partitioner.graph.Graph`` instead of a ``DGLGraph``; ``generate_ip_config`` writes loopback
addresses only (DGL's finds the host's outward address, which tests here must never use).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as spsp

from partitioner.graph import Graph
from testing.ports import free_port_range

DGL_COMMIT = "6e2c0f489ba4cfae4614d6f07da41e0ecd36b226"  # v1.1.3


def create_random_graph(n: int) -> Graph:
    """DGL's ``create_random_graph(n)``: the edges of ``spsp.random(n, n, density=0.001,
    random_state=100)``, one node type and one edge type."""
    arr = (spsp.random(n, n, density=0.001, format="coo", random_state=100) != 0).tocoo()
    return Graph.homogeneous(arr.row.astype(np.int64), arr.col.astype(np.int64), n)


def generate_ip_config(file_name: str, num_machines: int, num_servers: int) -> None:
    """DGL's ``generate_ip_config`` on 127.0.0.1: one free block of ``num_servers`` ports per
    machine (a machine's servers listen on PORT + k), from this test worker's share of the
    ports."""
    base = free_port_range(["127.0.0.1"], num_machines * num_servers)
    with open(file_name, "w") as f:
        for i in range(num_machines):
            f.write(f"127.0.0.1 {base + i * num_servers}\n")
