"""What the ported sampling and data loader tests share: DGL's test graphs as partitioner
graphs, DGL's ``has_edges_between`` / ``edge_ids`` on them, the partition's id mapping (DGL's
``return_mapping=True``), and this test process as a trainer of a running 2-machine job."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import scipy.sparse as spsp

from partitioner import partition_graph
from partitioner.graph import Graph
from partitioner.loader import load_orig_ids
from testing.servers import Cluster, running_cluster

CanonicalEtype = tuple[str, str, str]


def create_random_hetero(dense: bool = False, empty: bool = False,
                         sizes: dict[str, int] | None = None,
                         names: tuple[str, str, str] = ("r12", "r13", "r23")) -> Graph:
    """DGL's ``create_random_hetero`` (test_distributed_sampling.py; test_mp_dataloader.py's
    is ``sizes={"n1": 10000, ...}, names=("r1", "r2", "r3")``), with ``feat`` on ``n1``."""
    num_nodes = sizes or ({"n1": 210, "n2": 200, "n3": 220} if dense
                          else {"n1": 1010, "n2": 1000, "n3": 1020})
    etypes = [("n1", names[0], "n2"), ("n1", names[1], "n3"), ("n2", names[2], "n3")]
    random.seed(42)
    edges = {}
    for et in etypes:
        s, _, d = et
        arr = spsp.random(num_nodes[s] - 10 if empty else num_nodes[s],
                          num_nodes[d] - 10 if empty else num_nodes[d],
                          density=0.1 if dense else 0.001, format="coo", random_state=100)
        edges[et] = (arr.row.astype(np.int64), arr.col.astype(np.int64))
    return Graph(num_nodes=dict(num_nodes), edges=edges,
                 ndata={"n1": {"feat": np.ones((num_nodes["n1"], 10), np.float32)}})


def create_random_graph(n: int) -> Graph:
    """DGL's ``create_random_graph(n)`` (the edges of ``spsp.random(n, n, density=0.001,
    random_state=100)``). tests/compat/conftest.py's fails on scipy's ``!= 0``, which returns
    a CSR matrix (no ``.row``); this one takes the COO entries."""
    arr = spsp.random(n, n, density=0.001, format="coo", random_state=100)
    return Graph.homogeneous(arr.row.astype(np.int64), arr.col.astype(np.int64), n)


class EdgeIndex:
    """``has_edges_between`` and ``edge_ids`` of the original graph (input ids)."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self._ids = {et: {(int(a), int(b)): i for i, (a, b) in enumerate(zip(s, d, strict=True))}
                     for et, (s, d) in g.edges.items()}

    def etype(self, etype: object) -> CanonicalEtype:
        return next(c for c in self.g.edges if etype in (c, c[1]))

    def has_edges_between(self, src, dst, etype: object = None) -> np.ndarray:
        table = self._ids[self.etype(etype) if etype is not None else next(iter(self._ids))]
        return np.array([(int(a), int(b)) in table for a, b in zip(src, dst, strict=True)])

    def edge_ids(self, src, dst, etype: object = None) -> np.ndarray:
        table = self._ids[self.etype(etype) if etype is not None else next(iter(self._ids))]
        return np.array([table[(int(a), int(b))] for a, b in zip(src, dst, strict=True)],
                        np.int64)

    def find_edges(self, eids, etype: object = None) -> tuple[np.ndarray, np.ndarray]:
        s, d = self.g.edges[self.etype(etype) if etype is not None else next(iter(self._ids))]
        return s[np.asarray(eids)], d[np.asarray(eids)]


def partition(g: Graph, name: str, num_parts: int, out: Path):
    """DGL's ``partition_graph(..., return_mapping=True)``: the config path and the new id ->
    input id maps (per node type, per canonical edge type)."""
    partition_graph(g, name, num_parts, out, method="metis")
    cfg = out / f"{name}.json"
    orig_n, orig_e = load_orig_ids(cfg)
    return cfg, orig_n, orig_e


@contextlib.contextmanager
def trainer_of(cfg: Path, tmp_path: Path, monkeypatch, num_servers: int = 1,
               num_samplers: int = 0) -> Iterator[Cluster]:
    """Servers for the 2-part ``cfg`` on 127.0.0.1/127.0.0.2, and this process as the trainer
    of machine 0 (``initialize()`` done; ``exit_client()`` and the cluster's checks after)."""
    import runtime as dg

    with running_cluster(cfg, tmp_path, num_servers=num_servers) as c:
        with monkeypatch.context() as mp:
            for k, v in c.env("trainer", 0, num_samplers=num_samplers).items():
                mp.setenv(k, v)
            dg.exit_client()
            dg.initialize()
            try:
                yield c
            finally:
                dg.exit_client()
